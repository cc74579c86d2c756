"""Cold import of the app module against boto3 alone, each in a fresh interpreter, side by side.

A Lambda cold start imports the handler module; boto3 is the floor every Python function pays (the runtime provides
it, compiled). The runs alternate (app, boto3, app, boto3, ...) so that a busy machine slows both alike, and the
medians are compared. The app is imported as the deployment package holds it: a copy of app.py and chalicelib/
(without the __pycache__ folders the test suites write in the working tree) with the unchecked-hash bytecode
`make package` adds to the modules a cold start loads (infra/bytecode.py); the libraries come from this environment,
compiled, as the package now ships those a cold start loads. Beside it: the same copy from source alone (the package
before it carried bytecode), both with every module's bytecode cached, and, when `make package` has built it,
build/deployment.zip itself unpacked (its own libraries, not this environment's).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from bench.calls import ROOT
from infra.bytecode import compile_tree, loaded_at_cold_start

PACKAGE = ROOT / "build" / "deployment.zip"

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


def _copy_of_the_app(into: Path, *, compiled: bool) -> Path:
    """app.py and chalicelib/ without the working tree's __pycache__; with `compiled`, the bytecode `make package` adds
    to the modules a cold start loads (infra/bytecode.py), the libraries' coming from this environment's own."""
    into.mkdir()
    shutil.copy2(ROOT / "app.py", into / "app.py")
    shutil.copytree(ROOT / "chalicelib", into / "chalicelib", ignore=shutil.ignore_patterns("__pycache__"))
    if compiled:
        compile_tree(into, loaded_at_cold_start(into))
    return into


def import_times(runs: int = 11) -> dict[str, float | None]:
    """Median ms to import `app` and `boto3`: as packaged, with the app's own modules from source alone, with every
    module's bytecode cached, and (when `make package` has built it) from build/deployment.zip itself."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPYCACHEPREFIX")}
    plain = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
    results: dict[str, list[float]] = {
        "app": [],
        "boto3": [],
        "app_source": [],
        "app_bytecode": [],
        "boto3_bytecode": [],
        "app_package": [],
    }
    with tempfile.TemporaryDirectory(prefix="bisn-bench-") as scratch:
        root = Path(scratch)
        packaged = _copy_of_the_app(root / "packaged", compiled=True)
        source = _copy_of_the_app(root / "source", compiled=False)
        unpacked = None
        if PACKAGE.exists():
            unpacked = root / "task"
            with zipfile.ZipFile(PACKAGE) as archive:
                archive.extractall(unpacked)
        cached = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(root / "pyc")
        _once("app", cached, source)  # fills the cache
        _once("boto3", cached, source)
        for _ in range(runs):
            results["app"].append(_once("app", plain, packaged))
            results["boto3"].append(_once("boto3", plain, packaged))
            results["app_source"].append(_once("app", plain, source))
            results["app_bytecode"].append(_once("app", cached, source))
            results["boto3_bytecode"].append(_once("boto3", cached, source))
            if unpacked is not None:
                # The libraries the package ships (Powertools, Chalice...) from its own files, boto3 from here.
                results["app_package"].append(_once("app", plain, unpacked))
    return {key: float(statistics.median(values)) if values else None for key, values in results.items()}
