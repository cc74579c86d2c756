"""Random storms on a shop selling through Shopify or WooCommerce (devstack's fakes): joins, restocks through the
platform's own webhook, notices, link taps and repeated taps (each holding the unit on the store too), the store
down for a few calls, payments on the store, clock jumps, sweeps and crashes; each storm is settled and checked
against every invariant and the store's own holds (tests/reliability/storms.py, `PlatformStorm`).

The store reports its level whenever its stock moves by itself (a hold placed or given back, a payment, a walk-in
sale), sooner or later, sometimes late (after a newer report: ignored as stale) or twice (a duplicate); settled,
after the store's last report, the catalogue's level is the shelf level (the store's available plus our holds there).

`make test` plays FAST_SEEDS short storms per platform (12 in all); `make test-slow` SLOW_SEEDS more. Replay a seed with
`storms.play(storms.generate(seed, STORE_LENGTH, weights=STORE_WEIGHTS), bench)` on `storms.emulator(platform)`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability import storms
from tests.reliability.storms import (
    REPORT_WITHIN,
    STORE_CHANGES,
    STORE_LENGTH,
    STORE_WEIGHTS,
    Emulator,
    Report,
    describe,
    generate,
    label,
    play,
    shrink_storm,
)
from tests.reliability.world import PLATFORMS

FAST_SEEDS = 6
SLOW_SEEDS = 150
SLOW_SEEDS_FROM = 2_000_000
SHRINK_BUDGET = 60


@pytest.fixture(scope="module", params=PLATFORMS)
def store_bench(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """One provisioned emulator whose shops sell through the platform, emptied (and the store made anew) per storm."""
    with storms.emulator(str(request.param)) as shared:
        yield shared


def store_storms(bench: Emulator, seeds: range) -> None:
    """Play every seed; then fail with each failing seed, the first one shrunk."""
    failures = []
    for seed in seeds:
        result = play(generate(seed, STORE_LENGTH, weights=STORE_WEIGHTS), bench)
        if result.failed:
            failures.append((seed, result))
    if not failures:
        return
    seed, first = failures[0]
    reports = [describe(seed, first, shrink_storm(first, bench, budget=SHRINK_BUDGET))]
    reports += [describe(s, r) for s, r in failures[1:]]
    labels = sorted({label(v) for _, r in failures for v in r.violations})
    pytest.fail(
        f"{len(failures)} of {len(seeds)} {bench.platform} storms broke {labels}\n\n" + "\n\n".join(reports),
        pytrace=False,
    )


def test_storms_on_a_platform_keep_every_invariant_and_the_stores_holds(store_bench: Emulator) -> None:
    store_storms(store_bench, range(FAST_SEEDS))


@pytest.mark.slow
def test_many_more_storms_on_a_platform_keep_every_invariant(store_bench: Emulator) -> None:
    store_storms(store_bench, range(SLOW_SEEDS_FROM, SLOW_SEEDS_FROM + SLOW_SEEDS))


def test_the_store_reports_most_changes_of_its_stock_sooner_or_later_some_late_or_twice() -> None:
    followed = changes = late = 0
    drawn: set[str] = set()
    for seed in range(200):
        ops = generate(seed, STORE_LENGTH, weights=STORE_WEIGHTS)
        drawn |= {type(op).__name__ for op in ops}
        # A report is due within REPORT_WITHIN operations; a crash's aimed operation, or other reports due first,
        # may put it off by a few more.
        window = 2 * REPORT_WITHIN + 2
        for i, op in enumerate(ops[:-window]):
            if type(op).__name__ not in STORE_CHANGES:
                continue
            changes += 1
            reported = any(isinstance(later, Report) for later in ops[i + 1 : i + 1 + window])
            followed += reported
            if type(op).__name__ == "WalkIn":
                assert reported, f"seed {seed}: a walk-in sale at {i} is not reported"
        late += sum(isinstance(op, Report) and op.late for op in ops)
    assert followed / changes > 0.75, "most changes of the store's stock are reported"
    assert late > 0 and set(STORE_WEIGHTS) | {"Report"} <= drawn, "every kind of operation is drawn"
