"""Random storms: hundreds of seeded sequences of taps, restocks, falls, link taps, orders, leaves, opt-outs,
sweeps, redeliveries, crashes and settings changes, each settled and checked against every invariant.

`make test` plays the blocks of FAST, each a mix of operations (storms.MODES) and a range of seeds; `make test-slow`
plays those of MORE_MIXED, and SLOW_BLOCKS blocks of SLOW_BLOCK other seeds in one process per core.
A block plays all its seeds before it fails, shrinks the first storm that broke each invariant, and reports
every failing seed; replay one with `.venv/bin/python -m tests.reliability.storms --seed N [--mode M] --shrink`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import pytest

from chalicelib.tables.catalog import is_shard
from chalicelib.tables.reservations import OfferState
from tests.reliability import storms
from tests.reliability.invariants import Tables
from tests.reliability.storms import (
    MODES,
    OPS,
    PEOPLE,
    WEIGHTS,
    Advance,
    Close,
    CrashAt,
    CutPower,
    Emulator,
    Fall,
    Leave,
    LinkTap,
    Meanwhile,
    Op,
    Order,
    Pump,
    Restock,
    Result,
    Rise,
    Settings,
    Sweep,
    Tap,
    Throttle,
    describe,
    generate,
    label,
    play,
    shrink,
    shrink_storm,
)
from tests.reliability.world import outbox_texts, scan
from tests.support import ROOT

# 50 storms: a block of the general mix, and a short block of each mix that makes one kind of trouble common
# (a guard taken out of the code is caught by these within their first dozen seeds: docs/RELIABILITY.md).
FAST: list[tuple[str, range]] = [
    ("mixed", range(0, 25)),
    ("closes", range(0, 11)),
    ("races", range(0, 14)),
]
# Two more blocks of the general mix, the same seeds as ever, played by `make test-slow` (CI runs both): no guard
# removal is caught by these first, and they were a sixth of `make test`'s time.
MORE_MIXED: list[tuple[str, range]] = [("mixed", range(25, 50)), ("mixed", range(50, 75))]
BLOCKS = [
    *(pytest.param(mode, seeds, id=f"{mode}-{seeds.start}") for mode, seeds in FAST),
    *(pytest.param(mode, seeds, id=f"{mode}-{seeds.start}", marks=pytest.mark.slow) for mode, seeds in MORE_MIXED),
]
SLOW_BLOCK = 50  # seeds shared out among the processes at once
# 1,000 more: blocks of SLOW_BLOCK seeds, 16 of the general mix and 2 of each other.
SLOW_MODES = ["mixed"] * 16 + ["closes"] * 2 + ["races"] * 2
SLOW_BLOCKS = len(SLOW_MODES)
SLOW_SEEDS_FROM = 1_000_000
# Trials the shrinker may spend on one failing storm; each is one whole storm (about half a second).
SHRINK_BUDGET = int(os.environ.get("STORMS_SHRINK_BUDGET", "120"))


PlaySeeds = Callable[[Sequence[int], str], list[tuple[int, Result]]]


@pytest.fixture(scope="module")
def bench() -> Iterator[Emulator]:
    """One provisioned emulator for the module's storms, emptied before each."""
    with storms.emulator() as shared:
        yield shared


