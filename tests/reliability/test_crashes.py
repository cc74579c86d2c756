"""Invariant 7: a crash between any two steps loses no restock, no unit and no place.

Two kinds of crash, each followed by what follows it in production (the platform's retry of a webhook,
SQS's redelivery of a job, the shopper's second tap, the next minute's sweep), then invariants 1–7
are checked against every table:

- at every named fault point of the code (read from chalicelib, so a new point is covered at once);
- a power cut before each AWS call of each step of detection, the notifier, reserve and the sweep:
  the process dies there and every later call of that step fails, as for a Lambda that was killed.
  The fast suite cuts at a sample of the call boundaries; `make test-slow` cuts at every one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import boto3
import pytest
from moto import mock_aws

from devstack.clocks import FixedClock
from devstack.provision import provision
from infra.stages import stage_env
from tests.reliability.invariants import Tables, assert_invariants
from tests.reliability.journey import STEPS, Step, play
from tests.reliability.points import fault_points
from tests.reliability.tally import count
from tests.reliability.world import World
from tests.support import REGION

POINTS = sorted(fault_points())
CUT_AREAS = ("detect", "notifier", "reserve", "sweep")
CUT_STEPS = [i for i, step in enumerate(STEPS) if step.area in CUT_AREAS]
FAST_STRIDE = 5  # the fast suite cuts before every 5th call (and the first and last) of a step


@contextmanager
def fresh_world() -> Iterator[World]:
    """A World on its own emulator (for tests that play the journey many times)."""
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        provision(session)
        yield World.build(session, {**stage_env("local"), "AWS_DEFAULT_REGION": REGION}, FixedClock(int(time.time())))


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
    assert_invariants(w.services, settled=True)


# --- named fault points


def test_the_journey_reaches_every_named_fault_point(world: World) -> None:
    play(world)
    assert set(POINTS) <= set(world.faults.points_seen), "a fault point no journey step reaches"
    assert not world.faults.crashes
    outcome_holds(world)


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_a_named_fault_point_is_finished_by_the_retry_or_the_sweep(world: World, point: str) -> None:
    world.faults.crash_at(point)
    play(world)
    assert world.faults.crashes == [point]
    outcome_holds(world)
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
