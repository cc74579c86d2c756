"""A clock for tests and benchmarks: it moves only when told to (the app's clocks are in chalicelib/clock.py)."""

from __future__ import annotations


class FixedClock:
    """A clock that only moves when told to (tests)."""

    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> float:
        """The set time."""
        return self.at

    def advance(self, seconds: float) -> None:
        """Move this clock forward."""
        self.at += seconds
