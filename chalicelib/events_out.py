"""Events out: which audit facts become events for the shop's own platform, and what each one may carry.

Every event is read from one audit fact (chalicelib/tables/audit.py), and a fact is written once, with the change it
records: so each change makes one event, and its id, derived from the fact's key, is the same however often the
fact is read again (the receiver de-duplicates on it: Standard Webhooks' `webhook-id`, Klaviyo's `unique_id`).
Pure rules, no AWS: chalicelib/outbound.py moves the events, chalicelib/klaviyo.py writes Klaviyo's request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from chalicelib.errors import BadRequest

JOINED = "joined"
CONFIRMED = "confirmed"
NOTIFIED = "notified"
HELD = "held"
BOUGHT = "bought"
LAPSED = "lapsed"
OPTED_OUT = "opted_out"
EVENT_TYPES = (JOINED, CONFIRMED, NOTIFIED, HELD, BOUGHT, LAPSED, OPTED_OUT)

# The fact each event is read from. An offer that lapsed unused and a hold that expired unbought are both `lapsed`
# (the payload's `lapsed` says which).
FACT_EVENTS = {
    "joined": JOINED,  # written by capture with the new place, only where the shop sends joined events
    "confirmed": CONFIRMED,
    "notice_sent": NOTIFIED,
    "hold": HELD,
    "conversion": BOUGHT,
    "lapse": LAPSED,
    "expiry": LAPSED,
}
LAPSED_WHAT = {"lapse": "offer", "expiry": "hold"}
# A `leave` fact is an opt-out when the person left by unsubscribing or replying STOP (chalicelib/leaving.py REASONS).
OPT_OUT_REASONS = ("unsubscribe", "stop")

# What a payload may carry; the shop picks among them (OUTBOUND_EVENT_FIELDS).
FIELDS = ("sku", "contact", "channel", "lang", "restock_id", "order_id")
# Read from the person's place when the event is delivered, never kept on the queue.
PERSON_FIELDS = ("contact", "lang")

WEBHOOK = "webhook"
KLAVIYO = "klaviyo"
DESTINATIONS = (WEBHOOK, KLAVIYO)
TYPE_PREFIX = "bisn."  # Standard Webhooks' event types are full-stop delimited: "bisn.held"


def event_id_of(sku: str, ts: str) -> str:
    """The event id of the fact stored at (sku, ts): the same for every read of that fact, and free of the
    full stops Standard Webhooks forbids in a `webhook-id`."""
    return "evt_" + hashlib.sha256(f"{sku}\n{ts}".encode()).hexdigest()[:32]


@dataclass(frozen=True, kw_only=True)
class OutboundEvent:
    """One event on its way to one destination, as the events queue carries it: no contact, only its keyed hash."""

    event_id: str
    type: str
    sku: str
    occurred: str  # ISO-8601 UTC, when the fact was written
    destination: str = WEBHOOK
    contact_key: str = ""
    channel: str = ""
    restock_id: str = ""
    order_id: str = ""
    lapsed: str = ""  # "offer" or "hold", for a lapsed event

    def to_body(self) -> str:
        """The queue message's body."""
        return json.dumps({k: v for k, v in asdict(self).items() if v != ""}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, body: str) -> OutboundEvent:
        """An event from a queue body; BadRequest `invalid_event` for anything else (it then waits in the DLQ)."""
        try:
            data = json.loads(body)
        except (TypeError, ValueError):
            raise BadRequest("The event is not JSON.", code="invalid_event") from None
        known = {f.name for f in fields(cls)}
        if (
            not isinstance(data, dict)
            or set(data) - known
            or not all(isinstance(v, str) for v in data.values())
            or not {"event_id", "type", "sku", "occurred"} <= set(data)
            or data["type"] not in EVENT_TYPES
            or data.get("destination", WEBHOOK) not in DESTINATIONS
        ):
            raise BadRequest("The event is not one this app writes.", code="invalid_event")
        return cls(**data)


def from_fact(fact: Mapping[str, Any]) -> OutboundEvent | None:
    """The event an audit fact makes, or None when it makes none."""
    kind = str(fact.get("kind", ""))
    if kind == "leave" and fact.get("reason") in OPT_OUT_REASONS:
        event_type = OPTED_OUT
    elif kind in FACT_EVENTS:
        event_type = FACT_EVENTS[kind]
    else:
        return None
    sku, ts = str(fact["sku"]), str(fact["ts"])
    return OutboundEvent(
        event_id=event_id_of(sku, ts),
        type=event_type,
        sku=sku,
        occurred=ts.split("#", 1)[0],
        contact_key=str(fact.get("contact_key") or ""),
        channel=str(fact.get("channel") or ""),
        restock_id=str(fact.get("restock_id") or ""),
        order_id=str(fact.get("order_id") or ""),
        lapsed=LAPSED_WHAT.get(kind, ""),
    )


@dataclass(frozen=True)
class Person:
    """Who an event is about, read from their place when it is delivered."""

    contact: str
    channel: str
    lang: str


def about_a_person(event: OutboundEvent) -> bool:
    """Whether delivering the event needs the person it names to be still reachable (not opted out).

    An opt-out is the one event about someone who is now suppressed, so it carries nothing that names them.
    """
    return event.type != OPTED_OUT and bool(event.contact_key)


def needs_person(event: OutboundEvent, chosen: tuple[str, ...]) -> bool:
    """Whether the payload carries a field only the person's place can give."""
    return about_a_person(event) and any(f in PERSON_FIELDS for f in chosen)


def data_of(event: OutboundEvent, person: Person | None, chosen: tuple[str, ...]) -> dict[str, str]:
    """The fields of an event the shop chose to send, and only those; a field with no value is left out."""
    values = {
        "sku": event.sku,
        "channel": event.channel or (person.channel if person else ""),
        "restock_id": event.restock_id,
        "order_id": event.order_id,
    }
    if person is not None and about_a_person(event):
        values |= {"contact": person.contact, "lang": person.lang}
    data = {name: values[name] for name in chosen if values.get(name)}
    if event.lapsed:
        data["lapsed"] = event.lapsed
    return data


def payload(event: OutboundEvent, person: Person | None, chosen: tuple[str, ...]) -> dict[str, Any]:
    """A webhook's body as Standard Webhooks lays it out: `type`, `timestamp` and `data`."""
    return {"type": TYPE_PREFIX + event.type, "timestamp": event.occurred, "data": data_of(event, person, chosen)}


def body_text(document: Mapping[str, Any]) -> str:
    """A body as sent and signed: minified JSON, keys sorted, so the bytes signed are the bytes sent."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
