"""Invariant 7: a crash between any two steps loses no restock, no unit and no place.

Two kinds of crash, each followed by what follows it in production (the platform's retry of a webhook,
SQS's redelivery of a job, the shopper's second tap, the next minute's sweep), then invariants 1–7
are checked against every table:

- at every named fault point of the code (read from chalicelib, so a new point is covered at once); the store's
  own points (chalicelib/store_holds.py), and the crash right before a store call (`reserve.after_hold`), on a
  world that sells through Shopify or WooCommerce (devstack's fakes), whose holds are checked on the store too;
- a power cut before each AWS call of each step of detection, the notifier, reserve and the sweep:
  the process dies there and every later call of that step fails, as for a Lambda that was killed.
  The fast suite cuts at a sample of the call boundaries; `make test-slow` cuts at every one. On a platform
  world, the store call is not an AWS call: the cut right after it (before its hold is recorded) is tried too.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import boto3
import pytest
from moto import mock_aws

from chalicelib.dispatch import AFTER_UNDELIVERABLE
from chalicelib.messages.senders import EmailSender, Senders, SmsSender
from chalicelib.queue.messages import parse
from chalicelib.tables.reservations import OfferState
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from devstack.provision import provision
from infra.stages import stage_env
from tests.notices import BAD_NUMBER, FlakySns
from tests.reliability.invariants import Tables, assert_invariants
from tests.reliability.journey import STEPS, Step, play
from tests.reliability.points import fault_points
from tests.reliability.tally import count
from tests.reliability.world import CRASHES, PLATFORMS, World, outbox_recipients
from tests.support import REGION, ROOT

# Reached only when the provider refuses a recipient, which the journey never meets: crashed on its own below.
REFUSAL_POINTS = [AFTER_UNDELIVERABLE]
# Reached only when a draft order's create answer was lost while Shopify's search lagged, which the journey never
# meets: crashed in its own story (tests/reliability/test_store_crashes.py).
LOST_ANSWER_POINTS = ["store.after_duplicates"]
POINTS = sorted(set(fault_points()) - set(REFUSAL_POINTS) - set(LOST_ANSWER_POINTS))
# Reached only where the store holds units itself (Shopify, WooCommerce): played on a platform world.
STORE_POINTS = sorted(
    p for p, module in fault_points().items() if module == "chalicelib.store_holds" and p not in LOST_ANSWER_POINTS
)
# Tried on a platform world too: a crash after our hold committed and before the store call.
BEFORE_STORE_CALL = "reserve.after_hold"
CUT_AREAS = ("detect", "notifier", "reserve", "sweep")
CUT_STEPS = [i for i, step in enumerate(STEPS) if step.area in CUT_AREAS]
FAST_STRIDE = 5  # the fast suite cuts before every 5th call (and the first and last) of a step


@contextmanager
def fresh_world(platform: str | None = None) -> Iterator[World]:
    """A World on its own emulator (for tests that play the journey many times), on a platform if named."""
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        provision(session)
        env = {**stage_env("local"), "AWS_DEFAULT_REGION": REGION}
        yield World.build(session, env, FixedClock(int(time.time())), platform=platform)


@cache
def calls_per_step() -> tuple[int, ...]:
    """How many AWS calls each step makes when nothing goes wrong (one clean play)."""
    counts: list[int] = []
    with fresh_world() as w:

        def start_counting(index: int, _step: Step) -> None:
            if index:
                counts.append(w.faults.calls)
            w.faults.cut_before_call(10**9)  # counts calls from here on, never cuts

        play(w, before_step=start_counting, settle=False)
        counts.append(w.faults.calls)
    return tuple(counts)


def outcome_holds(w: World) -> None:
    """Whatever crashed, the story still ends as it should: every unit and place accounted for."""
    tables = Tables.read(w.services)
    conversions = [f for f in tables.facts("conversion")]
    assert len(conversions) <= 1, "one order converts one hold, once"
    [restock] = w.restocks()
    assert int(restock["units_total"]) == 4, "the restock and its rise were each applied once"
    # The latecomer and everyone still waiting were told (or skipped with a reason) by the end.
    # On a platform, the store's holds and sales agree with our rows too.
    assert_invariants(w.services, settled=True, store=w.store)
    if w.store is not None:
        assert w.store.counts(w.sku)["reserved"] == 0, "every hold ended or sold: the store reserves nothing"
        sold = [r for r in w.offers(OfferState.CONVERTED)]
        assert len(sold) == len(conversions)


@pytest.fixture(params=PLATFORMS)
def store_world(request: pytest.FixtureRequest, session: boto3.session.Session, env: dict[str, str]) -> World:
    """One shop selling through Shopify or WooCommerce (devstack's fakes), with a fault plan and a test clock."""
    return World.build(session, env, FixedClock(int(time.time())), platform=str(request.param))


# --- named fault points


def test_every_refusal_point_is_a_named_fault_point() -> None:
    assert set(REFUSAL_POINTS) <= set(fault_points())


def test_every_point_the_journey_leaves_out_is_a_named_fault_point_crashed_elsewhere() -> None:
    assert set(LOST_ANSWER_POINTS) <= set(fault_points())
    crashed_in_its_story = (ROOT / "tests/reliability/test_store_crashes.py").read_text()
    assert all(f'crash_at("{point}")' in crashed_in_its_story for point in LOST_ANSWER_POINTS)


def test_the_journey_reaches_every_named_fault_point(world: World) -> None:
    play(world)
    assert set(POINTS) - set(STORE_POINTS) <= set(world.faults.points_seen), "a fault point no journey step reaches"
    assert not world.faults.crashes
    outcome_holds(world)


def test_the_journey_on_a_platform_reaches_every_named_fault_point(store_world: World) -> None:
    play(store_world)
    assert STORE_POINTS, "the store's calls have named fault points"
    assert set(POINTS) <= set(store_world.faults.points_seen), "a fault point the platform journey never reaches"
    assert not store_world.faults.crashes
    outcome_holds(store_world)


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_a_named_fault_point_is_finished_by_the_retry_or_the_sweep(
    session: boto3.session.Session, env: dict[str, str], point: str
) -> None:
    # The store's own points are reached where the store holds units: Shopify here, WooCommerce below.
    w = World.build(session, env, FixedClock(int(time.time())), platform="shopify" if point in STORE_POINTS else None)
    w.faults.crash_at(point)
    play(w)
    assert w.faults.crashes == [point]
    outcome_holds(w)
    count("named fault points crashed")


@pytest.mark.parametrize(
    ("platform", "point"),
    [("woocommerce", p) for p in STORE_POINTS] + [(p, BEFORE_STORE_CALL) for p in PLATFORMS],
)
def test_a_crash_around_a_store_call_is_finished_by_the_retry_or_the_sweep(
    session: boto3.session.Session, env: dict[str, str], platform: str, point: str
) -> None:
    w = World.build(session, env, FixedClock(int(time.time())), platform=platform)
    w.faults.crash_at(point)
    play(w)
    assert w.faults.crashes == [point]
    outcome_holds(w)
    count("named fault points crashed")


# --- a power cut before any AWS call of a step


def cut_points(index: int, *, every: bool) -> list[int]:
    """The calls of a step to cut before: all of them, or a sample (first, every FAST_STRIDE-th, last)."""
    calls = calls_per_step()[index]
    if every or calls <= FAST_STRIDE + 1:
        return list(range(1, calls + 1))
    return sorted({1, calls, *range(FAST_STRIDE, calls, FAST_STRIDE)})


def cut_and_check(index: int, k: int) -> None:
    with fresh_world() as w:

        def arm(i: int, _step: Step) -> None:
            if i == index:
                w.faults.cut_before_call(k)

        play(w, before_step=arm)
        assert w.faults.crashes, f"step {STEPS[index].name!r} made fewer than {k} calls"
        outcome_holds(w)
    count("power cuts before an AWS call")


@pytest.mark.parametrize("index", CUT_STEPS, ids=[STEPS[i].name for i in CUT_STEPS])
def test_a_power_cut_before_sampled_aws_calls_of_a_step_loses_nothing(index: int) -> None:
    for k in cut_points(index, every=False):
        cut_and_check(index, k)


@pytest.mark.slow
@pytest.mark.parametrize("index", CUT_STEPS, ids=[STEPS[i].name for i in CUT_STEPS])
def test_a_power_cut_before_every_aws_call_of_a_step_loses_nothing(index: int) -> None:
    sampled = set(cut_points(index, every=False))
    for k in cut_points(index, every=True):
        if k not in sampled:
            cut_and_check(index, k)


# --- a power cut right after a store call (the store is not AWS: the next AWS call is the first to fail)

STORE_STEPS = [i for i, step in enumerate(STEPS) if step.area == "reserve"]


def cut_after_the_store_call(platform: str, index: int) -> None:
    """Play on a platform; in step `index`, the power goes as soon as the store has been called: the store did
    its part, and nothing after it (recording the hold) reaches AWS. The shopper taps again, or the sweep finishes."""
    with fresh_world(platform) as w:
        answer = w.store.handle
        armed: list[bool] = []

        def then_cut(*args: Any, **kwargs: Any) -> Any:
            response = answer(*args, **kwargs)
            if armed and not w.faults.armed:
                armed.clear()
                w.faults.cut_before_call(1)
            return response

        def arm(i: int, _step: Step) -> None:
            armed[:] = [True] if i == index else []

        w.store.handle = then_cut
        play(w, before_step=arm)
        assert any(c.startswith("call ") for c in w.faults.crashes), (
            f"step {STEPS[index].name!r} never called the store"
        )
        outcome_holds(w)
    count("power cuts after a store call")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_power_cut_right_after_the_store_call_loses_nothing(platform: str) -> None:
    cut_after_the_store_call(platform, STORE_STEPS[0])


@pytest.mark.slow
@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("index", STORE_STEPS[1:], ids=[STEPS[i].name for i in STORE_STEPS[1:]])
def test_a_power_cut_right_after_every_store_call_loses_nothing(platform: str, index: int) -> None:
    cut_after_the_store_call(platform, index)


# --- a crash right after a refused recipient's offer was undone


REFUSED = "+447400100201"
BEHIND = ("+447400100202", "+447400100203", "+447400100204")


def refusing(w: World, number: str) -> tuple[World, FlakySns]:
    """The same world, its SMS going through an SNS that refuses `number` as invalid, every time."""
    flaky = FlakySns(w.services.aws.sns, {number: 99}, BAD_NUMBER)
    senders = Senders(
        SmsSender(flaky),
        EmailSender(w.services.aws.sesv2, w.services.settings.ses_from),
        sms_per_second=1000,
        email_per_second=1000,
        sleep=lambda _s: None,
    )
    services = Services(
        w.services.settings, aws=w.services.aws, clock=w.clock, faults=w.faults, model=FakeBedrock(), senders=senders
    )
    return dataclasses.replace(w, services=services), flaky


def deliver_last_time(w: World) -> list[str]:
    """Deliver every job on the queue once, as its last receive: a job that crashes is not delivered again (SQS
    moves it to the DLQ), so only what the crashed process recorded can finish its work. The crashes seen."""
    crashed = []
    while True:
        messages = w.sqs.receive_message(QueueUrl=w.queue_url, MaxNumberOfMessages=1, VisibilityTimeout=0)
        if not messages.get("Messages"):
            return crashed
        message = messages["Messages"][0]
        try:
            w.services.notifier.handle(parse(message["Body"]), lambda: 60_000)
        except CRASHES as crash:
            w.faults.restore()
            crashed.append(str(crash))
        w.sqs.delete_message(QueueUrl=w.queue_url, ReceiptHandle=message["ReceiptHandle"])


def test_a_crash_after_an_undeliverable_roll_back_leaves_the_top_up_owed_and_the_sweep_sends_it(
    session: boto3.session.Session, env: dict[str, str]
) -> None:
    w, flaky = refusing(World.build(session, env, FixedClock(int(time.time()))), REFUSED)
    w.product()
    for number in (REFUSED, *BEHIND):
        w.tap(number)
        w.clock.advance(1)
    w.faults.crash_at(AFTER_UNDELIVERABLE)
    w.inventory(3)

    assert deliver_last_time(w), "the restock job died right after the refused offer was undone"
    assert w.faults.crashes == [AFTER_UNDELIVERABLE]
    assert flaky.refused == [REFUSED]
    [restock] = w.restocks()
    assert restock.get("pending_kind"), "the top-up is owed on the restock, written with the roll-back"
    assert BEHIND[2] not in outbox_recipients(), "nothing has offered the unit that came back yet"

    w.clock.advance(61)  # the next minute's sweep finds the job owed for over a minute
    assert w.sweep()["pending_requeued"] == 1
    w.pump()

    # The unit went to the next person long before any offer window ended; the refused number is never asked again.
    assert sorted(set(outbox_recipients())) == sorted(BEHIND)
    assert flaky.refused == [REFUSED]
    [restock] = w.restocks()
    assert "pending_key" not in restock and int(restock["units_offerable"]) == 0
    assert_invariants(w.services)
    w.settle()
    assert_invariants(w.services, settled=True)
    count("named fault points crashed")
