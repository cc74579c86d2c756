"""Time as an injected dependency, so the sweep and tests can run 'as if at' another moment."""

from __future__ import annotations

import time
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
