"""Each function's IAM policy file: generated, referenced, least privilege, and enough for what the code calls."""

from __future__ import annotations

import ast
import fnmatch
import json
from pathlib import Path
from typing import Any

import pytest

from infra import policies
from infra.pin_stage import ANY_ACCOUNT, own_account
from infra.policies import DEPLOY_REGION, FUNCTIONS
from infra.stages import load_config, stage_env
from tests.iam_rules import (
    ANY_RESOURCE_ALLOWED,
    AUDIT_ERASURE,
    STAFF_ONLY,
    actions,
    as_list,
    aws_calls_in,
    denials,
    dynamodb_targets,
    resources_for,
    statements,
    violations,
)
from tests.support import ROOT

CONFIG = load_config()
STAGES = policies.deployed_stages(CONFIG)
TEMPLATE = json.loads((ROOT / "infra" / "template.json").read_text())

# DESIGN §2, "may touch". The notifier and the sweep also read product settings and keep the
# per-product waiting count, so both touch the catalogue. The notifier takes a channel switch's code from the
# throttle table (chalicelib/confirm.py).
TABLES_PER_FUNCTION = {
    "api_handler": {"catalog", "requests", "restocks", "reservations", "optout", "throttle", "audit"},
    "notifier": {"catalog", "requests", "optout", "restocks", "reservations", "throttle", "audit"},
    "sweep": {"catalog", "reservations", "restocks", "requests", "optout", "throttle", "audit"},
    "catalog_sync": {"catalog", "restocks", "throttle", "audit"},
    "reconcile": {"catalog", "restocks", "throttle", "audit"},
    # A hard bounce or a complaint opts the address out and takes it off every list, as the sweep's STOP sync does.
    "feedback": {"catalog", "requests", "restocks", "reservations", "optout", "throttle", "audit"},
    # A number that can never take an SMS is opted out and leaves every list, as a hard bounce does.
    "sms_feedback": {"catalog", "requests", "restocks", "reservations", "optout", "throttle", "audit"},
    # Events out (docs/EVENTS.md): the feed reads the audit table's stream only; delivery reads a person's place
    # and whether they opted out.
    "events_feed": set(),
    "outbound": {"requests", "optout"},
}
SECRETS_PER_FUNCTION = {
    "api_handler": {"webhook-secret", "token-key", "contact-hash-key"},
    "notifier": {"token-key"},
    "sweep": {"contact-hash-key"},
    "feedback": {"contact-hash-key"},
    "sms_feedback": {"contact-hash-key"},
    "outbound": {"outbound-webhook-secret"},  # the shop's receiver's signing secret (Klaviyo's key, where set)
}


def policy(stage: str, function: str) -> dict[str, Any]:
    """A policy file as Chalice will read it."""
    return json.loads(policies.policy_path(stage, function).read_text())


def prefix(stage: str) -> str:
    """The stage's name prefix."""
    return stage_env(stage, CONFIG)["NAME_PREFIX"]


def template_tables() -> dict[str, dict[str, Any]]:
    """Short table name -> its template properties."""
    tables = {}
    for resource in TEMPLATE["Resources"].values():
        if resource["Type"] == "AWS::DynamoDB::Table":
            short = resource["Properties"]["TableName"]["Fn::Sub"].removeprefix("${NamePrefix}-")
            tables[short] = resource["Properties"]
    return tables


EVERY_POLICY = [(stage, function) for stage in STAGES for function in FUNCTIONS]


def test_policy_files_are_what_the_generator_writes_from_the_stage_settings() -> None:
    expected = policies.expected_files(CONFIG)
    stale = [
        str(path.relative_to(ROOT)) for path, text in expected.items() if not path.exists() or path.read_text() != text
    ]
    assert not stale, f"run `make policies`: {stale} differ from the stage settings"
    on_disk = set(policies.POLICY_DIR.rglob("*.json"))
    assert on_disk == set(expected), "policy files nobody asks for are lying in .chalice/policies"


def test_every_deployed_stage_gives_every_function_its_own_policy_file_and_no_generated_policy() -> None:
    assert CONFIG["autogen_policy"] is False
    assert STAGES, "no deployed stage"
    for stage in STAGES:
        configured = CONFIG["stages"][stage]["lambda_functions"]
        for function in FUNCTIONS:
            assert configured[function]["iam_policy_file"] == policies.policy_file_setting(stage, function)
            assert (ROOT / ".chalice" / configured[function]["iam_policy_file"]).exists()


