"""MAX_WAITING_PER_SKU over WAITING_SHARDS shards: a tap is refused as "list full" only when the list holds the cap."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest
from chalice.test import Client

from chalicelib.errors import Conflict
from chalicelib.tables.catalog import WAITING_SHARDS, shard_key, shard_share
from chalicelib.wiring import Services
from tests.builders import key_of

JSON = {"Content-Type": "application/json"}

CAP = 100  # not a multiple of 16: the first four shards hold 7 places, the other twelve 6


def test_the_shards_shares_sum_to_the_cap_exactly() -> None:
    assert WAITING_SHARDS == 16
    for cap in (1, 15, 16, 17, CAP, 10_000, 50_001):
        assert sum(shard_share(cap, shard) for shard in range(WAITING_SHARDS)) == cap


def test_a_list_fills_to_its_cap_before_any_tap_is_refused(services: Services, chair: str) -> None:
    # Every shopper here is at example.com: the hourly cap on one domain's places is tried on its own
    # (tests/integration/test_place_caps.py).
    settings = dataclasses.replace(services.settings, max_waiting_per_sku=CAP, places_per_domain_per_hour=CAP + 1)
    capture = dataclasses.replace(services.capture, settings=settings)
    contacts = [f"shopper{i}@example.com" for i in range(CAP + 1)]
    # Each tap from its own address, as different shoppers' are (the rate limit is per address).
    outcomes = [
        capture.capture(f"198.51.{i // 250}.{i % 250}", {"sku": chair, "channel": "email", "contact": c}).status
        for i, c in enumerate(contacts[:CAP])
    ]
    # Well past 98% of the cap: every tap up to the cap itself took a place, though people's own shards filled
    # long before (16 shards of 6 or 7 places, spread by a hash of the contact).
    assert outcomes == ["queued"] * CAP
    assert services.tables.catalog.waiting(chair) == CAP
    with pytest.raises(Conflict) as refused:
        capture.capture("203.0.113.1", {"sku": chair, "channel": "email", "contact": contacts[CAP]})
    assert refused.value.code == "waiting_list_full"
    assert services.tables.catalog.waiting(chair) == CAP

    # No shard holds more than its share, and each place records the shard it is counted on.
    places = list(services.tables.requests.queue(chair))
    recorded = Counter(p.shard for p in places)
    for shard in range(WAITING_SHARDS):
        item = services.tables.catalog.table.get_item(Key={"sku": shard_key(chair, shard)}, ConsistentRead=True)
        assert int(item["Item"]["waiting_count"]) == recorded[shard] <= shard_share(CAP, shard)

    # Someone already waiting keeps their place on the full list, though their tap is answered as a newcomer's is;
    # one leaving makes room for the next newcomer, on whichever shard had the room.
    kept = next(p for p in places if p.contact == contacts[0])
    with pytest.raises(Conflict) as repeat:
        capture.capture("198.51.0.0", {"sku": chair, "channel": "email", "contact": contacts[0]})
    assert repeat.value.code == "waiting_list_full"
    assert [p.joined_ts for p in services.tables.requests.queue(chair) if p.contact == contacts[0]] == [kept.joined_ts]
    services.exits.leave_sku(key_of(services, contacts[1]), chair, reason="manage")
    assert services.tables.catalog.waiting(chair) == CAP - 1
    again = capture.capture("203.0.113.2", {"sku": chair, "channel": "email", "contact": contacts[CAP]})
    assert again.status == "queued"
    assert services.tables.catalog.waiting(chair) == CAP


def fill(services: Services, sku: str) -> None:
    """Every shard at its share of the cap: the list is full whichever shard a tap lands on."""
    for shard in range(WAITING_SHARDS):
        services.tables.catalog.table.update_item(
            Key={"sku": shard_key(sku, shard)},
            UpdateExpression="SET waiting_count = :n",
            ExpressionAttributeValues={":n": shard_share(services.settings.max_waiting_per_sku, shard)},
        )


def test_a_full_list_answers_a_repeat_and_a_newcomer_alike(client: Client, services: Services, chair: str) -> None:
    # A stranger typing a contact into a full list's form must not learn whether that contact waits: the repeat tap
    # and the newcomer's get one answer, a 409 that tells both kinds of shopper what it means for them.
    first = client.http.post(
        "/notify-me", headers=JSON, body=json.dumps({"sku": chair, "channel": "email", "contact": "ada@example.com"})
    )
    assert first.status_code == 202
    [place] = services.tables.requests.queue(chair)
    fill(services, chair)
    answers = [
        client.http.post("/notify-me", headers=JSON, body=json.dumps({"sku": chair, "channel": "email", "contact": c}))
        for c in ("ada@example.com", "newcomer@example.com")
    ]
    assert [a.status_code for a in answers] == [409, 409]
    assert answers[0].json_body == answers[1].json_body
    assert answers[0].json_body["error"] == "waiting_list_full"
    assert "already on it keeps their place" in answers[0].json_body["message"]
    # The person who was waiting still waits, in the same place; the newcomer was given none.
    assert [(p.contact, p.joined_ts) for p in services.tables.requests.queue(chair)] == [
        ("ada@example.com", place.joined_ts)
    ]
