"""CSV downloads of the dashboard's tables (RFC 4180, a header row), safe to open in a spreadsheet."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# A cell a spreadsheet would read as a formula starts with one of these: it is written with a leading quote
# (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A spreadsheet that guesses another separator (`;` in many locales), or reads a line break as the end of a row,
# starts a new cell after any of these: the text after one gets the leading quote too, so every cell any reader
# splits out starts as text.
BOUNDARY = re.compile(r"([,;\r\n])")
# A negative number is no formula, and reads as a number (admin.js writes the same pattern).
NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
# A cell holding any of these is quoted (RFC 4180).
QUOTE_WHEN = re.compile(r'[,;"\r\n\t]')


def _escaped(piece: str) -> str:
    start = piece.lstrip(" ")
    if start.startswith(FORMULA_STARTS) and not _number(start):
        return piece[: len(piece) - len(start)] + "'" + start
    return piece


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    parts = BOUNDARY.split(text)  # the pieces at even places, the boundaries between them at odd ones
    text = "".join(part if i % 2 else _escaped(part) for i, part in enumerate(parts))
    if text.startswith("\r"):
        text = "'" + text
    return '"' + text.replace('"', '""') + '"' if QUOTE_WHEN.search(text) else text


def _number(text: str) -> bool:
    return NUMBER.match(text) is not None


def to_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """The rows' `columns`, in that order, under a header row."""
    lines = [",".join(_cell(column) for column in columns)]
    lines += [",".join(_cell(row.get(column)) for column in columns) for row in rows]
    # One empty cell is written as "", as RFC 4180 writers do: an empty line would read as no row at all.
    return "".join((line or '""') + "\r\n" for line in lines)
