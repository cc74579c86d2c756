"""The IAM rules every function's policy must keep, checked on policy files and on the packaged template."""

from __future__ import annotations

import ast
from typing import Any

from infra.policies import BEDROCK_PROFILE

# Calls that SNS or SES define no resource for: each may use Resource "*", and only in the named function.
ANY_RESOURCE_ALLOWED = {
    ("notifier", "sns:Publish"),  # an SMS to a phone number has no ARN
    ("notifier", "ses:GetAccount"),  # the account's sending quota
    ("sweep", "sns:ListPhoneNumbersOptedOut"),  # an account-level listing
    ("api_handler", "cloudwatch:GetMetricData"),  # the dashboard's monthly figures: no resource-level permissions
    ("api_handler", "sns:GetSMSAttributes"),  # the account's SMS spend limit
}
# The one change a function may make to an audit fact: the dashboard's erasure, on the person fields alone.
AUDIT_ERASURE = {"ForAllValues:StringEquals": {"dynamodb:Attributes": ["sku", "ts", "contact_key", "previous_key"]}}
MODEL = BEDROCK_PROFILE.split(".", 1)[1]
# The one Deny a policy may hold: the notifier's, which keeps its Publish-to-any-resource off every topic.
TOPIC_DENY = {"Effect": "Deny", "Action": ["sns:Publish"], "Resource": "arn:aws:sns:*:*:*"}


def as_list(value: Any) -> list[Any]:
    """A policy field that may be one value or a list, as a list."""
    return value if isinstance(value, list) else [value]


def statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The Allow statements of a policy document."""
    return [s for s in as_list(document["Statement"]) if s.get("Effect") == "Allow"]


def denials(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The Deny statements of a policy document."""
    return [s for s in as_list(document["Statement"]) if s.get("Effect") == "Deny"]


def actions(document: dict[str, Any]) -> set[str]:
    """Every action a policy allows."""
    return {action for s in statements(document) for action in as_list(s["Action"])}


def resources_for(document: dict[str, Any], action: str) -> set[str]:
    """Every resource on which a policy allows one action (before any Deny)."""
    return {r for s in statements(document) if action in as_list(s["Action"]) for r in as_list(s["Resource"])}


def dynamodb_targets(document: dict[str, Any], prefix: str) -> dict[str, set[str]]:
    """Table short name (or 'table/index/name') -> the DynamoDB actions allowed on it."""
    targets: dict[str, set[str]] = {}
    for s in statements(document):
        for resource in as_list(s["Resource"]):
            if not resource.startswith("arn:aws:dynamodb:"):
                continue
            path = resource.split(":table/", 1)[1]
            assert path.startswith(f"{prefix}-"), f"{resource} is not a table of prefix {prefix}"
            short = path[len(prefix) + 1 :]
            targets.setdefault(short, set()).update(as_list(s["Action"]))
    return targets


def violations(function: str, document: dict[str, Any], region: str, prefix: str) -> list[str]:
    """Every way a function's policy breaks the rules (empty when it keeps them all)."""
    found: list[str] = []
    for s in as_list(document["Statement"]):
        if s.get("Effect") == "Deny" and {k: v for k, v in s.items() if k != "Sid"} == TOPIC_DENY:
            continue
        if s.get("Effect") != "Allow" or "NotAction" in s or "NotResource" in s or "Principal" in s:
            found.append(f"{s.get('Sid')}: only plain Allow statements (and the notifier's topic Deny) are expected")
        acts = as_list(s.get("Action", []))
        for action in acts:
            if "*" in action:
                found.append(f"{s.get('Sid')}: wildcard action {action}")
        if "*" in as_list(s.get("Resource", [])):
            for action in acts:
                if (function, action) not in ANY_RESOURCE_ALLOWED:
                    found.append(f"{s.get('Sid')}: {action} on any resource")
    if "*" in resources_for(document, "sns:Publish") and TOPIC_DENY not in [
        {k: v for k, v in d.items() if k != "Sid"} for d in denials(document)
    ]:
        found.append("Publish on any resource without the Deny that keeps it off topics")
    everything = actions(document)
    bedrock = {a for a in everything if a.startswith("bedrock:")}
    if bedrock and function != "notifier":
        found.append(f"{function} may call Bedrock: {sorted(bedrock)}")
    if bedrock:
        if bedrock != {"bedrock:InvokeModel"}:
            found.append(f"Bedrock actions beyond InvokeModel: {sorted(bedrock)}")
        profile = f"arn:aws:bedrock:{region}:*:inference-profile/{BEDROCK_PROFILE}"
        allowed = {
            profile,
            f"arn:aws:bedrock:{region}::foundation-model/{MODEL}",
            f"arn:aws:bedrock:::foundation-model/{MODEL}",
        }
        granted = resources_for(document, "bedrock:InvokeModel")
        if granted != allowed:
            found.append(f"Bedrock resources {sorted(granted)} are not exactly {sorted(allowed)}")
        for s in statements(document):
            models = [r for r in as_list(s["Resource"]) if ":foundation-model/" in r]
            condition = s.get("Condition", {}).get("StringLike", {}).get("bedrock:InferenceProfileArn")
            if models and condition != profile:
                found.append(f"{s.get('Sid')}: the model is reachable other than through {profile}")
    if function == "api_handler":
        for action in everything:
            if action.startswith(("ses:", "bedrock:")):
                found.append(f"the API may call {action}")
        if "*" in resources_for(document, "sns:Publish"):
            found.append("the API may publish SMS to phone numbers")
    logs = resources_for(document, "logs:PutLogEvents")
    own = f"arn:aws:logs:{region}:*:log-group:/aws/lambda/{prefix}-{function}:*"
    if logs != {own}:
        found.append(f"logs go to {sorted(logs)}, not only the function's own group {own}")
    if "logs:CreateLogGroup" in everything:
        found.append("the function may create its log group (the template owns it and its retention)")
    audit = set()
    for s in statements(document):
        for resource in as_list(s["Resource"]):
            if resource.endswith(f":table/{prefix}-audit"):
                acts = set(as_list(s["Action"]))
                if s.get("Condition") == AUDIT_ERASURE and function == "api_handler":
                    acts -= {"dynamodb:UpdateItem"}
                audit |= acts
    if audit - {"dynamodb:PutItem", "dynamodb:Query"}:
        found.append(
            f"audit is append-only, but {function} may {sorted(audit - {'dynamodb:PutItem', 'dynamodb:Query'})}"
        )
    return found


