"""An in-memory WooCommerce for the tests and the local stack: exactly the REST v3 calls and webhooks the connector uses.

What it keeps of the real store (see chalicelib/platforms/woocommerce.py for the sources):
  * Authentication as WC_REST_Authentication::perform_basic_authentication (includes/class-wc-rest-authentication.php):
    the `consumer_key` and `consumer_secret` query parameters first, else HTTP Basic; a known key
    with the wrong secret is 401 `woocommerce_rest_authentication_error`; no key, or an unknown one, leaves the
    request unauthenticated and the route's permission check answers 401 `woocommerce_rest_cannot_view` (GET),
    `_create` (POST), `_edit` (PUT, PATCH) or `_delete`. Query keys count over HTTPS only, as there; Basic is
    taken over plain HTTP too, for the local stack. `strip_authorization` plays a host that drops the
    Authorization header before PHP sees it.
  * Pages with `per_page` (at most 100) and `page`, and the X-WP-Total / X-WP-TotalPages headers.
  * Errors as `{"code", "message", "data": {"status"}}`.
  * Stock moves with order status as in includes/wc-stock-functions.php: an order reaching on-hold, processing or
    completed takes its units (once, remembered per line as `_reduced_stock`); one moving to cancelled or pending
    gives them back. A pending order created over REST holds nothing. Creating an order does not check stock.
  * Payment (`pay_order`) is WC_Order::payment_complete: from pending, on-hold, failed or cancelled to processing,
    with date_paid set, taking stock only if the order had not already.
  * Reserved stock as ReserveStock (src/Checkout/Helpers/ReserveStock.php) keeps it: a row per order with an
    `expires`, counted while the order is checkout-draft or pending and `expires` is ahead, never moving
    stock_quantity; inserted only while stock less others' reservations covers it. `counts` gives what the
    storefront can still sell (stock less reservations) and what our holds reserve; a lapsed one counts for nothing.
  * The shipped plugin (integrations/woocommerce/bisn-holds.php): POST /wp-json/wc-bisn/v1/holds makes a hold's
    checkout-draft order and reserves its unit (409 `woocommerce_product_not_enough_stock` otherwise), `claim`
    checks a claim link as bisn_verify_claim does (400 altered, 410 ended) and `checkout` is the shop's checkout:
    it requires the billing name, address, city, postcode, country and email (WC_Checkout's required fields),
    charges flat-rate shipping, and pays the draft, which keeps its stamp. Product resources carry `bisn_reserved`.
  * One webhook per topic, listed by GET /webhooks (WC_REST_Webhooks_V2_Controller: status active, paused or
    disabled, no failure count). `record_delivery` applies WC_Webhook::log_delivery to a delivery's answer: a 2xx,
    301 or 302 resets the count, and a failure that finds more than 5 recorded (woocommerce_max_webhook_delivery_failures)
    disables the webhook, which then sends nothing until it is set active again. A failed delivery is never resent.
  * The "Enable stock management" setting at GET/PUT /settings/products/woocommerce_manage_stock (off: no order
    takes stock), and the plugin's GET /wp-json/wc-bisn/v1/store-check (`plugin_installed`, `unhooked`).
  * Webhooks signed as WC_Webhook::deliver does: the JSON body as PHP's json_encode writes it, base64 HMAC-SHA256
    of it in X-WC-Webhook-Signature, and the other X-WC-Webhook-* headers.
  * Asynchronous delivery: WooCommerce hands each delivery to Action Scheduler (wc_deliver_webhook_async, the
    woocommerce_webhook_deliver_async filter, true by default), sent on a later request in no promised order. Each
    change's delivery is returned to the caller; after `queue_webhooks(post)` it is also queued, and
    `deliver(order=, repeat=, drop=, seed=)` posts the queue (devstack/webhook_outbox.py), each answer applied as
    `record_delivery` does. Never retried: a `repeat` is the store firing one change twice (a topic with several
    hooks, https://github.com/woocommerce/woocommerce/issues/24729 and pull 25183), the same body under a new
    X-WC-Webhook-Delivery-ID (wp_hash of the webhook id and the second it is sent). `delete_product` sends
    product.deleted, whose body is the id alone.
  * Backorders as the REST API v3 product and variation properties give them
    (https://woocommerce.github.io/woocommerce-rest-api-docs/#product-properties): `backorders` "no", "notify" or
    "yes" (counted only where `manage_stock` is on), `backorders_allowed`, `backordered`, and `stock_status`
    "instock", "outofstock" or "onbackorder" (the values of the ProductStockStatus enum,
    https://woocommerce.github.io/code-reference/classes/Automattic-WooCommerce-Enums-ProductStockStatus.html). A
    managed product at 0 or below is "onbackorder" when backorders are allowed, else "outofstock"
    (WC_Product_Data_Store_CPT's stock status from the quantity, with the default out-of-stock threshold 0); a
    variable product is "instock" if a variation is, else "onbackorder" if one is. `sell` is a storefront sale: a
    managed product without backorders refuses more than it has, one with backorders goes below zero, as
    wc_update_product_stock takes the units whatever is left.

Never shipped to Lambda.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from chalicelib.platforms.base import StoreUnavailable
from chalicelib.platforms.http import HttpResponse
from devstack.webhook_outbox import Delivery, Post, SendOrder, Sent, WebhookOutbox

CATALOG_PATH = Path(__file__).with_name("demo-catalog.json")
API_PREFIX = "/wp-json/wc/v3"
RESERVATION_META_KEY = "_bisn_reservation_id"
USER_AGENT = "WooCommerce/9.4.0 Hookshot (WordPress/6.7)"

# Demo products sold in more than one variant: (parent name, attribute, options, the option the demo SKU is).
VARIABLE = {
    "WW-BEANIE-MOSS": ("Moss-stitch beanie", "Colour", ("Forest green", "Charcoal"), "Forest green"),
    "WW-CARDI-RUST": ("Rust cable-knit cardigan", "Size", ("S", "M", "L"), "M"),
}
TAKES_STOCK = frozenset({"on-hold", "processing", "completed"})  # wc_maybe_reduce_stock_levels
GIVES_BACK = frozenset({"cancelled", "pending"})  # wc_maybe_increase_stock_levels
STATUSES = ("pending", "processing", "on-hold", "completed", "cancelled", "refunded", "failed")
# The topics docs/PLATFORMS.md has the shop subscribe, one webhook each (ids from `webhook_id` on).
WEBHOOK_TOPICS = ("product.updated", "product.created", "product.deleted", "order.created", "order.updated")
WEBHOOK_STATUSES = ("active", "paused", "disabled")  # wc_get_webhook_statuses()
# WC_Webhook::failed_delivery: a failure finding more than this many recorded disables the webhook.
MAX_DELIVERY_FAILURES = 5  # the default of the woocommerce_max_webhook_delivery_failures filter
# What wc_maybe_reduce_stock_levels is hooked on (includes/wc-stock-functions.php); an inventory plugin may unhook it.
STOCK_REDUCTION_HOOKS = (
    "woocommerce_payment_complete",
    "woocommerce_order_status_completed",
    "woocommerce_order_status_processing",
    "woocommerce_order_status_on-hold",
)
PLUGIN_CHECK_PATH = "/wp-json/wc-bisn/v1/store-check"
PLUGIN_HOLDS_PATH = "/wp-json/wc-bisn/v1/holds"
DRAFT = "checkout-draft"
RESERVING = frozenset({DRAFT, "pending"})  # the statuses ReserveStock::get_query_for_reserved_stock counts
# WC_Checkout's default required fields (WC_Countries::get_default_address_fields, billing_email, billing_phone
# optional): the order a checkout makes always has them.
REQUIRED_BILLING = ("first_name", "last_name", "address_1", "city", "postcode", "country", "email")
FLAT_RATE = "4.95"  # the one shipping method of the fake's only zone (flat_rate), charged on every order
# The shopper the fake's own checkout uses when a caller pays without naming one (tests, the local console).
DEMO_CUSTOMER = {
    "first_name": "Ada",
    "last_name": "Lovelace",
    "address_1": "12 Marchmont Street",
    "city": "London",
    "postcode": "WC1N 1AF",
    "country": "GB",
    "email": "ada@example.com",
}


class RestError(Exception):
    """A REST error in WooCommerce's shape."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass
