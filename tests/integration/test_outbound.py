"""Events out on the emulator: audit facts from the stream onto the events queue, each delivered signed to a receiver
that verifies it with the Standard Webhooks library, retried with backoff, dead-lettered after the last attempt,
redriven, and never sent for a person who opted out; Klaviyo's Create Event request."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pytest

from chalicelib import klaviyo
from chalicelib.config import settings_from_env
from chalicelib.events_out import OutboundEvent
from chalicelib.outbound import MAX_ATTEMPTS, SENT, SUPPRESSED, DeliveryFailed, Outbound, backoff_s
from chalicelib.platforms.http import HttpResponse
from chalicelib.wiring import Services
from tests.builders import join_request, key_of
from tests.receiver import SECRET, URL, Receiver, stream_records
from tests.support import rebuilt

SKU = "CHAIR-WALNUT"


@pytest.fixture
def events_services(services: Services, env: dict[str, str]) -> Services:
    chosen = {
        "OUTBOUND_EVENTS": "held,bought,opted_out,notified",
        "OUTBOUND_EVENT_FIELDS": "sku,contact,lang,restock_id",
        "OUTBOUND_WEBHOOK_URL": URL,
        "OUTBOUND_WEBHOOK_SECRET": SECRET,
    }
    return rebuilt(services, settings=settings_from_env({**env, **chosen}))


def outbound(services: Services, receiver: Receiver) -> Outbound:
    return replace(services.outbound, transport=receiver, jitter=lambda: 0.0)


def queue(services: Services, name: str) -> str:
    return str(services.aws.sqs.get_queue_url(QueueName=name)["QueueUrl"])


def receive(services: Services, name: str) -> list[dict[str, Any]]:
    answer = services.aws.sqs.receive_message(
        QueueUrl=queue(services, name), MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    )
    return list(answer.get("Messages", []))


def test_a_hold_goes_out_once_signed_with_only_the_chosen_fields(events_services: Services, chair: str) -> None:
    s, now = events_services, events_services.clock.now()
    place = join_request(s, SKU, "ada@example.com", now)
    hold = s.tables.audit.record(SKU, "hold", now, contact_key=place.contact_key, restock_id="r1", token_id="t1")
    skipped = s.tables.audit.record(SKU, "notice_skipped", now, contact_key=place.contact_key)
    records = stream_records([hold, skipped])
    assert s.event_feed.handle(records) == 1
    assert s.event_feed.handle(records) == 1  # the stream handed the batch over again
    receiver = Receiver()
    for message in receive(s, "bisn-events"):
        assert "ada@example.com" not in message["Body"]  # the queue carries a keyed hash, never the contact
        assert outbound(s, receiver).handle(message["Body"], receipt_handle=message["ReceiptHandle"], attempt=1) == SENT
    [(headers, document)] = receiver.taken
    assert headers["webhook-id"] == OutboundEvent.parse(s.event_feed.events(records)[0].to_body()).event_id
    assert headers["webhook-timestamp"] == str(int(now))
    assert document == {
        "type": "bisn.held",
        "timestamp": hold["ts"].split("#")[0],
        "data": {"sku": SKU, "contact": "ada@example.com", "lang": "en", "restock_id": "r1"},
    }
    assert "token_id" not in json.dumps(document) and place.contact_key not in json.dumps(document)


def test_nothing_is_sent_for_a_person_who_opted_out(events_services: Services, chair: str) -> None:
    s, now = events_services, events_services.clock.now()
    place = join_request(s, SKU, "+447700900123", now)
    sent = s.tables.audit.record(SKU, "notice_sent", now, contact_key=place.contact_key, channel="sms")
    s.tables.optout.add(key_of(s, "+447700900123"), "stop", now)
    [event] = s.event_feed.events(stream_records([sent]))
    receiver = Receiver()
    assert outbound(s, receiver).deliver(event) == SUPPRESSED
    assert receiver.taken == []
    # The opt-out itself goes out naming nobody.
    left = s.tables.audit.record(SKU, "leave", now, contact_key=place.contact_key, reason="stop", channel="sms")
    [optout] = s.event_feed.events(stream_records([left]))
    assert outbound(s, receiver).deliver(optout) == SENT
    assert receiver.taken[0][1]["data"] == {"sku": SKU}


def test_failures_back_off_then_dead_letter_and_the_redrive_delivers(events_services: Services, chair: str) -> None:
    s, now = events_services, events_services.clock.now()
    place = join_request(s, SKU, "ada@example.com", now)
    bought = s.tables.audit.record(SKU, "conversion", now, contact_key=place.contact_key, order_id="o-1")
    s.event_feed.handle(stream_records([bought]))
    receiver = Receiver(statuses=[503, 429])
    sender = outbound(s, receiver)
    sqs, url = s.aws.sqs, queue(s, "bisn-events")

    [message] = receive(s, "bisn-events")
    with pytest.raises(DeliveryFailed):
        sender.handle(message["Body"], receipt_handle=message["ReceiptHandle"], attempt=1)
    assert receive(s, "bisn-events") == []  # hidden for the backoff's 5 seconds
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    [message] = receive(s, "bisn-events")
    with pytest.raises(DeliveryFailed) as failed:
        sender.handle(message["Body"], receipt_handle=message["ReceiptHandle"], attempt=2)
    assert failed.value.retry_after == 60  # the 429's Retry-After...
    assert backoff_s(2, failed.value.retry_after) == 300  # ...outweighed by the schedule's 5 minutes

    # Every attempt fails until the last; the queue then hands the event to its dead-letter queue.
    receiver.statuses = [500] * MAX_ATTEMPTS
    for attempt in range(3, MAX_ATTEMPTS + 1):
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
        [message] = receive(s, "bisn-events")
        assert int(message["Attributes"]["ApproximateReceiveCount"]) == attempt
        with pytest.raises(DeliveryFailed):
            sender.handle(message["Body"], receipt_handle=message["ReceiptHandle"], attempt=attempt)
    assert receive(s, "bisn-events") == []
    operations = s.admin.operations
    dead = operations.dead_events()
    assert dead["waiting"] == 1
    [listed] = dead["events"]
    assert (listed["type"], listed["sku"], listed["destination"]) == ("bought", SKU, "webhook")
    assert "contact" not in json.dumps(dead)
    assert receiver.taken == []

    assert operations.redrive({"queue": "bisn-events-dlq"})["moved"] == 1
    [message] = receive(s, "bisn-events")
    receiver.statuses = []
    assert sender.handle(message["Body"], receipt_handle=message["ReceiptHandle"], attempt=1) == SENT
    [(headers, document)] = receiver.taken
    assert headers["webhook-id"] == listed["event_id"]
    assert document["data"]["contact"] == "ada@example.com"


def test_a_tap_writes_its_joined_fact_with_its_place_only_when_joined_events_go_out(
    services: Services, events_services: Services, chair: str
) -> None:
    tap = {"sku": SKU, "channel": "email", "contact": "ada@example.com"}
    services.capture.capture("10.0.0.1", tap)  # the local stage sends no events: the tap writes no fact
    assert [f for f in services.tables.audit.for_sku(SKU) if f["kind"] == "joined"] == []

    s = rebuilt(events_services, settings=replace(events_services.settings, outbound_events=("joined", "confirmed")))
    s.capture.capture("10.0.0.2", {**tap, "contact": "bo@example.com"})
    [joined] = [f for f in s.tables.audit.for_sku(SKU) if f["kind"] == "joined"]
    assert (joined["contact_key"], joined["channel"]) == (key_of(s, "bo@example.com"), "email")
    [event] = s.event_feed.events(stream_records([joined]))
    receiver = Receiver()
    assert outbound(s, receiver).deliver(event) == SENT
    # An address nobody has confirmed yet is never handed on: anyone can type one.
    assert receiver.taken[0][1] == {
        "type": "bisn.joined",
        "timestamp": joined["ts"].split("#")[0],
        "data": {"sku": SKU},
    }


@dataclass
class KlaviyoDouble:
    """Stands where https://a.klaviyo.com/api/events would answer (202 Accepted, or what it is told)."""

    statuses: list[int]
    requests: list[tuple[str, dict[str, str], dict[str, Any]]]

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        self.requests.append((url, dict(headers), json.loads(body or b"{}")))
        return HttpResponse(self.statuses.pop(0) if self.statuses else klaviyo.ACCEPTED)


