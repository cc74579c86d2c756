"""The dashboard's CSV cannot carry a formula a spreadsheet would run, wherever a spreadsheet starts a cell (OWASP,
"CSV Injection"): at the start, and after a `,` or `;` (the separator a spreadsheet may guess)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess

import pytest

from chalicelib.admin.csvs import to_csv
from tests.support import ROOT

ADMIN_JS = ROOT / "chalicelib" / "static" / "admin" / "admin.js"

# (what a cell holds, how it is written)
CELLS = [
    ("Walnut dining chair", "Walnut dining chair"),
    ('=HYPERLINK("https://evil.example")', '''"'=HYPERLINK(""https://evil.example"")"'''),
    ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("-2+3", "'-2+3"),
    ("\t=1+1", '"\'\t=1+1"'),
    ("\r=1+1", "\"'\r'=1+1\""),
    ("Chair;=1+1", '"Chair;\'=1+1"'),
    ("Chair,=1+1", '"Chair,\'=1+1"'),
    ("Chair; @SUM(A1)", '"Chair; \'@SUM(A1)"'),
    ("Chair;-2+3;x", '"Chair;\'-2+3;x"'),
    ("Chair;\t=1", '"Chair;\'\t=1"'),
    ("Chair\n=1+1", '"Chair\n\'=1+1"'),
    ("Mug; blue", '"Mug; blue"'),
    ("-3", "-3"),
    ("-0.5", "-0.5"),
    ("1,-2", '"1,-2"'),
    ("Mug - blue", "Mug - blue"),
    (None, ""),
]


@pytest.mark.parametrize(("value", "written"), CELLS)
def test_a_cell_that_could_start_a_formula_anywhere_is_written_with_a_leading_quote(value: str, written: str) -> None:
    assert to_csv([{"sku": "A1", "name": value}], ["sku", "name"]) == f"sku,name\r\nA1,{written}\r\n"


@pytest.mark.parametrize("separator", [",", ";"])
def test_read_with_either_separator_no_cell_starts_a_formula(separator: str) -> None:
    text = to_csv([{"sku": "A1", "name": value} for value, _ in CELLS], ["sku", "name"])
    # A reader that takes the other separator also ends a row at any line break, inside quotes or not.
    lines = text.splitlines() if separator == ";" else [text]
    for line in lines:
        for row in csv.reader(io.StringIO(line, newline=""), delimiter=separator):
            for cell in row:
                assert not re.match(r"^ *[=+@\t\r]", cell), (separator, row)
                assert not re.match(r"^ *-", cell) or re.match(r"^-[0-9.]+$", cell), (separator, row)


def test_the_pages_own_csv_writes_every_cell_as_the_api_does() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the browser tests download the page's CSV instead")
    source = ADMIN_JS.read_text(encoding="utf-8")
    match = re.search(r"^function csvCell\(value\) \{.*?^\}", source, re.S | re.M)
    assert match, "csvCell is gone from admin.js"
    program = match.group(0) + "\nconsole.log(JSON.stringify(JSON.parse(require('fs').readFileSync(0)).map(csvCell)));"
    values = [value for value, _ in CELLS]
    answer = subprocess.run([node, "-e", program], input=json.dumps(values), text=True, check=True, capture_output=True)
    assert json.loads(answer.stdout) == [written for _, written in CELLS]
