"""A step of `make package`: every module a cold start loads from deployment.zip goes in compiled as well as in source.

Lambda's /var/task is read-only, so Python cannot keep the bytecode it compiles, and a package built by pip and Chalice
holds none: every cold start compiled app.py, the part of chalicelib/ that loading it imports, and the libraries it
loads from the package (Powertools, Chalice, jmespath, typing_extensions) from source again: 367 ms against 145 ms
compiled, measured on the package's own files (2026-12-05). Only what `import app` loads from the package is
compiled (found by importing the unpacked package's app in a fresh interpreter, boto3 coming from the runtime as in
Lambda): a service's modules are compiled once per container when it is first built, and compiling everything
would take deployment.zip past its 3 MB.

The files are unchecked-hash .pyc (PEP 552), which Python reads without comparing them to the source's modification
time, a time a zip keeps only to two seconds. A .pyc is read only by the Python version that wrote it: Chalice packages
for the runtime of the Python that runs it (tests/integration/test_deploy_template.py checks the template says so),
and this step refuses a template naming another one.

    .venv/bin/python -m infra.bytecode build/deployment.zip --template build/sam.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import py_compile
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

RUNTIME = f"python{sys.version_info.major}.{sys.version_info.minor}"
# No bytecode written by the run, and nothing from the caller's environment: what a cold start has.
QUIET = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
LOADED = (
    "import json, sys; import app; "
    "print(json.dumps(sorted(m.__spec__.origin for m in list(sys.modules.values()) "
    "if getattr(m, '__spec__', None) and str(m.__spec__.origin).endswith('.py'))))"
)


def loaded_at_cold_start(root: Path) -> list[str]:
    """The Python modules under `root` (paths relative to it) that importing the app found there loads."""
    out = subprocess.run(
        [sys.executable, "-c", LOADED], cwd=root, env=QUIET, capture_output=True, text=True, timeout=120
    )
    if out.returncode != 0:
        raise SystemExit(f"importing the app in {root} failed:\n{out.stderr}")
    base = root.resolve()
    paths = [Path(origin).resolve() for origin in json.loads(out.stdout)]
    return [path.relative_to(base).as_posix() for path in paths if path.is_relative_to(base)]


def compile_tree(root: Path, names: list[str]) -> list[str]:
    """Compile each named module under `root` beside its source (`__pycache__/`); the .pyc names, relative to root."""
    written = []
    for name in names:
        pyc = importlib.util.cache_from_source(name)
        py_compile.compile(
            str(root / name),
            cfile=str(root / pyc),
            dfile=name,
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        written.append(pyc)
    return written


def runtimes(template: Path) -> set[str]:
    """Every function runtime the packaged template names."""
    resources = json.loads(template.read_text())["Resources"]
    return {r["Properties"]["Runtime"] for r in resources.values() if r["Type"] == "AWS::Serverless::Function"}


def add_bytecode(archive: Path) -> list[str]:
    """Add a .pyc beside each module of the package a cold start loads; the modules compiled."""
    mode = archive.stat().st_mode
    with tempfile.TemporaryDirectory(prefix="bisn-bytecode-") as scratch:
        root = Path(scratch)
        with zipfile.ZipFile(archive) as src:
            src.extractall(root)
        loaded = loaded_at_cold_start(root)
        written = compile_tree(root, loaded)
        with zipfile.ZipFile(archive, "a", zipfile.ZIP_DEFLATED) as out:
            present = set(out.namelist())
            for pyc in written:
                if pyc not in present:
                    out.write(root / pyc, pyc)
    os.chmod(archive, mode)
    return loaded


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--template", type=Path, required=True, help="the packaged sam.json")
    args = parser.parse_args(argv)
    named = runtimes(args.template)
    if named != {RUNTIME}:
        raise SystemExit(f"{args.template} names {sorted(named)}: bytecode written by {RUNTIME} would not be read")
    loaded = add_bytecode(args.archive)
    print(f"{args.archive}: the {len(loaded)} modules a cold start loads compiled in ({RUNTIME}, unchecked-hash .pyc)")


if __name__ == "__main__":
    main(sys.argv[1:])
