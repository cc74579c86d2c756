"""The dev console: a demo storefront, the outbox, controls and a fake checkout, plus its JSON API; the app's
dashboard (/admin) shows the waiting lists, restocks and the rest.

Dev-only (Flask, bound to 127.0.0.1). See docs/CONSOLE.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from flask import Flask, Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException

from chalicelib.errors import BadRequest, DomainError
from chalicelib.messages.wording import TONES
from chalicelib.web.errors import error_status
from devstack import views
from devstack.console import validate
from devstack.stack import NotAvailable, Stack

log = logging.getLogger("devstack.console")
MAX_BODY_BYTES = 16 * 1024
# Demo shoppers; SMS numbers are GB mobiles (the local stage texts GB only: +44 7911 12… is Guernsey).
SHOPPERS = [
    {"id": "ada", "name": "Ada", "channel": "sms", "contact": "07400 123456"},
    {"id": "grace", "name": "Grace", "channel": "email", "contact": "grace@example.com"},
    {"id": "alan", "name": "Alan", "channel": "sms", "contact": "07912 123456"},
    {"id": "katherine", "name": "Katherine", "channel": "email", "contact": "katherine@example.com"},
]
# The console's own pages: the shop's side and the dev controls. Waiting lists, restocks, demand, support and
# operations are the app's dashboard (/admin on the API), which the navigation links to: one implementation.
PAGES = [
    ("storefront", "/", "Storefront"),
    ("outbox", "/outbox", "Outbox"),
    ("controls", "/controls", "Controls"),
]


class ConsoleError(Exception):
    """An error answer of the console's JSON API."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _error(status: int, code: str, message: str) -> tuple[Response, int]:
    return jsonify({"error": code, "message": message}), status


def _body(*, required: bool) -> dict[str, Any]:
    raw = request.get_data(cache=True)
    if len(raw) > MAX_BODY_BYTES:
        raise ConsoleError(413, "payload_too_large", f"The body must be at most {MAX_BODY_BYTES} bytes.")
    if not raw.strip():
        if required:
            raise ConsoleError(400, "invalid_body", "Send a JSON object.")
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConsoleError(400, "invalid_json", "The body is not valid JSON.") from exc
    if not isinstance(data, dict):
        raise ConsoleError(400, "invalid_body", "The body must be a JSON object.")
    return data


