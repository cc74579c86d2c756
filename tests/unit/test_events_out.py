"""Events out: which facts make events, what a payload may carry, the retry schedule, Klaviyo's request, settings."""

from __future__ import annotations

import json

import pytest

from chalicelib import klaviyo
from chalicelib.config import ConfigError, settings_from_env
from chalicelib.errors import BadRequest
from chalicelib.events_out import (
    EVENT_TYPES,
    KLAVIYO,
    OutboundEvent,
    Person,
    body_text,
    event_id_of,
    from_fact,
    payload,
)
from chalicelib.outbound import BACKOFF_S, MAX_ATTEMPTS, backoff_s, facts_of
from infra.stages import stage_env

TS = "2026-12-04T10:00:00.123456Z#a1b2c3d4e5f6"


def fact(kind: str, **extra: str) -> dict[str, str]:
    return {"sku": "CHAIR-WALNUT", "ts": TS, "kind": kind, "contact_key": "k" * 40, **extra}


@pytest.mark.parametrize(
    ("kind", "extra", "event_type"),
    [
        ("joined", {"channel": "email"}, "joined"),
        ("confirmed", {"channel": "email"}, "confirmed"),
        ("notice_sent", {"channel": "sms", "restock_id": "r1"}, "notified"),
        ("hold", {"restock_id": "r1"}, "held"),
        ("conversion", {"order_id": "o-9"}, "bought"),
        ("lapse", {}, "lapsed"),
        ("expiry", {}, "lapsed"),
        ("leave", {"reason": "unsubscribe"}, "opted_out"),
        ("leave", {"reason": "stop"}, "opted_out"),
    ],
)
def test_each_event_is_read_from_its_fact(kind: str, extra: dict[str, str], event_type: str) -> None:
    event = from_fact(fact(kind, **extra))
    assert event is not None
    assert event.type == event_type
    assert event.sku == "CHAIR-WALNUT"
    assert event.occurred == "2026-12-04T10:00:00.123456Z"


@pytest.mark.parametrize(
    ("kind", "extra"),
    [("leave", {"reason": "manage"}), ("leave", {"reason": "admin"}), ("notice_skipped", {}), ("just_gone", {})],
)
def test_other_facts_make_no_event(kind: str, extra: dict[str, str]) -> None:
    assert from_fact(fact(kind, **extra)) is None


def test_an_events_id_is_its_facts_and_has_no_full_stop() -> None:
    first, again = from_fact(fact("hold")), from_fact(fact("hold"))
    assert first is not None and again is not None
    assert first.event_id == again.event_id == event_id_of("CHAIR-WALNUT", TS)
    assert "." not in first.event_id
    assert event_id_of("CHAIR-WALNUT", TS.replace("a1", "b2")) != first.event_id


def test_the_payload_carries_only_the_chosen_fields() -> None:
    event = from_fact(fact("notice_sent", channel="email", restock_id="r1"))
    assert event is not None
    person = Person("ada@example.com", "email", "fr")
    assert payload(event, person, ("sku",)) == {
        "type": "bisn.notified",
        "timestamp": "2026-12-04T10:00:00.123456Z",
        "data": {"sku": "CHAIR-WALNUT"},
    }
    chosen = ("sku", "contact", "lang", "restock_id")
    assert payload(event, person, chosen)["data"] == {
        "sku": "CHAIR-WALNUT",
        "contact": "ada@example.com",
        "lang": "fr",
        "restock_id": "r1",
    }
    # The keyed hash never leaves: it is no field a shop can choose.
    assert "k" * 40 not in body_text(payload(event, person, chosen))


def test_an_opt_out_names_nobody_whatever_was_chosen() -> None:
    event = from_fact(fact("leave", reason="unsubscribe", channel="email"))
    assert event is not None
    data = payload(event, Person("ada@example.com", "email", "en"), ("sku", "contact", "lang", "channel"))["data"]
    assert data == {"sku": "CHAIR-WALNUT", "channel": "email"}


def test_a_lapse_says_what_lapsed() -> None:
    offer, hold = from_fact(fact("lapse")), from_fact(fact("expiry"))
    assert offer is not None and hold is not None
    assert payload(offer, None, ("sku",))["data"]["lapsed"] == "offer"
    assert payload(hold, None, ("sku",))["data"]["lapsed"] == "hold"


def test_a_queued_event_reads_back_the_same_and_nothing_else_reads() -> None:
    event = from_fact(fact("conversion", order_id="o-9"))
    assert event is not None
    assert OutboundEvent.parse(event.to_body()) == event
    assert "contact_key" in json.loads(event.to_body())  # a keyed hash, never the contact
    for junk in ("nope", "[]", '{"event_id":"e","type":"left","sku":"s","occurred":"t"}', '{"type":"held"}'):
        with pytest.raises(BadRequest):
            OutboundEvent.parse(junk)


def test_stream_records_give_the_new_facts_only() -> None:
    image = {"sku": {"S": "CHAIR-WALNUT"}, "ts": {"S": TS}, "kind": {"S": "hold"}, "at": {"N": "1"}}
    records = [
        {"eventName": "INSERT", "dynamodb": {"NewImage": image}},
        {"eventName": "MODIFY", "dynamodb": {"NewImage": image}},  # erasure taking a hash off a fact
        {"eventName": "REMOVE", "dynamodb": {}},  # the TTL
    ]
    assert [f["kind"] for f in facts_of(records)] == ["hold"]


