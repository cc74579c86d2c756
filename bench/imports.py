"""Cold import of the app module against boto3 alone, each in a fresh interpreter, side by side.

A Lambda cold start imports the handler module; boto3 is the floor every Python function pays. The
runs alternate (app, boto3, app, boto3, ...) so that a busy machine slows both alike, and the medians
are compared. The app's own modules are imported from source without a bytecode cache, as Lambda runs
them from the deployment package (which holds no .pyc files): from a copy of app.py and chalicelib/
without the __pycache__ folders the test suites write in the working tree. A second pair of runs
measures both with bytecode cached, in a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.calls import ROOT

SNIPPET = "import time; t = time.perf_counter(); import {module}; print((time.perf_counter() - t) * 1000)"


def _once(module: str, env: dict[str, str], cwd: Path) -> float:
    out = subprocess.run(
        [sys.executable, "-c", SNIPPET.format(module=module)],
        cwd=cwd,
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
    with tempfile.TemporaryDirectory(prefix="bisn-bench-") as scratch:
        code, cache = Path(scratch) / "app", Path(scratch) / "pyc"
        code.mkdir()
        shutil.copy2(ROOT / "app.py", code / "app.py")
        shutil.copytree(ROOT / "chalicelib", code / "chalicelib", ignore=shutil.ignore_patterns("__pycache__"))
        cached = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(cache)
        _once("app", cached, code)  # fills the cache
        _once("boto3", cached, code)
        for _ in range(runs):
            results["app"].append(_once("app", plain, code))
            results["boto3"].append(_once("boto3", plain, code))
            results["app_bytecode"].append(_once("app", cached, code))
            results["boto3_bytecode"].append(_once("boto3", cached, code))
    return {key: float(statistics.median(values)) for key, values in results.items()}
