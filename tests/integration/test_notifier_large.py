"""Large restocks: the walk stops before the Lambda deadline and continues in follow-up jobs, no gap, no repeat."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from chalicelib.messages.senders import EmailSender, Senders, SmsSender
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_many_requests, add_restock, key_of
from tests.notices import drain, sms_outbox, verify_sender
from tests.support import CHAIR, rebuilt

SKU = "CHAIR-WALNUT"


def run_large_restock(services: Services, clock: FixedClock, people: int, units: int, looks: int) -> dict[str, float]:
    """Queue `people`, restock `units`, deliver jobs until the queue is empty; check fairness and the cap."""
    services.tables.catalog.upsert(SKU, dict(CHAIR))
    verify_sender(services)
    # The emulator has no SNS quota to respect; the pacing itself is tested on its own.
    services = rebuilt(
        services,
        senders=Senders(
            SmsSender(services.aws.sns),
            EmailSender(services.aws.sesv2, services.settings.ses_from),
            sms_per_second=100_000,
            email_per_second=100_000,
        ),
    )
    numbers = add_many_requests(services, SKU, people, clock.now() - people)
    # Every 97th shopper has opted out since joining: passed over, never a gap in who else is told.
    opted_out = set(numbers[::97])
    for number in opted_out:
        services.tables.optout.add(key_of(services, number), "stop", clock.now())
    job = add_restock(services, SKU, units, clock.now())
    services.jobs.send(job)

    started = time.monotonic()
    deliveries = drain(services, looks=looks, limit=10_000)
    elapsed = time.monotonic() - started

    assert all(d.error is None for d in deliveries)
    kinds = Counter(d.job.kind for d in deliveries)
    assert kinds["restock"] == 1 and kinds["continue"] >= 2
    eligible = [n for n in numbers if n not in opted_out]
    sent = Counter(number for number, _ in sms_outbox())
    assert max(sent.values()) == 1, "nobody is told twice"
    assert set(sent) == set(eligible[:units]), "exactly the oldest eligible, with no gap"
    restock = services.tables.restocks.get(SKU, job.restock_ts)
    assert restock.units_offerable == 0
    positions = sorted(int(f["position"]) for f in services.tables.audit.for_sku(SKU) if f["kind"] == "notice_sent")
    told_positions = [i + 1 for i, n in enumerate(numbers) if n in set(eligible[:units])]
    assert positions == told_positions, "positions keep counting across continuations"
    skipped = [f for f in services.tables.audit.for_sku(SKU) if f["kind"] == "notice_skipped"]
    assert Counter(f["reason"] for f in skipped) == {
        "opted_out": len([n for n in opted_out if n in numbers[: told_positions[-1]]])
    }
    return {"seconds": elapsed, "jobs": len(deliveries)}


def test_a_queue_larger_than_one_invocation_finishes_across_continuation_jobs(
    services: Services, clock: FixedClock
) -> None:
    run_large_restock(services, clock, people=600, units=150, looks=40)


@pytest.mark.slow
def test_ten_thousand_waiting_and_two_thousand_units_finish_with_no_duplicate_and_no_gap(
    services: Services, clock: FixedClock
) -> None:
    figures = run_large_restock(services, clock, people=10_000, units=2_000, looks=400)
    print(f"10,000 waiting / 2,000 units: {figures['jobs']} jobs in {figures['seconds']:.1f}s")
