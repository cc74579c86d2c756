"""SMS delivery failures against the emulator, through the `sms_feedback` entry point: a number that can never take
an SMS is opted out everywhere, once; any other failure is counted and recorded."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.metrics import SMS_DELIVERY_FAILURES
from chalicelib.sms_feedback import AUDIT_PARTITION
from chalicelib.tables.requests import Request
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock, key_of
from tests.notices import plenty, sms_outbox, two_lists
from tests.sms_events import delivered, failed, subscription_event

SKU = "CHAIR-WALNUT"
LAMP = "LAMP-BRASS"
BAD = "+447400900001"
NEXT = "+447400900002"


@pytest.fixture
def shop(services: Services, clock: FixedClock) -> Services:
    """Two products; a number waits for both, ahead of another waiting for the chair."""
    return two_lists(services, clock.now(), first=BAD, then=NEXT)


def invoke(client: Client, *records: dict[str, Any] | str) -> None:
    result = client.lambda_.invoke("sms_feedback", subscription_event(*records))
    assert result.payload is None


def facts(services: Services) -> list[dict[str, Any]]:
    return [f for f in services.tables.audit.for_sku(AUDIT_PARTITION) if f["kind"] == "sms_failed"]


def places_of(services: Services, number: str) -> list[Request]:
    return services.exits.places(key_of(services, number))


def test_an_invalid_number_is_opted_out_and_leaves_every_list(
    shop: Services, client: Client, clock: FixedClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        invoke(client, failed(BAD, "Invalid phone number"))

    record = shop.tables.optout.get(key_of(shop, BAD))
    assert record is not None and record["source"] == "invalid_number"
    assert places_of(shop, BAD) == []
    leaves = [f for sku in (SKU, LAMP) for f in shop.tables.audit.for_sku(sku) if f["kind"] == "leave"]
    assert {(f["sku"], f["reason"]) for f in leaves} == {(SKU, "invalid_number"), (LAMP, "invalid_number")}
    (fact,) = facts(shop)
    assert fact["contact_key"] == key_of(shop, BAD) and fact["suppressed"] is True
    assert fact["provider_response"] == "Invalid phone number"
    assert BAD not in json.dumps(fact, default=str), "the number itself is never stored"
    assert BAD not in caplog.text and BAD[1:] not in caplog.text, "nor logged"

    # The next restock tells the next person only.
    shop.notifier.handle(add_restock(shop, SKU, 2, clock.now()), plenty)
    assert [number for number, _ in sms_outbox()] == [NEXT]


def test_a_number_on_the_accounts_opt_out_list_is_suppressed_as_a_stop(shop: Services, client: Client) -> None:
    invoke(client, failed(BAD, "Phone number is opted out"))
    assert shop.tables.optout.get(key_of(shop, BAD))["source"] == "stop"
    assert places_of(shop, BAD) == []


@pytest.mark.parametrize(
    "reason",
    ["Unknown error attempting to reach phone", "Phone is currently unreachable/unavailable", "Phone has blocked SMS"],
)
def test_a_failure_that_may_pass_is_recorded_and_suppresses_nothing(
    shop: Services, client: Client, reason: str
) -> None:
    invoke(client, failed(BAD, reason))
    assert shop.tables.optout.get(key_of(shop, BAD)) is None
    assert len(places_of(shop, BAD)) == 2
    (fact,) = facts(shop)
    assert fact["suppressed"] is False and fact["provider_response"] == reason


def test_a_repeated_invocation_counts_each_failure_once(shop: Services) -> None:
    event = subscription_event(failed(BAD, "Invalid phone number", message_id="m-1"), failed(NEXT, message_id="m-2"))
    first = shop.sms_feedback.handle(event)
    again = shop.sms_feedback.handle(event)
    assert first.counts == {"permanent": 1, "transient": 1}
    assert first.metrics == {SMS_DELIVERY_FAILURES: 2}, "the alarm's metric counts every failure, once"
    assert again.counts == {"repeated": 2} and again.metrics == {}
    assert len(facts(shop)) == 2


def test_successes_and_unreadable_records_change_nothing(shop: Services, caplog: pytest.LogCaptureFixture) -> None:
    broken = json.dumps({**failed(BAD), "delivery": {"destination": BAD}})
    with caplog.at_level(logging.INFO):
        report = shop.sms_feedback.handle(subscription_event(delivered(BAD), broken, "not json"))
        dropped = shop.sms_feedback.handle({"awslogs": {"data": "???"}})
    assert report.counts == {"ignored": 1, "dropped": 2}
    assert dropped.counts == {"dropped": 1}
    assert facts(shop) == [] and shop.tables.optout.get(key_of(shop, BAD)) is None
    assert BAD not in caplog.text and BAD[1:] not in caplog.text
