"""Input checks for the console's JSON API: bad input gets a 400 with a code and a message, never a crash."""

from __future__ import annotations

import math
import string
from typing import Any
from urllib.parse import urlsplit

from chalicelib.capture import parse_sku
from chalicelib.errors import BadRequest
from chalicelib.messages.wording import check_name, check_voice
from chalicelib.tables.catalog import PRODUCT_FIELDS

INT_LIMITS = {
    "threshold": (1, 1_000_000),
    "hold_window_s": (60, 86_400),  # a minute to a day
    "offer_window_s": (60, 7 * 86_400),  # a minute to a week
}
TEXT_LIMITS = {"name": 120, "voice": 200, "checkout_url": 500}
PLACEHOLDERS = {"sku", "reservation_id"}
MAX_UNITS = 1_000_000
MAX_MINUTES = 7 * 24 * 60


def sku(value: Any) -> str:
    """A SKU as the app accepts it."""
    return parse_sku(value)


def whole_number(body: dict[str, Any], field: str, low: int, high: int) -> int:
    """A required whole number within limits (booleans are not numbers here)."""
    value = body.get(field)
    if value is None:
        raise BadRequest(f"{field} is required.", code="missing_field")
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{field} must be a whole number.", code="invalid_field")
    if not low <= value <= high:
        raise BadRequest(f"{field} must be between {low} and {high}.", code="out_of_range")
    return value


def number(value: Any, field: str, low: float, high: float) -> float:
    """A finite number within limits."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRequest(f"{field} must be a number.", code="invalid_field")
    if not low <= value <= high:
        raise BadRequest(f"{field} must be between {low:g} and {high:g}.", code="out_of_range")
    return float(value)


def checkout_url(value: str) -> str:
    """An http(s) URL whose only placeholders are {sku} and {reservation_id}."""
    try:
        pieces = list(string.Formatter().parse(value))
    except ValueError as exc:
        raise BadRequest(
            "checkout_url has an unbalanced { or }; use {sku} and {reservation_id}.", code="invalid_field"
        ) from exc
    for _, field, spec, conversion in pieces:
        if field is not None and (field not in PLACEHOLDERS or spec or conversion):
            raise BadRequest(
                "checkout_url may hold only the placeholders {sku} and {reservation_id}.", code="invalid_field"
            )
    parts = urlsplit(value.replace("{sku}", "x").replace("{reservation_id}", "x"))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadRequest("checkout_url must be an http or https URL.", code="invalid_field")
    return value


def product_settings(body: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    """The settings of a PUT /api/catalog/{sku} body, checked; a new product needs a name and a checkout URL."""
    unknown = sorted(set(body) - set(PRODUCT_FIELDS))
    if unknown:
        raise BadRequest(
            f"Unknown field(s): {', '.join(unknown)}. Allowed: {', '.join(PRODUCT_FIELDS)}.", code="unknown_field"
        )
    if creating:
        for field in ("name", "checkout_url"):
            if body.get(field) in (None, ""):
                raise BadRequest(f"{field} is required for a new product.", code="missing_field")
    settings: dict[str, Any] = {}
    for field, (low, high) in INT_LIMITS.items():
        if field in body:
            settings[field] = whole_number(body, field, low, high)
    for field, limit in TEXT_LIMITS.items():
        if field not in body:
            continue
        value = body[field]
        if not isinstance(value, str):
            raise BadRequest(f"{field} must be a string.", code="invalid_field")
        value = value.strip()
        if not value:
            raise BadRequest(f"{field} may not be empty.", code="invalid_field")
        if len(value) > limit:
            raise BadRequest(f"{field} must be at most {limit} characters.", code="field_too_long")
        if any(ord(c) < 32 for c in value):
            raise BadRequest(f"{field} may not contain control characters.", code="invalid_field")
        checks = {"checkout_url": checkout_url, "name": check_name, "voice": check_voice}
        settings[field] = checks[field](value)
    if not settings:
        raise BadRequest("Send at least one setting to change.", code="invalid_body")
    return settings