@pytest.mark.parametrize(("stage", "function"), EVERY_POLICY)
def test_policy_keeps_every_least_privilege_rule(stage: str, function: str) -> None:
    assert violations(function, policy(stage, function), DEPLOY_REGION, prefix(stage)) == []


@pytest.mark.parametrize(("stage", "function"), EVERY_POLICY)
def test_function_touches_only_the_tables_and_indexes_it_needs(stage: str, function: str) -> None:
    targets = dynamodb_targets(policy(stage, function), prefix(stage))
    tables = template_tables()
    assert {t for t in targets if "/index/" not in t and "/stream/" not in t} == TABLES_PER_FUNCTION[function]
    streams = {t: granted for t, granted in targets.items() if "/stream/" in t}
    # Only the events feed reads a stream, the audit table's, and only as Lambda's trigger reads it.
    assert streams == ({"audit/stream/*": set(policies.STREAM_READ)} if function == "events_feed" else {})
    assert "StreamSpecification" in tables["audit"]
    for target, granted in targets.items():
        if "/index/" in target:
            table, index = target.split("/index/")
            names = {i["IndexName"] for i in tables[table].get("GlobalSecondaryIndexes", [])}
            assert index in names, f"{function} may query {table} index {index}, which the template lacks"
            assert granted == {"dynamodb:Query"}
        else:
            assert target.split("/stream/")[0] in tables, f"{function} names table {target}, which the template lacks"


@pytest.mark.parametrize("stage", STAGES)
def test_only_the_catalogue_may_be_scanned_and_nobody_writes_in_batches(stage: str) -> None:
    # Catalogue sync reads the whole catalogue; the API scans it only for a product a platform says was deleted
    # (a signed store webhook, never a shopper's request), to find that product's SKUs.
    for function in FUNCTIONS:
        granted = actions(policy(stage, function))
        assert "dynamodb:BatchWriteItem" not in granted
        assert ("dynamodb:Scan" in granted) == (function in ("catalog_sync", "api_handler"))
        for arn in resources_for(policy(stage, function), "dynamodb:Scan"):
            assert arn.endswith(f":table/{prefix(stage)}-catalog"), (function, arn)


@pytest.mark.parametrize("stage", STAGES)
def test_each_function_reads_only_its_own_secrets(stage: str) -> None:
    for function in FUNCTIONS:
        granted = resources_for(policy(stage, function), "secretsmanager:GetSecretValue")
        names = {
            arn.split(":secret:", 1)[1].removeprefix(f"{prefix(stage)}/").removesuffix("-??????") for arn in granted
        }
        expected = set(SECRETS_PER_FUNCTION.get(function, set()))
        # The generic stock feed is fetched with the catalogue's token (chalicelib/reconcile.py).
        if function in ("catalog_sync", "reconcile") and "CATALOG_TOKEN_SECRET_ID" in stage_env(stage, CONFIG):
            expected.add(stage_env(stage, CONFIG)["CATALOG_TOKEN_SECRET_ID"].split("/", 1)[1])
        assert names == expected, function


@pytest.mark.parametrize("stage", STAGES)
def test_only_the_notifier_texts_emails_or_writes_copy(stage: str) -> None:
    for function in FUNCTIONS:
        granted = actions(policy(stage, function))
        tells_shoppers = {"ses:SendEmail", "bedrock:InvokeModel"} & granted or "*" in resources_for(
            policy(stage, function), "sns:Publish"
        )
        assert bool(tells_shoppers) == (function == "notifier"), function


@pytest.mark.parametrize("stage", STAGES)
def test_email_is_sent_only_from_the_stages_sender(stage: str) -> None:
    env = stage_env(stage, CONFIG)
    address = env["SES_FROM"].split("<")[-1].rstrip(">")
    (statement,) = [s for s in statements(policy(stage, "notifier")) if "ses:SendEmail" in s["Action"]]
    assert statement["Condition"] == {"StringEquals": {"ses:FromAddress": address}}
    identities = (f"identity/{address}", f"identity/{address.split('@')[1]}")
    configuration_set = f"configuration-set/{env['SES_CONFIGURATION_SET']}"
    assert all(r.endswith((*identities, configuration_set)) for r in statement["Resource"])


