"""Time as an injected dependency, so the sweep and tests can run 'as if at' another moment."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Something that tells the time in Unix seconds."""

    def now(self) -> float:
        """Current time in Unix seconds."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> float:
        """Current time in Unix seconds."""
        return time.time()


def iso(ts: float) -> str:
    """Unix seconds as ISO-8601 UTC with microseconds, sortable as text."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(value: str) -> float:
    """ISO-8601 text (with zone, or UTC when none) as Unix seconds; ValueError when malformed."""
    text = value.strip()
    if text.endswith("Z") or text.endswith("z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


class Deadline:
    """When a scheduled run stops starting new work, so it ends (and saves where it stopped) before Lambda stops it.

    Built from the Lambda's remaining time less a margin as long as the longest single step the run may be in
    (a store or feed call's timeout), and never later than the run's own budget. `monotonic` is injectable, so a
    test can run out of time at a chosen step.
    """

    def __init__(self, seconds: float, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._at = monotonic() + seconds

    @classmethod
    def for_run(
        cls,
        budget_s: float,
        *,
        remaining_ms: Callable[[], int] | None = None,
        margin_s: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> Deadline:
        """The earlier of `budget_s` from now and the Lambda's remaining time less `margin_s`."""
        seconds = budget_s
        if remaining_ms is not None:
            seconds = min(seconds, remaining_ms() / 1000.0 - margin_s)
        return cls(max(0.0, seconds), monotonic=monotonic)

    def left_s(self) -> float:
        """Seconds until new work must stop (negative once past)."""
        return self._at - self._monotonic()

    def passed(self) -> bool:
        """Whether new work must not start."""
        return self.left_s() <= 0


def remaining_ms_of(context: object) -> Callable[[], int] | None:
    """The Lambda context's `get_remaining_time_in_millis`, or None where there is no Lambda context (local runs)."""
    method = getattr(context, "get_remaining_time_in_millis", None)
    return method if callable(method) else None
