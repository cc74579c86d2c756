"""The sweep against the emulator: lapses, expiries, top-ups, races, crashes and stale places."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace

import pytest

from chalicelib.sweep import MARGIN_S, ROLL_UP_EVERY_S, STALE_LEAD_S, SweepService
from chalicelib.tables.requests import unique_sk
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import join_request
from tests.scenes import Scene, scene
from tests.support import CHAIR, CrashAt, InjectedCrash, deadline_after, queued_jobs, rebuilt


@pytest.fixture
def s(services: Services, clock: FixedClock) -> Scene:
    return scene(services, clock, units=3, people=4)


def scans(services: Services) -> list[str]:
    """Records every DynamoDB Scan the services' client makes (botocore's event hooks, nothing patched)."""
    seen: list[str] = []
    services.aws.dynamodb.meta.client.meta.events.register(
        "before-call.dynamodb.Scan", lambda params, **_: seen.append(params.get("TableName", ""))
    )
    return seen


def test_sweep_lapses_unused_offers_and_expires_unbought_holds(s: Scene) -> None:
    lapsing, expiring, live = s.offer(0), s.offer(1), s.offer(2)
    s.tap(expiring)
    s.clock.advance(CHAIR["hold_window_s"])
    summary = s.services.sweep.run()
    assert (summary["lapsed"], summary["expired"]) == (0, 1)
    s.clock.advance(CHAIR["offer_window_s"] - CHAIR["hold_window_s"])
    s.tap(live)  # too late: the row's own expiry says so
    summary = s.services.sweep.run()
    assert (summary["lapsed"], summary["expired"]) == (2, 0)
    assert [s.row(t).state for t in (lapsing, expiring, live)] == ["lapsed", "expired", "lapsed"]
    assert s.counters() == (3, 3)
    assert [s.request(i).state for i in range(3)] == ["waiting"] * 3


def test_sweep_reads_due_rows_through_the_index_never_a_scan(s: Scene) -> None:
    for i in range(3):
        s.offer(i)
    seen = scans(s.services)
    s.clock.advance(CHAIR["offer_window_s"])
    assert s.services.sweep.run()["lapsed"] == 3
    assert seen == []


def test_sweep_pages_through_many_due_rows(services: Services, clock: FixedClock) -> None:
    sc = scene(services, clock, units=7, people=7)
    for i in range(7):
        sc.offer(i)
    clock.advance(CHAIR["offer_window_s"])
    small_pages = replace(services.sweep, page_size=2)
    summary = small_pages.run()
    assert (summary["lapsed"], summary["topups"]) == (7, 1)
    assert sc.counters() == (7, 7)
    assert small_pages.run()["lapsed"] == 0


def test_one_top_up_per_restock_that_freed_units(services: Services, clock: FixedClock) -> None:
    chair = scene(services, clock, units=3, people=3, sku="CHAIR-WALNUT")
    lamp = scene(services, clock, units=2, people=2, sku="LAMP-BRASS")
    quiet = scene(services, clock, units=1, people=1, sku="STOOL-OAK")
    for i in range(3):
        chair.offer(i)
    for i in range(2):
        lamp.tap(lamp.offer(i))
    clock.advance(CHAIR["offer_window_s"])
    quiet.offer(0)  # still live: frees nothing
    summary = services.sweep.run()
    assert (summary["lapsed"], summary["expired"], summary["topups"]) == (3, 2, 2)
    jobs = queued_jobs(services)
    assert sorted((j.sku, j.restock_id, j.restock_ts, j.kind) for j in jobs) == sorted(
        [
            ("CHAIR-WALNUT", chair.restock.restock_id, chair.restock.restock_ts, "topup"),
            ("LAMP-BRASS", lamp.restock.restock_id, lamp.restock.restock_ts, "topup"),
        ]
    )
    # Settled rows leave the index once their top-up is queued: a second run sends nothing.
    assert services.sweep.run()["topups"] == 0
    assert queued_jobs(services) == []


def test_sweeping_twice_returns_each_unit_once(s: Scene) -> None:
    offers = [s.offer(i) for i in range(3)]
    s.tap(offers[0])
    s.clock.advance(CHAIR["offer_window_s"])
    first = s.services.sweep.run()
    second = s.services.sweep.run()
    assert (first["lapsed"], first["expired"]) == (2, 1)
    assert (second["lapsed"], second["expired"], second["topups"]) == (0, 0, 0)
    assert s.counters() == (3, 3)


def test_concurrent_sweeps_return_each_unit_once(services: Services, clock: FixedClock) -> None:
    sc = scene(services, clock, units=6, people=6)
    offers = [sc.offer(i) for i in range(6)]
    for token_id in offers[:3]:
        sc.tap(token_id)
    clock.advance(CHAIR["offer_window_s"])
    sweeps = [rebuilt(services, faults=lambda point: None).sweep for _ in range(4)]
    barrier = threading.Barrier(len(sweeps))
    summaries: list[dict[str, int]] = []

    def run(sweep: SweepService) -> None:
        barrier.wait()
        summaries.append(sweep.run())

    threads = [threading.Thread(target=run, args=(sw,)) for sw in sweeps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(x["lapsed"] for x in summaries) == 3
    assert sum(x["expired"] for x in summaries) == 3
    assert sc.counters() == (6, 6)
    assert Counter(sc.audit_kinds())["expiry"] == 3
    assert Counter(sc.audit_kinds())["lapse"] == 3
    # Each top-up is one restock's; a racing sweep may queue one more, which the notifier treats as a no-op.
    assert 1 <= sum(x["topups"] for x in summaries) <= len(sweeps)
    assert {j.restock_id for j in queued_jobs(services)} == {sc.restock.restock_id}


def test_crash_after_a_lapse_is_finished_by_the_next_sweep(s: Scene) -> None:
    for i in range(3):
        s.offer(i)
    s.clock.advance(CHAIR["offer_window_s"])
    with pytest.raises(InjectedCrash):
        rebuilt(s.services, faults=CrashAt("sweep.after_lapse")).sweep.run()
    assert s.counters() == (3, 1)
    assert queued_jobs(s.services) == []
    summary = s.services.sweep.run()
    assert (summary["lapsed"], summary["topups"]) == (2, 1)
    assert s.counters() == (3, 3)
    assert [j.kind for j in queued_jobs(s.services)] == ["topup"]


def test_crash_after_an_expiry_is_finished_by_the_next_sweep(s: Scene) -> None:
    s.tap(s.offer(0))
    s.clock.advance(CHAIR["hold_window_s"])
    with pytest.raises(InjectedCrash):
        rebuilt(s.services, faults=CrashAt("sweep.after_expiry")).sweep.run()
    assert s.counters() == (3, 3)
    summary = s.services.sweep.run()
    assert (summary["expired"], summary["topups"]) == (0, 1)
    assert s.counters() == (3, 3)


def test_crash_after_a_top_up_is_sent_sends_it_again_and_returns_nothing_twice(s: Scene) -> None:
    s.offer(0)
    s.clock.advance(CHAIR["offer_window_s"])
    with pytest.raises(InjectedCrash):
        rebuilt(s.services, faults=CrashAt("sweep.after_topup")).sweep.run()
    summary = s.services.sweep.run()
    assert (summary["lapsed"], summary["topups"]) == (0, 1)
    assert [j.kind for j in queued_jobs(s.services)] == ["topup", "topup"]
    assert s.counters() == (3, 3)
    assert s.services.sweep.run()["topups"] == 0


def test_just_gone_lapse_owes_a_top_up_to_the_next_sweep(s: Scene) -> None:
    from tests.scenes import level_falls_to

    token_id = s.offer(0)
    level_falls_to(s, 0)
    s.tap(token_id)
    assert s.services.sweep.run()["topups"] == 1


def test_top_up_tells_the_next_in_line(services: Services, clock: FixedClock) -> None:
    pytest.importorskip("chalicelib.notifier")
    if not hasattr(Services, "notifier"):
        pytest.skip("the notifier is not wired into the services yet")
    sc = scene(services, clock, units=1, people=3)
    first = sc.offer(0)
    clock.advance(CHAIR["offer_window_s"])
    assert services.sweep.run()["topups"] == 1
    [job] = queued_jobs(services)
    outcome = services.notifier.handle(job, lambda: 60_000)
    assert outcome.notices == 1
    assert sc.row(first).state == "lapsed"
    # The first in line had their turn for this restock; the unit goes to the next, and no further.
    assert [sc.request(i).state for i in range(3)] == ["waiting", "offered", "waiting"]
    assert sc.counters() == (1, 0)
    # A second delivery of the same top-up tells nobody else.
    assert services.notifier.handle(job, lambda: 60_000).notices == 0


# --- Stale places.


def test_stale_waiting_place_is_removed_with_its_uniqueness_item(services: Services, clock: FixedClock) -> None:
    services.tables.catalog.upsert("CHAIR-WALNUT", dict(CHAIR))
    now = clock.now()
    stale = join_request(services, "CHAIR-WALNUT", "+447400200001", now, ttl=int(now) + 86400)
    fresh = join_request(services, "CHAIR-WALNUT", "+447400200002", now)
    seen = scans(services)
    clock.advance(86400 - STALE_LEAD_S)
    assert services.sweep.run()["stale_requests"] == 1
    assert services.tables.requests.get("CHAIR-WALNUT", stale.joined_ts) is None
    assert services.tables.requests.unique("CHAIR-WALNUT", stale.contact_key) is None
    assert services.tables.requests.get("CHAIR-WALNUT", fresh.joined_ts) is not None
    assert services.tables.catalog.waiting("CHAIR-WALNUT") == 1
    assert seen == []
    assert services.sweep.run()["stale_requests"] == 0


def test_place_refreshed_by_a_repeat_tap_is_not_stale(services: Services, clock: FixedClock) -> None:
    services.tables.catalog.upsert("CHAIR-WALNUT", dict(CHAIR))
    now = clock.now()
    place = join_request(services, "CHAIR-WALNUT", "+447400200001", now, ttl=int(now) + 86400)
    clock.advance(3600)
    services.tables.requests.refresh(
        "CHAIR-WALNUT", place.joined_ts, ttl=int(clock.now()) + 90 * 86400, now=clock.now()
    )
    clock.advance(86400)
    assert services.sweep.run()["stale_requests"] == 0
    assert services.tables.requests.get("CHAIR-WALNUT", place.joined_ts) is not None


def test_stale_place_with_a_live_offer_waits_for_its_unit_to_come_back(services: Services, clock: FixedClock) -> None:
    sc = scene(services, clock, units=1, people=0)
    now = clock.now()
    sc.requests.append(join_request(services, sc.sku, "+447400200003", now, ttl=int(now) + 1800))
    token_id = sc.offer(0)
    clock.advance(1800)
    summary = services.sweep.run()
    assert summary["stale_requests"] == 0
    assert sc.request(0).state == "offered"
    clock.advance(CHAIR["offer_window_s"])
    summary = services.sweep.run()
    assert (summary["lapsed"], summary["stale_requests"]) == (1, 1)
    assert sc.row(token_id).state == "lapsed"
    assert sc.counters() == (1, 1)
    assert services.tables.catalog.waiting(sc.sku) == 0


def test_stale_converted_place_goes_without_counting_twice(services: Services, clock: FixedClock) -> None:
    from chalicelib.orders import Order

    sc = scene(services, clock, units=1, people=0)
    now = clock.now()
    sc.requests.append(join_request(services, sc.sku, "+447400200004", now, ttl=int(now) + 7200))
    token_id = sc.offer(0)
    sc.tap(token_id)
    services.orders.record(Order(token_id, "order-1"))
    assert sc.waiting_count() == 0
    clock.advance(7200)
    assert services.sweep.run()["stale_requests"] == 1
    assert sc.waiting_count() == 0
    assert services.tables.requests.get(sc.sku, sc.requests[0].joined_ts) is None


def test_stale_place_leaves_a_newer_places_uniqueness_item(services: Services, clock: FixedClock) -> None:
    from chalicelib.tables.base import transact

    services.tables.catalog.upsert("CHAIR-WALNUT", dict(CHAIR))
    now = clock.now()
    old = join_request(services, "CHAIR-WALNUT", "+447400200005", now, ttl=int(now) + 3600)
    # The same person's uniqueness item now names a newer place (a re-join after the old one finished).
    services.tables.requests.table.update_item(
        Key={"sku": "CHAIR-WALNUT", "joined_ts": unique_sk(old.contact_key)},
        UpdateExpression="SET #ref = :newer",
        ExpressionAttributeNames={"#ref": "ref"},
        ExpressionAttributeValues={":newer": "2099-01-01T00:00:00.000000Z#abcdef"},
    )
    assert transact is not None
    clock.advance(3600)
    assert services.sweep.run()["stale_requests"] == 1
    assert services.tables.requests.get("CHAIR-WALNUT", old.joined_ts) is None
    assert services.tables.requests.unique("CHAIR-WALNUT", old.contact_key) is not None


def test_stale_places_are_found_days_after_their_ttl(services: Services, clock: FixedClock) -> None:
    services.tables.catalog.upsert("CHAIR-WALNUT", dict(CHAIR))
    now = clock.now()
    join_request(services, "CHAIR-WALNUT", "+447400200006", now, ttl=int(now) + 60)
    clock.advance(2 * 86400)
    assert services.sweep.run()["stale_requests"] == 1


# --- Restocks stuck in pending.


def test_sweep_asks_restock_detection_to_requeue_stuck_restocks(services: Services, clock: FixedClock) -> None:
    calls: list[float] = []

    class Detection:
        def requeue_pending(self, now: float) -> int:
            calls.append(now)
            return 2

    sweep = replace(services.sweep, detector=Detection())
    assert sweep.run(now=clock.now() + 30)["pending_requeued"] == 2
    assert calls == [clock.now() + 30]


def test_sweep_runs_as_if_at_a_given_time(s: Scene) -> None:
    s.offer(0)
    assert s.services.sweep.run()["lapsed"] == 0
    assert s.services.sweep.run(now=s.clock.now() + CHAIR["offer_window_s"])["lapsed"] == 1


def test_summary_counts_every_kind_of_work(s: Scene) -> None:
    assert set(s.services.sweep.run()) == {
        "lapsed",
        "reminders_queued",
        "expired",
        "topups",
        "stale_requests",
        "pending_requeued",
        "unknown_sku_digests",
        "optouts_synced",
        "raced",
        "store_placed",
        "store_settled",
        "store_released",
        "store_unanswered",
        "confirmations_requeued",
        "proofs_requeued",
        "demand_rolled_up",
        "out_of_time",
    }


def test_a_stale_place_that_was_told_leaves_that_memory_behind(services: Services, clock: FixedClock) -> None:
    services.tables.catalog.upsert("CHAIR-WALNUT", dict(CHAIR))
    now = clock.now()
    told = join_request(services, "CHAIR-WALNUT", "+447400200006", now, ttl=int(now) + 3600)
    # Told about a restock, and back to waiting (its offer lapsed): the place remembers which restock.
    services.tables.requests.table.update_item(
        Key={"sku": "CHAIR-WALNUT", "joined_ts": told.joined_ts},
        UpdateExpression="SET last_notified_restock = :rid",
        ExpressionAttributeValues={":rid": "rs_told"},
    )
    clock.advance(3600)
    assert services.sweep.run()["stale_requests"] == 1
    assert services.tables.requests.get("CHAIR-WALNUT", told.joined_ts) is None
    unique = services.tables.requests.unique("CHAIR-WALNUT", told.contact_key)
    assert unique is not None and unique.told_restock == "rs_told", "joining again brings no second notice"


def test_a_sweep_out_of_time_stops_at_the_row_it_is_on_and_the_next_run_carries_on(
    services: Services, clock: FixedClock
) -> None:
    sc = scene(services, clock, units=6, people=6)
    for i in range(6):
        sc.offer(i)
    clock.advance(CHAIR["offer_window_s"])
    small_pages = replace(services.sweep, page_size=2)
    # One row is always settled; the first look at the deadline after it finds time is up, mid-page: the rest
    # (the page's second row included) waits for the next run.
    summary = small_pages.run(deadline=deadline_after(0))
    assert (summary["lapsed"], summary["topups"], summary["out_of_time"]) == (1, 1, 1)
    assert summary["optouts_synced"] == summary["stale_requests"] == 0
    rest = small_pages.run()
    assert (rest["lapsed"], rest["out_of_time"]) == (5, 0)
    assert sc.counters() == (6, 6)


def test_the_scheduled_sweep_keeps_a_margin_before_the_lambda_timeout(services: Services, clock: FixedClock) -> None:
    sc = scene(services, clock, units=2, people=2)
    sc.offer(0)
    sc.offer(1)
    clock.advance(CHAIR["offer_window_s"])
    small_pages = replace(services.sweep, page_size=1)
    # Less of the Lambda's time left than the margin: one page is settled, nothing more is started.
    summary = small_pages.run(remaining_ms=lambda: int(MARGIN_S * 1000) - 1)
    assert (summary["lapsed"], summary["out_of_time"]) == (1, 1)


def test_the_demand_roll_up_runs_a_pass_a_quarter_hour_and_resumes_where_the_deadline_cut_it(
    services: Services, clock: FixedClock
) -> None:
    for sku in ("A-LAMP", "B-RUG", "C-VASE"):
        services.tables.catalog.upsert(sku, {**CHAIR, "name": sku})
        services.capture.capture("ip", {"sku": sku, "channel": "sms", "contact": "07400 123456"})
    counts = lambda: {p.sku: p.waiting_count for p in services.tables.catalog.all()}  # noqa: E731
    assert set(counts().values()) == {0}  # taps move only the shards
    # The first pass is cut by the deadline after one product (the run's earlier parts look at it six times).
    assert services.sweep.run(deadline=deadline_after(6))["demand_rolled_up"] == 1
    first = sum(counts().values())
    assert first == 1
    # The next run carries on from the last product done, though ROLL_UP_EVERY_S has not passed.
    assert services.sweep.run()["demand_rolled_up"] == 3 - first
    assert counts() == {"A-LAMP": 1, "B-RUG": 1, "C-VASE": 1}
    # Then nothing until ROLL_UP_EVERY_S after that pass began.
    assert services.sweep.run()["demand_rolled_up"] == 0
    clock.advance(ROLL_UP_EVERY_S)
    assert services.sweep.run()["demand_rolled_up"] == 3