# --- Which IAM action each AWS call in the code needs.

CALLS = {
    "get_item": "dynamodb:GetItem",
    "put_item": "dynamodb:PutItem",
    "update_item": "dynamodb:UpdateItem",
    "delete_item": "dynamodb:DeleteItem",
    "query": "dynamodb:Query",
    "query_all": "dynamodb:Query",  # chalicelib/tables/base.py helpers
    "count_all": "dynamodb:Query",
    "get_all": "dynamodb:BatchGetItem",
    "scan": "dynamodb:Scan",
    "scan_all": "dynamodb:Scan",
    "batch_get_item": "dynamodb:BatchGetItem",
    "batch_write_item": "dynamodb:BatchWriteItem",
    "transact_get_items": "dynamodb:GetItem",
    "batch_writer": "dynamodb:BatchWriteItem",
    "send_message": "sqs:SendMessage",
    "send_message_batch": "sqs:SendMessage",
    "get_queue_url": "sqs:GetQueueUrl",
    "receive_message": "sqs:ReceiveMessage",
    "delete_message": "sqs:DeleteMessage",
    "change_message_visibility": "sqs:ChangeMessageVisibility",
    "get_queue_attributes": "sqs:GetQueueAttributes",
    "start_message_move_task": "sqs:StartMessageMoveTask",
    "publish": "sns:Publish",
    "get_sms_attributes": "sns:GetSMSAttributes",
    "describe_alarms": "cloudwatch:DescribeAlarms",
    "get_metric_data": "cloudwatch:GetMetricData",
    "list_phone_numbers_opted_out": "sns:ListPhoneNumbersOptedOut",
    "check_if_phone_number_is_opted_out": "sns:CheckIfPhoneNumberIsOptedOut",
    "opt_in_phone_number": "sns:OptInPhoneNumber",
    "send_email": "ses:SendEmail",
    "get_account": "ses:GetAccount",
    "converse": "bedrock:InvokeModel",
    "converse_stream": "bedrock:InvokeModelWithResponseStream",
    "invoke_model": "bedrock:InvokeModel",
    "get_secret_value": "secretsmanager:GetSecretValue",
    "SecretsProvider": "secretsmanager:GetSecretValue",
    "get_parameter": "ssm:GetParameter",
    "SSMProvider": "ssm:GetParameter",
    "put_metric_data": "cloudwatch:PutMetricData",
    "admin_list_groups_for_user": "cognito-idp:AdminListGroupsForUser",
}
TRANSACTION_ITEMS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


# Code that only the support CLI runs, with the staff member's own AWS credentials, never a Lambda role. It lives
# outside chalicelib/, so it never ships and no function's policy grants what it calls.
STAFF_ONLY = ("support/lift.py",)


def aws_calls_in(source: str) -> dict[str, str]:
    """IAM action -> one place in `source` that needs it."""
    needed: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "get_paginator" and node.args and isinstance(node.args[0], ast.Constant):
                name = str(node.args[0].value)
            if name in CALLS:
                needed.setdefault(CALLS[name], f"line {node.lineno}: {name}")
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value in TRANSACTION_ITEMS:
                    needed.setdefault(TRANSACTION_ITEMS[key.value], f"line {node.lineno}: {key.value} item")
    return needed
