"""`make package` for real: the merged, pinned template every deployed stage would send to CloudFormation."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chalicelib.config import NOTIFIER_MAX_CONCURRENCY
from chalicelib.outbound import MAX_ATTEMPTS
from chalicelib.reconcile import RECONCILE_EVERY_MIN
from infra import policies
from infra.bytecode import QUIET, loaded_at_cold_start
from infra.pin_stage import ANY_ACCOUNT, PackageError, own_account, pin
from infra.policies import DEPLOY_REGION, FUNCTIONS
from infra.stages import load_config, stage_env
from tests.iam_rules import as_list, violations
from tests.support import ROOT

BIN = Path(sys.executable).parent
STAGES = policies.deployed_stages(load_config())
LOGICAL = {
    "api_handler": "APIHandler",
    "notifier": "Notifier",
    "sweep": "Sweep",
    "catalog_sync": "CatalogSync",
    "reconcile": "Reconcile",
    "feedback": "Feedback",
    "sms_feedback": "SmsFeedback",
    "events_feed": "EventsFeed",
    "outbound": "Outbound",
}
TOPIC = {"Ref": "AlertsTopic"}


@dataclass(frozen=True)
class Package:
    """One stage's build output."""

    stage: str
    prefix: str
    template: dict[str, Any]
    path: Path
    zip_path: Path

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every resource of one type, by logical id."""
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == kind}

    def function(self, name: str) -> dict[str, Any]:
        """A function's properties by its Chalice name."""
        return self.template["Resources"][LOGICAL[name]]["Properties"]

    def role_policy(self, name: str) -> dict[str, Any]:
        """The one inline policy document of a function's role."""
        role = self.function(name)["Role"]["Fn::GetAtt"][0]
        (inline,) = self.template["Resources"][role]["Properties"]["Policies"]
        return inline["PolicyDocument"]


def build(stage: str, out: Path) -> Package:
    """What `make package STAGE=<stage>` does, into `out`."""
    env = {**os.environ, "AWS_DEFAULT_REGION": DEPLOY_REGION, "ADMIN_AUTHORIZER": "cognito"}
    for command in (
        [str(BIN / "chalice"), "package", "--stage", stage, "--merge-template", "infra/template.json", str(out)],
        [sys.executable, "-m", "infra.trim_package", str(out / "deployment.zip")],
        [sys.executable, "-m", "infra.bytecode", str(out / "deployment.zip"), "--template", str(out / "sam.json")],
        [sys.executable, "-m", "infra.pin_stage", str(out / "sam.json"), "--stage", stage],
    ):
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(command[:3])} failed:\n{done.stdout}\n{done.stderr}"
    prefix = stage_env(stage, load_config())["NAME_PREFIX"]
    template = json.loads((out / "sam.json").read_text())
    return Package(stage, prefix, template, out / "sam.json", out / "deployment.zip")


@pytest.fixture(scope="session", params=STAGES)
def package(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Package:
    """Each deployed stage packaged once per test session (a few seconds each once wheels are cached)."""
    return build(request.param, tmp_path_factory.mktemp(f"package-{request.param}"))


def test_every_function_is_packaged_for_arm64_with_its_own_role(package: Package) -> None:
    functions = package.resources("AWS::Serverless::Function")
    assert set(functions) == set(LOGICAL.values())
    roles = set()
    for name in FUNCTIONS:
        props = package.function(name)
        assert props["Architectures"] == ["arm64"]
        assert props["Runtime"] == f"python{sys.version_info.major}.{sys.version_info.minor}"
        assert props["CodeUri"] == "./deployment.zip"
        assert props["FunctionName"] == {"Fn::Sub": "${NamePrefix}-" + name}
        roles.add(props["Role"]["Fn::GetAtt"][0])
    assert len(roles) == len(FUNCTIONS), "functions share a role"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_role_carries_exactly_its_policy_file_and_keeps_the_rules(package: Package, function: str) -> None:
    document = package.role_policy(function)
    written = json.loads(policies.policy_path(package.stage, function).read_text())
    # The policy file, with each ARN's account pinned to the one the stack is deployed to.
    assert document == own_account(written)
    assert violations(function, written, DEPLOY_REGION, package.prefix) == []
    plain = [r for s in document["Statement"] for r in as_list(s["Resource"]) if isinstance(r, str)]
    assert [r for r in plain if ANY_ACCOUNT.match(r)] == [], "an ARN still names any account"


def test_only_the_roles_of_the_functions_exist_and_none_has_managed_policies(package: Package) -> None:
    roles = package.resources("AWS::IAM::Role")
    # Besides the functions' roles, one for SNS itself: it writes the SMS delivery status logs.
    sns_role = roles.pop("SmsDeliveryStatusRole")
    assert len(roles) == len(FUNCTIONS)
    for role in roles.values():
        assert "ManagedPolicyArns" not in role["Properties"]
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}

    assert "ManagedPolicyArns" not in sns_role["Properties"]
    (trust,) = sns_role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sns.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    ((policy,),) = [sns_role["Properties"]["Policies"]]
    (grant,) = policy["PolicyDocument"]["Statement"]
    assert all(action.startswith("logs:") for action in grant["Action"])
    groups = [resource["Fn::Sub"].split(":log-group:", 1)[1] for resource in grant["Resource"]]
    assert groups == [
        "sns/${AWS::Region}/${AWS::AccountId}/DirectPublishToPhoneNumber:*",
        "sns/${AWS::Region}/${AWS::AccountId}/DirectPublishToPhoneNumber/Failure:*",
    ], "SNS may write its SMS delivery logs and nothing else"


