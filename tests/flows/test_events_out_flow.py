"""Events out through the app's own entry points: a shopper's hold, the audit stream's record of it handed to
`events_feed`, the queued event handed to `outbound`, a receiver that verifies the Standard Webhooks signature; a
failed attempt leaves the message for its backoff; the logs never name the person."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.config import settings_from_env
from chalicelib.outbound import DeliveryFailed
from chalicelib.wiring import Services
from devstack.fake_model import FakeBedrock
from tests.builders import join_request
from tests.receiver import SECRET, URL, Receiver, stream_records
from tests.support import app_client

CONTACT = "ada@example.com"


@pytest.fixture
def receiver() -> Receiver:
    return Receiver()


@pytest.fixture
def events_client(services: Services, env: dict[str, str], receiver: Receiver) -> Iterator[tuple[Client, Services]]:
    chosen = {
        "OUTBOUND_EVENTS": "held",
        "OUTBOUND_EVENT_FIELDS": "sku,contact",
        "OUTBOUND_WEBHOOK_URL": URL,
        "OUTBOUND_WEBHOOK_SECRET": SECRET,
    }
    # The shop's receiver stands in for urllib as the transport events go out through.
    settings = settings_from_env({**env, **chosen})
    wired = Services(settings, aws=services.aws, clock=services.clock, model=FakeBedrock(), transport=receiver)
    with app_client(wired) as client:
        yield client, wired


def queued(services: Services) -> list[dict[str, Any]]:
    url = services.aws.sqs.get_queue_url(QueueName="bisn-events")["QueueUrl"]
    return list(services.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))


def sqs_event(client: Client, message: dict[str, Any], attempt: int) -> dict[str, Any]:
    event = client.events.generate_sqs_event([message["Body"]], queue_name="bisn-events")
    [record] = event["Records"]
    record["receiptHandle"] = message["ReceiptHandle"]
    record["attributes"]["ApproximateReceiveCount"] = str(attempt)
    return event


def test_a_hold_reaches_the_shops_receiver_through_the_functions(
    events_client: tuple[Client, Services], receiver: Receiver, chair: str, caplog: pytest.LogCaptureFixture
) -> None:
    client, services = events_client
    now = services.clock.now()
    place = join_request(services, chair, CONTACT, now)
    hold = services.tables.audit.record(chair, "hold", now, contact_key=place.contact_key, restock_id="r1")
    caplog.set_level(logging.INFO)
    client.lambda_.invoke("events_feed", {"Records": stream_records([hold], now)})
    [message] = queued(services)

    receiver.statuses = [500]
    with pytest.raises(DeliveryFailed):
        client.lambda_.invoke("outbound", sqs_event(client, message, attempt=1))
    assert queued(services) == []  # hidden until its next try
    client.lambda_.invoke("outbound", sqs_event(client, message, attempt=2))

    [(headers, document)] = receiver.taken
    assert set(headers) == {"content-type", "webhook-id", "webhook-timestamp", "webhook-signature"}
    assert document["type"] == "bisn.held"
    assert document["data"] == {"sku": chair, "contact": CONTACT}
    assert CONTACT not in caplog.text and place.contact_key not in caplog.text
    assert headers["webhook-id"] in caplog.text  # the logs name the event by its id


def test_the_feed_ignores_facts_no_shop_chose(events_client: tuple[Client, Services], chair: str) -> None:
    client, services = events_client
    now = services.clock.now()
    lapse = services.tables.audit.record(chair, "lapse", now, contact_key="k" * 40)
    client.lambda_.invoke("events_feed", {"Records": stream_records([lapse], now)})
    assert queued(services) == []
    assert replace(services.settings, outbound_events=()).outbound_destinations == ()
