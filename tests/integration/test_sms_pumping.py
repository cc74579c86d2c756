"""SMS pumping and toll fraud: where SMS may go, and the caps on taps, places and waiting lists (README "Limits")."""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client

from chalicelib.capture import CaptureService
from chalicelib.errors import Conflict, DomainError, RateLimited
from chalicelib.tables.catalog import WAITING_SHARDS, shard_cap, shard_for, shard_key
from chalicelib.web.errors import error_status
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import key_of
from tests.flows.test_manage_flow import form_for
from tests.support import CHAIR

JSON = {"Content-Type": "application/json"}


def tap(client: Client, body: dict[str, Any]) -> Any:
    return client.http.post("/notify-me", headers=JSON, body=json.dumps(body))


def capture_with(services: Services, **limits: Any) -> CaptureService:
    """The capture service with some settings changed (the rest as the local stage has them)."""
    return dataclasses.replace(services.capture, settings=dataclasses.replace(services.settings, **limits))


def nothing_written(services: Services, sku: str) -> bool:
    product = services.tables.catalog.get(sku)
    return (
        product is not None
        and services.tables.catalog.waiting(sku) == 0
        and not list(services.tables.requests.queue(sku))
    )


def products(services: Services, count: int) -> list[str]:
    skus = [f"CHAIR-{i}" for i in range(count)]
    for sku in skus:
        services.tables.catalog.upsert(sku, dict(CHAIR))
    return skus


def test_sms_to_another_country_or_a_non_mobile_number_is_refused_with_400(
    client: Client, services: Services, chair: str
) -> None:
    # One end to end; every kind of number is in tests/unit/test_tap_refusals.py.
    response = tap(client, {"sku": chair, "channel": "sms", "contact": "020 7946 0000"})  # a London landline
    assert response.status_code == 400
    assert response.json_body["error"] == "sms_number_type"
    assert nothing_written(services, chair)


def test_allowed_countries_are_a_setting(services: Services, chair: str) -> None:
    capture = capture_with(services, sms_allowed_countries=("GB", "FR"))
    assert (
        capture.capture("203.0.113.1", {"sku": chair, "channel": "sms", "contact": "+33612345678"}).status == "queued"
    )
    with pytest.raises(DomainError) as refused:
        capture.capture("203.0.113.1", {"sku": chair, "channel": "sms", "contact": "+34612345678"})
    assert refused.value.code == "sms_country_not_allowed"


def test_the_allowed_countries_default_to_the_default_phone_region(services: Services) -> None:
    assert services.settings.sms_allowed_countries == (services.settings.default_phone_region,)


def test_taps_for_one_number_are_capped_per_hour_whatever_the_address(
    services: Services, clock: FixedClock, chair: str
) -> None:
    skus = products(services, 3)
    capture = capture_with(services, taps_per_number_per_hour=3)
    for i, sku in enumerate(skus):
        capture.capture(f"198.51.100.{i}", {"sku": sku, "channel": "sms", "contact": "07400 123456"})
    with pytest.raises(RateLimited) as refused:
        capture.capture("198.51.100.99", {"sku": chair, "channel": "sms", "contact": "07400 123456"})
    assert refused.value.code == "number_rate_limited"
    assert error_status(refused.value) == 429
    assert nothing_written(services, chair)
    clock.advance(3600)
    assert (
        capture.capture("198.51.100.99", {"sku": chair, "channel": "sms", "contact": "07400 123456"}).status == "queued"
    )


def test_taps_for_one_block_of_numbers_are_capped_per_hour(services: Services, chair: str) -> None:
    capture = capture_with(services, taps_per_prefix_per_hour=4)
    for i in range(4):
        capture.capture(f"198.51.100.{i}", {"sku": chair, "channel": "sms", "contact": f"+44740012{i:04d}"})
    with pytest.raises(RateLimited) as refused:
        capture.capture("198.51.100.50", {"sku": chair, "channel": "sms", "contact": "+447400129999"})
    assert refused.value.code == "prefix_rate_limited"
    assert services.tables.catalog.waiting(chair) == 4
    # Another block is counted apart; email is not an SMS destination at all.
    capture.capture("198.51.100.51", {"sku": chair, "channel": "sms", "contact": "+447400139999"})
    capture.capture("198.51.100.52", {"sku": chair, "channel": "email", "contact": "ada@example.com"})
    assert services.tables.catalog.waiting(chair) == 6


def test_places_per_number_are_capped_across_products(services: Services) -> None:
    skus = products(services, 3)
    capture = capture_with(services, places_per_number=2)
    for sku in skus[:2]:
        assert (
            capture.capture("198.51.100.1", {"sku": sku, "channel": "sms", "contact": "07400 123456"}).status
            == "queued"
        )
    with pytest.raises(Conflict) as refused:
        capture.capture("198.51.100.1", {"sku": skus[2], "channel": "sms", "contact": "07400 123456"})
    assert refused.value.code == "too_many_places"
    assert nothing_written(services, skus[2])
    # Asking again where the number already waits is no new place: it keeps its place.
    again = capture.capture("198.51.100.1", {"sku": skus[0], "channel": "sms", "contact": "07400 123456"})
    assert again.status == "already_queued"


