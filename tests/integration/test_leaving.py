"""Leaving a list through QueueExits: places, uniqueness items, counters and live offers stay in step."""

from __future__ import annotations

import pytest

from chalicelib.counters import lowered
from chalicelib.leaving import GONE, HOLDING, LEFT, RELEASED
from chalicelib.tables.requests import Request
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.scenes import scene
from tests.support import CrashAt, InjectedCrash, queued_jobs, rebuilt


def test_leaving_a_waiting_place_removes_it_with_its_uniqueness_item(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    assert s.waiting_count() == 2
    exit_ = services.exits.leave(s.request(0), reason="manage")
    assert exit_.outcome == LEFT
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts) is None
    assert services.tables.requests.unique(s.sku, s.requests[0].contact_key) is None
    assert s.waiting_count() == 1
    assert services.tables.requests.position(s.sku, s.requests[1].joined_ts) == 1
    [fact] = [f for f in services.tables.audit.for_sku(s.sku) if f["kind"] == "leave"]
    assert fact["reason"] == "manage"
    assert fact["contact_key"] == s.requests[0].contact_key
    assert "contact" not in fact


def test_leaving_with_a_live_offer_releases_it_and_queues_a_top_up(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    token = s.offer(0)
    assert s.counters() == (1, 0)
    exit_ = services.exits.leave(s.request(0), reason="unsubscribe")
    assert exit_.outcome == RELEASED
    assert s.counters() == (1, 1)
    row = s.row(token)
    assert row.state == "lapsed"
    assert row.lapse_reason == "unsubscribe"
    assert row.due_at is None  # the top-up is queued, so the sweep has nothing left to do for it
    [job] = queued_jobs(services)
    assert (job.kind, job.restock_id, job.sku) == ("topup", s.restock.restock_id, s.sku)
    assert s.waiting_count() == 1


def test_a_crash_after_releasing_is_finished_by_the_sweep(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    token = s.offer(0)
    crashing = rebuilt(services, faults=CrashAt("leave.after_release"))
    with pytest.raises(InjectedCrash):
        crashing.exits.leave(s.request(0), reason="stop")
    assert s.counters() == (1, 1)
    assert queued_jobs(services) == []
    assert s.row(token).due_at <= clock.now()
    summary = services.sweep.run()
    assert summary["topups"] == 1
    [job] = queued_jobs(services)
    assert job.kind == "topup"
    assert s.row(token).due_at is None


def test_leaving_after_the_stock_fell_never_over_promises(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    token = s.offer(0)
    # The shop's level fell to zero while the offer was out: the counters follow the fall as detection moves
    # them, no unit left and the live offer's promise owed (units_offerable below zero).
    available, offerable = lowered(available=1, offerable=0, fall=1)
    assert (available, offerable) == (0, -1)
    services.tables.restocks.table.update_item(
        Key={"sku": s.sku, "restock_ts": s.restock.restock_ts},
        UpdateExpression="SET units_available = :available, units_offerable = :offerable",
        ExpressionAttributeValues={":available": available, ":offerable": offerable},
    )
    exit_ = services.exits.leave(s.request(0), reason="unsubscribe")
    assert exit_.outcome == RELEASED
    assert s.counters() == (0, 0)
    assert s.row(token).state == "lapsed"
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts) is None
    assert s.waiting_count() == 1


def test_a_held_unit_stays_held(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    token = s.offer(0)
    s.tap(token)
    exit_ = services.exits.leave(s.request(0), reason="unsubscribe")
    assert exit_.outcome == HOLDING
    assert exit_.hold_expires_at == s.row(token).hold_expires_at
    assert s.request(0).state == "reserved"
    assert s.counters() == (0, 0)
    assert s.waiting_count() == 2


def test_an_offer_made_between_read_and_write_is_released_not_lost(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    stale = s.request(0)  # read while still waiting
    token = s.offer(0)  # the notifier wins the race
    exit_ = services.exits.leave(stale, reason="manage")
    assert exit_.outcome == RELEASED
    assert s.row(token).state == "lapsed"
    assert s.counters() == (1, 1)


def test_leaving_twice_changes_nothing_more(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    first = services.exits.leave(s.request(0), reason="manage")
    again = services.exits.leave_sku(s.requests[0].contact_key, s.sku, reason="manage")
    assert (first.outcome, again.outcome) == (LEFT, GONE)
    assert s.waiting_count() == 1


def test_leave_all_covers_every_sku(services: Services, clock: FixedClock) -> None:
    from tests.builders import join_request

    s = scene(services, clock, units=1, people=1)
    services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    join_request(services, "LAMP", s.requests[0].contact, clock.now())
    exits = services.exits.leave_all(s.requests[0].contact_key, reason="admin")
    assert sorted((e.sku, e.outcome) for e in exits) == [("CHAIR-WALNUT", LEFT), ("LAMP", LEFT)]
    assert services.exits.places(s.requests[0].contact_key) == []


def test_unsubscribing_while_the_notifier_runs_keeps_every_count_right(services: Services, clock: FixedClock) -> None:
    import threading

    from chalicelib.queue.messages import Job

    s = scene(services, clock, units=3, people=12)
    leavers = s.requests[:6]
    barrier = threading.Barrier(len(leavers) + 1)
    errors: list[BaseException] = []

    def notify() -> None:
        barrier.wait()
        services.notifier.handle(Job(s.sku, s.restock.restock_id, s.restock.restock_ts), lambda: 60_000)

    def leave(request: Request) -> None:
        barrier.wait()
        try:
            services.optouts.opt_out(request.contact_key, "unsubscribe")
        except BaseException as exc:  # surfaced below; a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=notify)] + [threading.Thread(target=leave, args=(r,)) for r in leavers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # Top-ups for the offers that were passed on tell the next people.
    for job in queued_jobs(services):
        services.notifier.handle(job, lambda: 60_000)
    live = list(services.tables.requests.queue(s.sku))
    assert {r.contact_key for r in live}.isdisjoint({r.contact_key for r in leavers})
    assert s.waiting_count() == len(live) == 6
    offered = [r for r in live if r.state == "offered"]
    available, offerable = s.counters()
    assert available == 3
    assert offerable + len(offered) == available  # every unit is either offered or still offerable
    assert len(offered) == 3  # and the freed ones went on down the line
