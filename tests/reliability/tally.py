"""Counts of what the reliability suite tried (crash cases, generated examples, threads), for its summary line."""

from __future__ import annotations

from collections import Counter

TALLY: Counter[str] = Counter()


def count(what: str, n: int = 1) -> None:
    """Add to one of the suite's counts."""
    TALLY[what] += n