def test_only_the_sms_delivery_failure_log_group_may_invoke_sms_feedback(package: Package) -> None:
    permissions = package.resources("AWS::Lambda::Permission")
    invoked_by_logs = {
        k: v["Properties"] for k, v in permissions.items() if v["Properties"]["Principal"] == "logs.amazonaws.com"
    }
    (grant,) = invoked_by_logs.values()
    assert grant["FunctionName"] == {"Fn::GetAtt": ["SmsFeedback", "Arn"]}
    assert grant["SourceAccount"] == {"Ref": "AWS::AccountId"}
    assert grant["SourceArn"]["Fn::Sub"].endswith(
        ":log-group:sns/${AWS::Region}/${AWS::AccountId}/DirectPublishToPhoneNumber/Failure:*"
    )
    outputs = package.template["Outputs"]
    assert outputs["SmsFeedbackFunctionArn"]["Value"] == {"Fn::GetAtt": ["SmsFeedback", "Arn"]}
    assert outputs["SmsDeliveryStatusRoleArn"]["Value"] == {"Fn::GetAtt": ["SmsDeliveryStatusRole", "Arn"]}


def test_stack_dependent_settings_come_from_the_stack_not_from_config(package: Package) -> None:
    for name in FUNCTIONS:
        variables = package.function(name)["Environment"]["Variables"]
        assert variables["ALERT_TOPIC_ARN"] == TOPIC
        assert variables["NAME_PREFIX"] == {"Ref": "NamePrefix"}
        assert variables["POWERTOOLS_SERVICE_NAME"] == {"Ref": "NamePrefix"}
        assert variables["STAGE"] == package.stage
        secret_ids = {k for k in variables if k.endswith("_SECRET_ID")}
        assert {"WEBHOOK_SECRET_SECRET_ID", "TOKEN_KEY_SECRET_ID", "CONTACT_HASH_KEY_SECRET_ID"} <= secret_ids
        assert not {"WEBHOOK_SECRET", "TOKEN_KEY", "CONTACT_HASH_KEY"} & set(variables), "a secret in clear"


def test_the_stack_is_pinned_to_the_stage_prefix_and_the_policies_region(package: Package) -> None:
    parameter = package.template["Parameters"]["NamePrefix"]
    assert parameter["Default"] == package.prefix
    assert parameter["AllowedValues"] == [package.prefix]
    (assertion,) = package.template["Rules"]["DeployRegion"]["Assertions"]
    assert assertion["Assert"] == {"Fn::Equals": [{"Ref": "AWS::Region"}, DEPLOY_REGION]}


