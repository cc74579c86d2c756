"""Top-ups and retried jobs resume where the restock's walk left off (docs/SCALE.md, "Top-ups").

The cursor on the restock moves with the walk's own writes; places passed over for a reason that can change
are parked on the restock and looked at again first; a rolled-back offer parks its place too; facts of places
passed over are written once, in batches.
"""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.messages.senders import EmailSender, Senders, SmsSender
from chalicelib.notifier import SendFailed, SkipReason
from chalicelib.queue.messages import Job
from chalicelib.tables.requests import RequestState
from chalicelib.tables.reservations import Offer
from chalicelib.tables.restocks import ROLLED_BACK, Restock, WalkMark
from chalicelib.walk import PARKED_MAX
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_request, add_restock, joined, make_offer, put_restock
from tests.notices import FlakySns, email_outbox, plenty, selling_the_chair, told, waiting_by_sms
from tests.support import InjectedCrash, rebuilt

SKU = "CHAIR-WALNUT"


@pytest.fixture
def shop(services: Services) -> Services:
    """A shop selling the chair, with its From address verified in SES."""
    return selling_the_chair(services, SKU)


def restock_of(services: Services, job: Job) -> Restock:
    restock = services.tables.restocks.get(job.sku, job.restock_ts)
    assert restock is not None
    return restock


def facts(services: Services, kind: str) -> list[dict[str, Any]]:
    return [f for f in services.tables.audit.for_sku(SKU) if f["kind"] == kind]


def lapse_one(services: Services, job: Job, clock: FixedClock) -> None:
    """The oldest live offer of the restock lapses unused (the sweep's own move), freeing its unit."""
    rows = [r for r in services.tables.reservations.table.scan()["Items"] if r["restock_id"] == job.restock_id]
    live = sorted((r for r in rows if r["state"] == "offered"), key=lambda r: str(r["request_joined_ts"]))
    services.moves.lapse(Offer.from_item(live[0]), clock.now())


def topup(job: Job) -> Job:
    return Job(job.sku, job.restock_id, job.restock_ts, kind="topup")


def test_the_walk_leaves_its_cursor_on_the_restock_and_a_topup_starts_after_it(
    shop: Services, clock: FixedClock
) -> None:
    numbers = waiting_by_sms(shop, SKU, clock.now(), 30)
    job = add_restock(shop, SKU, 20, clock.now())
    shop.notifier.handle(job, plenty)

    restock = restock_of(shop, job)
    assert restock.walk_cursor == joined(19, clock.now()) and restock.walk_passed == 20
    assert restock.walk_parked == frozenset()

    lapse_one(shop, job, clock)
    outcome = shop.notifier.handle(topup(job), plenty)

    assert outcome.notices == 1 and told()[-1] == numbers[20]
    # Nobody before the cursor was passed over again, so no fact was written for them.
    assert not outcome.skipped and not facts(shop, "notice_skipped")
    assert restock_of(shop, job).walk_cursor == joined(20, clock.now())
    [sent] = [f for f in facts(shop, "notice_sent") if f["job_kind"] == "topup"]
    assert int(sent["position"]) == 21, "positions go on counting from the cursor"


def test_a_retried_job_writes_no_fact_twice(shop: Services, clock: FixedClock) -> None:
    numbers = waiting_by_sms(shop, SKU, clock.now(), 6)
    add_request(shop, SKU, "+447700900001", joined(2, clock.now(), "aaaaaa"), clock.now(), state="converted")
    job = add_restock(shop, SKU, 10, clock.now())

    first = shop.notifier.handle(job, plenty)
    again = shop.notifier.handle(job, plenty)

    assert first.skipped == {SkipReason.CONVERTED: 1} and first.notices == 6
    assert again.notices == 0 and not again.skipped
    assert len(facts(shop, "notice_skipped")) == 1
    assert sorted(told()) == sorted(numbers)