class Product:
    """A simple product, a variable parent or a variation."""

    id: int
    name: str
    type: str  # simple, variable, variation
    sku: str
    price: str
    parent_id: int = 0
    attribute: tuple[str, str] | None = None  # (name, option) for a variation
    stock: int = 0
    manage_stock: bool = True
    status: str = "publish"
    backorders: str = "no"
    variations: list[int] = field(default_factory=list)
    modified: float = 0.0


@dataclass
class Order:
    """An order with its lines (product id, variation id, quantity, units taken)."""

    id: int
    status: str
    lines: list[dict[str, Any]]
    meta: list[dict[str, Any]]
    created_via: str
    created: float
    modified: float
    customer_note: str = ""
    date_paid: float | None = None
    stock_reduced: bool = False
    reserved_until: float | None = None  # its wc_reserved_stock rows' `expires` (a hold's draft order)
    billing: dict[str, str] = field(default_factory=dict)
    shipping: dict[str, str] = field(default_factory=dict)
    shipping_total: str = "0.00"
    payment_method: str = ""


@dataclass
class Webhook:
    """A webhook as WC_Webhook keeps it: its status and its count of consecutive failed deliveries."""

    id: int
    topic: str
    delivery_url: str
    status: str = "active"
    failure_count: int = 0
    modified: float = 0.0


