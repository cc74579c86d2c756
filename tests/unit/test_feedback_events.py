"""Reading SES feedback: SNS notifications carrying SES event records, in the shapes AWS documents."""

from __future__ import annotations

import json

import pytest

from chalicelib.contacts import contact_key
from chalicelib.feedback import MalformedEvent, SesEvent, Verdict, parse_message, recipient_key
from tests.ses_events import bounce, complaint, delivery, via_sns

KEY = "unit-test-hash-key"


def test_a_permanent_bounce_is_hard() -> None:
    event = parse_message(via_sns(bounce("ada@example.com")))
    assert event == SesEvent(
        "Bounce",
        "0102018f-feed-back-0000-000000000001-000000",
        ("ada@example.com",),
        bounce_type="Permanent",
        bounce_subtype="General",
        feedback_id="0102018f-b0b0-4e1a-9c1d-000000000001-000000",
    )
    assert event.verdict == Verdict.HARD_BOUNCE


@pytest.mark.parametrize(("bounce_type", "subtype"), [("Transient", "MailboxFull"), ("Undetermined", "Undetermined")])
def test_transient_and_undetermined_bounces_are_soft(bounce_type: str, subtype: str) -> None:
    event = parse_message(via_sns(bounce("ada@example.com", bounce_type, subtype)))
    assert event.verdict == Verdict.SOFT_BOUNCE
    assert event.bounce_subtype == subtype


def test_a_complaint() -> None:
    event = parse_message(via_sns(complaint("ada@example.com")))
    assert event.verdict == Verdict.COMPLAINT
    assert event.recipients == ("ada@example.com",)


def test_a_delivery_lists_its_recipients_as_strings() -> None:
    event = parse_message(via_sns(delivery("ada@example.com")))
    assert event.verdict == Verdict.DELIVERY
    assert event.recipients == ("ada@example.com",)


def test_an_identity_notification_names_its_type_notification_type() -> None:
    # Shape: SES Developer Guide, "Amazon SNS notification contents for Amazon SES" (notificationType, not eventType).
    record = bounce("ada@example.com")
    record["notificationType"] = record.pop("eventType")
    assert parse_message(via_sns(record)).verdict == Verdict.HARD_BOUNCE


def test_other_event_types_are_ignored() -> None:
    record = delivery("ada@example.com")
    record["eventType"] = "Open"
    assert parse_message(via_sns(record)).verdict == Verdict.IGNORED


def test_unknown_fields_are_tolerated() -> None:
    # SES reserves the right to add fields to its records.
    record = complaint("ada@example.com")
    record["complaint"]["complaintSubType"] = None
    record["somethingNew"] = {"x": 1}
    assert parse_message(via_sns(record)).verdict == Verdict.COMPLAINT


def _without(record: dict, *path: str) -> dict:
    inner = record
    for step in path[:-1]:
        inner = inner[step]
    del inner[path[-1]]
    return record


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("{not json", id="not JSON"),
        pytest.param(json.dumps([1, 2]), id="not an object"),
        pytest.param(json.dumps({"Type": "SubscriptionConfirmation", "Message": "{}"}), id="not a notification"),
        pytest.param(json.dumps({"Type": "Notification", "Message": "{oops"}), id="message not JSON"),
        pytest.param(json.dumps({"Type": "Notification"}), id="no message"),
        pytest.param(via_sns({"mail": {"messageId": "m"}}), id="no event type"),
        pytest.param(via_sns(_without(bounce("a@example.com"), "mail")), id="no mail"),
        pytest.param(via_sns(_without(bounce("a@example.com"), "mail", "messageId")), id="no message id"),
        pytest.param(via_sns(_without(bounce("a@example.com"), "bounce", "bounceType")), id="no bounce type"),
        pytest.param(via_sns(_without(bounce("a@example.com"), "bounce", "bouncedRecipients")), id="no recipients"),
        pytest.param(via_sns(_without(complaint("a@example.com"), "complaint")), id="no complaint object"),
        pytest.param(via_sns({**delivery("a@example.com"), "delivery": {"recipients": [7]}}), id="odd recipient"),
    ],
)
def test_unreadable_messages_are_malformed(body: str) -> None:
    with pytest.raises(MalformedEvent):
        parse_message(body)


def test_a_recipient_is_known_by_the_key_capture_matches_it_by() -> None:
    # Capture stores the ASCII form and matches it lower-cased; SES reports the address it sent to.
    assert recipient_key("Ada@Example.com", KEY) == contact_key("ada@example.com", KEY)
    assert recipient_key("Ada <ada@xn--bcher-kva.de>", KEY) == contact_key("ada@xn--bcher-kva.de", KEY)
