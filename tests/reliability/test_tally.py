"""The summary line adds up every process's counts, as it must when pytest-xdist runs the suite in workers."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.reliability import tally


@pytest.fixture(autouse=True)
def own_tally(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tally of this test's own: the real one is the run's summary line."""
    monkeypatch.setattr(tally, "TALLY", Counter())


def worker_run(counts: dict[str, int]) -> dict[str, Any]:
    """What one worker sends back: it counts in its own process, then hands over as its session ends."""
    tally.TALLY.clear()
    for what, n in counts.items():
        tally.count(what, n)
    workeroutput: dict[str, Any] = {}
    tally.hand_over(workeroutput)
    return workeroutput


def test_the_controller_sums_what_each_worker_handed_over() -> None:
    first = worker_run({"storms run": 3, "storm ops played": 40})
    second = worker_run({"storms run": 4, "redeliveries": 2})
    tally.TALLY.clear()  # the controller runs no test of its own

    for workeroutput in (first, second, {}):  # the last: a worker that crashed before handing over
        tally.take_in(workeroutput)

    assert tally.summary() == "reliability: redeliveries 2, storm ops played 40, storms run 7"


def test_a_run_without_workers_prints_its_own_counts() -> None:
    tally.count("threads started", 8)

    assert tally.summary() == "reliability: threads started 8"


def test_nothing_counted_prints_no_line() -> None:
    assert tally.summary() is None
