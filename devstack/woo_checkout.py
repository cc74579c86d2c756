"""The fake WooCommerce's own storefront checkout, for the local stack: where a hold's claim link lands.

As the plugin's bisn_maybe_redeem_claim does (integrations/woocommerce/bisn-holds.php), a claim link opened on the
shop's home URL puts the held draft order in the shopper's session and sends them on (303) to the checkout page.
That page shows the held item and WooCommerce's classic checkout form, its fields named and labelled as
WC_Countries::get_default_address_fields and WC_Countries::get_address_fields give them
(plugins/woocommerce/includes/class-wc-countries.php: `billing_` + first_name, last_name, country, address_1,
city, postcode, then billing_email, billing_phone) and posted back as the no-JavaScript classic form is. A missing
required field re-shows the form with what was typed and WC_Checkout::validate_posted_data's notice
(plugins/woocommerce/includes/class-wc-checkout.php: "Billing %s" then "%s is a required field."). Placing the
order calls `FakeWooCommerce.checkout`, which pays the draft itself (as block checkout goes on with it), delivers
the order webhook to the app and answers with the "order received" page
(WC_Order::get_checkout_order_received_url: /checkout/order-received/<id>/?key=<order key>).

Never shipped to Lambda.
"""

from __future__ import annotations

import hashlib
import html
import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from devstack import fake_woocommerce
from devstack.fake_woocommerce import FakeWooCommerce, RestError

log = logging.getLogger("devstack.woo_checkout")

CHECKOUT_PATH = "/checkout/"
RECEIVED_PATH = re.compile(r"/checkout/order-received/(\d+)/?")
# A delivery of the store's order webhook to the app: its answer's HTTP status, None when nothing answered.
Deliver = Callable[[tuple[bytes, dict[str, str]]], int | None]
WsgiResult = Iterator[bytes] | list[bytes]


@dataclass(frozen=True)
class Field:
    """One billing field of the classic checkout form."""

    key: str  # the order's billing key; the form's input is `billing_<key>`
    label: str
    autocomplete: str
    kind: str = "text"

    @property
    def name(self) -> str:
        """The input's name and id."""
        return f"billing_{self.key}"

    @property
    def required(self) -> bool:
        """WC_Checkout's required billing fields are the ones the fake's checkout refuses an order without."""
        return self.key in fake_woocommerce.REQUIRED_BILLING


