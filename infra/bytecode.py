"""A step of `make package`: the app's own modules go into deployment.zip compiled as well as in source.

Lambda's /var/task is read-only, so Python cannot keep the bytecode it compiles: without .pyc files in the package,
every cold start compiles app.py and all of chalicelib/ again (about a sixth of the app's cold import, bench/imports.py).
The files are written as unchecked-hash .pyc (PEP 552), which Python reads without comparing them to the source's
modification time, a time a zip keeps only to two seconds. A .pyc is read only by the Python version that wrote it;
Chalice packages for the runtime of the Python that runs it (tests/integration/test_deploy_template.py checks the
template says so), and this step refuses a template naming another one.

    .venv/bin/python -m infra.bytecode build/deployment.zip --template build/sam.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import py_compile
import sys
import tempfile
import zipfile
from pathlib import Path

OWN = ("app.py", "chalicelib/")
RUNTIME = f"python{sys.version_info.major}.{sys.version_info.minor}"


def own_source(name: str) -> bool:
    """Whether an archive member is one of the app's own Python modules."""
    return name.endswith(".py") and (name == OWN[0] or name.startswith(OWN[1]))


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


def add_bytecode(archive: Path) -> int:
    """Add a .pyc beside each of the app's own modules in the archive; how many were added."""
    mode = archive.stat().st_mode
    with tempfile.TemporaryDirectory(prefix="bisn-bytecode-") as scratch:
        root = Path(scratch)
        with zipfile.ZipFile(archive) as src:
            names = [n for n in src.namelist() if own_source(n)]
            src.extractall(root, members=names)
        written = compile_tree(root, names)
        with zipfile.ZipFile(archive, "a", zipfile.ZIP_DEFLATED) as out:
            present = set(out.namelist())
            for pyc in written:
                if pyc not in present:
                    out.write(root / pyc, pyc)
    os.chmod(archive, mode)
    return len(written)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--template", type=Path, required=True, help="the packaged sam.json")
    args = parser.parse_args(argv)
    named = runtimes(args.template)
    if named != {RUNTIME}:
        raise SystemExit(f"{args.template} names {sorted(named)}: bytecode written by {RUNTIME} would not be read")
    added = add_bytecode(args.archive)
    print(f"{args.archive}: {added} modules of the app compiled in ({RUNTIME}, unchecked-hash .pyc)")


if __name__ == "__main__":
    main(sys.argv[1:])
