"""Every Response the app makes from a value: a JSON body, a refusal (a DomainError), a rendered `Page`, and
Chalice's own refusals in the app's JSON error shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from chalice import Response

from chalicelib.errors import DomainError, RateLimited
from chalicelib.web.errors import error_status

if TYPE_CHECKING:
    from chalicelib.shopper.pages import Page


def json_response(status: int, body: dict[str, Any], headers: Mapping[str, str | list[str]] | None = None) -> Response:
    """A JSON response."""
    return Response(body=body, status_code=status, headers={"Content-Type": "application/json", **(headers or {})})


def page_response(page: Page) -> Response:
    """The one place a rendered page becomes an HTTP answer."""
    return Response(body=page.html, status_code=page.status, headers=page.headers)


def error_response(error: DomainError, headers: Mapping[str, str | list[str]] | None = None) -> Response:
    """A DomainError as `{"error": code, "message": ...}` (and its `reason` and `note`, when it has them) with its
    status."""
    extra = dict(headers or {})
    if isinstance(error, RateLimited):
        extra["Retry-After"] = str(error.retry_after_s)
    body = {"error": error.code, "message": error.message}
    if error.reason:
        body["reason"] = error.reason
    if error.note is not None:
        body["note"] = error.note
    return json_response(error_status(error), body, extra)


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
