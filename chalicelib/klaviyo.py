"""Klaviyo: an outbound event as a request to Klaviyo's Create Event endpoint.

Create Event (https://developers.klaviyo.com/en/v2026-07-15/reference/create_event): POST
https://a.klaviyo.com/api/events with the private API key as `Authorization: Klaviyo-API-Key <key>`
(https://developers.klaviyo.com/en/docs/authenticate_), a `revision` header pinning the API's dated revision, and
a JSON:API body: an `event` whose attributes are its `properties`, `time`, `unique_id`, its `metric` (by name) and
its `profile` (by email or phone number). Klaviyo answers 202 Accepted and records one event per `unique_id`.
Pure: chalicelib/outbound.py sends what this writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.events_out import OutboundEvent, Person, data_of

URL = "https://a.klaviyo.com/api/events"
REVISION = "2026-07-15"  # pinned: a newer revision is taken on deliberately, never by default
JSON_API = "application/vnd.api+json"
ACCEPTED = 202

# The metric each event is recorded under in Klaviyo: what a flow's trigger is chosen by.
METRIC_NAMES = {
    "joined": "Back in stock: joined",
    "confirmed": "Back in stock: confirmed",
    "notified": "Back in stock: notified",
    "held": "Back in stock: held",
    "bought": "Back in stock: bought",
    "lapsed": "Back in stock: lapsed",
}


def headers(api_key: str) -> dict[str, str]:
    """The request's headers."""
    return {
        "authorization": f"Klaviyo-API-Key {api_key}",
        "revision": REVISION,
        "accept": JSON_API,
        "content-type": JSON_API,
    }


def profile_of(person: Person) -> dict[str, str]:
    """The profile's identifier: the email address, or the E.164 phone number of an SMS place."""
    return {"email": person.contact} if "@" in person.contact else {"phone_number": person.contact}


def event_body(event: OutboundEvent, person: Person | None, chosen: tuple[str, ...]) -> dict[str, Any] | None:
    """The Create Event body, or None when the event cannot go to Klaviyo: it names no reachable person (an
    opt-out, or a place gone before delivery), and a Klaviyo event must belong to a profile."""
    if person is None or event.type not in METRIC_NAMES or "contact" not in chosen:
        return None
    properties: Mapping[str, str] = {k: v for k, v in data_of(event, person, chosen).items() if k != "contact"}
    return {
        "data": {
            "type": "event",
            "attributes": {
                "properties": dict(properties),
                "time": event.occurred,
                "unique_id": event.event_id,
                "metric": {"data": {"type": "metric", "attributes": {"name": METRIC_NAMES[event.type]}}},
                "profile": {"data": {"type": "profile", "attributes": profile_of(person)}},
            },
        }
    }