def test_a_late_joiner_is_told_by_the_next_topup(shop: Services, clock: FixedClock) -> None:
    waiting_by_sms(shop, SKU, clock.now(), 3)
    job = add_restock(shop, SKU, 5, clock.now())
    shop.notifier.handle(job, plenty)
    assert restock_of(shop, job).walk_cursor == joined(2, clock.now())

    # One joins later; another's join stamp, taken on a Lambda whose clock was behind, sorts before the cursor.
    add_request(shop, SKU, "+447700900010", joined(60, clock.now()), clock.now())
    add_request(shop, SKU, "+447700900011", joined(1, clock.now(), "ffffff"), clock.now())
    outcome = shop.notifier.handle(topup(job), plenty)

    assert outcome.notices == 2
    assert set(told()[-2:]) == {"+447700900010", "+447700900011"}


def test_a_late_joiner_before_the_cursor_passed_over_for_a_reason_that_changes_is_parked(
    shop: Services, clock: FixedClock
) -> None:
    now = clock.now()
    waiting_by_sms(shop, SKU, now, 3)
    job = add_restock(shop, SKU, 2, now)
    shop.notifier.handle(job, plenty)
    # Its stamp sorts before the cursor; its address is not confirmed yet when the next top-up reads it.
    late = add_request(shop, SKU, "late@example.com", joined(0, now, "ffffff"), now, channel="email", unconfirmed=True)
    lapse_one(shop, job, clock)

    outcome = shop.notifier.handle(topup(job), plenty)

    assert outcome.skipped == {SkipReason.UNCONFIRMED: 1}
    assert [(p.joined_ts, p.reason) for p in restock_of(shop, job).parked()] == [
        (late.joined_ts, SkipReason.UNCONFIRMED)
    ]


def test_a_place_passed_over_for_a_reason_that_changes_is_looked_at_again_first(
    shop: Services, clock: FixedClock
) -> None:
    now = clock.now()
    # The oldest place waits for its address to confirm; the second holds an offer of an earlier restock.
    unconfirmed = add_request(shop, SKU, "first@example.com", joined(0, now), now, channel="email", unconfirmed=True)
    earlier = put_restock(shop, SKU, 1, now - 86400, webhook_id="wh_earlier")
    holding = add_request(shop, SKU, "+447700900020", joined(1, now), now)
    make_offer(shop, earlier, holding, now - 60)
    numbers = waiting_by_sms(shop, SKU, now, 4, start=2)
    job = add_restock(shop, SKU, 4, now)

    first = shop.notifier.handle(job, plenty)

    assert first.skipped == {SkipReason.UNCONFIRMED: 1, SkipReason.HOLDING_OFFER: 1}
    assert sorted(told()) == numbers
    restock = restock_of(shop, job)
    assert restock.walk_cursor == joined(5, now)
    assert {(p.joined_ts, p.reason) for p in restock.parked()} == {
        (unconfirmed.joined_ts, SkipReason.UNCONFIRMED),
        (holding.joined_ts, SkipReason.HOLDING_OFFER),
    }

    # The holder's offer of the earlier restock lapses; a unit of this one comes back.
    earlier_row = next(
        r for r in shop.tables.reservations.table.scan()["Items"] if r["restock_id"] == earlier.restock_id
    )
    shop.moves.lapse(Offer.from_item(earlier_row), clock.now())
    lapse_one(shop, job, clock)
    outcome = shop.notifier.handle(topup(job), plenty)

    # Told before anyone after the cursor (fair order); the unconfirmed place stays parked, with no new fact.
    assert outcome.notices == 1 and told()[-1] == "+447700900020"
    assert not outcome.skipped
    assert [(p.joined_ts, p.reason) for p in restock_of(shop, job).parked()] == [
        (unconfirmed.joined_ts, SkipReason.UNCONFIRMED)
    ]
    assert len(facts(shop, "notice_skipped")) == 2


