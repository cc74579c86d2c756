"""A cold start loads the entry points and the wiring, not the services: each is loaded when first used."""

from __future__ import annotations

import json
import subprocess
import sys

from infra.bytecode import QUIET  # no bytecode left by these runs, nothing from the caller
from infra.stages import stage_env
from tests.support import ROOT

# What every function needs to declare its entry points and build services on demand.
AT_LOAD = {
    "chalicelib",
    # The dashboard's page, like the widget: a string and an allow-list, its files read from disk when first asked.
    "chalicelib.admin_pages",
    "chalicelib.aws",
    "chalicelib.clock",
    # The settings check the accent by the same rule the pages and emails draw it with.
    "chalicelib.colours",
    "chalicelib.config",
    "chalicelib.errors",
    "chalicelib.faults",
    # The app's log handler is installed as the app loads, so the first invocation's lines are JSON too.
    "chalicelib.logs",
    "chalicelib.web",
    "chalicelib.web.errors",
    "chalicelib.web.responses",
    # The widget's script, served by the app itself (its package's __init__ only describes it).
    "chalicelib.shopper",
    "chalicelib.shopper.widget",
    "chalicelib.wiring",
}
LIST = "import json, sys; import app; print(json.dumps(sorted(m for m in sys.modules if m.startswith('chalicelib'))))"


def test_loading_the_app_imports_no_service_module() -> None:
    out = subprocess.run([sys.executable, "-c", LIST], cwd=ROOT, env=QUIET, capture_output=True, text=True, check=True)
    assert set(json.loads(out.stdout)) == AT_LOAD


def test_a_service_s_modules_load_when_it_is_first_built() -> None:
    code = f"""
import sys
from chalicelib.config import settings_from_env
from chalicelib.wiring import Services
services = Services(settings_from_env({{**{stage_env("local")!r}, "AWS_DEFAULT_REGION": "eu-west-2"}}))
assert "chalicelib.tables.requests" not in sys.modules
services.tables.requests
assert "chalicelib.tables.requests" in sys.modules
assert "chalicelib.notifier" not in sys.modules and "chalicelib.sweep" not in sys.modules
"""
    env = {**QUIET, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
