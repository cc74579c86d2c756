"""Entry points of the back-in-stock notifier. Each parses input, calls chalicelib, maps errors to HTTP."""

from __future__ import annotations

from chalice import Chalice, Response

from chalicelib import wiring
from chalicelib.capture import MAX_BODY_BYTES
from chalicelib.errors import DomainError
from chalicelib.web import cors_headers, error_response, json_response, parse_body
from chalicelib.widget import widget_source

app = Chalice(app_name="bisn")
app.api.binary_types = []

FORM_TYPES = ["application/json", "application/x-www-form-urlencoded", "text/plain"]


def _source_ip() -> str:
    identity = (app.current_request.context or {}).get("identity") or {}
    return str(identity.get("sourceIp") or "unknown")


def _cors() -> dict[str, str]:
    origin = app.current_request.headers.get("origin")
    return cors_headers(origin, wiring.current().settings.cors_origins)


@app.route("/notify-me", methods=["POST"], content_types=FORM_TYPES)
def notify_me() -> Response:
    """A shopper taps Notify me: join the SKU's waiting list."""
    request = app.current_request
    cors = _cors()
    try:
        data = parse_body(request.raw_body, request.headers.get("content-type", ""), MAX_BODY_BYTES)
        outcome = wiring.current().capture.capture(_source_ip(), data)
    except DomainError as error:
        return error_response(error, cors)
    body: dict[str, object] = {"status": outcome.status}
    if outcome.position is not None:
        body["position"] = outcome.position
    return json_response(outcome.http_status, body, cors)


@app.route("/notify-me", methods=["OPTIONS"])
def notify_me_preflight() -> Response:
    """CORS preflight for shop storefronts on the allow-list."""
    return Response(body="", status_code=204, headers=_cors())


@app.route("/widget.js", methods=["GET"])
def widget() -> Response:
    """The embeddable Notify-me widget."""
    return Response(
        body=widget_source(),
        status_code=200,
        headers={"Content-Type": "application/javascript; charset=utf-8", "Cache-Control": "public, max-age=300"},
    )
