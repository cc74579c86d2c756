"""The one reader of `.chalice/config.json`: its stages and the environment each gives its functions.

Every tool reads stage settings through here: the tests, the local stack, the bench, the `bisn` support command
and the deployment tooling. chalicelib never reads the file (it does not ship); a deployed function gets these
values as its environment, as Chalice sets them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / ".chalice" / "config.json"


class UnknownStage(ValueError):
    """The config has no stage of that name."""


def load_config(path: Path = CONFIG) -> dict[str, Any]:
    """The parsed .chalice/config.json."""
    return dict(json.loads(path.read_text()))


def stage_env(stage: str, config: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The environment variables a stage sets: the app-wide ones, overridden by the stage's own.

    `config` is a parsed config (default: .chalice/config.json as it is now); UnknownStage names the stages there.
    """
    data = load_config() if config is None else config
    stages = data.get("stages", {})
    if stage not in stages:
        raise UnknownStage(f"no stage {stage!r} in {CONFIG} (stages: {', '.join(stages)})")
    env = dict(data.get("environment_variables", {}))
    env.update(stages[stage].get("environment_variables", {}))
    return env
