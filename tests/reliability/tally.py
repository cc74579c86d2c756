"""Counts of what the reliability suite tried (crash cases, generated examples, threads), for its summary line.

Each process counts what it ran. Under pytest-xdist the tests run in worker processes, so each worker hands
its counts to the controller as it finishes, and the controller adds them up for the line (tests/conftest.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, MutableMapping
from typing import Any

TALLY: Counter[str] = Counter()

# The key a worker's counts travel under in xdist's `workeroutput`.
WORKER_KEY = "reliability_tally"


def count(what: str, n: int = 1) -> None:
    """Add to one of the suite's counts."""
    TALLY[what] += n


def hand_over(workeroutput: MutableMapping[str, Any]) -> None:
    """On a worker: put this process's counts where xdist sends them back to the controller."""
    workeroutput[WORKER_KEY] = dict(TALLY)


def take_in(workeroutput: Mapping[str, Any]) -> None:
    """On the controller: add one finished worker's counts (none from a worker that crashed before handing over)."""
    TALLY.update(workeroutput.get(WORKER_KEY, {}))


def summary() -> str | None:
    """The summary line, or None when nothing was counted (no reliability test ran)."""
    if not TALLY:
        return None
    return "reliability: " + ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items()))
