"""Reading SNS's SMS delivery status records out of a CloudWatch Logs subscription's invocation."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from chalicelib.sms_feedback import PERMANENT, MalformedLogs, SmsFailure, log_messages, parse_record
from tests.sms_events import FAILURE_REASONS, delivered, failed, subscription_event

NUMBER = "+447400900001"


def test_the_awslogs_payload_is_unpacked_into_its_records() -> None:
    event = subscription_event(failed(NUMBER), delivered(NUMBER))
    messages = log_messages(event)
    assert [json.loads(m)["status"] for m in messages] == ["FAILURE", "SUCCESS"]


def test_a_control_message_carries_no_records() -> None:
    # CloudWatch Logs checks a new destination with a CONTROL_MESSAGE (CloudWatch Logs User Guide, "Subscription
    # filters with AWS Lambda").
    assert (
        log_messages(
            subscription_event("CWL CONTROL MESSAGE: Checking health of destination", message_type="CONTROL_MESSAGE")
        )
        == []
    )


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"awslogs": {}},
        {"awslogs": {"data": "not base64!"}},
        {"awslogs": {"data": base64.b64encode(b"not gzip").decode()}},
        {"awslogs": {"data": base64.b64encode(gzip.compress(b"[1, 2]")).decode()}},
        {"awslogs": {"data": base64.b64encode(gzip.compress(b'{"messageType": "DATA_MESSAGE"}')).decode()}},
    ],
)
def test_anything_else_is_malformed(event: dict) -> None:
    with pytest.raises(MalformedLogs):
        log_messages(event)


def test_a_failure_record_gives_its_message_id_number_and_reason() -> None:
    record = json.dumps(failed(NUMBER, "Invalid phone number", message_id="m-1"))
    assert parse_record(record) == SmsFailure("m-1", NUMBER, "Invalid phone number")


def test_a_success_record_is_not_a_failure() -> None:
    assert parse_record(json.dumps(delivered(NUMBER))) is None


@pytest.mark.parametrize(
    "record",
    [
        "not json",
        "[]",
        json.dumps({"status": "FAILURE"}),
        json.dumps({**failed(NUMBER), "delivery": {"destination": NUMBER}}),
        json.dumps({**failed(NUMBER), "notification": {"messageId": ""}}),
    ],
)
def test_a_broken_failure_record_is_malformed(record: str) -> None:
    with pytest.raises(MalformedLogs):
        parse_record(record)


def test_only_reasons_that_never_pass_suppress_the_number() -> None:
    assert set(PERMANENT) <= set(FAILURE_REASONS), "every suppressing reason is one SNS documents"
    suppressing = {reason for reason in FAILURE_REASONS if SmsFailure("m", NUMBER, reason).suppresses}
    assert suppressing == {"Invalid phone number", "Phone number is opted out"}
    assert SmsFailure("m", NUMBER, "Phone number is opted out").suppresses == "stop"
    assert SmsFailure("m", NUMBER, "Invalid phone number").suppresses == "invalid_number"
    # A reason SNS may add later suppresses nothing until someone decides it should.
    assert SmsFailure("m", NUMBER, "Some new reason").suppresses is None