def test_past_the_parking_bound_the_cursor_stops_before_the_next_changeable_skip(
    shop: Services, clock: FixedClock
) -> None:
    now = clock.now()
    for i in range(PARKED_MAX + 1):
        add_request(shop, SKU, f"w{i}@example.com", joined(i, now), now, channel="email", unconfirmed=True)
    numbers = waiting_by_sms(shop, SKU, now, 2, start=PARKED_MAX + 1)
    job = add_restock(shop, SKU, 3, now)

    shop.notifier.handle(job, plenty)

    restock = restock_of(shop, job)
    assert sorted(told()) == numbers
    assert len(restock.walk_parked) == PARKED_MAX
    assert restock.walk_cursor == joined(PARKED_MAX - 1, now), "never past the place it could not park"


def test_a_send_rolled_back_after_the_cursor_passed_it_is_told_by_the_retry(shop: Services, clock: FixedClock) -> None:
    numbers = waiting_by_sms(shop, SKU, clock.now(), 4)
    job = add_restock(shop, SKU, 4, clock.now())
    # A provider that refuses the second send once for a reason of its own (the job fails and is retried).
    flaky = FlakySns(shop.aws.sns, {numbers[1]: 1})
    senders = Senders(
        SmsSender(flaky), EmailSender(shop.aws.sesv2, shop.settings.ses_from), sms_per_second=50, email_per_second=50
    )
    failing = rebuilt(shop, senders=senders)

    with pytest.raises(SendFailed):
        failing.notifier.handle(job, plenty)

    restock = restock_of(shop, job)
    # The cursor went past the place with its offer; the roll-back parked it, so the cursor cannot lose it.
    assert restock.walk_cursor == joined(3, clock.now())
    [parked] = restock.parked()
    assert (parked.joined_ts, parked.reason, parked.position) == (joined(1, clock.now()), ROLLED_BACK, 2)
    request = shop.tables.requests.get(SKU, joined(1, clock.now()))
    assert request is not None and request.state == RequestState.WAITING

    retry = failing.notifier.handle(job, plenty)

    assert retry.notices == 1 and told().count(numbers[1]) == 1
    assert restock_of(shop, job).walk_parked == frozenset()


def test_a_crash_before_settled_places_come_off_the_parked_set_costs_one_more_look(
    shop: Services, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = clock.now()
    add_request(shop, SKU, "first@example.com", joined(0, now), now, channel="email", unconfirmed=True)
    numbers = waiting_by_sms(shop, SKU, now, 3, start=1)
    job = add_restock(shop, SKU, 3, now)
    shop.notifier.handle(job, plenty)
    shop.tables.requests.table.update_item(
        Key={"sku": SKU, "joined_ts": joined(0, now)}, UpdateExpression="REMOVE unconfirmed"
    )
    lapse_one(shop, job, clock)
    real = shop.tables.restocks.mark_walk

    def dies_before_unparking(sku: str, restock_ts: str, mark: WalkMark) -> bool:
        if mark.unpark:
            raise InjectedCrash("before the settled places come off")
        return real(sku, restock_ts, mark)

    monkeypatch.setattr(shop.tables.restocks, "mark_walk", dies_before_unparking)
    with pytest.raises(InjectedCrash):
        shop.notifier.handle(topup(job), plenty)
    monkeypatch.undo()

    # The confirmed place was told (its offer and the cursor committed); it is still parked, so the redelivered
    # job looks at it once more, finds it told, and takes it off, sending nothing again.
    assert sorted(told()) == numbers and len(email_outbox()) == 1
    assert len(restock_of(shop, job).walk_parked) == 1
    lapse_one(shop, job, clock)  # a unit to offer, so the redelivered job walks
    again = shop.notifier.handle(topup(job), plenty)
    assert again.notices == 0
    assert restock_of(shop, job).walk_parked == frozenset()
    assert sorted(f["reason"] for f in facts(shop, "notice_skipped")) == ["already_notified", "unconfirmed"]
