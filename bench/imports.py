"""Cold import of the app module against boto3 alone, each in a fresh interpreter, side by side.

A Lambda cold start imports the handler module; boto3 is the floor every Python function pays. The
runs alternate (app, boto3, app, boto3, ...) so that a busy machine slows both alike, and the medians
are compared. The app's own modules are imported from source without a bytecode cache, as Lambda runs
them from the deployment package (which holds no .pyc files); a second pair of runs measures both with
bytecode cached, in a temporary directory.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

from bench.calls import ROOT

SNIPPET = "import time; t = time.perf_counter(); import {module}; print((time.perf_counter() - t) * 1000)"


def _once(module: str, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", SNIPPET.format(module=module)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def import_times(runs: int = 11) -> dict[str, float]:
    """Median ms to import `app` and `boto3`, without and with a bytecode cache for the app's modules."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPYCACHEPREFIX")}
    plain = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
    results: dict[str, list[float]] = {"app": [], "boto3": [], "app_bytecode": [], "boto3_bytecode": []}
    with tempfile.TemporaryDirectory(prefix="bisn-pyc-") as cache:
        cached = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = cache
        _once("app", cached)  # fills the cache
        _once("boto3", cached)
        for _ in range(runs):
            results["app"].append(_once("app", plain))
            results["boto3"].append(_once("boto3", plain))
            results["app_bytecode"].append(_once("app", cached))
            results["boto3_bytecode"].append(_once("boto3", cached))
    return {key: float(statistics.median(values)) for key, values in results.items()}
