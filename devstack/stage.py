"""The local stage's settings, read from .chalice/config.json (infra/stages.py) as Chalice would, with the stack's overrides."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from chalicelib.config import Settings, settings_from_env
from infra.stages import load_config, stage_env

ROOT = Path(__file__).resolve().parent.parent
REGION = "eu-west-2"
ACCOUNT_ID = "123456789012"  # the emulator's account; the local stage's ARNs name it


def local_settings(overrides: Mapping[str, str] | None = None, region: str = REGION) -> Settings:
    """Settings of the local stage as the API process sees them, overrides applied."""
    return settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": region, **(overrides or {})})


def lambda_timeout_s(function: str, stage: str = "local") -> int:
    """The configured timeout of one Lambda function (per-function, per-stage, then app-wide; 60 s if unset)."""
    data = load_config()
    stage_cfg = data["stages"].get(stage, {})
    for scope in (stage_cfg.get("lambda_functions", {}).get(function, {}), stage_cfg):
        if "lambda_timeout" in scope:
            return int(scope["lambda_timeout"])
    for scope in (data.get("lambda_functions", {}).get(function, {}), data):
        if "lambda_timeout" in scope:
            return int(scope["lambda_timeout"])
    return 60