def test_the_notifier_consumes_the_stacks_own_queue_one_job_at_a_time(package: Package) -> None:
    events = package.function("notifier")["Events"]
    (event,) = events.values()
    assert event["Type"] == "SQS"
    assert event["Properties"]["Queue"] == {"Fn::GetAtt": ["JobsQueue", "Arn"]}
    assert event["Properties"]["BatchSize"] == 1
    # At most this many jobs at once: the account's send rates are divided by it (chalicelib/messages/senders.py).
    assert event["Properties"]["ScalingConfig"] == {"MaximumConcurrency": NOTIFIER_MAX_CONCURRENCY}
    schedules = {name: package.function(name)["Events"] for name in ("sweep", "catalog_sync", "reconcile")}
    assert [e["Properties"]["Schedule"] for e in schedules["sweep"].values()] == ["rate(1 minute)"]
    assert [e["Properties"]["Schedule"] for e in schedules["catalog_sync"].values()] == ["rate(15 minutes)"]
    # The period the reconciliation's bound is derived from (chalicelib/reconcile.py, docs/PLATFORMS.md).
    assert [e["Properties"]["Schedule"] for e in schedules["reconcile"].values()] == [
        f"rate({RECONCILE_EVERY_MIN} minutes)"
    ]


def test_events_out_read_the_audit_stream_and_retry_eight_times_before_their_dlq(package: Package) -> None:
    (feed,) = package.function("events_feed")["Events"].values()
    assert feed["Type"] == "DynamoDB"
    assert feed["Properties"]["Stream"] == {"Fn::GetAtt": ["AuditTable", "StreamArn"]}
    (only,) = feed["Properties"]["FilterCriteria"]["Filters"]
    assert json.loads(only["Pattern"])["eventName"] == ["INSERT"]
    (delivery,) = package.function("outbound")["Events"].values()
    assert delivery["Properties"]["Queue"] == {"Fn::GetAtt": ["EventsQueue", "Arn"]}
    assert delivery["Properties"]["BatchSize"] == 1
    resources = package.template["Resources"]
    assert resources["AuditTable"]["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    queue = resources["EventsQueue"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * package.function("outbound")["Timeout"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == MAX_ATTEMPTS
    assert resources["EventsDeadLetterQueue"]["Properties"]["MessageRetentionPeriod"] == 14 * 86400


def test_a_job_outlives_six_notifier_timeouts_and_dead_letters_stay_two_weeks(package: Package) -> None:
    resources = package.template["Resources"]
    queue = resources["JobsQueue"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * package.function("notifier")["Timeout"]
    assert package.function("notifier")["Timeout"] == 60
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["JobsDeadLetterQueue", "Arn"]}
    assert resources["JobsDeadLetterQueue"]["Properties"]["MessageRetentionPeriod"] == 14 * 86400


def test_every_function_logs_to_its_own_group_kept_seven_days_made_before_it(package: Package) -> None:
    groups = {
        json.dumps(g["Properties"]["LogGroupName"]): k for k, g in package.resources("AWS::Logs::LogGroup").items()
    }
    assert len(groups) == len(FUNCTIONS)
    for name, logical in LOGICAL.items():
        group = groups[json.dumps({"Fn::Sub": "/aws/lambda/${NamePrefix}-" + name})]
        assert package.template["Resources"][group]["Properties"]["RetentionInDays"] == 7
        assert group in package.template["Resources"][logical]["DependsOn"]


def alarm(package: Package, metric: str, dimension: Any = None) -> dict[str, Any]:
    """The one alarm on a metric (of one dimension value, when given)."""
    (found,) = [
        a["Properties"]
        for a in package.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["MetricName"] == metric
        and (dimension is None or a["Properties"]["Dimensions"][0]["Value"] == dimension)
    ]
    return found


def test_alarms_watch_dead_letters_over_promising_api_errors_and_the_sweep(package: Package) -> None:
    dlq = alarm(package, "ApproximateNumberOfMessagesVisible", {"Fn::GetAtt": ["JobsDeadLetterQueue", "QueueName"]})
    assert dlq["Namespace"] == "AWS/SQS"
    assert dlq["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["JobsDeadLetterQueue", "QueueName"]}}]
    over = alarm(package, "NoticesOverUnits")
    assert over["Namespace"] == "BackInStock"
    assert over["Dimensions"] == [{"Name": "service", "Value": {"Ref": "NamePrefix"}}]
    api = alarm(package, "5XXError")
    api_name = package.template["Resources"]["RestAPI"]["Properties"]["Name"]
    stage = package.template["Resources"]["RestAPI"]["Properties"]["StageName"]
    assert {d["Name"]: d["Value"] for d in api["Dimensions"]} == {"ApiName": api_name, "Stage": stage}
    sweep = alarm(package, "Errors", {"Ref": "Sweep"})
    assert sweep["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "Sweep"}}]
    # SMS delivery failures that no retry brings back are known: the function's errors, and failures in bulk.
    sms_feedback = alarm(package, "Errors", {"Ref": "SmsFeedback"})
    sms_failures = alarm(package, "SmsDeliveryFailures")
    assert sms_failures["Dimensions"] == [{"Name": "service", "Value": {"Ref": "NamePrefix"}}]
    assert (sms_failures["Statistic"], sms_failures["Period"], sms_failures["Threshold"]) == ("Sum", 3600, 20)
    assert sms_failures["AlarmActions"] == [TOPIC]
    for found in (dlq, over, api, sweep, sms_feedback):
        assert (found["ComparisonOperator"], found["Threshold"]) == ("GreaterThanThreshold", 0)
        assert found["AlarmActions"] == [TOPIC]
        assert found["TreatMissingData"] == "notBreaching"


def test_refused_store_credentials_have_an_alarm_of_their_own(package: Package) -> None:
    # Counted wherever a store answers 401 (tests/flows/test_store_credentials_refused.py): a key the shop must fix,
    # alarmed apart from a store that is down, at its first refusal in a five-minute window.
    refused = alarm(package, "StoreCredentialsRefused")
    assert refused["Namespace"] == "BackInStock"
    assert refused["Dimensions"] == [{"Name": "service", "Value": {"Ref": "NamePrefix"}}]
    assert (refused["Statistic"], refused["Period"], refused["EvaluationPeriods"]) == ("Sum", 300, 1)
    assert (refused["ComparisonOperator"], refused["Threshold"]) == ("GreaterThanThreshold", 0)
    assert refused["TreatMissingData"] == "notBreaching"
    assert refused["AlarmActions"] == [TOPIC] and refused["OKActions"] == [TOPIC]
    assert refused["AlarmName"] == {"Fn::Sub": "${NamePrefix}-store-credentials-refused"}


def test_ses_feedback_reaches_its_own_queue_and_function(package: Package) -> None:
    resources = package.template["Resources"]
    destination = resources["FeedbackEventDestination"]["Properties"]
    assert destination["ConfigurationSetName"] == {"Ref": "FeedbackConfigurationSet"}
    assert sorted(destination["EventDestination"]["MatchingEventTypes"]) == ["bounce", "complaint", "delivery"]
    assert destination["EventDestination"]["SnsDestination"] == {"TopicARN": {"Ref": "FeedbackTopic"}}
    subscription = resources["FeedbackSubscription"]["Properties"]
    assert (subscription["Protocol"], subscription["RawMessageDelivery"]) == ("sqs", False)
    assert subscription["Endpoint"] == {"Fn::GetAtt": ["FeedbackQueue", "Arn"]}
    (publish,) = resources["FeedbackTopicPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert publish["Principal"] == {"Service": "ses.amazonaws.com"}
    (deliver,) = resources["FeedbackQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert deliver["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Ref": "FeedbackTopic"}}}
    (event,) = package.function("feedback")["Events"].values()
    assert event["Properties"]["Queue"] == {"Fn::GetAtt": ["FeedbackQueue", "Arn"]}
    queue = resources["FeedbackQueue"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * package.function("feedback")["Timeout"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["FeedbackDeadLetterQueue", "Arn"]}
    dead = alarm(
        package, "ApproximateNumberOfMessagesVisible", {"Fn::GetAtt": ["FeedbackDeadLetterQueue", "QueueName"]}
    )
    assert dead["AlarmActions"] == [TOPIC]
    name = resources["FeedbackConfigurationSet"]["Properties"]["Name"]["Fn::Sub"].replace(
        "${NamePrefix}", package.prefix
    )
    assert package.function("notifier")["Environment"]["Variables"]["SES_CONFIGURATION_SET"] == name


def test_the_monthly_budget_warns_the_alert_topic_which_may_receive_it(package: Package) -> None:
    (budget,) = package.resources("AWS::Budgets::Budget").values()
    props = budget["Properties"]
    assert props["Budget"]["TimeUnit"] == "MONTHLY"
    assert props["Budget"]["BudgetLimit"]["Amount"] == {"Ref": "MonthlyBudgetUsd"}
    assert package.template["Parameters"]["MonthlyBudgetUsd"]["Type"] == "Number"
    for notification in props["NotificationsWithSubscribers"]:
        assert notification["Subscribers"] == [{"SubscriptionType": "SNS", "Address": TOPIC}]
    topic_policy = package.template["Resources"]["AlertsTopicPolicy"]
    (statement,) = topic_policy["Properties"]["PolicyDocument"]["Statement"]
    assert set(statement["Principal"]["Service"]) == {"budgets.amazonaws.com", "cloudwatch.amazonaws.com"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    assert budget["DependsOn"] == "AlertsTopicPolicy"


def test_the_packaged_template_passes_cfn_lint(package: Package) -> None:
    done = subprocess.run([str(BIN / "cfn-lint"), str(package.path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_zip_ships_the_app_and_its_runtime_libraries_only(package: Package) -> None:
    with zipfile.ZipFile(package.zip_path) as archive:
        names = archive.namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert {"app.py", "chalicelib", "aws_lambda_powertools", "phonenumbers", "itsdangerous", "standardwebhooks"} <= top
    for not_shipped in ("tests", "devstack", "support", "infra", "moto", "boto3", "botocore", "pytest", ".chalice"):
        assert not_shipped not in top, f"{not_shipped} does not belong in the Lambda package"
    chalice = {name for name in names if name.startswith("chalice/") and "/__pycache__/" not in name}
    assert chalice <= {"chalice/__init__.py", "chalice/app.py", "chalice/app.pyi"}, "more than the Chalice runtime"
    assert package.zip_path.stat().st_size < 10 * 1024 * 1024


def test_every_module_a_cold_start_loads_from_the_package_ships_compiled(package: Package, tmp_path: Path) -> None:
    with zipfile.ZipFile(package.zip_path) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path)
    loaded = loaded_at_cold_start(tmp_path)
    assert {"app.py", "chalicelib/wiring.py", "aws_lambda_powertools/logging/logger.py", "chalice/app.py"} <= set(
        loaded
    )
    missing = [name for name in loaded if importlib.util.cache_from_source(name) not in names]
    assert missing == [], "a module every cold start loads ships without its bytecode (infra/bytecode.py)"
    # A service's modules are compiled when first used, in a container that keeps them: only the cold start ships.
    assert importlib.util.cache_from_source("chalicelib/notifier.py") not in names


def test_an_email_address_is_checked_from_the_package_without_dnspython(package: Package, tmp_path: Path) -> None:
    with zipfile.ZipFile(package.zip_path) as archive:
        assert not any(name.startswith("dns/") for name in archive.namelist())
        archive.extractall(tmp_path)
    script = (
        "import sys; from chalicelib.contacts import normalise_email;"
        "print(normalise_email('ana@b\u00fccher.de'), 'dns' in sys.modules, sys.modules['email_validator'].__file__)"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=QUIET, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    address, dns_loaded, validator = out.stdout.split()
    assert address == "ana@xn--bcher-kva.de" and dns_loaded == "False" and validator.startswith(str(tmp_path))


def test_packaging_refuses_an_unnamed_function_an_undefined_one_or_a_foreign_queue(package: Package) -> None:
    unnamed = json.loads(json.dumps(package.template))
    unnamed["Resources"]["Extra"] = {"Type": "AWS::Serverless::Function", "Properties": {"Handler": "app.extra"}}
    with pytest.raises(PackageError, match="Extra has no FunctionName"):
        pin(unnamed, package.prefix)
    overrides_only = json.loads((ROOT / "infra" / "template.json").read_text())
    with pytest.raises(PackageError, match="which the app does not define"):
        pin(overrides_only, package.prefix)
    foreign = json.loads(json.dumps(package.template))
    (event,) = foreign["Resources"]["Notifier"]["Properties"]["Events"].values()
    event["Properties"]["Queue"] = {"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:orders"}
    with pytest.raises(PackageError, match="only the jobs, feedback and events queues"):
        pin(foreign, package.prefix)


def test_pinning_twice_changes_nothing(package: Package) -> None:
    again = pin(json.loads(json.dumps(package.template)), package.prefix)
    assert again == package.template


# Every route a request can make us send a message by (a notice's place, a code, a re-subscribe), as app.py
# declares it: the WAF rule and the tighter throttles must cover each.
SENDING_ROUTES = ("/notify-me", "/notify-me/code", "/me/{token}", "/m/{token}", "/resubscribe/{link_id}")
CODE_ROUTES = SENDING_ROUTES[1:]


def waf_matches(statement: dict[str, Any], path: str) -> bool:
    """Whether a WAF scope-down statement (byte matches on the URI path, or an OR or NOT of them) matches `path`."""
    if "OrStatement" in statement:
        return any(waf_matches(s, path) for s in statement["OrStatement"]["Statements"])
    if "NotStatement" in statement:
        return not waf_matches(statement["NotStatement"]["Statement"], path)
    match = statement["ByteMatchStatement"]
    assert match["FieldToMatch"] == {"UriPath": {}}
    assert match["TextTransformations"] == [{"Priority": 0, "Type": "LOWERCASE"}]
    wanted, path = match["SearchString"], path.lower()
    return {
        "ENDS_WITH": path.endswith,
        "CONTAINS": lambda text: text in path,
        "STARTS_WITH": path.startswith,
        "EXACTLY": lambda text: path == text,
    }[match["PositionalConstraint"]](wanted)


def waf_rules(package: Package) -> dict[str, dict[str, Any]]:
    """The web ACL's rules by name."""
    (acl,) = package.resources("AWS::WAFv2::WebACL").values()
    return {rule["Name"]: rule for rule in acl["Properties"]["Rules"]}


def filled(route: str) -> str:
    """A route of app.py with each {parameter} filled as a client would."""
    return route.replace("{token}", "AbC_12-xyz").replace("{link_id}", "0f" * 16).replace("{sku}", "WW-1")


def test_the_api_stage_is_throttled_and_an_optional_waf_rate_limits_every_route_that_sends(package: Package) -> None:
    (api,) = package.resources("AWS::Serverless::Api").values()
    stage, *codes = api["Properties"]["MethodSettings"]
    assert stage["ThrottlingRateLimit"] == {"Ref": "ApiThrottleRateLimit"}
    assert stage["ThrottlingBurstLimit"] == {"Ref": "ApiThrottleBurstLimit"}
    assert (stage["ResourcePath"], stage["HttpMethod"]) == ("/*", "*")
    # The code routes get a tighter throttle of their own, each on a route the API really has.
    paths = api["Properties"]["DefinitionBody"]["paths"]
    throttled = set()
    for setting in codes:
        path = setting["ResourcePath"][1:].replace("~1", "/")
        assert setting["HttpMethod"] == "POST" and "post" in paths[path]
        assert setting["ThrottlingRateLimit"] == {"Ref": "ApiCodeThrottleRateLimit"}
        assert setting["ThrottlingBurstLimit"] == {"Ref": "ApiCodeThrottleBurstLimit"}
        throttled.add(path)
    assert throttled == set(CODE_ROUTES)
    assert set(SENDING_ROUTES) <= set(paths)
    parameters = package.template["Parameters"]
    assert parameters["EnableWaf"]["Default"] == "true"
    (acl,) = package.resources("AWS::WAFv2::WebACL").values()
    (association,) = package.resources("AWS::WAFv2::WebACLAssociation").values()
    assert acl["Condition"] == association["Condition"] == "WafEnabled"
    rule = waf_rules(package)["notify-me-rate"]
    rate = rule["Statement"]["RateBasedStatement"]
    assert rate["Limit"] == {"Ref": "WafNotifyMeLimit"} and rate["AggregateKeyType"] == "IP"
    scope = rate["ScopeDownStatement"]
    # WAF sees the path as the client sent it: behind the stage's name on the execute-api host, bare on a domain.
    for route in SENDING_ROUTES:
        for prefix in ("/api", ""):
            assert waf_matches(scope, prefix + filled(route)), f"the WAF rule does not count {route}"
    for quiet in ("/widget.js", "/webhooks/inventory", "/admin/api/queue", "/reserve/abc", "/r/abc"):
        assert not waf_matches(scope, "/api" + quiet), f"{quiet} sends nothing and needs no WAF rule"
    assert "${RestAPI.Stage}" in association["Properties"]["ResourceArn"]["Fn::Sub"]


# Each per-address rule's parameter, its default and its window in seconds (docs/DEPLOY.md, docs/SECURITY.md).
RATE_RULES = {
    "notify-me-rate": ("WafNotifyMeLimit", 100, 300),
    "page-rate": ("WafPageLimit", 300, 60),
    "webhook-rate": ("WafWebhookLimit", 1500, 60),
}


def test_every_route_a_client_can_call_has_a_per_address_rate_rule_answering_429(package: Package) -> None:
    parameters = package.template["Parameters"]
    assert parameters["EnableWaf"]["Default"] == "true", "per-address limits are on unless a stage turns them off"
    (acl,) = package.resources("AWS::WAFv2::WebACL").values()
    rules = waf_rules(package)
    assert set(rules) == set(RATE_RULES)
    bodies = acl["Properties"]["CustomResponseBodies"]
    for name, (parameter, default, window) in RATE_RULES.items():
        rate = rules[name]["Statement"]["RateBasedStatement"]
        assert rate["Limit"] == {"Ref": parameter} and parameters[parameter]["Default"] == default
        # WAF's own bounds: a limit of at least 10, a window of 60, 120, 300 or 600 seconds.
        assert parameters[parameter]["MinValue"] >= 10 and rate["EvaluationWindowSec"] in (60, 120, 300, 600)
        assert (rate["AggregateKeyType"], rate["EvaluationWindowSec"]) == ("IP", window)
        response = rules[name]["Action"]["Block"]["CustomResponse"]
        assert response["ResponseCode"] == 429
        assert {"Name": "Retry-After", "Value": "60"} in response["ResponseHeaders"]
        assert response["CustomResponseBodyKey"] in bodies
    assert "rate_limited" in bodies["rate-limited-json"]["Content"]

    def limits(path: str) -> set[str]:
        return {
            name
            for name, rule in rules.items()
            if waf_matches(rule["Statement"]["RateBasedStatement"]["ScopeDownStatement"], path)
        }

    paths = package.template["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]["paths"]
    shopper = (
        "/r/",
        "/reserve/",
        "/m/",
        "/me/",
        "/notify-me",
        "/confirm/",
        "/unsubscribe/",
        "/optin/",
        "/resubscribe/",
    )
    assert {prefix for prefix in shopper if any(path.startswith(prefix) for path in paths)} == set(shopper)
    for route in paths:
        for prefix in ("/api", ""):
            path = prefix + filled(route)
            counted = limits(path)
            if route.startswith("/webhooks/"):
                assert counted == {"webhook-rate"}, route
            else:
                # Reserve links, the manage page and every tap are held by the generous page rule at least.
                assert "page-rate" in counted and "webhook-rate" not in counted, route
            if route in SENDING_ROUTES:
                assert "notify-me-rate" in counted, route


def test_the_dashboard_api_is_behind_the_stacks_own_cognito_pool(package: Package) -> None:
    body = package.template["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]
    authorizer = body["securityDefinitions"]["AdminUserPool"]["x-amazon-apigateway-authorizer"]
    assert authorizer["type"] == "cognito_user_pools"
    assert authorizer["providerARNs"] == [{"Fn::GetAtt": ["AdminUserPool", "Arn"]}]
    guarded = {
        (path, method)
        for path, operations in body["paths"].items()
        for method, operation in operations.items()
        if isinstance(operation, dict) and {"AdminUserPool": []} in operation.get("security", [])
    }
    admin = {
        (path, method)
        for path, operations in body["paths"].items()
        if path.startswith("/admin/api/") and not path.startswith("/admin/api/session")
        for method in operations
        if not method.startswith("x-amazon")
    }
    assert admin and admin <= guarded
    assert not any(path.startswith(("/admin/api/session", "/notify-me", "/reserve")) for path, _ in guarded)
    pool = package.template["Resources"]["AdminUserPool"]["Properties"]
    # MFA is required unless a stage overrides AdminMfa: Cognito itself then issues no token on a password alone.
    assert (pool["MfaConfiguration"], pool["EnabledMfas"]) == ({"Ref": "AdminMfa"}, ["SOFTWARE_TOKEN_MFA"])
    mfa = package.template["Parameters"]["AdminMfa"]
    assert (mfa["Default"], mfa["AllowedValues"]) == ("ON", ["ON", "OPTIONAL"])
    client = package.template["Resources"]["AdminUserPoolClient"]["Properties"]
    assert client["GenerateSecret"] is False
    assert set(client["ExplicitAuthFlows"]) == {"ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"}
    env = package.function("api_handler")["Environment"]["Variables"]
    assert (env["ADMIN_USER_POOL_ID"], env["ADMIN_CLIENT_ID"]) == (
        {"Ref": "AdminUserPool"},
        {"Ref": "AdminUserPoolClient"},
    )
    unbound = json.loads(json.dumps(package.template))
    del unbound["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]["securityDefinitions"]["AdminUserPool"]
    with pytest.raises(PackageError, match="ADMIN_AUTHORIZER=cognito"):
        pin(unbound, package.prefix)
