"""A step of `make package`: leave out of deployment.zip the files of its libraries the functions never read.

* Babel ships CLDR data for about a thousand locales (some 30 MB unpacked); the functions format numbers, prices
  and dates only in chalicelib/i18n.py's LANGUAGES, each loaded by its primary tag with CLDR's `root` under it.
  Every other `babel/locale-data/*.dat` is left out (Babel reads a locale's file only when it is first used).
* Powertools ships Swagger UI's browser bundle for its own API resolvers' docs page; the app is a Chalice app
  that uses Powertools' logger, metrics and parameters only, and serves no Swagger UI.
* Bytecode a local run left in the working tree (`__pycache__/`, written by this machine's Python and checked
  against the source's time): the package's own is added after this step, by infra/bytecode.py.
* dnspython comes with email-validator for its deliverability check (MX lookups), which imports it only when that
  check is asked for; the app's one call (chalicelib/contacts.py) turns it off, as the email's own confirmation
  link is the check. tests/integration/test_deploy_template.py checks an email address from the package's own files.

That keeps the package under its 3 MB target (docs/BENCHMARKS.md) rather than at four times it, with room for the
bytecode infra/bytecode.py adds.

    .venv/bin/python -m infra.trim_package build/deployment.zip
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import zipfile
from pathlib import Path

from chalicelib.i18n import LANGUAGES

LOCALE_DATA = "babel/locale-data/"
KEEP = frozenset({"root", *LANGUAGES})
SWAGGER_UI = "aws_lambda_powertools/event_handler/openapi/swagger_ui/"
UNUSED_ASSETS = (".js", ".css")
DNSPYTHON = ("dns/", "dnspython-")


def kept(name: str) -> bool:
    """Whether an archive member stays: everything but another language's locale data, Swagger UI's assets,
    dnspython and bytecode."""
    if name.startswith("__pycache__/") or "/__pycache__/" in name:
        return False
    if name.startswith(SWAGGER_UI) and name.endswith(UNUSED_ASSETS):
        return False
    if name.startswith(DNSPYTHON):
        return False
    if not name.startswith(LOCALE_DATA) or not name.endswith(".dat"):
        return True
    return name[len(LOCALE_DATA) : -len(".dat")] in KEEP


def trim(archive: Path) -> tuple[int, int]:
    """Rewrite the archive without the unused files: (members removed, bytes before - after)."""
    before = archive.stat().st_size
    mode = archive.stat().st_mode
    removed = 0
    fd, tmp = tempfile.mkstemp(dir=archive.parent, suffix=".zip")
    os.close(fd)
    try:
        with zipfile.ZipFile(archive) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for info in src.infolist():
                if not kept(info.filename):
                    removed += 1
                    continue
                # The member's own date and permissions are kept, so the rewritten archive is as reproducible as
                # the one Chalice wrote.
                out.writestr(info, src.read(info), compress_type=info.compress_type)
        missing = [lang for lang in KEEP if f"{LOCALE_DATA}{lang}.dat" not in zipfile.ZipFile(tmp).namelist()]
        if removed and missing:
            raise SystemExit(f"{archive}: the locale data of {', '.join(sorted(missing))} is missing")
        os.chmod(tmp, mode)
        os.replace(tmp, archive)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return removed, before - archive.stat().st_size


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    args = parser.parse_args(argv)
    removed, saved = trim(args.archive)
    print(f"{args.archive}: {removed} unused library files left out ({saved / 1e6:.1f} MB smaller)")


if __name__ == "__main__":
    main(sys.argv[1:])
