"""Each function's policy grants everything its own code paths may call (read from the code, per function)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra import policies
from infra.policies import FUNCTIONS
from infra.stages import load_config, stage_env
from tests.code_paths import Need, Reader, entry_points, function_needs
from tests.iam_rules import actions, as_list, statements
from tests.support import ROOT

CONFIG = load_config()
STAGES = policies.deployed_stages(CONFIG)
APP = (ROOT / "app.py").read_text()


@pytest.fixture(scope="module")
def needs() -> dict[str, Any]:
    """Lambda function -> what its code may need."""
    return function_needs(Reader(), APP)


def granted(document: dict[str, Any], need: Need, prefix: str) -> bool:
    """True when a policy allows one need."""
    if not need.action.startswith("dynamodb:"):
        return need.action in actions(document)
    for statement in statements(document):
        if need.action not in as_list(statement["Action"]):
            continue
        for resource in as_list(statement["Resource"]):
            path = resource.split(":table/", 1)[-1]
            if need.index and path == f"{prefix}-{need.table}/index/{need.index}":
                return True
            if not need.index and (path == f"{prefix}-{need.table}" or (not need.table and ":table/" in resource)):
                return True
    return False


def test_every_function_of_the_app_has_a_policy_and_every_policy_a_function() -> None:
    assert set(entry_points(APP)) == set(FUNCTIONS)


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_the_policy_grants_what_the_functions_code_may_call(needs: dict[str, Any], stage: str, function: str) -> None:
    document = json.loads(policies.policy_path(stage, function).read_text())
    prefix = stage_env(stage, CONFIG)["NAME_PREFIX"]
    reach = needs[function]
    assert reach.needs, f"no AWS call found on {function}'s paths: the reader lost its way"
    missing = [
        f"{need.action} on {need.table or 'any table'}{'/index/' + need.index if need.index else ''} (via {route})"
        for need, route in reach.needs.items()
        if not granted(document, need, prefix)
    ]
    assert missing == []


def test_the_reader_follows_services_into_tables_and_clients(needs: dict[str, Any]) -> None:
    sweep = needs["sweep"].needs
    # The sweep reads due offers through the sparse index and returns units in transactions.
    assert Need("reservations", "dynamodb:Query", "by-due") in sweep
    assert Need("restocks", "dynamodb:UpdateItem") in sweep
    assert Need("", "sns:ListPhoneNumbersOptedOut") in sweep
    notifier = needs["notifier"].needs
    assert {Need("", "sns:Publish"), Need("", "ses:SendEmail"), Need("", "bedrock:InvokeModel")} <= set(notifier)
    assert Need("", "sqs:SendMessage") in notifier
    api = needs["api_handler"].needs
    assert Need("requests", "dynamodb:PutItem") in api
    assert Need("", "secretsmanager:GetSecretValue") in api
    assert not {n for n in api if n.action.startswith(("ses:", "bedrock:"))}


# Grants the code needs that the reader cannot see, each with the path it misses. Everything else a policy grants
# must be something some code path of that function calls.
NOT_SEEN_BY_THE_READER = {
    # The platform webhooks' routes go through app.py's `_store_webhook` helper, which the reader does not follow:
    # a stock webhook finds its SKU through by-store-item; a product deleted on the platform scans for its SKUs.
    ("api_handler", "catalog", "dynamodb:Query", "by-store-item"),
    ("api_handler", "catalog", "dynamodb:Scan", ""),
    # A place in line (chalicelib/line.py `read_place`, a helper taking `Tables`) sums the product's waiting shards.
    ("api_handler", "catalog", "dynamodb:BatchGetItem", ""),
    # The idle mark's transaction items take the restocks table as `Any` (chalicelib/tables/catalog.py).
    ("notifier", "restocks", "dynamodb:ConditionCheckItem", ""),
}
# Not calls of the code: Lambda writes the logs, the SQS trigger receives and deletes on the function's role, and
# the DynamoDB Streams trigger reads the stream on it.
RUNTIME = {
    *policies.STREAM_READ,
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_the_policy_grants_nothing_the_functions_code_never_calls(
    needs: dict[str, Any], stage: str, function: str
) -> None:
    document = json.loads(policies.policy_path(stage, function).read_text())
    prefix = stage_env(stage, CONFIG)["NAME_PREFIX"]
    reach = needs[function].needs
    unused = []
    for statement in statements(document):
        for action in as_list(statement["Action"]):
            if action in RUNTIME:
                continue
            for resource in as_list(statement["Resource"]):
                if not action.startswith("dynamodb:"):
                    used = any(n.action == action for n in reach)
                    if not used:
                        unused.append(f"{action} on {resource}")
                    continue
                table, _, index = resource.split(":table/", 1)[1].removeprefix(f"{prefix}-").partition("/index/")
                used = (function, table, action, index) in NOT_SEEN_BY_THE_READER or any(
                    n.action == action and n.table in (table, "") and n.index == index for n in reach
                )
                if not used:
                    unused.append(f"{action} on {table}{'/index/' + index if index else ''}")
    assert unused == [], f"{function} is granted what none of its code paths calls"
