"""The modules a cold start loads from the package ship compiled, and Python runs that bytecode without the source."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from infra.bytecode import QUIET, RUNTIME, add_bytecode, main

TAG = sys.implementation.cache_tag


def _archive(tmp_path: Path) -> Path:
    archive = tmp_path / "deployment.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("app.py", "import shipped\nfrom chalicelib import answer\nVALUE = answer.VALUE\n")
        z.writestr("chalicelib/__init__.py", "")
        z.writestr("chalicelib/answer.py", "VALUE = 'compiled'\n")
        z.writestr("chalicelib/service.py", "LOADED_WHEN_FIRST_USED = True\n")
        z.writestr("shipped/__init__.py", "import json\n")  # a library the package ships, loaded at cold start
        z.writestr("unused/__init__.py", "")  # a library nothing imports as the app loads
    return archive


def test_only_what_loading_the_app_imports_from_the_package_is_compiled(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    assert sorted(add_bytecode(archive)) == [
        "app.py",
        "chalicelib/__init__.py",
        "chalicelib/answer.py",
        "shipped/__init__.py",
    ]
    names = set(zipfile.ZipFile(archive).namelist())
    assert {f"__pycache__/app.{TAG}.pyc", f"chalicelib/__pycache__/answer.{TAG}.pyc"} <= names
    assert {f"shipped/__pycache__/__init__.{TAG}.pyc"} <= names
    # The standard library and the rest come from the runtime; what a cold start does not load stays source only.
    assert f"chalicelib/__pycache__/service.{TAG}.pyc" not in names
    assert not any(name.startswith("unused/__pycache__") for name in names)


def test_the_runtime_reads_the_bytecode_without_the_source(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    add_bytecode(archive)
    unpacked = tmp_path / "task"
    zipfile.ZipFile(archive).extractall(unpacked)
    # Unchecked-hash bytecode is used as it is: a source changed after packaging is not even read.
    (unpacked / "chalicelib" / "answer.py").write_text("raise SystemExit('compiled from source')\n")
    done = subprocess.run(
        [sys.executable, "-c", "import app; print(app.VALUE)"],
        cwd=unpacked,
        env=QUIET,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "compiled"


def test_an_app_that_does_not_load_stops_the_step(tmp_path: Path) -> None:
    archive = tmp_path / "deployment.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("app.py", "import not_shipped_anywhere\n")
    with pytest.raises(SystemExit, match="not_shipped_anywhere"):
        add_bytecode(archive)
    assert not any("__pycache__" in name for name in zipfile.ZipFile(archive).namelist())


def test_a_template_for_another_runtime_is_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    template = tmp_path / "sam.json"
    function = {"Type": "AWS::Serverless::Function", "Properties": {"Runtime": "python3.9"}}
    template.write_text(json.dumps({"Resources": {"Notifier": function}}))
    with pytest.raises(SystemExit, match="would not be read"):
        main([str(archive), "--template", str(template)])
    assert not any("__pycache__" in name for name in zipfile.ZipFile(archive).namelist())
    function["Properties"]["Runtime"] = RUNTIME
    template.write_text(json.dumps({"Resources": {"Notifier": function}}))
    main([str(archive), "--template", str(template)])
    assert any("__pycache__" in name for name in zipfile.ZipFile(archive).namelist())
