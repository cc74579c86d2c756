"""Last step of `make package`: tie the packaged template to the stage its policies were written for.

The policy files name the stage's tables, queue and secrets (infra/policies.py), so a stack deployed
with another name prefix or in another region would start with functions that may touch nothing.
This pins the template's NamePrefix to the stage's NAME_PREFIX and adds a rule that refuses any
region but the policies' one, so such a deployment fails at once with a clear message instead.

It binds the dashboard's Cognito authorizer to the stack's AdminUserPool (refusing a package in which some
/admin/api route but sign-in goes without it). It also binds each SQS trigger to the stack's own queue (the notifier's to JobsQueue, the SES feedback
handler's to FeedbackQueue, the outbound events' to EventsQueue), and the events feed's stream trigger to the
AuditTable's stream, for the facts that can be events only: Chalice writes the queue as
ARN text built from the name given in app.py, which cannot know the stage and orders nothing (the
queue must exist before Lambda maps it). And it refuses a template in which some function has no
name or log group from infra/template.json.

Last, it puts the real account id into the roles' policies: the policy files write the account of each
ARN as `*` (they cannot hold intrinsics, and no stage setting names the account), but in the packaged
template they are plain JSON inside each role, where `${AWS::AccountId}` is the account the stack is
deployed to. Every `arn:aws:<service>:<region>:*:` becomes that account; ARNs with no account (Bedrock's
foundation models) and the notifier's Deny on every topic in every account (`arn:aws:sns:*:*:*`) stay.

    .venv/bin/python -m infra.pin_stage build/sam.json --stage dev
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from infra.policies import DEPLOY_REGION, stage_settings
from infra.stages import load_config


class PackageError(RuntimeError):
    """The packaged template does not match what the stage's policies allow."""


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every Lambda function of a packaged template, by logical id."""
    return {k: v for k, v in template["Resources"].items() if v.get("Type") == "AWS::Serverless::Function"}


def check_functions(template: dict[str, Any]) -> None:
    """Every function needs a fixed name (its policy's log permission names it) and its own log group first."""
    resources = template["Resources"]
    log_groups = {
        json.dumps(r["Properties"].get("LogGroupName"), sort_keys=True): logical
        for logical, r in resources.items()
        if r.get("Type") == "AWS::Logs::LogGroup"
    }
    for logical, function in functions(template).items():
        props = function["Properties"]
        if "Handler" not in props:
            raise PackageError(f"infra/template.json overrides {logical}, which the app does not define")
        name = props.get("FunctionName", {})
        if not isinstance(name, dict) or not isinstance(name.get("Fn::Sub"), str):
            raise PackageError(f"function {logical} has no FunctionName in infra/template.json")
        group = log_groups.get(json.dumps({"Fn::Sub": "/aws/lambda/" + name["Fn::Sub"]}, sort_keys=True))
        if group is None:
            raise PackageError(f"function {logical} has no log group with a retention in infra/template.json")
        if group not in function.get("DependsOn", []):
            raise PackageError(f"function {logical} must depend on {group}, so the group exists before it logs")


# The queues a function may consume, by the end of the name app.py gives them, and their logical ids.
QUEUES = {"-jobs": "JobsQueue", "-ses-feedback": "FeedbackQueue", "-events": "EventsQueue"}


def bind_queue(template: dict[str, Any]) -> None:
    """Point every SQS trigger at the stack's own queue of that name (the jobs queue, the SES feedback queue)."""
    for logical, function in functions(template).items():
        for name, event in function["Properties"].get("Events", {}).items():
            if event.get("Type") != "SQS":
                continue
            if event["Properties"]["Queue"] in [{"Fn::GetAtt": [q, "Arn"]} for q in QUEUES.values()]:
                continue
            queue = json.dumps(event["Properties"]["Queue"])
            bound = [q for suffix, q in QUEUES.items() if queue.rstrip('"}').endswith(suffix)]
            if not bound:
                raise PackageError(
                    f"{logical}.{name} consumes {queue}; only the jobs, feedback and events queues exist"
                )
            event["Properties"]["Queue"] = {"Fn::GetAtt": [bound[0], "Arn"]}


# The one stream a function may read, and the facts on it that can be events (chalicelib/events_out.py): Lambda
# invokes the function for those only, so a shop with no events out pays for no invocation per fact.
STREAM_TABLE = "AuditTable"
EVENT_FACTS = ("joined", "confirmed", "notice_sent", "hold", "conversion", "lapse", "expiry", "leave")


def bind_stream(template: dict[str, Any]) -> None:
    """Point every DynamoDB Streams trigger at the stack's own audit table's stream, for new facts of the kinds
    that can be events: Chalice writes the stream's ARN as given in app.py, which no stage knows before the table
    exists."""
    pattern = {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"kind": {"S": list(EVENT_FACTS)}}}}
    for function in functions(template).values():
        for event in function["Properties"].get("Events", {}).values():
            if event.get("Type") != "DynamoDB":
                continue
            event["Properties"]["Stream"] = {"Fn::GetAtt": [STREAM_TABLE, "StreamArn"]}
            event["Properties"]["FilterCriteria"] = {"Filters": [{"Pattern": json.dumps(pattern)}]}


