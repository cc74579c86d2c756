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