def create_console(stack: Stack, *, origins: Iterable[str] = ()) -> Flask:
    """The console's Flask app, driving `stack`. Writes are refused from any origin but `origins`."""
    app = Flask(__name__)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    allowed_origins = {o.rstrip("/") for o in origins}

    @app.before_request
    def same_origin_only() -> Any:
        # A page on another site must not be able to restock or place orders through a shopper's browser.
        origin = request.headers.get("Origin")
        if request.method not in ("GET", "HEAD", "OPTIONS") and origin and origin.rstrip("/") not in allowed_origins:
            return _error(403, "forbidden_origin", "The console accepts changes only from its own pages.")
        return None

    @app.context_processor
    def dashboard_link() -> dict[str, str]:
        # Every page links to the app's dashboard; the API's address follows a platform switch's rebuild.
        return {"dashboard_url": stack.services.settings.public_base_url.rstrip("/") + "/admin"}

    @app.errorhandler(ConsoleError)
    def console_error(error: ConsoleError) -> Any:
        return _error(error.status, error.code, error.message)

    @app.errorhandler(DomainError)
    def domain_error(error: DomainError) -> Any:
        return _error(error_status(error), error.code, error.message)

    @app.errorhandler(NotAvailable)
    def not_available(error: NotAvailable) -> Any:
        return _error(501, "not_available", str(error))

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Any:
        if request.path.startswith("/api/"):
            code = (error.name or "error").lower().replace(" ", "_")
            return _error(error.code or 500, code, error.description or error.name)
        return render_template("message.html", title=error.name, message=error.description, pages=PAGES), error.code

    @app.errorhandler(OSError)
    def api_unreachable(error: OSError) -> Any:
        return _error(503, "api_unreachable", f"The API did not answer ({error}). Is it still running?")

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> Any:
        log.exception("console request failed: %s %s", request.method, request.path)
        if request.path.startswith("/api/"):
            return _error(500, "console_error", f"The console hit an error: {error.__class__.__name__}: {error}")
        return render_template("message.html", title="Console error", message=str(error), pages=PAGES), 500

    # --- JSON API (DESIGN §6, plus what the pages need)

    @app.get("/api/status")
    def status() -> Any:
        return jsonify(
            api=stack.api_state,
            api_base=stack.services.settings.public_base_url,
            capabilities=stack.capabilities(),
            clock={"now": stack.clock.now(), "offset_s": stack.clock.offset_s},
            jobs=stack.queue_depths(),
            platform=stack.platform,
        )

    @app.get("/api/platform")
    def platform() -> Any:
        return jsonify(platform=stack.platform, platforms=stack.platforms())

    @app.post("/api/platform")
    def switch_platform() -> Any:
        body = _body(required=True)
        chosen = body.get("platform")
        if not isinstance(chosen, str):
            raise BadRequest("platform is required: generic, shopify or woocommerce.", code="missing_field")
        return jsonify(stack.switch_platform(chosen.strip().lower()))

    @app.get("/api/catalog")
    def catalog() -> Any:
        return jsonify(platform=stack.platform, products=views.catalog(stack.services, stack.stores))

    @app.get("/api/store/<path:sku>")
    def store_counts(sku: str) -> Any:
        sku = validate.sku(sku)
        counts = stack.store_counts(sku)
        return jsonify(platform=stack.platform, sku=sku, available=counts["available"], reserved=counts["reserved"])

    @app.get("/api/products")
    def products() -> Any:
        return jsonify(products=views.products(stack.services))

    @app.get("/api/outbox")
    def outbox() -> Any:
        return jsonify(messages=views.messages(stack.services))

    @app.post("/api/run/notifier")
    def run_notifier() -> Any:
        _body(required=False)
        return jsonify(stack.run_notifier())

    @app.post("/api/run/sweep")
    def run_sweep() -> Any:
        body = _body(required=False)
        now = body.get("now")
        at = None if now is None else validate.number(now, "now", 0, 32_503_680_000)
        return jsonify(stack.run_sweep(at))

    @app.post("/api/restock")
    def restock() -> Any:
        body = _body(required=True)
        sku = validate.sku(body.get("sku"))
        available = validate.whole_number(body, "available", 0, validate.MAX_UNITS)
        webhook_id, sent, answer = stack.restock(sku, available)
        return jsonify(
            platform=stack.platform,
            webhook_id=webhook_id,
            sent=sent,
            api={"status": answer.status, "body": answer.body},
            meaning=views.restock_meaning(stack.services, sku, answer.status, answer.body),
        )

    @app.get("/api/queue/<path:sku>")
    def queue(sku: str) -> Any:
        sku = validate.sku(sku)
        view = views.queue(stack.services, sku)
        if view is None:
            raise ConsoleError(404, "unknown_sku", f"There is no product with SKU {sku!r} in the catalogue.")
        return jsonify(view)

    @app.put("/api/catalog/<path:sku>")
    def put_product(sku: str) -> Any:
        sku = validate.sku(sku)
        body = _body(required=True)
        creating = stack.services.tables.catalog.get(sku, consistent=True) is None
        settings = validate.product_settings(body, creating=creating)
        saved = stack.services.tables.catalog.upsert(sku, settings)
        if "threshold" in settings and not creating:
            # As catalogue sync does: stock already on the shelf may meet a lowered threshold.
            stack.services.detector.reconsider(sku)
        return jsonify(created=creating, product=views.product(saved)), 201 if creating else 200

    @app.get("/api/clock")
    def clock() -> Any:
        return jsonify(now=stack.clock.now(), offset_s=stack.clock.offset_s)

    @app.post("/api/clock/advance")
    def advance() -> Any:
        body = _body(required=True)
        if "minutes" not in body:
            raise BadRequest("minutes is required.", code="missing_field")
        minutes = validate.number(body["minutes"], "minutes", 0, validate.MAX_MINUTES)
        if minutes <= 0:
            raise BadRequest("minutes must be more than 0: the clock only moves forward.", code="out_of_range")
        now = stack.advance_clock(minutes)
        return jsonify(now=now, offset_s=stack.clock.offset_s)

    @app.get("/api/audit/<path:sku>")
    def audit(sku: str) -> Any:
        sku = validate.sku(sku)
        return jsonify(sku=sku, events=views.audit(stack.services, sku))

    @app.get("/api/reservations/<reservation_id>")
    def reservation(reservation_id: str) -> Any:
        row = views.reservation(stack.services, reservation_id)
        if row is None:
            raise ConsoleError(404, "not_found", "There is no reservation with that id.")
        return jsonify(reservation=row)

    @app.post("/api/orders")
    def place_order() -> Any:
        body = _body(required=True)
        reservation_id = body.get("reservation_id")
        if not isinstance(reservation_id, str) or not reservation_id.strip() or len(reservation_id) > 128:
            raise BadRequest("reservation_id is required (a string).", code="missing_field")
        order_id = body.get("order_id")
        if order_id is not None and (not isinstance(order_id, str) or not 0 < len(order_id) <= 64):
            raise BadRequest("order_id must be a short string.", code="invalid_field")
        webhook_id, sent, answer = stack.place_order(reservation_id.strip(), order_id)
        return jsonify(
            platform=stack.platform,
            order_id=str(sent.get("order_id") or sent.get("id") or ""),
            webhook_id=webhook_id,
            sent=sent,
            api={"status": answer.status, "body": answer.body},
        )

    # --- pages

    def page(name: str, **context: Any) -> str:
        return render_template(
            f"{name}.html",
            active=name,
            pages=PAGES,
            api_base=stack.services.settings.public_base_url,
            shop_name=stack.services.settings.shop_name,
            platform=stack.platform,
            platforms=stack.platforms(),
            **context,
        )

    @app.get("/")
    def storefront() -> Any:
        return page("storefront", products=views.products(stack.services), shoppers=SHOPPERS)

    @app.get("/outbox")
    def outbox_page() -> Any:
        return page("outbox")

    @app.get("/controls")
    def controls_page() -> Any:
        # The tone picker says when the tone changes nothing here: the local stage's stand-in model
        # (devstack/fake_model.py) and the plain templates write the same copy whatever the tone.
        copy_mode = stack.services.settings.copy_mode
        return page("controls", products=views.products(stack.services), tones=TONES, copy_mode=copy_mode)

    @app.get("/checkout")
    def checkout_page() -> Any:
        reservation_id = request.args.get("reservation", "")
        row = views.reservation(stack.services, reservation_id)
        item = stack.services.tables.catalog.get(str(row["sku"])) if row else None
        status = 200 if row else 404
        return page("checkout", reservation=row, product=item, reservation_id=reservation_id), status

    return app