@pytest.mark.parametrize("stage", STAGES)
def test_every_email_goes_out_under_the_templates_configuration_set(stage: str) -> None:
    # The stage's setting names the set infra/template.json creates for that prefix, whose events reach the queue.
    name = TEMPLATE["Resources"]["FeedbackConfigurationSet"]["Properties"]["Name"]["Fn::Sub"]
    assert stage_env(stage, CONFIG)["SES_CONFIGURATION_SET"] == name.replace("${NamePrefix}", prefix(stage))


def named(resource: str) -> str:
    """The name inside an ARN: table, queue, topic, secret or log group function."""
    for marker in (
        ":table/",
        ":secret:",
        ":log-group:/aws/lambda/",
        ":identity/",
        ":inference-profile/",
        ":foundation-model/",
    ):
        if marker in resource:
            return resource.split(marker, 1)[1]
    return resource.rsplit(":", 1)[-1]


@pytest.mark.parametrize("stage", STAGES)
def test_policies_name_only_their_own_stages_resources(stage: str) -> None:
    prefixes = sorted((prefix(s) for s in STAGES), key=len, reverse=True)
    for function in FUNCTIONS:
        for s in statements(policy(stage, function)):
            for resource in s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]:
                if resource == "*" or ":ses:" in resource or ":bedrock:" in resource:
                    continue
                if resource.endswith(":userpool/*"):
                    # A pool's ARN names its id, which the stack makes: pinned to the account at package.
                    continue
                name = named(resource)
                owner = next((p for p in prefixes if name.startswith((f"{p}-", f"{p}/"))), None)
                assert owner == prefix(stage), f"{stage} {function} names {resource}"


def test_a_stage_with_a_different_model_or_no_sender_is_refused() -> None:
    config = json.loads(json.dumps(CONFIG))
    env = config["stages"]["dev"]["environment_variables"]
    env["BEDROCK_MODEL_ID"] = "anthropic.claude-opus-4-1-20250805-v1:0"
    with pytest.raises(ValueError, match="grant"):
        policies.expected_files(config, Path("/nonexistent"))
    env["BEDROCK_MODEL_ID"] = policies.BEDROCK_PROFILE
    env["COPY_MODE"] = "template"
    files = policies.expected_files(config, Path("/p"))
    assert "bedrock" not in files[Path("/p/dev/policy-notifier.json")], "no model grant when no model is used"
    del env["TOKEN_KEY_SECRET_ID"]
    with pytest.raises(ValueError, match="TOKEN_KEY"):
        policies.expected_files(config, Path("/p"))


# --- Every AWS call the shipped code makes is granted to some function.


@pytest.mark.parametrize("stage", STAGES)
def test_every_aws_call_the_shipped_code_makes_is_granted_to_some_function(stage: str) -> None:
    granted = set().union(*(actions(policy(stage, f)) for f in FUNCTIONS))
    missing = []
    for path in sorted((ROOT / "chalicelib").rglob("*.py")):
        for action, where in aws_calls_in(path.read_text()).items():
            if action not in granted:
                missing.append(f"{path.relative_to(ROOT)} {where} needs {action}")
    assert missing == []


def test_staff_only_code_is_not_shipped_and_no_shipped_code_imports_it() -> None:
    for staff in STAFF_ONLY:
        assert (ROOT / staff).is_file() and not staff.startswith("chalicelib/")
    importers = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "chalicelib").rglob("*.py"))
        if any(
            (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "support")
            or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "support" for a in node.names))
            for node in ast.walk(ast.parse(path.read_text()))
        )
    ]
    assert importers == []


def test_the_call_scanner_sees_clients_paginators_and_transaction_items() -> None:
    source = (
        "sns.get_paginator('list_phone_numbers_opted_out')\n"
        "client.converse(modelId=m)\n"
        "items = [{'ConditionCheck': {}}, {'Put': {}}]\n"
        "table.batch_writer()\n"
    )
    assert set(aws_calls_in(source)) == {
        "sns:ListPhoneNumbersOptedOut",
        "bedrock:InvokeModel",
        "dynamodb:ConditionCheckItem",
        "dynamodb:PutItem",
        "dynamodb:BatchWriteItem",
    }


