"""HTTP plumbing shared by the entry points: body parsing, JSON errors, CORS, small HTML pages."""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import parse_qs

from chalice import Response

from chalicelib.errors import BadRequest, DomainError, PayloadTooLarge, RateLimited

# The largest notify-me body accepted: a SKU, a contact and a name fit many times over.
MAX_BODY_BYTES = 4096


def parse_body(raw: bytes | None, content_type: str, max_bytes: int) -> dict[str, Any]:
    """A JSON or form-encoded body as a dict; BadRequest/PayloadTooLarge for anything else."""
    data = raw or b""
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"The body must be at most {max_bytes} bytes.")
    if not data.strip():
        raise BadRequest("The body is empty.", code="invalid_body")
    kind = (content_type or "").split(";")[0].strip().lower()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest("The body must be UTF-8.", code="invalid_body") from exc
    if kind == "application/x-www-form-urlencoded":
        fields = parse_qs(text, keep_blank_values=True, max_num_fields=20)
        return {k: v[-1] for k, v in fields.items()}
    return json_object(text)


def json_object(text: str) -> dict[str, Any]:
    """Text that must be one JSON object; BadRequest 'invalid_json' or 'invalid_body' otherwise."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise BadRequest("The body is not valid JSON.", code="invalid_json") from exc
    if not isinstance(parsed, dict):
        raise BadRequest("The body must be a JSON object.", code="invalid_body")
    return parsed


def json_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    """A JSON response."""
    return Response(body=body, status_code=status, headers={"Content-Type": "application/json", **(headers or {})})


def error_response(error: DomainError, headers: dict[str, str] | None = None) -> Response:
    """A DomainError as `{"error": code, "message": ...}` with its status."""
    extra = dict(headers or {})
    if isinstance(error, RateLimited):
        extra["Retry-After"] = str(error.retry_after_s)
    return json_response(error.status, {"error": error.code, "message": error.message}, extra)


# Refusals Chalice makes before any route runs, as {"Code", "Message"}: the code each answers with here.
CHALICE_CODES = {
    "UnsupportedMediaType": "unsupported_media_type",
    "MethodNotAllowedError": "method_not_allowed",
    "BadRequestError": "bad_request",
    "InternalServerError": "internal_error",
}


def house_error(response: Response) -> Response:
    """A refusal Chalice made itself (a body type the route does not take, say) in the app's JSON error shape."""
    body = response.body
    if response.status_code < 400 or not isinstance(body, dict) or set(body) != {"Code", "Message"}:
        return response
    code = CHALICE_CODES.get(str(body["Code"]), "refused")
    headers = {k: v for k, v in (response.headers or {}).items() if k.lower() != "content-type"}
    return json_response(response.status_code, {"error": code, "message": str(body["Message"])}, headers)


def cors_headers(origin: str | None, allowed: tuple[str, ...]) -> dict[str, str]:
    """CORS headers for a shop storefront origin on the allow-list (none for anyone else)."""
    if not origin:
        return {}
    origin = origin.rstrip("/")
    if origin not in allowed and "*" not in allowed:
        return {}
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": "POST, OPTIONS",
        "Access-Control-Allow-Headers": "Content-Type",
        "Access-Control-Max-Age": "600",
        "Vary": "Origin",
    }


def html_page(status: int, title: str, message: str, shop_name: str, extra_html: str = "") -> Response:
    """A small, accessible HTML page carrying the shop's name."""
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} · {html.escape(shop_name)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#1a1a1a}}
h1{{font-size:1.5rem}}button{{font-size:1rem;padding:.6rem 1.2rem}}.shop{{color:#555;font-size:.9rem}}</style></head>
<body><main><p class="shop">{html.escape(shop_name)}</p><h1>{html.escape(title)}</h1><p>{html.escape(message)}</p>{extra_html}</main></body></html>
"""
    return Response(
        body=body, status_code=status, headers={"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"}
    )
