"""Test helpers shared by the suites: crash injection, a local-stage environment, sample data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REGION = "eu-west-2"


def stage_env(stage: str = "local") -> dict[str, str]:
    """The environment variables .chalice/config.json sets for a stage."""
    config = json.loads((ROOT / ".chalice" / "config.json").read_text())
    env = dict(config.get("environment_variables", {}))
    env.update(config["stages"][stage].get("environment_variables", {}))
    return env


class InjectedCrash(RuntimeError):
    """Stands for a Lambda dying at a named point."""


class CrashAt:
    """A fault hook that crashes the first `times` times a named point is reached."""

    def __init__(self, point: str, times: int = 1) -> None:
        self.point = point
        self.remaining = times
        self.seen: list[str] = []

    def __call__(self, point: str) -> None:
        self.seen.append(point)
        if point == self.point and self.remaining > 0:
            self.remaining -= 1
            raise InjectedCrash(point)


CHAIR: dict[str, Any] = {
    "name": "Walnut dining chair",
    "threshold": 1,
    "hold_window_s": 900,
    "offer_window_s": 3600,
    "voice": "warm and plain",
    "checkout_url": "https://shop.example/checkout?sku={sku}&reservation={reservation_id}",
}
