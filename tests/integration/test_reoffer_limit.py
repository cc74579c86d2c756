"""REOFFER_LAPSE_LIMIT: a restock whose offers keep lapsing unused, with no sale between, stops re-offering its
units (SMS pumping: numbers that never buy must not drain one notice after another), and says why in the audit."""

from __future__ import annotations

import dataclasses

from chalicelib.notifier import Notifier, StopReason
from chalicelib.queue.messages import Job
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.scenes import Scene, scene


def plenty() -> int:
    return 60_000


def notifier(services: Services, limit: int) -> Notifier:
    return dataclasses.replace(
        services.notifier, settings=dataclasses.replace(services.settings, reoffer_lapse_limit=limit)
    )


def walk(s: Scene, n: Notifier) -> StopReason:
    job = Job(s.sku, s.restock.restock_id, s.restock.restock_ts, kind="topup")
    return StopReason(n.handle(job, plenty).stopped)


def lapse_all(s: Scene) -> None:
    s.clock.advance(3600 + 60)
    s.services.sweep.run()


def offered(s: Scene) -> list[int]:
    return [i for i in range(len(s.requests)) if s.request(i).last_notified_restock == s.restock.restock_id]


def test_reoffering_stops_after_the_limit_of_unused_offers_and_the_audit_says_why(
    services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=5)
    n = notifier(services, limit=2)
    walk(s, n)
    lapse_all(s)
    walk(s, n)
    lapse_all(s)
    assert offered(s) == [0, 1]
    assert walk(s, n) == StopReason.REOFFERS_STOPPED
    assert walk(s, n) == StopReason.REOFFERS_STOPPED  # and again, without a second fact
    assert offered(s) == [0, 1]  # the third in line is not told
    assert s.counters() == (1, 1)  # the unit stays counted, for the next level report or staff
    [fact] = [f for f in services.tables.audit.for_sku(s.sku) if f["kind"] == "reoffers_stopped"]
    assert fact["reason"] == "lapse_limit"
    assert int(fact["lapses_unsold"]) == 2 and int(fact["units_left"]) == 1


def test_a_sale_starts_the_count_of_unused_offers_again(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=2, people=4)
    bought, unused = s.offer(0), s.offer(1)
    s.tap(bought)
    services.moves.lapse(s.row(unused), clock.now())
    assert lapses(s) == 1
    services.moves.convert(s.row(bought), "order-1", clock.now())
    assert lapses(s) == 0


def lapses(s: Scene) -> int:
    restock = s.services.tables.restocks.get(s.sku, s.restock.restock_ts)
    assert restock is not None
    return restock.lapses_unsold


def test_an_offer_whose_unit_was_just_gone_is_not_counted(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    token = s.offer(0)
    services.moves.lapse(s.row(token), clock.now(), reason="just_gone")
    assert lapses(s) == 0