# In the order the classic form lists them (each field's `priority`), with WooCommerce's labels.
FIELDS = (
    Field("first_name", "First name", "given-name"),
    Field("last_name", "Last name", "family-name"),
    Field("country", "Country / Region", "country", "country"),
    Field("address_1", "Street address", "address-line1"),
    Field("city", "Town / City", "address-level2"),
    Field("postcode", "Postcode / ZIP", "postal-code"),
    Field("phone", "Phone", "tel", "tel"),
    Field("email", "Email address", "email", "email"),
)
# The countries the demo shop sells to (WooCommerce > Settings > General > Selling location(s)).
COUNTRIES = {
    "GB": "United Kingdom (UK)",
    "IE": "Ireland",
    "FR": "France",
    "DE": "Germany",
    "NL": "Netherlands",
    "US": "United States (US)",
}
# is_email's shape, near enough: something@domain.tld with no spaces.
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#1e1e1e;background:#fff;line-height:1.5}
header{background:#1e1e1e;color:#fff;padding:.75rem 1rem;font-weight:600}
main{max-width:46rem;margin:0 auto;padding:1rem}
table{width:100%;border-collapse:collapse;margin-bottom:1.5rem}
th,td{text-align:left;padding:.4rem;border-bottom:1px solid #c3c4c7}
td.amount,th.amount{text-align:right}
.form-row{margin:0 0 1rem}
label{display:block;font-weight:600}
input,select{font:inherit;width:100%;box-sizing:border-box;padding:.5rem;border:1px solid #50575e;border-radius:3px}
[aria-invalid=true]{border-color:#b32d2e;border-width:2px}
.required{color:#b32d2e;text-decoration:none;border:0}
.optional{font-weight:400}
.field-error{color:#b32d2e;margin:.25rem 0 0}
.woocommerce-error{border-left:4px solid #b32d2e;background:#fcf0f1;padding:.75rem 1rem .75rem 2rem}
button{font:inherit;font-weight:600;background:#1e1e1e;color:#fff;border:0;border-radius:3px;padding:.75rem 1.5rem}
.woocommerce-thankyou-order-received{font-size:1.25rem;font-weight:600}
"""
SECURITY_HEADERS = [
    ("Content-Type", "text/html; charset=utf-8"),
    ("Cache-Control", "no-store"),
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"),
]


class WooCheckout:
    """The storefront pages of a FakeWooCommerce: claim link, checkout and order received."""

    def __init__(
        self, store: FakeWooCommerce, lock: threading.RLock, deliver: Callable[[], Deliver | None], shop_name: str
    ) -> None:
        self.store = store
        self.shop_name = shop_name
        self.lock = lock
        self.deliver = deliver  # asked at each order: the stack connects it once the app's API is there
        self.cookie = f"wp_woocommerce_session_{hashlib.md5(store.store_url.encode()).hexdigest()}"  # COOKIEHASH
        self.sessions: dict[str, int] = {}  # session cookie -> the claimed draft order in its cart

    def handles(self, method: str, path: str, query: str) -> bool:
        """Whether a request is for the storefront rather than the REST API."""
        if path in ("", "/") and "bisn_claim=" in query:
            return method == "GET"
        return path in (CHECKOUT_PATH, CHECKOUT_PATH.rstrip("/")) or RECEIVED_PATH.fullmatch(path) is not None

    def __call__(self, environ: Mapping[str, Any], start_response: Callable[..., Any]) -> WsgiResult:
        method = str(environ.get("REQUEST_METHOD", "GET"))
        path = str(environ.get("PATH_INFO", "") or "/")
        query = str(environ.get("QUERY_STRING") or "")
        if path in ("", "/"):
            return self._claim(query, start_response)
        if match := RECEIVED_PATH.fullmatch(path):
            return self._received(int(match[1]), query, start_response)
        order_id = self.sessions.get(self._session(environ) or "")
        if method == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            raw = environ["wsgi.input"].read(length).decode("utf-8", "replace") if length else ""
            posted = {k: v[-1].strip() for k, v in parse_qs(raw, keep_blank_values=True).items()}
            return self._place_order(environ, order_id, posted, start_response)
        return self._checkout_page(order_id, {}, [], start_response)

    # --- the claim link

    def _claim(self, query: str, start_response: Callable[..., Any]) -> WsgiResult:
        try:
            with self.lock:
                order_id = self.store.claim(f"{self.store.store_url}/?{query}")
        except RestError as exc:
            # wp_die with the plugin's message and status.
            body = f"<h1>Back-in-stock hold</h1><p>{html.escape(exc.message)}</p>"
            return self._page(start_response, f"{exc.status} {_reason(exc.status)}", "Back-in-stock hold", body)
        token = secrets.token_urlsafe(24)
        self.sessions[token] = order_id
        cookie = f"{self.cookie}={token}; Path=/; HttpOnly; SameSite=Lax"
        start_response(
            "303 See Other",
            [("Location", f"{self.store.store_url}{CHECKOUT_PATH}"), ("Set-Cookie", cookie), *SECURITY_HEADERS[1:2]],
        )
        return [b""]

    def _session(self, environ: Mapping[str, Any]) -> str | None:
        jar = SimpleCookie()
        try:
            jar.load(str(environ.get("HTTP_COOKIE") or ""))
        except CookieError:  # a malformed Cookie header is no session, as PHP reads it
            return None
        morsel = jar.get(self.cookie)
        return morsel.value if morsel is not None else None

    # --- the checkout

    def _held(self, order_id: int | None) -> fake_woocommerce.Order | None:
        order = self.store.orders.get(order_id) if order_id is not None else None
        return order if order is not None and order.status == fake_woocommerce.DRAFT else None

    def _place_order(
        self,
        environ: Mapping[str, Any],
        order_id: int | None,
        posted: dict[str, str],
        start_response: Callable[..., Any],
    ) -> WsgiResult:
        errors = validate(posted)
        if errors or self._held(order_id) is None:
            return self._checkout_page(order_id, posted, errors, start_response)
        assert order_id is not None
        customer = {f.key: posted.get(f.name, "") for f in FIELDS if posted.get(f.name)}
        try:
            with self.lock:
                request = self.store.checkout(order_id, customer)
                order_key = self.store.order_json(self.store.orders[order_id])["order_key"]
        except RestError as exc:
            return self._checkout_page(order_id, posted, [(None, exc.message)], start_response)
        # wc_empty_cart: the session's cart no longer holds the claimed order.
        self.sessions.pop(self._session(environ) or "", None)
        self._send(request)
        target = f"{self.store.store_url}/checkout/order-received/{order_id}/?key={order_key}"
        start_response("303 See Other", [("Location", target), *SECURITY_HEADERS[1:2]])
        return [b""]

    def _send(self, request: tuple[bytes, dict[str, str]]) -> None:
        """The order.updated delivery, to the app; its answer is logged as WC_Webhook::log_delivery would."""
        deliver = self.deliver()
        if deliver is None:
            log.warning("the fake WooCommerce paid an order but no app is connected to deliver its webhook to")
            return
        try:
            status = deliver(request)
        except OSError as exc:
            log.warning("the order webhook from the fake WooCommerce's checkout was not delivered: %s", exc)
            status = None
        self.store.record_delivery(request[1], status)
        log.info("fake WooCommerce checkout: order webhook delivered, the API answered %s", status)

    def _checkout_page(
        self,
        order_id: int | None,
        posted: Mapping[str, str],
        errors: list[tuple[str | None, str]],
        start_response: Callable[..., Any],
        status: str = "200 OK",
    ) -> WsgiResult:
        order = self._held(order_id)
        if order is None:
            body = "<h1>Checkout</h1><p class='cart-empty'>Your cart is currently empty.</p>"
            return self._page(start_response, status, "Checkout", body)
        notices = ""
        if errors:
            items = "".join(
                f"<li id='{html.escape(key)}_error'>{html.escape(message)}</li>"
                if key
                else f"<li>{html.escape(message)}</li>"
                for key, message in errors
            )
            notices = (
                "<div role='alert'><p><strong>Your order could not be placed:</strong></p>"
                f"<ul class='woocommerce-error'>{items}</ul></div>"
            )
        invalid = {key for key, _ in errors if key}
        rows = "".join(_field_html(f, posted.get(f.name, ""), f.name in invalid) for f in FIELDS)
        body = (
            f"<h1>Checkout</h1>{notices}{self._review(order)}"
            f"<form class='checkout woocommerce-checkout' method='post' action='{CHECKOUT_PATH}' novalidate>"
            f"<h2>Billing details</h2>{rows}"
            "<p>Required fields are marked <abbr class='required' title='required'>*</abbr>.</p>"
            "<button type='submit' name='woocommerce_checkout_place_order' id='place_order' value='Place order'>"
            "Place order</button></form>"
        )
        return self._page(start_response, status, "Checkout", body)

    def _review(self, order: fake_woocommerce.Order) -> str:
        data = self.store.order_json(order)
        lines = "".join(
            f"<tr><td>{html.escape(item['name'])} <strong>&times;&nbsp;{item['quantity']}</strong>"
            f"<br><small>SKU {html.escape(item['sku'])}</small></td><td class='amount'>£{item['total']}</td></tr>"
            for item in data["line_items"]
        )
        subtotal = sum(float(item["total"]) for item in data["line_items"])
        shipping = float(fake_woocommerce.FLAT_RATE)
        return (
            "<h2 id='order_review_heading'>Your order</h2>"
            "<table class='shop_table woocommerce-checkout-review-order-table' aria-labelledby='order_review_heading'>"
            "<thead><tr><th scope='col'>Product</th><th scope='col' class='amount'>Subtotal</th></tr></thead>"
            f"<tbody>{lines}</tbody><tfoot>"
            f"<tr><th scope='row'>Shipping (flat rate)</th><td class='amount'>£{shipping:.2f}</td></tr>"
            f"<tr><th scope='row'>Total</th><td class='amount'><strong>£{subtotal + shipping:.2f}</strong></td></tr>"
            "</tfoot></table>"
        )

    def _page(self, start_response: Callable[..., Any], status: str, title: str, body: str) -> list[bytes]:
        shop = html.escape(self.shop_name)
        document = (
            "<!doctype html><html lang='en-GB'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(title)} – {shop}</title><style>{STYLE}</style></head>"
            f"<body><header>{shop} · WooCommerce</header><main>{body}</main></body></html>"
        )
        start_response(status, list(SECURITY_HEADERS))
        return [document.encode("utf-8")]

    # --- order received

    def _received(self, order_id: int, query: str, start_response: Callable[..., Any]) -> WsgiResult:
        order = self.store.orders.get(order_id)
        key = {k: v[-1] for k, v in parse_qs(query).items()}.get("key", "")
        data = self.store.order_json(order) if order is not None else None
        if data is None or not secrets.compare_digest(str(data["order_key"]), key):
            # WooCommerce's thank-you template for an order it cannot show.
            body = "<h1>Order received</h1><p>Sorry, this order is invalid and cannot be paid for.</p>"
            return self._page(start_response, "404 Not Found", "Order received", body)
        billing = data["billing"]
        paid = datetime.fromtimestamp(order.date_paid, tz=UTC).strftime("%d %B %Y") if order and order.date_paid else ""
        address = "<br>".join(
            html.escape(part)
            for part in (
                f"{billing.get('first_name', '')} {billing.get('last_name', '')}".strip(),
                billing.get("address_1", ""),
                billing.get("city", ""),
                billing.get("postcode", ""),
                COUNTRIES.get(billing.get("country", ""), billing.get("country", "")),
            )
            if part
        )
        body = (
            "<h1>Order received</h1>"
            "<p class='woocommerce-thankyou-order-received'>Thank you. Your order has been received.</p>"
            "<ul class='order_details'>"
            f"<li>Order number: <strong id='order-number'>{html.escape(str(data['number']))}</strong></li>"
            f"<li>Date: <strong>{html.escape(paid)}</strong></li>"
            f"<li>Email: <strong>{html.escape(billing.get('email', ''))}</strong></li>"
            f"<li>Total: <strong>£{html.escape(str(data['total']))}</strong></li>"
            f"<li>Status: <strong id='order-status'>{html.escape(str(data['status']))}</strong></li>"
            "</ul><h2>Billing address</h2>"
            f"<address>{address}</address>"
        )
        return self._page(start_response, "200 OK", "Order received", body)


def validate(posted: Mapping[str, str]) -> list[tuple[str | None, str]]:
    """WC_Checkout::validate_posted_data's notices for a posted form, each with the input it is about, in the
    form's order: a country it does not know, an email that is not one, a required field left empty."""
    errors: list[tuple[str | None, str]] = []
    for field in FIELDS:
        value = posted.get(field.name, "")
        label = f"Billing {field.label}"
        if field.kind == "country" and value and value not in COUNTRIES:
            errors.append((field.name, f"'{value}' is not a valid country code."))
        elif field.kind == "email" and value and not EMAIL.fullmatch(value):
            errors.append((field.name, f"{label} is not a valid email address."))
        elif field.required and not value:
            errors.append((field.name, f"{label} is a required field."))
    return errors


def _field_html(field: Field, value: str, invalid: bool) -> str:
    marker = (
        " <abbr class='required' title='required'>*</abbr>"
        if field.required
        else " <span class='optional'>(optional)</span>"
    )
    attributes = f"id='{field.name}' name='{field.name}' autocomplete='{field.autocomplete}'"
    if field.required:
        attributes += " aria-required='true'"
    if invalid:
        attributes += f" aria-invalid='true' aria-describedby='{field.name}_error'"
    if field.kind == "country":
        options = "<option value=''>Select a country / region…</option>" + "".join(
            f"<option value='{code}'{' selected' if code == value else ''}>{html.escape(name)}</option>"
            for code, name in COUNTRIES.items()
        )
        control = f"<select {attributes}>{options}</select>"
    else:
        control = f"<input type='{field.kind}' {attributes} value='{html.escape(value, quote=True)}'>"
    return (
        f"<p class='form-row' id='{field.name}_field'>"
        f"<label for='{field.name}'>{html.escape(field.label)}{marker}</label>{control}</p>"
    )


def _reason(status: int) -> str:
    return {400: "Bad Request", 404: "Not Found", 410: "Gone"}.get(status, "Error")
