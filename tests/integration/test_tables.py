"""Each table class against the emulator, provisioned from infra/template.json."""

from __future__ import annotations

import threading

import pytest

from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.requests import Request, UniqueItem, new_joined_ts
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.support import CHAIR


def join(services: Services, sku: str, contact: str, now: float, key: str | None = None) -> str:
    joined = new_joined_ts(now)
    unique, request = services.tables.requests.join_items(
        Request.waiting(
            sku=sku,
            joined_ts=joined,
            channel="sms",
            contact=contact,
            contact_key=key or f"key-{contact}",
            name="",
            ttl=int(now) + 86400,
            now=now,
        )
    )
    services.tables.run(Tx().add("unique", unique).add("request", request))
    return joined


def test_upsert_keeps_counters_and_fills_defaults(services: Services) -> None:
    services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    services.tables.catalog.table.update_item(
        Key={"sku": "LAMP"}, UpdateExpression="SET waiting_count = :n", ExpressionAttributeValues={":n": 7}
    )
    product = services.tables.catalog.upsert("LAMP", {"threshold": 3})
    assert product.waiting_count == 7
    assert product.name == "Brass lamp"
    assert product.threshold == 3
    assert product.hold_window_s == 900


def test_cached_reads_are_reused_until_upsert(services: Services) -> None:
    services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    assert services.tables.catalog.get_cached("LAMP").name == "Brass lamp"
    services.tables.catalog.table.update_item(
        Key={"sku": "LAMP"},
        UpdateExpression="SET #n = :n",
        ExpressionAttributeNames={"#n": "name"},
        ExpressionAttributeValues={":n": "Changed"},
    )
    assert services.tables.catalog.get_cached("LAMP").name == "Brass lamp"
    services.tables.catalog.upsert("LAMP", {"voice": "dry"})
    assert services.tables.catalog.get_cached("LAMP").name == "Changed"


def test_queue_reads_oldest_first_and_skips_uniqueness_items(services: Services, clock: FixedClock) -> None:
    services.tables.catalog.upsert("CHAIR", dict(CHAIR))
    stamps = []
    for i in range(5):
        stamps.append(join(services, "CHAIR", f"+44740012345{i}", clock.now()))
        clock.advance(1)
    queue = list(services.tables.requests.queue("CHAIR", page_size=2))
    assert [r.joined_ts for r in queue] == stamps
    assert services.tables.requests.position("CHAIR", stamps[3]) == 4


def test_ties_in_the_same_instant_are_broken_by_the_suffix(services: Services, clock: FixedClock) -> None:
    stamps = [join(services, "CHAIR", f"+44740012345{i}", clock.now()) for i in range(6)]
    queue = [r.joined_ts for r in services.tables.requests.queue("CHAIR")]
    assert queue == sorted(stamps)
    assert len({s.split("#")[0] for s in stamps}) == 1


def test_a_second_join_for_the_same_person_is_refused_with_the_old_place(services: Services, clock: FixedClock) -> None:
    first = join(services, "CHAIR", "+447400123456", clock.now())
    with pytest.raises(TransactionCancelled) as caught:
        join(services, "CHAIR", "+447400123456", clock.now() + 5)
    assert caught.value.failed("unique")
    assert caught.value.old("unique")["ref"] == first
    assert caught.value.old("unique", UniqueItem) == UniqueItem(
        "CHAIR", "key-+447400123456", ref=first, ttl=int(clock.now()) + 86400
    )
    place = services.tables.requests.place_of("CHAIR", "key-+447400123456")
    assert place is not None and place.joined_ts == first
    assert services.tables.requests.place_of("CHAIR", "key-nobody") is None


def test_position_counts_only_live_requests(services: Services, clock: FixedClock) -> None:
    stamps = []
    for i in range(3):
        stamps.append(join(services, "CHAIR", f"+44740012345{i}", clock.now()))
        clock.advance(1)
    services.tables.requests.table.update_item(
        Key={"sku": "CHAIR", "joined_ts": stamps[0]},
        UpdateExpression="SET #s = :c",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":c": "converted"},
    )
    assert services.tables.requests.position("CHAIR", stamps[2]) == 2


def test_refresh_keeps_the_join_stamp_and_the_name_and_refuses_finished_places(
    services: Services, clock: FixedClock
) -> None:
    joined = join(services, "CHAIR", "+447400123456", clock.now())
    refreshed = services.tables.requests.refresh("CHAIR", joined, ttl=123, now=clock.now())
    assert refreshed is not None and refreshed.joined_ts == joined and refreshed.ttl == 123
    assert refreshed.name == "", "the name given at the first tap stays"
    services.tables.requests.table.update_item(
        Key={"sku": "CHAIR", "joined_ts": joined},
        UpdateExpression="SET #s = :c",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":c": "converted"},
    )
    assert services.tables.requests.refresh("CHAIR", joined, ttl=456, now=clock.now()) is None


def test_requests_are_found_by_contact_key(services: Services, clock: FixedClock) -> None:
    join(services, "CHAIR", "+447400123456", clock.now(), key="k1")
    join(services, "LAMP", "+447400123456", clock.now(), key="k1")
    join(services, "LAMP", "+447400123457", clock.now(), key="k2")
    assert sorted(r.sku for r in services.tables.requests.by_contact("k1")) == ["CHAIR", "LAMP"]


def test_optout_keeps_the_first_reason_and_batches_lookups(services: Services, clock: FixedClock) -> None:
    assert services.tables.optout.add("k1", "stop", clock.now())
    assert not services.tables.optout.add("k1", "unsubscribe", clock.now())
    assert services.tables.optout.get("k1")["source"] == "stop"
    for i in range(150):
        services.tables.optout.add(f"bulk{i}", "admin", clock.now())
    keys = [f"bulk{i}" for i in range(0, 300, 2)] + ["k1", "nobody"]
    suppressed = services.tables.optout.suppressed_among(keys)
    assert suppressed == {f"bulk{i}" for i in range(0, 150, 2)} | {"k1"}
    assert services.tables.optout.remove("k1")
    assert not services.tables.optout.remove("k1")


def test_throttle_refuses_at_the_limit_and_counts(services: Services) -> None:
    assert all(services.tables.rate_counters.charge("ip#1", 3, 999) for _ in range(3))
    assert not services.tables.rate_counters.charge("ip#1", 3, 999)
    assert services.tables.rate_counters.bump("unknown#X", 999) == 1
    assert services.tables.rate_counters.bump("unknown#X", 999) == 2


def test_throttle_counts_every_concurrent_request(services: Services) -> None:
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda: results.append(services.tables.rate_counters.charge("ip#2", 10, 999)))
        for _ in range(16)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 10


def test_audit_is_append_only_and_ordered(services: Services, clock: FixedClock) -> None:
    for kind in ("restock_detected", "notice_sent", "hold"):
        services.tables.audit.record("CHAIR", kind, clock.now(), contact_key="k1", position=1)
        clock.advance(1)
    assert [a["kind"] for a in services.tables.audit.for_sku("CHAIR")] == ["restock_detected", "notice_sent", "hold"]
    assert [a["kind"] for a in services.tables.audit.for_sku("CHAIR", newest_first=True, limit=1)] == ["hold"]
    assert len(services.tables.audit.for_contact("k1")) == 3


def test_a_product_added_by_hand_counts_as_sold_out_for_demand(services: Services) -> None:
    services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    assert [p["sku"] for p in services.tables.catalog.table.scan()["Items"] if p.get("demand_key") == "out"] == ["LAMP"]