def test_a_full_waiting_list_refuses_newcomers_but_keeps_those_on_it(services: Services, chair: str) -> None:
    # A cap of one place a shard: a newcomer whose own shard is taken is counted on another with room, and the
    # list is full only once every shard is (docs/SCALE.md; tests/integration/test_waiting_cap.py at 100).
    capture = capture_with(services, max_waiting_per_sku=WAITING_SHARDS)
    first = "ada@example.com"
    shard = shard_for(key_of(services, first))
    second = next(c for c in (f"shopper{i}@example.com" for i in range(400)) if shard_for(key_of(services, c)) == shard)
    assert capture.capture("198.51.100.1", {"sku": chair, "channel": "email", "contact": first}).status == "queued"
    assert capture.capture("198.51.100.2", {"sku": chair, "channel": "email", "contact": second}).status == "queued"
    others = [f"other{i}@example.com" for i in range(WAITING_SHARDS - 2)]
    for i, other in enumerate(others):
        assert capture.capture(f"198.51.101.{i}", {"sku": chair, "channel": "email", "contact": other}).status == (
            "queued"
        )
    assert services.tables.catalog.waiting(chair) == WAITING_SHARDS
    with pytest.raises(Conflict) as refused:
        capture.capture("198.51.100.3", {"sku": chair, "channel": "email", "contact": "late@example.com"})
    assert refused.value.code == "waiting_list_full"
    # The one already waiting is answered as the newcomer was (tests/integration/test_waiting_cap.py) and keeps the
    # place.
    with pytest.raises(Conflict):
        capture.capture("198.51.100.1", {"sku": chair, "channel": "email", "contact": first})
    assert first in [p.contact for p in services.tables.requests.queue(chair)]
    assert services.tables.catalog.waiting(chair) == WAITING_SHARDS


def test_a_full_list_answers_409_over_http(client: Client, services: Services, chair: str) -> None:
    # Every shard counts its share of the cap, so the list is full whichever shard the tap lands on.
    for shard in range(WAITING_SHARDS):
        services.tables.catalog.table.update_item(
            Key={"sku": shard_key(chair, shard)},
            UpdateExpression="SET waiting_count = :n",
            ExpressionAttributeValues={":n": shard_cap(services.settings.max_waiting_per_sku)},
        )
    response = tap(client, {"sku": chair, "channel": "email", "contact": "ada@example.com"})
    assert response.status_code == 409
    assert response.json_body["error"] == "waiting_list_full"


def test_the_caps_never_store_a_number_in_clear(services: Services, chair: str) -> None:
    services.capture.capture("198.51.100.1", {"sku": chair, "channel": "sms", "contact": "07400 123456"})
    keys = [item["key"] for item in services.tables.whole("throttle").scan()["Items"]]
    assert any(k.startswith("tapn#") for k in keys) and any(k.startswith("tapp#") for k in keys)
    assert any(k.startswith("places#") for k in keys)
    assert not any("7400" in k or "123456" in k for k in keys)


# --- Switching to SMS on the manage page passes the same checks.


def email_place(services: Services, skus: list[str]) -> str:
    for sku in skus:
        joined = services.capture.capture(
            "198.51.100.1", {"sku": sku, "channel": "email", "contact": "ada@example.com"}
        )
        # Confirmed, as a switch needs (tests/integration/test_code_sms_caps.py has the unconfirmed case).
        services.confirm_pages.confirm(services.tokens.confirm(sku, str(joined.joined_ts)))
    [request] = list(services.tables.requests.queue(skus[0]))
    return f"/me/{services.tokens.manage(request.contact_key)}"


def switch(client: Client, url: str, contact: str) -> Any:
    fields = {**form_for(client.http.get(url).body, "switch"), "contact": contact}
    return client.http.post(url, headers={"Content-Type": "application/x-www-form-urlencoded"}, body=urlencode(fields))


@pytest.mark.parametrize(("contact", "shown"), [("020 7946 0000", "landline"), ("+33 6 12 34 56 78", "GB")])
def test_switching_to_a_landline_or_a_foreign_number_is_refused(
    client: Client, services: Services, chair: str, contact: str, shown: str
) -> None:
    url = email_place(services, [chair])
    response = switch(client, url, contact)
    assert response.status_code == 400
    assert shown in response.body.decode()
    assert [r.channel for r in services.tables.requests.queue(chair)] == ["email"]


def test_switching_counts_the_places_against_the_numbers_cap(services: Services) -> None:
    skus = products(services, 3)
    email_place(services, skus)
    [request] = list(services.tables.requests.queue(skus[0]))
    manage = dataclasses.replace(services.manage, places_per_number=2)
    # Refused before any code is sent: the switch would bring three places to a number allowed two.
    with pytest.raises(DomainError) as refused:
        manage.start_switch(request.contact_key, "07400 123456")
    assert refused.value.code == "too_many_places"
    assert {r.channel for sku in skus for r in services.tables.requests.queue(sku)} == {"email"}
