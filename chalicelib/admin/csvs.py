"""CSV downloads of the dashboard's tables (RFC 4180, a header row), safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

# A cell a spreadsheet would read as a formula starts with one of these: it is written with a leading quote.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_STARTS) and not _number(text):
        return "'" + text
    return text


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def to_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """The rows' `columns`, in that order, under a header row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(column)) for column in columns])
    return out.getvalue()
