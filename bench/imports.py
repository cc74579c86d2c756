"""Cold import of the app module against boto3 alone, each in a fresh interpreter, side by side.

A Lambda cold start imports the handler module; boto3 is the floor every Python function pays. The
runs alternate (app, boto3, app, boto3, ...) so that a busy machine slows both alike, and the medians
are compared. The app is imported as the deployment package holds it: a copy of app.py and chalicelib/
(without the __pycache__ folders the test suites write in the working tree) with the unchecked-hash
bytecode `make package` adds (infra/bytecode.py), in a directory Python may not write to, as Lambda's
/var/task. Two more figures: the same copy from source alone (the package before it carried bytecode),
and both with every module's bytecode cached, in a temporary directory.
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
from infra.bytecode import compile_tree, own_source

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
    """app.py and chalicelib/ as the package holds them, with their bytecode or without."""
    shutil.copy2(ROOT / "app.py", into / "app.py")
    shutil.copytree(ROOT / "chalicelib", into / "chalicelib", ignore=shutil.ignore_patterns("__pycache__"))
    if compiled:
        names = [str(path.relative_to(into)) for path in into.rglob("*.py")]
        compile_tree(into, [name for name in names if own_source(name)])
    return into


def import_times(runs: int = 11) -> dict[str, float]:
    """Median ms to import `app` and `boto3`: as packaged, from source alone, and with all bytecode cached."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPYCACHEPREFIX")}
    plain = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
    results: dict[str, list[float]] = {
        "app": [],
        "boto3": [],
        "app_source": [],
        "app_bytecode": [],
        "boto3_bytecode": [],
    }
    with tempfile.TemporaryDirectory(prefix="bisn-bench-") as scratch:
        root = Path(scratch)
        cache, packaged, source = (root / "pyc", root / "packaged", root / "source")
        for folder in (cache, packaged, source):
            folder.mkdir()
        _copy_of_the_app(packaged, compiled=True)
        _copy_of_the_app(source, compiled=False)
        cached = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(cache)
        _once("app", cached, source)  # fills the cache
        _once("boto3", cached, source)
        for _ in range(runs):
            results["app"].append(_once("app", plain, packaged))
            results["boto3"].append(_once("boto3", plain, packaged))
            results["app_source"].append(_once("app", plain, source))
            results["app_bytecode"].append(_once("app", cached, source))
            results["boto3_bytecode"].append(_once("boto3", cached, source))
    return {key: float(statistics.median(values)) for key, values in results.items()}
