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