class FakeWooCommerce:
    """An in-memory WooCommerce: products from devstack/demo-catalog.json (two of them with variations), orders,
    the REST calls the connector makes, and signed webhooks."""

    def __init__(
        self,
        *,
        store_url: str = "http://127.0.0.1:8002",
        consumer_key: str = "ck_fake_key",
        consumer_secret: str = "cs_fake_secret",
        webhook_secret: str = "fake-webhook-secret",
        webhook_id: int = 7,
        catalog_path: Path = CATALOG_PATH,
        stock: Mapping[str, int] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store_url = store_url.rstrip("/")
        self.consumer_key = consumer_key
        self.consumer_secret = consumer_secret
        self.webhook_secret = webhook_secret
        self.webhook_id = webhook_id
        self.clock = clock
        self.products: dict[int, Product] = {}
        self.orders: dict[int, Order] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path?query) as received
        self.sent: list[tuple[bytes, dict[str, str]]] = []  # webhooks the store produced, oldest first
        self._faults: list[tuple[int | None, dict[str, str]]] = []  # status (None: no answer) for the next calls
        self._after_faults: list[str] = []  # "METHOD /route" (or "*") of calls done whose answer is then lost
        self._next_order_id = 501
        self.strip_authorization = False
        self.manage_stock = "yes"  # WooCommerce > Settings > Products > Inventory > Enable stock management
        self.plugin_installed = True  # integrations/woocommerce/bisn-holds.php in mu-plugins
        self.unhooked: set[str] = set()  # STOCK_REDUCTION_HOOKS an inventory plugin removed
        self.webhooks = {
            webhook_id + i: Webhook(webhook_id + i, topic, "https://api.example/webhooks/woocommerce", modified=clock())
            for i, topic in enumerate(WEBHOOK_TOPICS)
        }
        # None: each change's delivery is only returned (and kept in `sent`), for the caller to post; see
        # queue_webhooks.
        self.outbox: WebhookOutbox | None = None
        self._lock = threading.RLock()
        self._seed(catalog_path, stock or {})

    # ------------------------------------------------------------------ seeding and helpers

    def _seed(self, catalog_path: Path, stock: Mapping[str, int]) -> None:
        now = self.clock()
        next_id = 101
        demo = json.loads(catalog_path.read_text())["products"]
        for index, item in enumerate(demo):
            sku, name = str(item["sku"]), str(item["name"])
            price = f"{24 + 6 * index}.00"
            if sku in VARIABLE:
                parent_name, attribute, options, own = VARIABLE[sku]
                parent = Product(next_id, parent_name, "variable", sku.rsplit("-", 1)[0], price, modified=now)
                parent.manage_stock = False
                self.products[parent.id] = parent
                next_id += 1
                for option in options:
                    variant_sku = sku if option == own else f"{sku}-{_slug(option).upper()}"
                    variation = Product(
                        next_id,
                        f"{parent_name} - {option}",
                        "variation",
                        variant_sku,
                        price,
                        parent_id=parent.id,
                        attribute=(attribute, option),
                        stock=stock.get(variant_sku, 0),
                        modified=now,
                    )
                    self.products[variation.id] = variation
                    parent.variations.append(variation.id)
                    next_id += 1
            else:
                self.products[next_id] = Product(
                    next_id, name, "simple", sku, price, stock=stock.get(sku, 0), modified=now
                )
                next_id += 1

    def by_sku(self, sku: str) -> Product:
        """The product or variation with this SKU."""
        for product in self.products.values():
            if product.sku == sku and product.type != "variable":
                return product
        raise KeyError(sku)

    def fail_next(self, status: int | None, times: int = 1, headers: Mapping[str, str] | None = None) -> None:
        """Answer the next `times` REST calls with `status` (a REST error body), or not at all when None."""
        with self._lock:
            self._faults.extend([(status, dict(headers or {}))] * times)

    def timeout_after_next(self, call: str = "*") -> None:
        """The next call (`call` names it as "POST /orders", which the plugin's hold route answers to as well, or
        "*" for any) is done, but its answer is lost."""
        with self._lock:
            self._after_faults.append(call)

    def counts(self, sku: str) -> dict[str, int]:
        """What the storefront can still sell of a SKU (its stock less what is reserved), and the units our holds
        reserve. A reservation past its `expires` no longer counts, as WooCommerce's query ignores it."""
        with self._lock:
            product = self.by_sku(sku)
            reserved = self.reserved(product, stamped_only=True)
            free = product.stock - self.reserved(product) if product.manage_stock else product.stock
            return {"available": max(free, 0), "reserved": reserved}

    def reserved(self, product: Product, *, stamped_only: bool = False, exclude: int = 0) -> int:
        """ReserveStock::get_reserved_stock: units in wc_reserved_stock for live checkout-draft and pending orders."""
        now = self.clock()
        total = 0
        for order in self.orders.values():
            if order.id == exclude or order.status not in RESERVING or (stamped_only and not _stamped(order)):
                continue
            if order.reserved_until is None or order.reserved_until <= now:
                continue
            total += sum(line["quantity"] for line in order.lines if self._line_product(line) is product)
        return total

    def order_for(self, reservation_id: str) -> Order | None:
        """The order our hold stamped with this reservation id."""
        for order in self.orders.values():
            if any(m["key"] == RESERVATION_META_KEY and m["value"] == reservation_id for m in order.meta):
                return order
        return None

    # ------------------------------------------------------------------ store actions with webhooks

    def set_stock(self, sku: str, quantity: int) -> tuple[bytes, dict[str, str]]:
        """The shop sets a SKU's stock; the product.updated delivery WooCommerce sends for it."""
        with self._lock:
            product = self.by_sku(sku)
            product.stock = quantity
            product.modified = self.clock()
            return self.webhook_request("product.updated", self.product_json(product))

    def stock_webhook(self, sku: str) -> tuple[bytes, dict[str, str]]:
        """The product.updated WooCommerce sends when a SKU's stock_quantity changes by itself (an order taking its
        units or giving them back, a sale on the storefront): the product as it stands now, modified now."""
        with self._lock:
            product = self.by_sku(sku)
            product.modified = self.clock()
            return self.webhook_request("product.updated", self.product_json(product))

    def set_backorders(self, sku: str, backorders: str) -> tuple[bytes, dict[str, str]]:
        """The shop sets "Allow backorders?" ("no", "notify" or "yes"); the product.updated delivery it sends."""
        if backorders not in ("no", "notify", "yes"):
            raise ValueError(backorders)
        with self._lock:
            product = self.by_sku(sku)
            product.backorders = backorders
            product.modified = self.clock()
            return self.webhook_request("product.updated", self.product_json(product))

    def sell(self, sku: str, quantity: int = 1) -> tuple[bytes, dict[str, str]]:
        """A shopper buys `quantity` on the storefront (RestError 409 when a product without backorders has too few
        units); the product.updated delivery for its new stock, which backorders can take below zero."""
        with self._lock:
            product = self.by_sku(sku)
            if product.manage_stock:
                if product.backorders == "no" and product.stock - self.reserved(product) < quantity:
                    raise RestError(409, "woocommerce_product_not_enough_stock", "Not enough units are available.")
                product.stock -= quantity
            product.modified = self.clock()
            return self.webhook_request("product.updated", self.product_json(product))

    def stock_status(self, product: Product) -> str:
        """The product's stock_status as WooCommerce derives it (instock, outofstock or onbackorder)."""
        if product.type == "variable":
            statuses = {self.stock_status(self.products[v]) for v in product.variations}
            return next((s for s in ("instock", "onbackorder") if s in statuses), "outofstock")
        if product.manage_stock:
            if product.stock > 0:
                return "instock"
            return "outofstock" if product.backorders == "no" else "onbackorder"
        return "instock"  # set by hand on an unmanaged product; the fake's stay in stock

    def pay_order(self, order_id: int, customer: Mapping[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
        """The shopper pays (WC_Order::payment_complete); the order.updated delivery that follows. A hold's draft
        order is first checked out with `customer`'s address and email (DEMO_CUSTOMER when none is named)."""
        with self._lock:
            order = self.orders[order_id]
            if order.status == DRAFT:
                return self.checkout(order_id, dict(DEMO_CUSTOMER if customer is None else customer))
            if order.status not in ("pending", "on-hold", "failed", "cancelled"):
                raise ValueError(f"order {order_id} is {order.status}: payment_complete does nothing")
            order.date_paid = order.date_paid or self.clock()
            self._set_status(order, "processing")
            return self.webhook_request("order.updated", self.order_json(order))

    def claim(self, url: str) -> int:
        """The shopper opens a claim link: the plugin's bisn_claim_redeem. The draft order it names goes into their
        cart (the draft is the order block checkout goes on with); RestError 400 for a link that is not ours or was
        altered, 410 for one past its expiry or a hold that ended."""
        with self._lock:
            query = {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}
            try:
                reservation_id = query["bisn_claim"]
                order_id, expires = int(query["bisn_order"]), int(query["bisn_expires"])
            except (KeyError, ValueError) as exc:
                raise RestError(400, "bisn_claim_invalid", "This link is not complete.") from exc
            message = f"bisn-claim-v1|{reservation_id}|{order_id}|{expires}".encode()
            expected = hmac.new(self.webhook_secret.encode(), message, hashlib.sha256).hexdigest()
            if not any(hmac.compare_digest(expected, sig) for sig in query.get("bisn_sig", "").split(",")):
                raise RestError(400, "bisn_claim_invalid", "This link is not complete.")
            order = self.orders.get(order_id)
            if order is None or reservation_id not in _stamps(order):
                raise RestError(400, "bisn_claim_invalid", "This link is not complete.")
            if expires <= self.clock() or order.status != DRAFT or not order.reserved_until:
                raise RestError(410, "bisn_claim_expired", "This hold has ended.")
            return order.id

    def checkout(self, order_id: int, customer: Mapping[str, str]) -> tuple[bytes, dict[str, str]]:
        """The shopper places the claimed cart's order at the checkout and pays (WC_Checkout::process_checkout,
        then WC_Order::payment_complete): the billing address and email are required (RestError 400 naming the
        missing ones), shipping is charged, and the draft becomes a processing order keeping its meta. Payment
        takes the stock and the reservation ends (wc_release_stock_for_order on payment complete)."""
        with self._lock:
            order = self.orders.get(order_id)
            if order is None or order.status != DRAFT:
                raise RestError(400, "woocommerce_checkout_invalid_order", "This order cannot be checked out.")
            missing = [name for name in REQUIRED_BILLING if not str(customer.get(name) or "").strip()]
            if "@" not in str(customer.get("email") or "") and "email" not in missing:
                missing.append("email")
            if missing:
                raise RestError(400, "woocommerce_checkout_required_fields", "Required: " + ", ".join(missing))
            if not order.reserved_until or order.reserved_until <= self.clock():
                # The reservation lapsed: the checkout checks stock like anybody else's.
                for line in order.lines:
                    product = self._line_product(line)
                    short = product and product.stock - self.reserved(product) < line["quantity"]
                    if product and product.manage_stock and product.backorders == "no" and short:
                        raise RestError(409, "woocommerce_product_not_enough_stock", "Not enough stock.")
            order.billing = {name: str(customer.get(name) or "") for name in REQUIRED_BILLING}
            order.shipping = {k: v for k, v in order.billing.items() if k != "email"}
            if str(customer.get("phone") or "").strip():  # billing_phone: optional at WC_Checkout
                order.billing["phone"] = str(customer["phone"]).strip()
            order.shipping_total = FLAT_RATE
            order.payment_method = "bacs" if customer.get("payment_method") == "bacs" else "stripe"
            order.created_via = "store-api"
            order.date_paid = self.clock()
            order.reserved_until = None
            self._set_status(order, "processing")
            return self.webhook_request("order.updated", self.order_json(order))

    def place_hold(self, request: Mapping[str, Any]) -> tuple[Order, bool]:
        """The plugin's POST /wc-bisn/v1/holds (bisn_rest_place_hold): a draft order for one unit stamped with the
        reservation id, its stock reserved until `expires_at` if enough is free (ReserveStock's insert-if-enough);
        the same draft again for a reservation that has one. (order, created)."""
        reservation_id = request.get("reservation_id")
        if not isinstance(reservation_id, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", reservation_id):
            raise RestError(400, "rest_invalid_param", "Invalid parameter(s): reservation_id")
        try:
            product_id, variation_id = int(request["product_id"]), int(request.get("variation_id") or 0)
            expires = int(request["expires_at"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RestError(400, "rest_invalid_param", "Invalid parameter(s): product_id, expires_at") from exc
        existing = self.order_for(reservation_id)
        if existing is not None:
            return existing, False
        now = self.clock()
        if expires <= now:
            raise RestError(400, "rest_invalid_param", "Invalid parameter(s): expires_at")
        product = self.products.get(variation_id or product_id)
        if product is None or product.type == "variable" or (variation_id and product.parent_id != product_id):
            raise RestError(404, "bisn_invalid_product", "No such product.")
        if product.status != "publish":
            raise RestError(409, "woocommerce_product_out_of_stock", "The product is not for sale.")
        if product.manage_stock and product.backorders == "no" and product.stock - self.reserved(product) < 1:
            raise RestError(409, "woocommerce_product_not_enough_stock", "Not enough units are available.")
        if not product.manage_stock and product.stock <= 0:
            raise RestError(409, "woocommerce_product_out_of_stock", "The product is out of stock.")
        line = {"product_id": product_id, "variation_id": variation_id, "quantity": 1, "reduced": 0}
        meta: list[dict[str, Any]] = [
            {"key": RESERVATION_META_KEY, "value": reservation_id},
            {"key": "_bisn_hold_expires", "value": expires},
        ]
        order = Order(self._next_order_id, DRAFT, [line], meta, "bisn-claim", now, now, reserved_until=float(expires))
        self._next_order_id += 1
        self.orders[order.id] = order
        return order, True

    def ping_request(self) -> tuple[bytes, dict[str, str]]:
        """What WC_Webhook::deliver_ping posts when the webhook is saved: a bare form body, unsigned."""
        return f"webhook_id={self.webhook_id}".encode(), {
            "Content-Type": "application/x-www-form-urlencoded",
            "User-Agent": USER_AGENT,
        }

    def webhook_request(self, topic: str, payload: Mapping[str, Any] | Iterable[Any]) -> tuple[bytes, dict[str, str]]:
        """A delivery as WC_Webhook::deliver sends it: the body and its headers, signed with the webhook secret."""
        body = php_json(payload)
        signature = base64.b64encode(hmac.new(self.webhook_secret.encode(), body, hashlib.sha256).digest()).decode()
        resource, _, event = topic.partition(".")
        now = self.clock()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-WC-Webhook-Source": f"{self.store_url}/",  # home_url( '/' )
            "X-WC-Webhook-Topic": topic,
            "X-WC-Webhook-Resource": resource,
            "X-WC-Webhook-Event": event,
            "X-WC-Webhook-Signature": signature,
            "X-WC-Webhook-ID": str(self.webhook_id),
            # wp_hash( webhook id . time() ): a new value every second, whatever is sent.
            "X-WC-Webhook-Delivery-ID": hashlib.md5(f"{self.webhook_id}{int(now)}".encode()).hexdigest(),
        }
        hook = self.webhook_for(topic)
        if hook is not None:
            headers["X-WC-Webhook-ID"] = str(hook.id)
            headers["X-WC-Webhook-Delivery-ID"] = hashlib.md5(f"{hook.id}{int(now)}".encode()).hexdigest()
        # WC_Webhook::should_deliver: a paused or disabled webhook sends nothing; the delivery is still built for
        # callers that post it themselves.
        if hook is None or hook.status == "active":
            self.sent.append((body, headers))
            if self.outbox is not None:
                self.outbox.queue(body, headers)
        return body, headers

    def queue_webhooks(self, post: Post) -> WebhookOutbox:
        """From now on every delivery an active webhook produces is also queued, and posted by `deliver` through
        `post` (devstack/webhook_outbox.py): late, in any order, repeated. The methods still return each delivery;
        a caller using the outbox posts only through it."""
        self.outbox = WebhookOutbox(post=post, again=self._again, settle=self._settle)
        return self.outbox

    def deliver(
        self,
        *,
        order: SendOrder = "fifo",
        repeat: int = 1,
        drop: Callable[[Delivery], bool] | None = None,
        seed: int = 0,
    ) -> list[Sent]:
        """Post the queued deliveries (WebhookOutbox.deliver), each answer applied to its webhook as
        `record_delivery` does. WooCommerce never retries: a repeat is the store firing the same change again (a
        topic with several hooks, https://github.com/woocommerce/woocommerce/issues/24729), the same body and
        signature under a new X-WC-Webhook-Delivery-ID, and every delivery leaves the outbox after its sends."""
        if self.outbox is None:
            raise RuntimeError("queue_webhooks first: deliveries are returned to the caller, not queued")
        return self.outbox.deliver(order=order, repeat=repeat, drop=drop, seed=seed)

    def _again(self, delivery: Delivery) -> dict[str, str]:
        # wp_hash( webhook id . time() ): the second firing runs in a later second, so its delivery id differs.
        headers = dict(delivery.headers)
        hook_id = headers.get("X-WC-Webhook-ID", "")
        headers["X-WC-Webhook-Delivery-ID"] = hashlib.md5(
            f"{hook_id}{int(self.clock()) + delivery.sends}".encode()
        ).hexdigest()
        return headers

    def _settle(self, delivery: Delivery, status: int | None) -> bool:
        self.record_delivery(delivery.headers, status)
        return True

    def delete_product(self, sku: str) -> tuple[bytes, dict[str, str]]:
        """The shop deletes (permanently) the product or variation with this SKU; the product.deleted delivery, whose
        body is the product's id alone (WC_Webhook::build_payload for a deleted resource: `array( 'id' => $id )`)."""
        with self._lock:
            product = self.by_sku(sku)
            del self.products[product.id]
            return self.webhook_request("product.deleted", {"id": product.id})

    def webhook_for(self, topic: str) -> Webhook | None:
        """The webhook subscribed to a topic, if the shop made one."""
        return next((w for w in self.webhooks.values() if w.topic == topic), None)

    def record_delivery(self, headers: Mapping[str, str], status: int | None) -> None:
        """What WC_Webhook::log_delivery does with the answer to a delivery (None: no answer at all).

        A 2xx, 301 or 302 resets the failure count; anything else is WC_Webhook::failed_delivery, which disables
        the webhook when it finds more than MAX_DELIVERY_FAILURES failures already recorded, and otherwise counts
        one more. WooCommerce never sends a failed delivery again.
        """
        hook = self.webhooks.get(int(headers.get("X-WC-Webhook-ID", "0") or 0))
        if hook is None:
            return
        if status is not None and 200 <= status < 303:
            hook.failure_count = 0
        elif hook.failure_count > MAX_DELIVERY_FAILURES:
            hook.status = "disabled"
        else:
            hook.failure_count += 1
        hook.modified = self.clock()

    def webhook_json(self, hook: Webhook) -> dict[str, Any]:
        """GET /webhooks/<id> (WC_REST_Webhooks_V2_Controller::prepare_item_for_response: no failure count)."""
        resource, _, event = hook.topic.partition(".")
        return {
            "id": hook.id,
            "name": f"bisn {hook.topic}",
            "status": hook.status,
            "topic": hook.topic,
            "resource": resource,
            "event": event,
            "hooks": [],
            "delivery_url": hook.delivery_url,
            "date_created": _wc_date(hook.modified),
            "date_created_gmt": _wc_date(hook.modified),
            "date_modified": _wc_date(hook.modified),
            "date_modified_gmt": _wc_date(hook.modified),
        }

    # ------------------------------------------------------------------ resources as the REST API shows them

    def product_json(self, product: Product, *, as_variation: bool = False) -> dict[str, Any]:
        """GET /products/<id> (a variation through it has type "variation"), or a variations-endpoint item."""
        modified = _wc_date(product.modified)
        stock_status = self.stock_status(product)
        backorders_allowed = product.manage_stock and product.backorders != "no"
        permalink = f"{self.store_url}/product/{_slug(product.name)}/"
        image = {"id": 900 + product.id, "src": f"{self.store_url}/wp-content/uploads/{_slug(product.sku)}.jpg"}
        data: dict[str, Any] = {
            "id": product.id,
            "name": product.name,
            "slug": _slug(product.name),
            "permalink": permalink,
            "date_created": modified,
            "date_created_gmt": modified,
            "date_modified": modified,
            "date_modified_gmt": modified,
            "type": product.type,
            "status": product.status,
            "sku": product.sku,
            "price": product.price,
            "regular_price": product.price,
            "sale_price": "",
            "purchasable": product.type != "variable" or bool(product.variations),
            "manage_stock": product.manage_stock,
            "stock_quantity": product.stock if product.manage_stock else None,
            "stock_status": stock_status,
            "backorders": product.backorders,
            "backorders_allowed": backorders_allowed,
            "backordered": stock_status == "onbackorder",
            "parent_id": product.parent_id,
            "meta_data": [],
        }
        if self.plugin_installed and product.manage_stock and product.type != "variable":
            # The plugin's woocommerce_rest_prepare_product_object filters (REST reads and webhook payloads alike).
            data["bisn_reserved"] = self.reserved(product, stamped_only=True)
        if product.type == "variation":
            name, option = product.attribute or ("", "")
            attributes = [{"id": 0, "name": name, "option": option}]
            if as_variation:
                del data["name"], data["slug"], data["type"], data["parent_id"]
                data["image"] = image
            else:
                data["images"] = [image]
                data["variations"] = []
            data["attributes"] = attributes
            parent = self.products[product.parent_id]
            data["permalink"] = (
                f"{self.store_url}/product/{_slug(parent.name)}/?attribute_{_slug(name)}={_slug(option)}"
            )
        else:
            data["images"] = [image]
            data["variations"] = list(product.variations)
            data["attributes"] = []
            variations = [self.products[v] for v in product.variations]
            if variations and variations[0].attribute:
                options = [v.attribute[1] for v in variations if v.attribute]
                data["attributes"] = [
                    {"id": 0, "name": variations[0].attribute[0], "options": options, "variation": True}
                ]
        return data

    def order_json(self, order: Order) -> dict[str, Any]:
        """GET /orders/<id>."""
        lines = []
        total = 0.0
        for index, line in enumerate(order.lines):
            product = self._line_product(line)
            price = float(product.price) if product else 0.0
            total += price * line["quantity"]
            lines.append(
                {
                    "id": order.id * 10 + index,
                    "name": product.name if product else "",
                    "product_id": line["product_id"],
                    "variation_id": line["variation_id"],
                    "quantity": line["quantity"],
                    "sku": product.sku if product else "",
                    "price": price,
                    "subtotal": f"{price * line['quantity']:.2f}",
                    "total": f"{price * line['quantity']:.2f}",
                    "meta_data": [{"id": 1, "key": "_reduced_stock", "value": str(line["reduced"])}]
                    if line["reduced"]
                    else [],
                }
            )
        key = f"wc_order_{hashlib.sha256(str(order.id).encode()).hexdigest()[:13]}"
        return {
            "id": order.id,
            "parent_id": 0,
            "number": str(order.id),
            "order_key": key,
            "created_via": order.created_via,
            "status": order.status,
            "currency": "GBP",
            "date_created": _wc_date(order.created),
            "date_created_gmt": _wc_date(order.created),
            "date_modified": _wc_date(order.modified),
            "date_modified_gmt": _wc_date(order.modified),
            "total": f"{total + float(order.shipping_total):.2f}",
            "shipping_total": order.shipping_total,
            "customer_id": 0,
            "customer_note": order.customer_note,
            "billing": {"first_name": "", "last_name": "", "email": "", **order.billing},
            "shipping": {"first_name": "", "last_name": "", **order.shipping},
            "shipping_lines": (
                [{"id": order.id * 10 + 9, "method_id": "flat_rate", "total": order.shipping_total}]
                if order.shipping
                else []
            ),
            "payment_method": order.payment_method,
            "transaction_id": "",
            "date_paid": _wc_date(order.date_paid) if order.date_paid else None,
            "date_paid_gmt": _wc_date(order.date_paid) if order.date_paid else None,
            "meta_data": [{"id": 9000 + i, **m} for i, m in enumerate(order.meta)],
            "line_items": lines,
            "payment_url": f"{self.store_url}/checkout/order-pay/{order.id}/?pay_for_order=true&key={key}",
            "needs_payment": order.status in ("pending", "failed"),
        }

    # ------------------------------------------------------------------ stock rules

    def _line_product(self, line: Mapping[str, Any]) -> Product | None:
        return self.products.get(line["variation_id"] or line["product_id"])

    def _set_status(self, order: Order, status: str) -> None:
        order.status = status
        order.modified = self.clock()
        # wc_reduce_stock_levels returns early unless stock management is on, and does not run at all for a status
        # whose hook an inventory plugin removed.
        reduces = self.manage_stock == "yes" and f"woocommerce_order_status_{status}" not in self.unhooked
        if status in TAKES_STOCK and not order.stock_reduced and reduces:
            for line in order.lines:
                product = self._line_product(line)
                if product and product.manage_stock and not line["reduced"]:
                    product.stock -= line["quantity"]
                    product.modified = order.modified
                    line["reduced"] = line["quantity"]
            order.stock_reduced = True
        elif status in GIVES_BACK and order.stock_reduced:
            for line in order.lines:
                product = self._line_product(line)
                if product and product.manage_stock and line["reduced"]:
                    product.stock += line["reduced"]
                    product.modified = order.modified
                    line["reduced"] = 0
            order.stock_reduced = False

    # ------------------------------------------------------------------ REST

    def handle(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None) -> HttpResponse:
        """One REST request, answered as WooCommerce would (or a fault queued by fail_next)."""
        with self._lock:
            parts = urlsplit(url)
            self.requests.append((method, parts.path + (f"?{parts.query}" if parts.query else "")))
            if self._faults:
                status, extra = self._faults.pop(0)
                if status is None:
                    raise StoreUnavailable("the store could not be reached: TimeoutError")
                return _error(RestError(status, "fake_fault", "A fault the test asked for."), extra)
            try:
                query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
                self._authenticate(method, headers, query)
                response = self._route(method, parts.path, query, body)
            except RestError as exc:
                response = _error(exc)
            call = f"{method} {parts.path.removeprefix(API_PREFIX).rstrip('/')}"
            # The plugin's hold route creates the hold's order: "POST /orders" names it too.
            calls = {"*", call} | ({"POST /orders"} if call == f"POST {PLUGIN_HOLDS_PATH}" else set())
            if self._after_faults and self._after_faults[0] in calls:
                self._after_faults.pop(0)
                raise StoreUnavailable("the store could not be reached: TimeoutError")
            return response

    def _authenticate(self, method: str, headers: Mapping[str, str], query: dict[str, str]) -> None:
        key, secret = "", ""
        # is_ssl(): query keys are read over HTTPS only.
        if self.store_url.startswith("https://") and query.get("consumer_key") and query.get("consumer_secret"):
            key, secret = query.pop("consumer_key"), query.pop("consumer_secret")
        lowered = {k.lower(): v for k, v in headers.items()}
        auth = "" if self.strip_authorization else lowered.get("authorization", "")
        # Basic is taken over plain HTTP too, unlike WooCommerce (OAuth 1.0a there): the local stack has no TLS.
        if not key and auth.startswith("Basic "):
            try:
                key, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                key, secret = "", ""
        if key and hmac.compare_digest(key, self.consumer_key):
            if hmac.compare_digest(secret, self.consumer_secret):
                return
            raise RestError(401, "woocommerce_rest_authentication_error", "Consumer secret is invalid.")
        # Unauthenticated: each controller's permission check names its own action.
        action = {"GET": "view", "POST": "create", "PUT": "edit", "PATCH": "edit", "DELETE": "delete"}
        code = f"woocommerce_rest_cannot_{action.get(method, 'view')}"
        raise RestError(401, code, "Sorry, you cannot do that.")

    def _route(self, method: str, path: str, query: Mapping[str, str], body: bytes | None) -> HttpResponse:
        if method == "GET" and path.rstrip("/") == PLUGIN_CHECK_PATH and self.plugin_installed:
            return _ok(
                {
                    "plugin_version": "2.0.0",
                    "manage_stock": self.manage_stock,
                    "stock_reduction": {hook: hook not in self.unhooked for hook in STOCK_REDUCTION_HOOKS},
                    "can_reduce_order_stock_filtered": False,
                    "reserved_stock": True,
                }
            )
        if method == "POST" and path.rstrip("/") == PLUGIN_HOLDS_PATH and self.plugin_installed:
            order, created = self.place_hold(_body(body))
            return _ok(
                {
                    "order_id": order.id,
                    "status": order.status,
                    "reservation_id": next(iter(_stamps(order)), ""),
                    "reserved_until": int(order.reserved_until or 0),
                },
                201 if created else 200,
            )
        if not path.startswith(API_PREFIX + "/"):
            raise RestError(404, "rest_no_route", "No route was found matching the URL and request method.")
        route = path[len(API_PREFIX) :].rstrip("/")
        if method == "GET" and route == "/products":
            items = [p for p in self.products.values() if p.type != "variation"]
            if query.get("status") and query["status"] != "any":
                items = [p for p in items if p.status == query["status"]]
            items = _included(items, query)
            return _page([self.product_json(p) for p in items], query)
        if method == "GET" and (match := re.fullmatch(r"/products/(\d+)", route)):
            return _ok(self.product_json(self._product(int(match[1]))))
        if method == "GET" and (match := re.fullmatch(r"/products/(\d+)/variations", route)):
            parent = self._product(int(match[1]))
            variations = _included([self.products[v] for v in parent.variations], query)
            return _page([self.product_json(v, as_variation=True) for v in variations], query)
        if method == "GET" and (match := re.fullmatch(r"/products/(\d+)/variations/(\d+)", route)):
            variation = self._product(int(match[2]))
            if variation.parent_id != int(match[1]):
                raise RestError(404, "woocommerce_rest_product_variation_invalid_id", "Invalid ID.")
            return _ok(self.product_json(variation, as_variation=True))
        if route == "/settings/products/woocommerce_manage_stock" and method in ("GET", "PUT", "POST", "PATCH"):
            # WC_REST_Setting_Options_V2_Controller: one option of the "products" group; a checkbox is "yes"/"no".
            if method != "GET":
                value = _body(body).get("value")
                if value not in ("yes", "no"):
                    raise RestError(400, "rest_setting_value_invalid", "An invalid setting value was passed.")
                self.manage_stock = value
            return _ok(
                {
                    "id": "woocommerce_manage_stock",
                    "label": "Manage stock",
                    "description": "Enable stock management",
                    "type": "checkbox",
                    "default": "yes",
                    "tip": "",
                    "value": self.manage_stock,
                    "group_id": "products",
                }
            )
        if method == "GET" and route == "/webhooks":
            wanted = query.get("status", "all")
            hooks = [w for w in self.webhooks.values() if wanted == "all" or w.status == wanted]
            return _page([self.webhook_json(w) for w in hooks], query)
        if match := re.fullmatch(r"/webhooks/(\d+)", route):
            hook = self.webhooks.get(int(match[1]))
            if hook is None:
                raise RestError(404, "woocommerce_rest_webhook_invalid_id", "Invalid ID.")
            if method in ("PUT", "POST", "PATCH"):
                status = _body(body).get("status")
                if status is not None:
                    if status not in WEBHOOK_STATUSES:
                        raise RestError(400, "rest_invalid_param", "Invalid parameter(s): status")
                    hook.status = status
                    hook.modified = self.clock()
            return _ok(self.webhook_json(hook))
        if method == "GET" and route == "/orders":
            return _page([self.order_json(o) for o in self._orders(query)], query)
        if method == "POST" and route == "/orders":
            return _ok(self.order_json(self._create_order(_body(body))), 201)
        if match := re.fullmatch(r"/orders/(\d+)", route):
            found = self.orders.get(int(match[1]))
            if found is None:
                raise RestError(404, "woocommerce_rest_shop_order_invalid_id", "Invalid ID.")
            order = found
            if method == "GET":
                return _ok(self.order_json(order))
            if method in ("PUT", "POST", "PATCH"):
                status = _body(body).get("status")
                if status is not None:
                    if status not in STATUSES:
                        raise RestError(400, "rest_invalid_param", "Invalid parameter(s): status")
                    self._set_status(order, status)
                    self.webhook_request("order.updated", self.order_json(order))
                return _ok(self.order_json(order))
        raise RestError(404, "rest_no_route", "No route was found matching the URL and request method.")

    def _product(self, product_id: int) -> Product:
        product = self.products.get(product_id)
        if product is None:
            raise RestError(404, "woocommerce_rest_product_invalid_id", "Invalid ID.")
        return product

    def _orders(self, query: Mapping[str, str]) -> list[Order]:
        wanted = [s for s in query.get("status", "any").split(",") if s]
        orders = [o for o in self.orders.values() if "any" in wanted or o.status in wanted]
        if query.get("product"):
            orders = [o for o in orders if any(str(line["product_id"]) == query["product"] for line in o.lines)]
        orders.sort(key=lambda o: (o.created, o.id), reverse=query.get("order", "desc") == "desc")
        return orders

    def _create_order(self, request: Mapping[str, Any]) -> Order:
        status = request.get("status") or "pending"
        if status not in STATUSES:
            raise RestError(400, "rest_invalid_param", "Invalid parameter(s): status")
        lines = []
        for item in request.get("line_items") or []:
            product_id = int(item.get("product_id") or 0)
            variation_id = int(item.get("variation_id") or 0)
            product = self.products.get(variation_id or product_id)
            if product is None or (variation_id and product.parent_id != product_id):
                raise RestError(400, "woocommerce_rest_invalid_product_id", "Product ID provided is invalid.")
            lines.append(
                {
                    "product_id": product_id,
                    "variation_id": variation_id,
                    "quantity": int(item.get("quantity") or 1),
                    "reduced": 0,
                }
            )
        meta = [{"key": str(m["key"]), "value": m["value"]} for m in request.get("meta_data") or []]
        now = self.clock()
        order = Order(
            self._next_order_id, "pending", lines, meta, "rest-api", now, now, str(request.get("customer_note") or "")
        )
        self._next_order_id += 1
        self.orders[order.id] = order
        # A new order starts out pending; setting another status is a transition from pending, so its hooks run
        # (WC_Abstract_Order::get_status substitutes the default "pending" for a new order's empty status).
        if status != "pending":
            self._set_status(order, status)
        self.webhook_request("order.created", self.order_json(order))
        if request.get("set_paid") is True:
            order.date_paid = now
            self._set_status(order, "processing")
        return order

    # ------------------------------------------------------------------ in-process and WSGI access

    def transport(self) -> FakeTransport:
        """A Transport that reaches this store in process (no network)."""
        return FakeTransport(self)

    def wsgi_app(self, environ: Mapping[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """The REST API as a WSGI app, for the local stack to serve over HTTP."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else None
        headers = {k[5:].replace("_", "-").title(): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = str(environ["CONTENT_TYPE"])
        query = environ.get("QUERY_STRING") or ""
        url = f"{self.store_url}{environ.get('PATH_INFO', '')}" + (f"?{query}" if query else "")
        try:
            response = self.handle(str(environ.get("REQUEST_METHOD", "GET")), url, headers, body)
        except StoreUnavailable:
            response = _error(RestError(504, "fake_timeout", "The store did not answer in time."))
        reason = {200: "OK", 201: "Created", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}.get(
            response.status, "Error"
        )
        start_response(f"{response.status} {reason}", list(response.headers.items()))
        return [response.body]


class FakeTransport:
    """The in-process Transport onto a FakeWooCommerce."""

    def __init__(self, store: FakeWooCommerce) -> None:
        self.store = store

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        """One request, answered by the fake store."""
        return self.store.handle(method, url, headers, body)


def php_json(payload: Any) -> bytes:
    """JSON as wp_json_encode writes it: no spaces, `/` escaped as `\\/`, non-ASCII as \\u escapes."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=True).replace("/", "\\/").encode("ascii")


def _stamped(order: Order) -> bool:
    return any(m["key"] == RESERVATION_META_KEY for m in order.meta)


def _stamps(order: Order) -> list[str]:
    return [str(m["value"]) for m in order.meta if m["key"] == RESERVATION_META_KEY]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _wc_date(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _body(body: bytes | None) -> dict[str, Any]:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError as exc:
        raise RestError(400, "rest_invalid_json", "Invalid JSON body passed.") from exc
    if not isinstance(parsed, dict):
        raise RestError(400, "rest_invalid_json", "Invalid JSON body passed.")
    return parsed


def _ok(payload: Any, status: int = 200, extra: Mapping[str, str] | None = None) -> HttpResponse:
    return HttpResponse(status, json.dumps(payload).encode(), {"content-type": "application/json", **(extra or {})})


def _included(items: list[Product], query: Mapping[str, str]) -> list[Product]:
    """`include`: a comma-separated list of ids that limits the list to them (WP_REST_Controller's
    `wp_parse_id_list`; https://woocommerce.github.io/woocommerce-rest-api-docs/#list-all-products and
    #list-all-product-variations). A variation is never among /products: that endpoint lists the product post type."""
    raw = query.get("include")
    if raw is None:
        return items
    try:
        wanted = {int(part) for part in raw.replace(" ", ",").split(",") if part}
    except ValueError as exc:
        raise RestError(400, "rest_invalid_param", "Invalid parameter(s): include") from exc
    return [p for p in items if p.id in wanted]


def _page(items: list[dict[str, Any]], query: Mapping[str, str]) -> HttpResponse:
    try:
        per_page = int(query.get("per_page", "10"))
        page = int(query.get("page", "1"))
    except ValueError as exc:
        raise RestError(400, "rest_invalid_param", "Invalid parameter(s): per_page") from exc
    if not 1 <= per_page <= 100:
        raise RestError(400, "rest_invalid_param", "Invalid parameter(s): per_page")
    total_pages = max(1, -(-len(items) // per_page)) if items else 0
    if page > max(total_pages, 1):
        raise RestError(
            400,
            "woocommerce_rest_invalid_page_number",
            "The page number requested is larger than the number of pages available.",
        )
    chunk = items[(page - 1) * per_page : page * per_page]
    return _ok(chunk, extra={"x-wp-total": str(len(items)), "x-wp-totalpages": str(total_pages)})


def _error(error: RestError, extra: Mapping[str, str] | None = None) -> HttpResponse:
    body = {"code": error.code, "message": error.message, "data": {"status": error.status}}
    return HttpResponse(
        error.status,
        json.dumps(body).encode(),
        {"content-type": "application/json", **{k.lower(): v for k, v in (extra or {}).items()}},
    )
