"""Fixtures of the reliability suite: a World on a fresh emulator (the root conftest provisions it)."""

from __future__ import annotations

import boto3
import pytest

from devstack.clocks import FixedClock
from tests.reliability.world import World


@pytest.fixture
def world(session: boto3.session.Session, env: dict[str, str], clock: FixedClock) -> World:
    """One shop on a fresh emulator, with a fault plan and a test clock."""
    return World.build(session, env, clock)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line of what the reliability suite tried in this run (the figures docs/RELIABILITY.md quotes)."""
    from tests.reliability.tally import TALLY

    if TALLY:
        terminalreporter.write_line("reliability: " + ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items())))
