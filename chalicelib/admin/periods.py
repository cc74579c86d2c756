"""The dashboard's periods (`from`/`to` as YYYY-MM-DD) and its opaque cursors and references."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from chalicelib.errors import BadRequest

DEFAULT_DAYS = 30
MAX_DAYS = 366  # a year and a day: the audit keeps facts 400 days by default


@dataclass(frozen=True)
class Period:
    """Whole UTC days from `first` to `last`, both included."""

    first: date
    last: date

    @property
    def start(self) -> float:
        """Unix seconds of the first day's midnight."""
        return datetime(self.first.year, self.first.month, self.first.day, tzinfo=UTC).timestamp()

    @property
    def end(self) -> float:
        """Unix seconds of the last moment of the last day."""
        return self.start + ((self.last - self.first).days + 1) * 86400 - 0.000001

    def days(self) -> list[str]:
        """Every day of the period, 'YYYY-MM-DD', oldest first."""
        return [(self.first + timedelta(days=i)).isoformat() for i in range((self.last - self.first).days + 1)]


def _day(text: str, name: str) -> date:
    try:
        return date.fromisoformat(text) if len(text) == 10 else date.fromisoformat("x")
    except ValueError as exc:
        raise BadRequest(f"`{name}` must be a date written YYYY-MM-DD.", code="invalid_period") from exc


def period_of(params: Mapping[str, str], today: date) -> Period:
    """The period a query string asks for: `from` and `to`, each defaulting (the last 30 days, to today)."""
    last = _day(params["to"], "to") if params.get("to") else today
    first = _day(params["from"], "from") if params.get("from") else last - timedelta(days=DEFAULT_DAYS - 1)
    if first > last:
        raise BadRequest("`from` must not be after `to`.", code="invalid_period")
    if (last - first).days + 1 > MAX_DAYS:
        raise BadRequest(f"A period is at most {MAX_DAYS} days.", code="invalid_period")
    return Period(first, last)


def seal(value: Mapping[str, Any]) -> str:
    """A small JSON value as an opaque URL-safe string (cursors and row references; nothing secret)."""
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")


def unseal(text: str, name: str) -> dict[str, Any]:
    """The value `seal` made; BadRequest for anything else."""
    try:
        value = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise BadRequest(f"`{name}` is not one this dashboard gave out.", code=f"invalid_{name}") from exc
    if not isinstance(value, dict) or len(text) > 512:
        raise BadRequest(f"`{name}` is not one this dashboard gave out.", code=f"invalid_{name}")
    return value
