"""Random storms on a shop selling through Shopify or WooCommerce (devstack's fakes): joins, restocks through the
platform's own webhook, notices, link taps and repeated taps (each holding the unit on the store too), the store
down for a few calls, payments on the store, clock jumps, sweeps and crashes; each storm is settled and checked
against every invariant and the store's own holds (tests/reliability/storms.py, `PlatformStorm`).

`make test` plays FAST_SEEDS short storms per platform (12 in all); `make test-slow` SLOW_SEEDS more. Replay a seed with
`storms.play(storms.generate(seed, STORE_LENGTH, weights=STORE_WEIGHTS), bench)` on `storms.emulator(platform)`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability import storms
from tests.reliability.storms import (
    STORE_LENGTH,
    STORE_WEIGHTS,
    Emulator,
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
