"""Each stage names the level its functions log at (POWERTOOLS_LOG_LEVEL, read by chalicelib/logs.py)."""

from __future__ import annotations

import pytest

from infra.stages import load_config, stage_env

LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}


@pytest.mark.parametrize("stage", sorted(load_config()["stages"]))
def test_every_stage_sets_a_log_level(stage: str) -> None:
    assert stage_env(stage).get("POWERTOOLS_LOG_LEVEL") in LEVELS


def test_production_logs_what_the_app_says_it_does() -> None:
    # INFO: one line per notifier job and per catalogue sync or restock, and every warning and error.
    assert stage_env("prod")["POWERTOOLS_LOG_LEVEL"] == "INFO"
