"""Joining a waiting list through the HTTP API, as a storefront would."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.contacts import contact_key
from chalicelib.tables.requests import Request
from chalicelib.wiring import Services
from devstack.clocks import FixedClock

JSON = {"Content-Type": "application/json"}


def tap(client: Client, body: Any, headers: dict[str, str] | None = None) -> Any:
    payload = body if isinstance(body, str) else json.dumps(body)
    return client.http.post("/notify-me", headers={**JSON, **(headers or {})}, body=payload)


def requests_for(services: Services, sku: str) -> list[Request]:
    return list(services.tables.requests.queue(sku, active_only=False))


RECEIVED_SMS = {"status": "received", "channel": "sms", "confirm_email": False}
RECEIVED_EMAIL = {"status": "received", "channel": "email", "confirm_email": True}


def test_new_tap_joins_with_place_one(client: Client, services: Services, chair: str) -> None:
    response = tap(client, {"sku": chair, "channel": "sms", "contact": "07400 123456", "name": "Ada"})
    assert response.status_code == 202
    assert response.json_body == RECEIVED_SMS  # no position, no link: nothing a stranger could use
    [request] = requests_for(services, chair)
    assert request.contact == "+447400123456"
    assert request.state == "waiting"


def test_repeat_tap_keeps_place(client: Client, services: Services, clock: FixedClock, chair: str) -> None:
    tap(client, {"sku": chair, "channel": "email", "contact": "first@example.com"})
    clock.advance(1)
    tap(client, {"sku": chair, "channel": "email", "contact": "Ada.Lovelace@Example.com"})
    before = requests_for(services, chair)[1]
    clock.advance(60)
    again = tap(client, {"sku": chair, "channel": "email", "contact": "ada.lovelace@example.COM"})
    assert again.status_code == 202
    assert again.json_body == RECEIVED_EMAIL
    after = requests_for(services, chair)
    assert len(after) == 2
    assert after[1].joined_ts == before.joined_ts


def test_simultaneous_taps_leave_one_place(client: Client, services: Services, chair: str) -> None:
    statuses: list[int] = []
    # As many as one number may tap in an hour (TAPS_PER_NUMBER_PER_HOUR's default); more would be refused with 429.
    taps = services.settings.taps_per_number_per_hour
    barrier = threading.Barrier(taps)

    def one() -> None:
        barrier.wait()
        statuses.append(tap(client, {"sku": chair, "channel": "sms", "contact": "+44 7400 123457"}).status_code)

    threads = [threading.Thread(target=one) for _ in range(taps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [202] * taps
    assert len(requests_for(services, chair)) == 1


def test_opted_out_contact_is_acknowledged_and_not_stored(client: Client, services: Services, chair: str) -> None:
    services.tables.optout.add(contact_key("+447400123458", services.hash_key), "stop", services.clock.now())
    response = tap(client, {"sku": chair, "channel": "sms", "contact": "07400123458"})
    assert response.status_code == 202
    assert response.json_body == RECEIVED_SMS  # the same answer as a first sign-up
    assert requests_for(services, chair) == []


def test_an_internationalised_domain_is_stored_in_its_ascii_form(
    client: Client, services: Services, chair: str
) -> None:
    # SES's envelope is ASCII only: the domain is kept as Punycode (IDNA), the form every send uses.
    first = tap(client, {"sku": chair, "channel": "email", "contact": "ana@bücher.de"})
    assert first.status_code == 202
    [request] = requests_for(services, chair)
    assert request.contact == "ana@xn--bcher-kva.de"
    # The same mailbox written in Punycode is the same person, who keeps their place.
    again = tap(client, {"sku": chair, "channel": "email", "contact": "ana@xn--bcher-kva.de"})
    assert again.json_body == first.json_body
    assert len(requests_for(services, chair)) == 1


def test_a_local_part_outside_ascii_gets_a_clear_400(client: Client, services: Services, chair: str) -> None:
    response = tap(client, {"sku": chair, "channel": "email", "contact": "anä@bücher.de"})
    assert response.status_code == 400
    assert response.json_body["error"] == "invalid_email"
    assert "ASCII" in response.json_body["message"]
    assert requests_for(services, chair) == []


def test_a_repeat_tap_never_changes_the_name_given_first(client: Client, services: Services, chair: str) -> None:
    tap(client, {"sku": chair, "channel": "sms", "contact": "07400 123456", "name": "Ada"})
    again = tap(client, {"sku": chair, "channel": "sms", "contact": "07400 123456", "name": "Mallory"})
    assert again.json_body == RECEIVED_SMS
    [place] = requests_for(services, chair)
    assert place.name == "Ada", "anyone who knows the number can tap for it; only the first tap names the place"


def test_a_name_typed_in_decomposed_unicode_joins_and_is_stored_composed(
    client: Client, services: Services, chair: str
) -> None:
    # As macOS sends it: an a, then a combining acute accent.
    response = tap(client, {"sku": chair, "channel": "sms", "contact": "07400 123456", "name": "Na\u0301ndor"})
    assert response.status_code == 202
    assert response.json_body == RECEIVED_SMS
    [place] = requests_for(services, chair)
    assert place.name == "Nándor" == "N\u00e1ndor"


@pytest.mark.parametrize("channel, contact", [("sms", "07400 123459"), ("email", "ada@example.com")])
def test_a_stranger_cannot_tell_a_new_place_a_repeat_or_an_opt_out_apart(
    client: Client, services: Services, chair: str, channel: str, contact: str
) -> None:
    first = tap(client, {"sku": chair, "channel": channel, "contact": contact})
    repeat = tap(client, {"sku": chair, "channel": channel, "contact": contact})
    stopped = "+447400123460" if channel == "sms" else "gone@example.com"
    services.tables.optout.add(contact_key(stopped, services.hash_key), "stop", services.clock.now())
    opted_out = tap(client, {"sku": chair, "channel": channel, "contact": stopped})
    answers = {(r.status_code, json.dumps(r.json_body, sort_keys=True)) for r in (first, repeat, opted_out)}
    assert len(answers) == 1
    assert "/me/" not in next(iter(answers))[1]