def test_any_resource_is_allowed_only_for_calls_that_have_no_resource() -> None:
    # SES GetAccount, CloudWatch GetMetricData and SNS GetSMSAttributes are account-level: the Service
    # Authorization Reference lists no resource type for them.
    assert {action for _, action in ANY_RESOURCE_ALLOWED} == {
        "sns:Publish",
        "sns:ListPhoneNumbersOptedOut",
        "ses:GetAccount",
        "cloudwatch:GetMetricData",
        "sns:GetSMSAttributes",
    }
    bad = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["dynamodb:*"], "Resource": "*"}]}
    found = violations("api_handler", bad, DEPLOY_REGION, "bisn")
    assert any("wildcard action" in f for f in found)
    assert any("on any resource" in f for f in found)


@pytest.mark.parametrize("stage", STAGES)
def test_the_notifier_texts_phone_numbers_but_its_publish_reaches_no_topic(stage: str) -> None:
    document = policy(stage, "notifier")
    assert resources_for(document, "sns:Publish") == {"*"}, "a phone number has no ARN"
    (deny,) = denials(document)
    assert (deny["Action"], deny["Resource"]) == (["sns:Publish"], "arn:aws:sns:*:*:*")
    # IAM matches * in a Resource against any run of characters, so every topic ARN, in any region or account,
    # falls under the Deny: the stage's own alert topic and the SES feedback topic included.
    topics = [
        stage_env(stage, CONFIG)["ALERT_TOPIC_ARN"],
        f"arn:aws:sns:{DEPLOY_REGION}:111122223333:{prefix(stage)}-ses-feedback",
        "arn:aws:sns:us-east-1:444455556666:someone-elses-topic",
    ]
    assert all(fnmatch.fnmatchcase(topic, deny["Resource"]) for topic in topics)
    # Only the notifier may Publish to any resource, and no other function needs a Deny.
    assert [f for f in FUNCTIONS if denials(policy(stage, f))] == ["notifier"]


@pytest.mark.parametrize("stage", STAGES)
def test_only_the_sweep_publishes_staff_alerts(stage: str) -> None:
    alert_topic = f"arn:aws:sns:{DEPLOY_REGION}:*:{prefix(stage)}-alerts"
    senders = [f for f in FUNCTIONS if alert_topic in resources_for(policy(stage, f), "sns:Publish")]
    assert senders == ["sweep"]
    assert "sns:Publish" not in actions(policy(stage, "api_handler"))


@pytest.mark.parametrize(("stage", "function"), EVERY_POLICY)
def test_make_package_names_the_deploying_account_in_every_regional_arn(stage: str, function: str) -> None:
    pinned = own_account(policy(stage, function))
    for statement in pinned["Statement"]:
        for resource in statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]:
            if isinstance(resource, dict):
                (text,) = resource.values()
                assert ":${AWS::AccountId}:" in text and ":*:" not in text.split("${AWS::AccountId}")[0]
            else:
                # Left as written: no region (Bedrock's models), any resource, or the Deny on every topic.
                assert not ANY_ACCOUNT.match(resource), resource
    assert [s["Resource"] for s in pinned["Statement"] if s["Effect"] == "Deny"] in ([], ["arn:aws:sns:*:*:*"])


@pytest.mark.parametrize("stage", STAGES)
def test_the_dashboard_may_change_an_audit_fact_only_by_taking_its_person_fields_off(stage: str) -> None:
    document = policy(stage, "api_handler")
    prefix = stage_env(stage, load_config())["NAME_PREFIX"]
    updates = [
        s
        for s in statements(document)
        if "dynamodb:UpdateItem" in as_list(s["Action"])
        and any(r.endswith(f"{prefix}-audit") for r in as_list(s["Resource"]))
    ]
    assert [s["Condition"] for s in updates] == [AUDIT_ERASURE]
    unconditioned = {**updates[0]}
    del unconditioned["Condition"]
    broken = {**document, "Statement": [*document["Statement"], unconditioned]}
    assert any("audit is append-only" in f for f in violations("api_handler", broken, DEPLOY_REGION, prefix))
    for function in ("notifier", "sweep"):
        assert not any(
            "dynamodb:UpdateItem" in as_list(s["Action"]) and any(r.endswith("-audit") for r in as_list(s["Resource"]))
            for s in statements(policy(stage, function))
        )
