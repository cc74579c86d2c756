"""The deploy-time check of the SNS SMS monthly spend limit (infra/sms_spend.py)."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra.sms_spend import check, delivery_status_problem, enable_delivery_status, failure_log_group


class FakeSns:
    def __init__(self, limit: str | None) -> None:
        self.attributes = {} if limit is None else {"MonthlySpendLimit": limit}

    def get_sms_attributes(self, attributes: list[str]) -> dict[str, Any]:
        return {"attributes": dict(self.attributes)}

    def set_sms_attributes(self, attributes: dict[str, str]) -> None:
        self.attributes.update(attributes)


def test_an_unset_or_too_high_limit_fails_the_check() -> None:
    assert "no SNS SMS MonthlySpendLimit" in check(FakeSns(None), 20)
    assert "above the 20 USD" in check(FakeSns("100"), 20)
    assert check(FakeSns("10"), 20) == ""


def test_the_check_can_set_the_limit() -> None:
    sns = FakeSns(None)
    assert check(sns, 20, set_it=True) == ""
    assert sns.attributes == {"MonthlySpendLimit": "20"}


# --- SMS delivery status logging, on the emulator


def a_function(session: boto3.session.Session) -> str:
    """A Lambda function standing for the stack's sms_feedback (created, never run), its ARN."""
    role = session.client("iam").create_role(
        RoleName="sms-feedback", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return None\n")
    return str(
        session.client("lambda").create_function(
            FunctionName="bisn-sms_feedback",
            Runtime="python3.11",
            Role=role,
            Handler="app.handler",
            Code={"ZipFile": code.getvalue()},
        )["FunctionArn"]
    )


def test_delivery_status_logging_reaches_the_function_once_turned_on() -> None:
    with mock_aws():
        session = boto3.session.Session(region_name="eu-west-2")
        sns, logs = session.client("sns"), session.client("logs")
        function = a_function(session)
        role = "arn:aws:iam::123456789012:role/bisn-SmsDeliveryStatusRole-1A2B3C"
        wiring = {"role_arn": role, "function_arn": function}
        assert "DeliveryStatusIAMRole is unset" in delivery_status_problem(sns, logs, **wiring)

        enable_delivery_status(sns, logs, **wiring)
        enable_delivery_status(sns, logs, **wiring)  # again, as every deploy does: nothing changes

        assert delivery_status_problem(sns, logs, **wiring) == ""
        attributes = sns.get_sms_attributes()["attributes"]
        assert attributes["DeliveryStatusIAMRole"] == role
        assert attributes["DeliveryStatusSuccessSamplingRate"] == "0"
        group = failure_log_group(function)
        assert group == "sns/eu-west-2/123456789012/DirectPublishToPhoneNumber/Failure"
        [described] = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
        assert described["retentionInDays"] == 30
        [subscription] = logs.describe_subscription_filters(logGroupName=group)["subscriptionFilters"]
        assert subscription["destinationArn"] == function and subscription["filterName"] == "bisn-sms_feedback"

        other = function.replace("bisn-sms_feedback", "bisn-dev-sms_feedback")
        assert "no subscription filter" in delivery_status_problem(sns, logs, role_arn=role, function_arn=other)


def test_a_function_arn_names_its_region_and_account() -> None:
    with pytest.raises(ValueError, match="not a Lambda function ARN"):
        failure_log_group("arn:aws:iam::123456789012:role/x")
