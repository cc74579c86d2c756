"""The package's own modules ship compiled, and Python runs that bytecode without looking at the source again."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from infra.bytecode import RUNTIME, add_bytecode, main, own_source


def _archive(tmp_path: Path) -> Path:
    archive = tmp_path / "deployment.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("app.py", "from chalicelib import answer\nVALUE = answer.VALUE\n")
        z.writestr("chalicelib/__init__.py", "")
        z.writestr("chalicelib/answer.py", "VALUE = 'compiled'\n")
        z.writestr("phonenumbers/__init__.py", "")  # a library's module: not the app's own
    return archive


def test_only_the_apps_own_modules_are_compiled() -> None:
    assert own_source("app.py") and own_source("chalicelib/tables/base.py")
    assert not own_source("chalicelib/locales/de/LC_MESSAGES/shopper.mo")
    assert not own_source("phonenumbers/__init__.py") and not own_source("chalice/app.py")


def test_each_module_of_the_app_gets_a_pyc_the_runtime_reads_without_the_source(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    assert add_bytecode(archive) == 3
    names = set(zipfile.ZipFile(archive).namelist())
    tag = sys.implementation.cache_tag
    assert {f"__pycache__/app.{tag}.pyc", f"chalicelib/__pycache__/answer.{tag}.pyc"} <= names
    assert not any(name.startswith("phonenumbers/__pycache__") for name in names)
    unpacked = tmp_path / "task"
    zipfile.ZipFile(archive).extractall(unpacked)
    # Unchecked-hash bytecode is used as it is: a source changed after packaging is not even read.
    (unpacked / "chalicelib" / "answer.py").write_text("raise SystemExit('compiled from source')\n")
    done = subprocess.run(
        [sys.executable, "-c", "import app; print(app.VALUE)"],
        cwd=unpacked,
        env={"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "compiled"


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