@pytest.fixture(scope="module")
def in_processes() -> Iterator[PlaySeeds]:
    """Seeds played in one process per core, each with its own emulator (the many storms of `make test-slow`).

    Under xdist the cores are already shared out among its workers, so each worker's pool takes its share."""
    sharing = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    workers = int(os.environ.get("STORMS_WORKERS", "0")) or max(1, (os.cpu_count() or 1) // sharing)
    with storms.storm_pool(workers) as play_seeds:
        yield play_seeds


def here(bench: Emulator) -> PlaySeeds:
    """Seeds played one after another on `bench`."""
    return lambda seeds, mode: [(seed, play(generate(seed, mode=mode), bench)) for seed in seeds]


def storm_block(bench: Emulator, seeds: range, play_seeds: PlaySeeds | None = None, mode: str = "mixed") -> None:
    """Play every seed; then fail with each failing seed, and the smallest storm per invariant broken."""
    played = (play_seeds or here(bench))(seeds, mode)
    failures = [(seed, result) for seed, result in played if result.failed]
    if not failures:
        return
    reports, shrunk = [], set()
    for seed, result in failures:
        first = label(result.violations[0])
        if first in shrunk:
            reports.append(describe(seed, result))
            continue
        shrunk.add(first)
        reports.append(describe(seed, result, shrink_storm(result, bench, budget=SHRINK_BUDGET)))
    pytest.fail(
        f"{len(failures)} of {len(seeds)} {mode} storms broke an invariant\n\n" + "\n\n".join(reports), pytrace=False
    )


@pytest.mark.parametrize(("mode", "seeds"), BLOCKS)
def test_storms_keep_every_invariant(bench: Emulator, mode: str, seeds: range) -> None:
    storm_block(bench, seeds, mode=mode)


@pytest.mark.slow
@pytest.mark.parametrize("block", range(SLOW_BLOCKS))
def test_many_more_storms_keep_every_invariant(bench: Emulator, in_processes: PlaySeeds, block: int) -> None:
    start = SLOW_SEEDS_FROM + block * SLOW_BLOCK
    storm_block(bench, range(start, start + SLOW_BLOCK), in_processes, SLOW_MODES[block])


# --- storms that once broke an invariant, shrunk, kept as they were found

ONCE_BROKEN: dict[str, list[Op]] = {
    "left with a live offer, joined again, told again for the same restock": [
        Tap(0), Restock(2), Pump(), Leave(0), Tap(0)
    ],
    "bought, joined again, told again for the same restock": [
        Restock(6), Tap(1), Tap(3), Tap(4), Pump(), LinkTap(20), Order(3, report=True), Tap(4)
    ],
    "spent a source's taps, joined again, told again": [Rise(3), Tap(0), Pump(), Leave(0), Throttle(0)],
    "joined while units waited for nobody, never told": [Restock(2), Pump(), Tap(2)],
    "still holding an offer of a closed restock when the next opened, never told of it": [
        Tap(2), Rise(3), Pump(), Close(0), Rise(2)
    ],
    "just gone after a fall, then a new restock": [
        Tap(2), Restock(3), Tap(3), Fall(1), Pump(), Fall(2), LinkTap(6), Rise(1)
    ],
    "told for two restocks in turn": [Tap(0), Tap(1), Restock(6), Pump(), Close(0), Restock(6)],
    "threshold raised between restocks": [
        Tap(1), Restock(2), Tap(2), Pump(), Settings(threshold=3), Restock(1), LinkTap(30, live=False),
        Restock(3), LinkTap(97),
    ],
}  # fmt: skip


@pytest.mark.parametrize("story", list(ONCE_BROKEN))
def test_a_storm_that_once_broke_an_invariant_keeps_it_now(bench: Emulator, story: str) -> None:
    result = play(ONCE_BROKEN[story], bench)
    assert not result.violations, "\n".join(result.trace + result.violations)


# --- the generator


def test_a_seed_always_makes_the_same_storm() -> None:
    assert generate(7) == generate(7)
    assert generate(7) != generate(8)
    assert len(generate(7)) == 40 and len(generate(7, length=12)) == 12


def test_the_mix_follows_the_weights() -> None:
    drawn = Counter(type(op).__name__ for seed in range(300) for op in generate(seed))
    total = sum(drawn.values())
    assert set(drawn) == set(OPS), "every kind of operation is drawn"
    for name, weight in WEIGHTS.items():
        # 12,000 draws: each share is within a few points of its weight.
        assert abs(100 * drawn[name] / total - weight) < 2.5, (name, drawn[name] / total)


@pytest.mark.parametrize("mode", sorted(set(MODES) - {"mixed"}))
def test_each_mode_draws_only_its_own_mix(mode: str) -> None:
    drawn = Counter(type(op).__name__ for seed in range(100) for op in generate(seed, mode=mode))
    assert set(drawn) == set(MODES[mode])
    assert generate(7, mode=mode) != generate(7)


def test_ops_read_back_as_python() -> None:
    ops = generate(3)
    # The failure report prints one op a line; pasted back, it is the same storm.
    assert eval(storms.replayable(ops), vars(storms)) == ops


# --- the shared emulator


def test_a_reset_emulator_is_as_empty_as_a_fresh_one(bench: Emulator) -> None:
    ops = [Tap(0), Tap(8), Restock(2), Pump(), LinkTap(0), Order(0, report=True), Throttle(1), Sweep(4000)]
    first = play(ops, bench)
    assert any(outbox_texts()), "the storm sent notices"
    world = bench.world()
    for short in ("requests", "restocks", "reservations", "optout", "throttle", "audit"):
        assert list(scan(world.table(short))) == [], short
    # The new world's product is all there is, with no level, no open restock and nobody waiting.
    catalog = list(scan(world.table("catalog")))
    [product] = [item for item in catalog if not is_shard(item)]
    assert product["sku"] == storms.SKU and "level" not in product and "open_restock_id" not in product
    assert sum(int(item["waiting_count"]) for item in catalog if is_shard(item)) == 0
    assert world.jobs_waiting() == 0
    assert outbox_texts() == []
    assert not world.faults.points_seen and not world.faults.armed
    # And the same storm plays the same way again on it, and on a newly provisioned emulator in a process of its
    # own (in this one, moto would share its backends with the module's emulator).
    again = play(ops, bench)
    alone = played_elsewhere(ops)
    assert first.trace == again.trace == alone["trace"]
    assert first.violations == again.violations == alone["violations"]


PLAY_ELSEWHERE = """
import json, logging, sys
logging.disable(logging.CRITICAL)
from tests.reliability import storms
with storms.emulator() as bench:
    result = storms.play(eval(sys.argv[1], vars(storms)), bench)
print(json.dumps({"trace": result.trace, "violations": result.violations}))
"""


def played_elsewhere(ops: list[Op]) -> dict[str, list[str]]:
    """A storm played by another Python process on an emulator provisioned for it alone."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    out = subprocess.run(
        [sys.executable, "-c", PLAY_ELSEWHERE, repr(ops)], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_crash_armed_for_an_op_that_never_reaches_it_is_disarmed(bench: Emulator) -> None:
    # The sweep point is not reached by advancing the clock; the crash must not wait for the next sweep.
    ops = [CrashAt("sweep.after_lapse"), Advance(30), Tap(0), Restock(1), Pump(), Sweep(4000), Pump()]
    result = play(ops, bench)
    assert result.crashes == 0, result.trace
    assert not result.violations
    # A power cut armed for a step that makes fewer calls is forgotten too.
    result = play([CutPower(15), Tap(0), Tap(1), Restock(2), Pump()], bench)
    assert result.crashes == 0, result.trace
    assert result.trace[2].endswith(": queued")  # the tap went through whole


def test_a_crash_that_is_reached_is_followed_by_the_retry(bench: Emulator) -> None:
    result = play([Tap(0), CrashAt("detect.after_restock_written"), Restock(1), Pump()], bench)
    assert result.crashes == 1
    assert "restock" in result.trace[2]
    assert not result.violations, result.violations


def test_a_second_walk_of_the_same_job_meanwhile_tells_nobody_twice(bench: Emulator) -> None:
    # SQS hands the job to a second invocation while the first has read its page and not yet made its offers: the
    # first finds its people told and the units gone, and offers nobody else (units_offerable >= count): the step
    # checker names an offer past the units read before the pump. Settled, the other two are told in turn.
    ops = [Tap(0), Tap(1), Tap(2), Tap(3), Restock(2), Meanwhile("before BatchGetItem", "pump"), Pump()]
    result = play(ops, bench)
    assert "meanwhile at before BatchGetItem, Pump(): 1 job(s)" in result.trace[6], result.trace
    assert not result.violations, result.violations
    assert bench.current is not None
    places = [str(row["request_joined_ts"]) for row in Tables.read(bench.current.services).rows]
    assert len(places) == len(set(places)) == 4


def test_an_opt_out_between_an_offer_and_its_message_stops_the_message(bench: Emulator) -> None:
    ops = [Tap(0), Tap(1), Restock(2), Meanwhile("notifier.after_offer_committed", "optout", 0), Pump()]
    result = play(ops, bench)
    assert "meanwhile at notifier.after_offer_committed, OptOut(who=0): newly=True" in result.trace[4], result.trace
    assert not result.violations, result.violations
    people = {row["contact_key"] for row in Tables.read(bench.current.services).rows if row["token_id"] in sent(bench)}
    assert people == {bench.current.key_of(PEOPLE[1])}


def test_an_opt_out_cut_short_after_its_suppression_row_still_stops_the_message(bench: Emulator) -> None:
    # The place is still offered with its own token: only the last look at the suppression list holds the message.
    ops = [Tap(0), Tap(1), Restock(2), Meanwhile("notifier.after_offer_committed", "optout, cut short", 0), Pump()]
    result = play(ops, bench)
    assert "newly=True, then died; OptOut(who=0) pressed again" in result.trace[4], result.trace
    assert not result.violations, result.violations
    people = {row["contact_key"] for row in Tables.read(bench.current.services).rows if row["token_id"] in sent(bench)}
    assert people == {bench.current.key_of(PEOPLE[1])}


def sent(bench: Emulator) -> set[str]:
    assert bench.current is not None
    return set(bench.current.sent_tokens())


def test_a_rate_limited_tap_writes_nothing(bench: Emulator) -> None:
    result = play([Tap(0), Throttle(0), Throttle(0)], bench)
    assert result.trace[1].endswith("rate limited, nothing written")
    assert result.trace[2].endswith("rate limited, nothing written")
    assert not result.violations, result.violations


def test_the_store_loses_a_unit_when_an_order_arrives(bench: Emulator) -> None:
    ops = [Tap(0), Tap(1), Restock(2), Pump(), LinkTap(0), Order(0, report=True)]
    result = play(ops, bench)
    assert "converted, shelf 1" in result.trace[5], result.trace
    tables = Tables.read(bench.current.services)  # the world the storm played on
    assert [r["state"] for r in tables.rows if r["state"] == "converted"] == ["converted"]
    assert not result.violations, result.violations


def test_every_person_taps_with_their_own_contact() -> None:
    assert len(set(PEOPLE)) == len(PEOPLE) == 12
    assert storms.spelled(0, True) == "07400 100001"
    assert storms.spelled(8, True) == "ADA@EXAMPLE.COM"


# --- shrinking


def test_the_shrinker_keeps_only_what_the_failure_needs() -> None:
    ops = generate(11, length=40)
    needed = [ops[5], ops[30]]

    def fails(candidate: list) -> bool:
        return ops[5] in candidate and ops[30] in candidate

    smallest, trials = shrink(ops, fails)
    assert [op for op in smallest if op in needed] == needed
    assert len(smallest) == 2, smallest
    assert trials < 150


def test_a_failing_storm_shrinks_to_the_ops_that_break_the_invariant(bench: Emulator) -> None:
    # Damage done by a stand-in for a bug: an extra unit taken from the open restock whenever a link is held.
    original = storms.Storm._linktap

    def leaky(self: storms.Storm, op: LinkTap) -> str:
        said = original(self, op)
        if self._rows(OfferState.HELD):
            restocks = self.w.restocks()
            self.w.table("restocks").update_item(
                Key={"sku": storms.SKU, "restock_ts": restocks[-1]["restock_ts"]},
                UpdateExpression="ADD units_available :m",
                ExpressionAttributeValues={":m": -1},
            )
        return said

    storms.Storm._linktap = leaky  # type: ignore[method-assign]
    try:
        ops = [Tap(0), Tap(1), Advance(30), Restock(3), Sweep(10), Pump(), Tap(2), LinkTap(0), Pump()]
        # Not tallied: the summary line counts the storms the product met, not this planted damage.
        result = play(ops, bench, tally=False)
        # Named at the step that did it (the link tap moved units_available by two), and again once settled.
        assert result.failed and label(result.violations[0]) == "4 counters", result.violations
        assert any(label(v) == "4 oversell" for v in result.violations), result.violations
        smallest = shrink_storm(result, bench)
    finally:
        storms.Storm._linktap = original  # type: ignore[method-assign]
    kinds = [type(op).__name__ for op in smallest.ops]
    assert kinds == ["Tap", "Restock", "Pump", "LinkTap"], smallest.ops
    report = describe(1, result, smallest)
    assert "LinkTap(pick=0, live=True)," in report and "4 counters: op 3 LinkTap(pick=0, live=True)" in report