def test_klaviyo_gets_the_documented_request_with_the_key_from_the_secrets(
    events_services: Services, env: dict[str, str], chair: str
) -> None:
    chosen = {"OUTBOUND_EVENTS": "bought", "OUTBOUND_EVENT_FIELDS": "sku,contact,order_id", "KLAVIYO_API_KEY": "pk_x"}
    s = rebuilt(events_services, settings=settings_from_env({**env, **chosen}))
    now = s.clock.now()
    place = join_request(s, SKU, "+447700900123", now)
    bought = s.tables.audit.record(SKU, "conversion", now, contact_key=place.contact_key, order_id="o-7")
    [event] = s.event_feed.events(stream_records([bought]))
    assert event.destination == "klaviyo"
    left = s.tables.audit.record(SKU, "leave", now, contact_key=place.contact_key, reason="unsubscribe")
    with_optouts = replace(s.settings, outbound_events=("bought", "opted_out"))
    # Klaviyo takes no opt-out event: it would belong to no profile.
    assert replace(s.event_feed, settings=with_optouts).events(stream_records([left])) == []
    double = KlaviyoDouble(statuses=[429], requests=[])
    sender = replace(s.outbound, transport=double)
    with pytest.raises(DeliveryFailed):
        sender.deliver(event)
    assert sender.deliver(event) == SENT
    [(url, headers, body), again] = double.requests
    assert again == (url, headers, body)  # the same unique_id: Klaviyo records the event once
    assert url == "https://a.klaviyo.com/api/events"
    assert headers["authorization"] == "Klaviyo-API-Key pk_x" and headers["revision"] == klaviyo.REVISION
    attributes = body["data"]["attributes"]
    assert attributes["unique_id"] == event.event_id
    assert attributes["profile"]["data"] == {"type": "profile", "attributes": {"phone_number": "+447700900123"}}
    assert attributes["metric"]["data"]["attributes"]["name"] == "Back in stock: bought"
    assert attributes["properties"] == {"sku": SKU, "order_id": "o-7"}