# An ARN whose region is named and whose account is left as `*` by infra/policies.py.
ANY_ACCOUNT = re.compile(r"^(arn:aws:[a-z0-9-]+:[a-z0-9-]+:)\*(:.*)$")


def own_account(document: dict[str, Any]) -> dict[str, Any]:
    """A policy document with each regional ARN's `*` account replaced by `${AWS::AccountId}` (an Fn::Sub)."""

    def pinned(resource: Any) -> Any:
        match = ANY_ACCOUNT.match(resource) if isinstance(resource, str) else None
        if match is None:
            return resource
        if "${" in resource:
            raise PackageError(f"{resource} holds '${{', which Fn::Sub would read as a variable")
        return {"Fn::Sub": f"{match.group(1)}${{AWS::AccountId}}{match.group(2)}"}

    statements = []
    for statement in document["Statement"]:
        resources = statement["Resource"]
        pinned_resources = [pinned(r) for r in resources] if isinstance(resources, list) else pinned(resources)
        statements.append({**statement, "Resource": pinned_resources})
    return {**document, "Statement": statements}


def pin_accounts(template: dict[str, Any]) -> None:
    """Every inline policy of every role, pinned to the deploying account."""
    for role in template["Resources"].values():
        if role.get("Type") != "AWS::IAM::Role":
            continue
        for inline in role["Properties"].get("Policies", []):
            inline["PolicyDocument"] = own_account(inline["PolicyDocument"])


# The dashboard's API Gateway authorizer (app.py ADMIN_AUTHORIZER) and the pool it must name (infra/template.json).
ADMIN_AUTHORIZER = "AdminUserPool"
ADMIN_API = "/admin/api/"
SIGN_IN = ("/admin/api/session", "/admin/api/session/challenge")


def bind_admin_authorizer(template: dict[str, Any]) -> None:
    """Point the dashboard's Cognito authorizer at the stack's own user pool, and refuse a template in which some
    /admin/api route (sign-in aside) goes without it: Chalice writes the pool's ARN as given in app.py, which
    cannot know the stack's pool."""
    body = template["Resources"].get("RestAPI", {}).get("Properties", {}).get("DefinitionBody", {})
    authorizer = body.get("securityDefinitions", {}).get(ADMIN_AUTHORIZER)
    if authorizer is None:
        raise PackageError(
            "the dashboard has no Cognito authorizer: package with ADMIN_AUTHORIZER=cognito (make package)"
        )
    authorizer["x-amazon-apigateway-authorizer"]["providerARNs"] = [{"Fn::GetAtt": [ADMIN_AUTHORIZER, "Arn"]}]
    for path, operations in body.get("paths", {}).items():
        if not path.startswith(ADMIN_API) or path in SIGN_IN:
            continue
        for method, operation in operations.items():
            if method.startswith("x-amazon") or not isinstance(operation, dict):
                continue
            if {ADMIN_AUTHORIZER: []} not in operation.get("security", []):
                raise PackageError(f"{method.upper()} {path} is not behind the dashboard's Cognito authorizer")


def pin(template: dict[str, Any], prefix: str, region: str = DEPLOY_REGION) -> dict[str, Any]:
    """The template with NamePrefix fixed to `prefix`, deployments outside `region` refused, the queue bound,
    and the roles' policies naming the deploying account."""
    check_functions(template)
    bind_queue(template)
    bind_stream(template)
    bind_admin_authorizer(template)
    pin_accounts(template)
    parameter = template["Parameters"]["NamePrefix"]
    parameter["Default"] = prefix
    parameter["AllowedValues"] = [prefix]
    template.setdefault("Rules", {})["DeployRegion"] = {
        "Assertions": [
            {
                "Assert": {"Fn::Equals": [{"Ref": "AWS::Region"}, region]},
                "AssertDescription": (
                    f"The IAM policies of this package allow {region} only; "
                    "change DEPLOY_REGION in infra/policies.py and run make policies to deploy elsewhere."
                ),
            }
        ]
    }
    return template


def main(argv: list[str] | None = None) -> int:
    """Pin a packaged template in place."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("template", type=Path)
    parser.add_argument("--stage", required=True)
    args = parser.parse_args(argv)
    stage = stage_settings(load_config(), args.stage)
    template = json.loads(args.template.read_text())
    try:
        pin(template, stage.prefix, stage.region)
    except PackageError as error:
        print(f"make package: {error}", file=sys.stderr)
        return 1
    args.template.write_text(json.dumps(template, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