def test_retries_follow_the_standard_webhooks_schedule_up_to_the_dlq() -> None:
    # Standard Webhooks' example schedule (https://www.standardwebhooks.com, spec "Deliverability and reliability"):
    # 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, then held to 11 h (SQS's 12-hour visibility limit runs from the receive).
    assert [backoff_s(n) for n in range(1, MAX_ATTEMPTS)] == list(BACKOFF_S)
    assert BACKOFF_S[:6] == (5, 300, 1800, 7200, 18000, 36000)
    assert backoff_s(MAX_ATTEMPTS) == 0  # the last attempt failed: on to the dead-letter queue at once
    assert backoff_s(1, retry_after=120) == 120  # a 429's Retry-After is waited at least
    assert backoff_s(7, retry_after=99_999) == 39600
    assert backoff_s(2, jitter=1.0) == 330 and backoff_s(2, jitter=-1.0) == 270


# Klaviyo Create Event, revision 2026-07-15: https://developers.klaviyo.com/en/v2026-07-15/reference/create_event
# (POST https://a.klaviyo.com/api/events; `revision` header required; body data.type "event" with attributes
# properties, time, unique_id, metric.data {type "metric", attributes.name}, profile.data {type "profile",
# attributes email / phone_number}); the private key's header: https://developers.klaviyo.com/en/docs/authenticate_
KLAVIYO_FIXTURE = {
    "data": {
        "type": "event",
        "attributes": {
            "properties": {"sku": "CHAIR-WALNUT", "restock_id": "r1"},
            "time": "2026-12-04T10:00:00.123456Z",
            "unique_id": event_id_of("CHAIR-WALNUT", TS),
            "metric": {"data": {"type": "metric", "attributes": {"name": "Back in stock: held"}}},
            "profile": {"data": {"type": "profile", "attributes": {"email": "ada@example.com"}}},
        },
    }
}


def test_klaviyo_gets_the_documented_create_event_request() -> None:
    event = from_fact(fact("hold", restock_id="r1"))
    assert event is not None
    person = Person("ada@example.com", "email", "en")
    assert klaviyo.event_body(event, person, ("sku", "contact", "restock_id")) == KLAVIYO_FIXTURE
    assert klaviyo.URL == "https://a.klaviyo.com/api/events"
    assert klaviyo.headers("pk_abc") == {
        "authorization": "Klaviyo-API-Key pk_abc",
        "revision": "2026-07-15",
        "accept": "application/vnd.api+json",
        "content-type": "application/vnd.api+json",
    }
    sms = klaviyo.event_body(event, Person("+447700900123", "sms", "en"), ("contact",))
    assert sms is not None
    assert sms["data"]["attributes"]["profile"]["data"]["attributes"] == {"phone_number": "+447700900123"}


def test_klaviyo_gets_nothing_that_names_no_reachable_person() -> None:
    hold, optout = from_fact(fact("hold")), from_fact(fact("leave", reason="stop"))
    assert hold is not None and optout is not None
    assert klaviyo.event_body(hold, None, ("contact",)) is None  # the place is gone
    assert klaviyo.event_body(optout, Person("+447700900123", "sms", "en"), ("contact",)) is None


def local(**extra: str) -> dict[str, str]:
    return {**stage_env("local"), "AWS_DEFAULT_REGION": "eu-west-2", **extra}


SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_events_out_are_off_unless_chosen() -> None:
    settings = settings_from_env(local())
    assert settings.outbound_events == () and settings.outbound_destinations == ()
    assert settings.outbound_event_fields == ("sku",)
    assert settings.events_queue_name == "bisn-events" and settings.events_dlq_name == "bisn-events-dlq"


def test_events_out_settings_are_checked_together() -> None:
    chosen = local(
        OUTBOUND_EVENTS="held, bought",
        OUTBOUND_EVENT_FIELDS="sku,contact",
        OUTBOUND_WEBHOOK_URL="https://crm.example/hooks/bisn",
        OUTBOUND_WEBHOOK_SECRET=SECRET,
        KLAVIYO_API_KEY="pk_abc",
    )
    settings = settings_from_env(chosen)
    assert settings.outbound_events == ("held", "bought")
    assert settings.outbound_destinations == ("webhook", KLAVIYO)
    refused = {
        "left": {**chosen, "OUTBOUND_EVENTS": "held,left"},
        "postcode": {**chosen, "OUTBOUND_EVENT_FIELDS": "sku,postcode"},
        "https://": {**chosen, "OUTBOUND_WEBHOOK_URL": "http://crm.example/hooks"},
        "OUTBOUND_WEBHOOK_SECRET": {k: v for k, v in chosen.items() if k != "OUTBOUND_WEBHOOK_SECRET"},
        "contact": {**chosen, "OUTBOUND_EVENT_FIELDS": "sku"},
        "somewhere": {k: v for k, v in chosen.items() if k not in ("OUTBOUND_WEBHOOK_URL", "KLAVIYO_API_KEY")},
    }
    for words, env in refused.items():
        with pytest.raises(ConfigError, match=words):
            settings_from_env(env)
    assert set(EVENT_TYPES) == {"joined", "confirmed", "notified", "held", "bought", "lapsed", "opted_out"}
