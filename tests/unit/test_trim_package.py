"""The package leaves out only what the functions never read, and Babel still formats every served language."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import babel

from chalicelib.i18n import LANGUAGES
from infra.trim_package import kept, trim


def test_only_other_languages_locale_data_swagger_ui_dnspython_and_bytecode_are_left_out(tmp_path: Path) -> None:
    archive = tmp_path / "deployment.zip"
    names = [
        "app.py",
        "babel/global.dat",
        "babel/locale-data/root.dat",
        *(f"babel/locale-data/{lang}.dat" for lang in LANGUAGES),
        "babel/locale-data/de_AT.dat",
        "babel/locale-data/ja.dat",
        "babel/locale-data/LICENSE.unicode",
        "aws_lambda_powertools/event_handler/openapi/swagger_ui/swagger-ui-bundle.min.js",
        "aws_lambda_powertools/event_handler/openapi/swagger_ui/swagger-ui.min.css",
        "aws_lambda_powertools/event_handler/openapi/swagger_ui/__init__.py",
        "dns/__init__.py",
        "dns/resolver.py",
        "dnspython-2.9.2.dist-info/METADATA",
        "email_validator/__init__.py",
        "email_validator/deliverability.py",
        "dnsx/__init__.py",
        "__pycache__/app.cpython-311.pyc",
        "chalicelib/__pycache__/notifier.cpython-311.pyc",
        "chalicelib/pycache_notes.py",
    ]
    with zipfile.ZipFile(archive, "w") as z:
        for name in names:
            z.writestr(name, "x")
    removed, _ = trim(archive)
    left = set(zipfile.ZipFile(archive).namelist())
    assert removed == 9
    assert not any("__pycache__" in name for name in left) and "chalicelib/pycache_notes.py" in left
    assert not any(name.startswith(("dns/", "dnspython-")) for name in left)
    assert {"email_validator/__init__.py", "email_validator/deliverability.py", "dnsx/__init__.py"} <= left
    assert {"babel/locale-data/de_AT.dat", "babel/locale-data/ja.dat"}.isdisjoint(left)
    assert "aws_lambda_powertools/event_handler/openapi/swagger_ui/__init__.py" in left
    assert {"app.py", "babel/global.dat", "babel/locale-data/root.dat", "babel/locale-data/LICENSE.unicode"} <= left
    assert all(kept(f"babel/locale-data/{lang}.dat") for lang in LANGUAGES)


def test_babel_formats_every_served_language_from_the_trimmed_data(tmp_path: Path) -> None:
    # Babel as the package holds it: only the kept locale files, imported from there and nowhere else.
    source = Path(babel.__file__).parent
    target = tmp_path / "babel"
    shutil.copytree(
        source,
        target,
        ignore=lambda d, names: (
            [n for n in names if not kept(f"babel/locale-data/{n}")] if d.endswith("locale-data") else []
        ),
    )
    assert len(list((target / "locale-data").glob("*.dat"))) == len(LANGUAGES) + 1
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import babel; assert babel.__file__.startswith(sys.argv[1]);"
        "from chalicelib import i18n;"
        "print([(i18n.price('24.00', 'EUR', l), i18n.number(1234, l), i18n.moment(1796400000, l)) for l in i18n.LANGUAGES])"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True, cwd=Path.cwd()
    )
    assert "24,00" in out.stdout and "Dez." in out.stdout
