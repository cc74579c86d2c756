"""Named points where a test can inject a crash, to prove that nothing is lost between two steps."""

from __future__ import annotations

from collections.abc import Callable

FaultHook = Callable[[str], None]


def no_faults(point: str) -> None:
    """The production hook: every step goes on."""
