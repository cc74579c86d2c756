"""WooCommerce: verify and read its webhooks, read its catalogue, and hold a unit in its reserved stock (REST API v3
and the plugin's routes).

How a hold keeps a unit out of the storefront and ends in the normal checkout
-----------------------------------------------------------------------------
A held unit must be bought through WooCommerce's own checkout, which collects the address and email, charges
shipping and tax: an order the REST API makes carries none of that, and the pay-for-order page (form-pay.php)
asks for none of it either. So the hold lives where WooCommerce's checkout keeps its own: the reserved-stock table.
`ReserveStock::reserve_stock_for_order($order, $minutes)` (namespace Automattic WooCommerce Checkout Helpers,
src/Checkout/Helpers/ReserveStock.php) inserts a wc_reserved_stock row for an order only while the stock less
what others reserve covers it, and every cart and checkout stock check subtracts the rows of checkout-draft and
pending orders whose `expires` is still ahead (`get_query_for_reserved_stock`), except the shopper's own order.
stock_quantity does not move until the order is paid (`wc_maybe_reduce_stock_levels` on payment complete and the
processing, completed and on-hold statuses, includes/wc-stock-functions.php), when the row is let go.

The shipped plugin (integrations/woocommerce/bisn-holds.php) does the PHP side:
  * POST /wp-json/wc-bisn/v1/holds (a `wc-` namespace, authenticated by our REST key like wc/v3): a checkout-draft
    order for the unit stamped `_bisn_reservation_id`, its stock reserved until the hold's end; 409 when the unit
    is not free (ReserveStockException); the same draft again for a reservation that has one.
  * the claim link we send the shopper to, signed here (HMAC-SHA256 under each webhook secret, over the
    reservation, the draft and the claim's expiry): the unit goes in their cart with the draft as their checkout's
    order, and block checkout goes on with the draft, the classic checkout moving the stamp to the order it makes.
  * `bisn_reserved` on each product and variation resource (so in webhook payloads too): the units live holds
    reserve, which stock_quantity still counts. A level is stock_quantity less that, what the storefront can sell.
A hold that ends unbought has its draft cancelled, which takes it out of the reserved-stock query; a draft the
shopper placed (pending payment, paid) is never touched. The order that is paid carries the stamp, and its
order.updated webhook converts the hold.

What the shop needs (docs/PLATFORMS.md), each checked at every catalogue sync and on the dashboard (check_store):
  * WooCommerce > Settings > Products > Inventory > "Enable stock management" on (`woocommerce_manage_stock` =
    "yes"), and "Manage stock?" on each product or variation that is watched.
  * The plugin in wp-content/mu-plugins/.
  * A REST API key (WooCommerce > Settings > Advanced > REST API) with Read/Write access, and webhooks
    (product.created, product.updated, product.deleted, order.created, order.updated) with a secret.

Authentication is HTTP Basic with the consumer key and secret, which WooCommerce documents for HTTPS only
(https://woocommerce.github.io/woocommerce-rest-api-docs/#authentication-over-https). Some hosts (PHP as CGI or
FastCGI behind Apache) drop the Authorization header before PHP sees it; the same page documents passing the key
and secret as the query parameters `consumer_key` and `consumer_secret` instead, and
WC_REST_Authentication::perform_basic_authentication (includes/class-wc-rest-authentication.php) reads those
first, over HTTPS only (`is_ssl()`). A request whose header was dropped arrives unauthenticated, so the route's
own permission check answers 401 `woocommerce_rest_cannot_view` (or `_create`, `_edit`, `_delete`), the code an
unknown key gets too; a known key with the wrong secret gets 401 `woocommerce_rest_authentication_error`. So a
401 other than that last one is tried once more with the keys in the query string, and if that is accepted the
connector keeps using it. A 401 that remains is StoreCredentialsRefused: the store is up and refuses the key.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from chalicelib.errors import BadRequest, InvalidSignature
from chalicelib.platforms.base import (
    CATALOG,
    IGNORED,
    INVENTORY,
    ORDERS,
    WOOCOMMERCE,
    CatalogEntry,
    CatalogUnavailable,
    HoldRequest,
    LevelReport,
    OrderReport,
    StoreCredentialsRefused,
    StoreHold,
    StoreRefused,
    StoreUnavailable,
    WebhookDelivery,
    check_topic,
)
from chalicelib.platforms.http import HttpResponse, Transport, retry_after_s
from chalicelib.web import json_object

# Product and order payloads carry descriptions, addresses and line items: far larger than our own webhooks.
MAX_WEBHOOK_BYTES = 512 * 1024
RESERVATION_META_KEY = "_bisn_reservation_id"
PRODUCT_ID = "woocommerce.product_id"
VARIATION_ID = "woocommerce.variation_id"
API_PREFIX = "/wp-json/wc/v3"
PER_PAGE = 100
MAX_PAGES = 500  # 50,000 products: past this the catalogue is not one shop's
MAX_ORDER_PAGES = 10  # on-hold orders for one product, newest first, looked through for a reservation
MAX_429_WAITS = 3
MAX_WAIT_S = 30.0
# A product that does not manage stock and says "instock" can be sold without limit: report a level no waiting
# list reaches, so every shopper waiting is told, rather than ignore it (ignoring would leave a list that saw
# "outofstock" waiting forever once the shop switched the product back to in stock).
UNTRACKED_IN_STOCK = 1_000_000
PAID_STATUSES = frozenset({"processing", "completed"})  # wc_get_is_paid_statuses()
UNPAID_STATUSES = frozenset({"pending", "on-hold", "failed", "cancelled", "checkout-draft", "trash"})
# A hold is a draft order (the status block checkout gives the order it builds, DraftOrders in WooCommerce Blocks)
# whose unit sits in wc_reserved_stock; ReserveStock counts only checkout-draft and pending orders' rows.
DRAFT_STATUS = "checkout-draft"
RELEASABLE_STATUSES = (DRAFT_STATUS, "on-hold", "pending")
_PING = re.compile(rb"webhook_id=[0-9]{1,20}")
# The webhooks docs/PLATFORMS.md has the shop make, each delivering to our /webhooks/woocommerce.
WEBHOOK_TOPICS = ("product.created", "product.updated", "product.deleted", "order.created", "order.updated")
DELIVERY_PATH = "/webhooks/woocommerce"
# Where wc_maybe_reduce_stock_levels is hooked (includes/wc-stock-functions.php). An inventory plugin that removes
# it takes over stock itself, and WooCommerce's own levels (what we read) stop falling when an order is paid.
STOCK_REDUCTION_HOOKS = (
    "woocommerce_payment_complete",
    "woocommerce_order_status_completed",
    "woocommerce_order_status_processing",
    "woocommerce_order_status_on-hold",
)
# What the plugin adds to a product or variation resource (REST and webhook payloads alike): the units its live
# holds reserve, which stock_quantity still counts.
RESERVED_FIELD = "bisn_reserved"
# The plugin's own report of the hooks above; a `wc-` namespace, so the REST key authenticates it as it does
# wc/v3 (WC_REST_Authentication::is_wc_namespace).
PLUGIN_PREFIX = "/wp-json/wc-bisn/v1"
REENABLE_HINT = (
    "WooCommerce never sends a failed delivery again and disables a webhook after repeated failures: set it"
    " Active again in WooCommerce > Settings > Advanced > Webhooks (or PUT /wp-json/wc/v3/webhooks/<id>"
    ' {"status": "active"}); changes made while it was off arrive only with the next change or catalogue sync'
)
# The one 401 that says the key reached WooCommerce and was turned down (WC_REST_Authentication::set_error); any
# other 401 may be a request whose Authorization header the host dropped.
KEY_REFUSED = "woocommerce_rest_authentication_error"

log = logging.getLogger(__name__)


# What each topic's body is (https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks; the payload is the
# REST resource, WC_Webhook::build_payload): product.deleted carries only `{"id": N}`; a product the product
# resource with its `date_modified_gmt`; an order the order resource with its `line_items`. A body of one topic is
# refused under another.
_PRODUCT_ONLY = frozenset({"sku", "stock_quantity", "stock_status", "manage_stock"})
_ORDER_ONLY = frozenset({"line_items", "order_key", "payment_method"})
TOPIC_SHAPES: dict[str, dict[str, frozenset[str]]] = {
    "product.deleted": {"only": frozenset({"id"}), "required": frozenset({"id"})},
    "product.created": {"required": frozenset({"id", "date_modified_gmt"}), "forbidden": _ORDER_ONLY},
    "product.updated": {"required": frozenset({"id", "date_modified_gmt"}), "forbidden": _ORDER_ONLY},
    "order.created": {"forbidden": _PRODUCT_ONLY},
    "order.updated": {"forbidden": _PRODUCT_ONLY},
}


class WooCommerceConnector:
    """The WooCommerce connector: webhooks by HMAC-SHA256, REST API v3 with Basic auth, holds as on-hold orders."""

    def __init__(
        self,
        *,
        store_url: str,
        consumer_key: Callable[[], str],
        consumer_secret: Callable[[], str],
        webhook_secrets: Callable[[], Sequence[str]],
        transport: Transport,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store_url = store_url.rstrip("/")
        self._source = _normalised_url(store_url)
        self._consumer_key = consumer_key
        self._consumer_secret = consumer_secret
        self._webhook_secrets = webhook_secrets
        self._transport = transport
        self._sleep = sleep
        # Learned once per container: the host drops the Authorization header, so the keys go in the query.
        self._keys_in_query = False

    name = WOOCOMMERCE
    # A hold is an on-hold order on the store.
    holds_on_store = True

    # ------------------------------------------------------------------ webhooks

    def read_webhook(self, raw: bytes | None, headers: Mapping[str, str]) -> WebhookDelivery:
        """Verify X-WC-Webhook-Signature (InvalidSignature), then read the delivery (BadRequest).

        Headers as WooCommerce sends them: WC_Webhook::deliver() in includes/class-wc-webhook.php, documented at
        https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks.
        """
        data = raw or b""
        lowered = {str(k).lower(): str(v) for k, v in headers.items()}
        if len(data) > MAX_WEBHOOK_BYTES:
            raise InvalidSignature("The body is larger than any delivery we accept.")
        signature = lowered.get("x-wc-webhook-signature", "").strip()
        if not signature:
            # The ping WooCommerce sends when a webhook is saved (WC_Webhook::deliver_ping) is a bare form body
            # `webhook_id=N` with no signature or X-WC headers, and the webhook is only activated if it gets a 200.
            # Only that exact shape is answered, and it changes nothing.
            if _PING.fullmatch(data):
                webhook_id = data.split(b"=", 1)[1].decode("ascii")
                now = time.time()
                return WebhookDelivery(f"woocommerce:ping:{webhook_id}:{int(now)}", now, "ping", IGNORED, reason="ping")
            raise InvalidSignature("The webhook signature is missing.")
        if not self._signature_holds(data, signature):
            raise InvalidSignature("The webhook signature is wrong.")

        source = lowered.get("x-wc-webhook-source", "")
        if _normalised_url(source) != self._source:
            raise BadRequest("The delivery comes from another store.", code="wrong_shop")
        topic = lowered.get("x-wc-webhook-topic", "").strip()
        webhook_id = lowered.get("x-wc-webhook-id", "").strip()

        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRequest("The body is not UTF-8.", code="invalid_body") from exc
        body = json_object(text)
        if topic in TOPIC_SHAPES:
            check_topic(topic, body, **TOPIC_SHAPES[topic])
        # X-WC-Webhook-Delivery-ID is wp_hash(webhook id . time()) (WC_Webhook::get_new_delivery_id): a fresh
        # value for every send, so the same change sent twice (two hooks of one topic firing in separate requests,
        # a delivery queued twice) never shares it. What is stable is the webhook, the resource and its
        # date_modified_gmt. That date has one-second resolution, so two real changes within a second would
        # collide; a digest of the body separates them, while an identical body (the same state sent again, as
        # the payload is built at send time) is the duplicate we want to drop.
        digest = hashlib.sha256(data).hexdigest()[:16]
        stamp = body.get("date_modified_gmt") or "-"
        delivery_id = f"woocommerce:{webhook_id or '-'}:{topic}:{body.get('id', '-')}:{stamp}:{digest}"
        sent_at = _gmt(stamp) if isinstance(stamp, str) and stamp != "-" else None
        sent = sent_at if sent_at is not None else time.time()
        delivery = self._delivery(delivery_id, sent, topic, body)
        return dataclasses.replace(delivery, body_digest=hashlib.sha256(data).hexdigest(), body_at=sent_at)

    def _delivery(self, delivery_id: str, sent: float, topic: str, body: dict[str, Any]) -> WebhookDelivery:
        if topic in ("product.updated", "product.created"):
            return self._product_delivery(delivery_id, sent, topic, body)
        if topic == "product.deleted":
            # A deletion's payload is just {"id": N} (WC_Webhook::build_payload).
            product_id = _int_field(body, "id")
            return WebhookDelivery(delivery_id, sent, topic, CATALOG, removed_ids=(f"{PRODUCT_ID}:{product_id}",))
        if topic in ("order.created", "order.updated"):
            return WebhookDelivery(delivery_id, sent, topic, ORDERS, orders=(_order_report(body),))
        return WebhookDelivery(delivery_id, sent, topic, IGNORED, reason="unknown_topic")

    def _signature_holds(self, data: bytes, signature: str) -> bool:
        # WC_Webhook::generate_signature: base64 of the raw HMAC-SHA256 of the body as sent, keyed by the secret.
        given = signature.encode("utf-8", "replace")
        held = False
        for secret in self._webhook_secrets():
            if not secret:
                continue
            expected = base64.b64encode(hmac.new(secret.encode("utf-8"), data, hashlib.sha256).digest())
            held = hmac.compare_digest(expected, given) or held  # every secret is tried: no early exit to time
        return held

    def _product_delivery(self, delivery_id: str, sent: float, topic: str, body: dict[str, Any]) -> WebhookDelivery:
        # The payload is GET /wc/v3/products/<id> (WC_Webhook::get_wp_api_payload). A variation's change fires
        # product.updated through `woocommerce_update_product_variation` with the variation's own id, so it
        # arrives as a product resource with type "variation" and its parent_id. A variable parent carries only
        # its variations' ids: each variation reports for itself.
        product_id = _int_field(body, "id")
        kind = body.get("type")
        if kind == "variable" or kind == "grouped":
            return WebhookDelivery(delivery_id, sent, topic, IGNORED, reason="variable_parent")
        sku = body.get("sku")
        if not isinstance(sku, str) or not sku.strip():
            return WebhookDelivery(delivery_id, sent, topic, IGNORED, reason="no_sku")
        if body.get("status", "publish") != "publish":
            return WebhookDelivery(delivery_id, sent, topic, IGNORED, reason="not_published")
        level = _level(body)
        occurred = body.get("date_modified_gmt")
        report = LevelReport(
            available=level, occurred_at=_gmt(occurred) if isinstance(occurred, str) else None, sku=sku
        )
        if kind == "variation":
            parent_id = _int_field(body, "parent_id")
            ids = {PRODUCT_ID: str(parent_id), VARIATION_ID: str(product_id)}
        else:
            ids = {PRODUCT_ID: str(product_id)}
        entry = _entry(body, sku.strip(), str(body.get("name") or sku), ids)
        return WebhookDelivery(delivery_id, sent, topic, INVENTORY, levels=(report,), products=(entry,))

    # ------------------------------------------------------------------ catalogue

    def read_catalog(self) -> Iterator[CatalogEntry]:
        """Every published simple product and variation with a SKU; CatalogUnavailable if it cannot be read."""
        try:
            # List all products: https://woocommerce.github.io/woocommerce-rest-api-docs/#list-all-products
            for product in self._pages("/products", {"status": "publish"}):
                if not isinstance(product, dict) or product.get("status") != "publish":
                    continue
                kind = product.get("type")
                if kind == "simple":
                    sku = product.get("sku")
                    if isinstance(sku, str) and sku.strip():
                        pid = str(product.get("id"))
                        yield _entry(product, sku.strip(), str(product.get("name") or sku), {PRODUCT_ID: pid})
                elif kind == "variable":
                    yield from self._variations(product)
        except StoreUnavailable as exc:
            raise CatalogUnavailable(
                f"the WooCommerce catalogue could not be read: {exc}",
                credentials_refused=isinstance(exc, StoreCredentialsRefused),
            ) from exc

    def _variations(self, parent: dict[str, Any]) -> Iterator[CatalogEntry]:
        parent_id = parent.get("id")
        if not isinstance(parent_id, int):
            raise CatalogUnavailable("a variable product without a numeric id")
        # List all product variations:
        # https://woocommerce.github.io/woocommerce-rest-api-docs/#list-all-product-variations
        for variation in self._pages(f"/products/{parent_id}/variations", {}):
            if not isinstance(variation, dict) or variation.get("status", "publish") != "publish":
                continue
            sku = variation.get("sku")
            if not isinstance(sku, str) or not sku.strip():
                continue
            options = [str(a.get("option")) for a in variation.get("attributes") or [] if isinstance(a, dict)]
            name = str(parent.get("name") or sku) + (f" - {', '.join(options)}" if options else "")
            ids = {PRODUCT_ID: str(parent_id), VARIATION_ID: str(variation.get("id"))}
            yield _entry(variation, sku.strip(), name, ids)

    def _pages(self, path: str, query: Mapping[str, str]) -> Iterator[Any]:
        # Pagination: https://woocommerce.github.io/woocommerce-rest-api-docs/#pagination (X-WP-Total,
        # X-WP-TotalPages; per_page at most 100).
        page = 1
        while page <= MAX_PAGES:
            response = self._request("GET", path, {**query, "per_page": str(PER_PAGE), "page": str(page)})
            if response.status != 200:
                raise CatalogUnavailable(f"WooCommerce answered {response.status} to a catalogue page")
            items = _json(response, CatalogUnavailable)
            if not isinstance(items, list):
                raise CatalogUnavailable("a catalogue page that is not a list")
            yield from items
            total_pages = _int_header(response, "x-wp-totalpages")
            if total_pages is None:
                if len(items) < PER_PAGE:
                    return
            elif page >= total_pages:
                return
            page += 1
        raise CatalogUnavailable(f"the catalogue has more than {MAX_PAGES} pages")

    # ------------------------------------------------------------------ the store's own settings

    def check_store(self) -> dict[str, Any]:
        """What the shop must have right for holds and levels to work, read through the REST API: the key, stock
        management, the plugin's view of WooCommerce's stock hooks, and our webhooks' status. `problems` says, in
        words a shop owner can act on, what is wrong; it is empty when all is well. Never raises."""
        checks: dict[str, Any] = {
            "platform": WOOCOMMERCE,
            "credentials": "ok",
            "stock_management": "unknown",
            "stock_reduction": "unknown",
            "webhooks": [],
            "problems": [],
        }
        problems: list[str] = checks["problems"]
        try:
            self._check_settings(checks, problems)
            self._check_plugin(checks, problems)
            self._check_webhooks(checks, problems)
        except StoreCredentialsRefused as exc:
            checks["credentials"] = "refused"
            problems.append(str(exc))
        except StoreUnavailable as exc:
            checks["credentials"] = "unknown"
            problems.append(f"the store could not be checked: {exc}")
        checks["keys_in"] = "query" if self._keys_in_query else "header"
        return checks

    def _check_settings(self, checks: dict[str, Any], problems: list[str]) -> None:
        # Retrieve a setting option (group "products"):
        # https://woocommerce.github.io/woocommerce-rest-api-docs/#retrieve-a-setting-option
        response = self._request("GET", "/settings/products/woocommerce_manage_stock", {})
        if response.status != 200:
            raise _transient(response, "read the stock management setting")
        setting = _json(response, StoreUnavailable)
        value = setting.get("value") if isinstance(setting, dict) else None
        checks["stock_management"] = "on" if value == "yes" else "off" if value == "no" else "unknown"
        if value == "no":
            problems.append(
                "stock management is off (WooCommerce > Settings > Products > Inventory > Enable stock management):"
                " WooCommerce takes no stock for any order, so no unit can be held and no level is reported"
            )

    def _check_plugin(self, checks: dict[str, Any], problems: list[str]) -> None:
        response = self._request("GET", "/store-check", {}, prefix=PLUGIN_PREFIX)
        if response.status == 404:
            checks["stock_reduction"] = "unknown"
            problems.append(
                "the bisn-holds plugin does not answer (integrations/woocommerce/bisn-holds.php in"
                " wp-content/mu-plugins/): holds cannot reach the checkout without it"
            )
            return
        if response.status != 200:
            raise _transient(response, "read the plugin's store check")
        report = _json(response, StoreUnavailable)
        hooks = report.get("stock_reduction") if isinstance(report, dict) else None
        if not isinstance(hooks, dict):
            raise StoreUnavailable("the plugin's store check is not the shape it should be")
        unhooked = [hook for hook in STOCK_REDUCTION_HOOKS if hooks.get(hook) is False]
        checks["stock_reduction"] = "unhooked" if unhooked else "hooked"
        if unhooked:
            problems.append(
                "WooCommerce's stock reduction is unhooked from " + ", ".join(unhooked) + " (an inventory plugin"
                " manages stock instead): paid orders no longer lower WooCommerce's stock, so its levels are not"
                " the shelf's"
            )
        if isinstance(report, dict) and report.get("can_reduce_order_stock_filtered") is True:
            problems.append("a plugin filters woocommerce_can_reduce_order_stock: some paid orders may take no stock")

    def _check_webhooks(self, checks: dict[str, Any], problems: list[str]) -> None:
        # List all webhooks: https://woocommerce.github.io/woocommerce-rest-api-docs/#list-all-webhooks (status is
        # active, paused or disabled; WC_REST_Webhooks_V2_Controller shows no failure count).
        response = self._request("GET", "/webhooks", {"per_page": str(PER_PAGE)})
        listed = _listed(response, "list the webhooks", "the webhook list is not a list")
        ours = [
            {
                "id": hook.get("id"),
                "topic": str(hook.get("topic") or ""),
                "status": str(hook.get("status") or ""),
                "delivery_url": str(hook.get("delivery_url") or ""),
            }
            for hook in listed
            if isinstance(hook, dict) and urlsplit(str(hook.get("delivery_url") or "")).path.endswith(DELIVERY_PATH)
        ]
        checks["webhooks"] = ours
        for hook in ours:
            if hook["status"] == "disabled":
                problems.append(f"webhook {hook['id']} ({hook['topic']}) is disabled. {REENABLE_HINT}")
            elif hook["status"] != "active":
                problems.append(f"webhook {hook['id']} ({hook['topic']}) is {hook['status'] or 'not active'}")
        present = {hook["topic"] for hook in ours}
        missing = [topic for topic in WEBHOOK_TOPICS if topic not in present]
        if missing:
            problems.append("no webhook delivers " + ", ".join(missing) + f" to {DELIVERY_PATH}")

    # ------------------------------------------------------------------ holds

    def place_hold(self, hold: HoldRequest) -> StoreHold:
        """One unit reserved by the plugin in WooCommerce's own reserved-stock table for a draft order stamped with
        the reservation id; the shopper is sent to a signed claim link that puts it in their cart. Idempotent: the
        plugin answers with the draft it already made for the reservation."""
        product_id = _numeric(hold.ids.get(PRODUCT_ID))
        variation_id = _numeric(hold.ids.get(VARIATION_ID))
        if product_id is None:
            raise StoreRefused(f"no {PRODUCT_ID} for this SKU")
        body = {
            "reservation_id": hold.reservation_id,
            "product_id": product_id,
            "variation_id": variation_id or 0,
            "expires_at": int(hold.expires_at),
        }
        response = self._request("POST", "/holds", {}, body, prefix=PLUGIN_PREFIX)
        if response.status == 404 and _error_code(response) == "rest_no_route":
            # Not the item's fault: every hold needs the plugin. Retried, and named by the store check.
            raise StoreUnavailable("the bisn-holds plugin is not installed on the store (rest_no_route)")
        if response.status not in (200, 201):
            raise _hold_error(response, "reserve the unit")
        placed = _json(response, StoreUnavailable)
        order_id = placed.get("order_id") if isinstance(placed, dict) else None
        if isinstance(order_id, bool) or not isinstance(order_id, int) or order_id <= 0:
            raise StoreUnavailable("the plugin's answer names no draft order")
        return StoreHold(ref=str(order_id), checkout_url=self.claim_url(hold.reservation_id, order_id, hold.expires_at))

    def claim_url(self, reservation_id: str, order_id: int, expires_at: int) -> str:
        """The link that turns the store's hold into the shopper's cart: the store's home URL with the reservation,
        its draft order, the claim's expiry and an HMAC-SHA256 of the three under each webhook secret (the plugin
        takes any one it knows, so a secret rotation does not break a link in flight)."""
        message = claim_message(reservation_id, order_id, expires_at)
        signatures = [
            hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
            for secret in self._webhook_secrets()
            if secret
        ]
        query = {
            "bisn_claim": reservation_id,
            "bisn_order": str(order_id),
            "bisn_expires": str(int(expires_at)),
            "bisn_sig": ",".join(signatures),
        }
        return f"{self._store_url}/?{urlencode(query)}"

    def release_hold(self, reservation_id: str, ref: str | None) -> None:
        """Cancel the hold's draft order so its reserved stock stops counting; an order the shopper placed (pending
        payment, paid, or anything past the draft) is never touched, nor an order another reservation stamped."""
        order: dict[str, Any] | None
        if ref is None:
            order = self._find_order(reservation_id, None, RELEASABLE_STATUSES)
            if order is None:
                return
        else:
            if _numeric(ref) is None:
                return  # never an order of ours
            # Retrieve an order: https://woocommerce.github.io/woocommerce-rest-api-docs/#retrieve-an-order
            response = self._request("GET", f"/orders/{quote(ref)}", {})
            if response.status == 404:
                return
            if response.status != 200:
                raise _transient(response, "read the hold order")
            found = _json(response, StoreUnavailable)
            if not isinstance(found, dict):
                raise StoreUnavailable("the order is not an object")
            if reservation_id not in _reservation_ids(found):
                return  # not the order this reservation stamped: never cancel somebody else's order
            order = found
        if _releasable(order):
            self._cancel(str(order.get("id")))

    def release_duplicates(self, reservation_id: str, ref: str) -> bool:
        """Settled: the plugin keeps one draft order per reservation id (a retry is answered with the same one)."""
        return True

    def _cancel(self, order_id: str) -> None:
        # Cancelled, not deleted: a cancelled order leaves the reserved-stock query (it counts checkout-draft and
        # pending orders only: ReserveStock::get_query_for_reserved_stock), and a legacy on-hold hold gets its unit
        # back through wc_maybe_increase_stock_levels on woocommerce_order_status_cancelled.
        # Update an order: https://woocommerce.github.io/woocommerce-rest-api-docs/#update-an-order
        response = self._request("PUT", f"/orders/{quote(order_id)}", {}, {"status": "cancelled"})
        if response.status in (200, 404):
            return
        raise _transient(response, "cancel the hold order")

    def _find_order(
        self, reservation_id: str, product_id: int | None, statuses: Sequence[str]
    ) -> dict[str, Any] | None:
        """The order stamped with this reservation id, if there is one.

        The REST API cannot filter orders by meta, and `search` looks only at addresses, the billing email and
        item names, never at meta or the customer note, so it cannot find the stamp on a real store. What it can
        filter on is the product (`product`, matched against each line's product id, the parent for a variation)
        and the status: the hold orders of one product are few, newest first, and each one's meta_data says
        whose it is. List all orders: https://woocommerce.github.io/woocommerce-rest-api-docs/#list-all-orders
        """
        query: dict[str, str] = {"status": ",".join(statuses), "orderby": "date", "order": "desc"}
        if product_id is not None:
            query["product"] = str(product_id)
        for page in range(1, MAX_ORDER_PAGES + 1):
            response = self._request("GET", "/orders", {**query, "per_page": str(PER_PAGE), "page": str(page)})
            orders = _listed(response, "look up the hold order", "the order list is not a list")
            for order in orders:
                if isinstance(order, dict) and reservation_id in _reservation_ids(order):
                    return order
            total_pages = _int_header(response, "x-wp-totalpages")
            if len(orders) < PER_PAGE or (total_pages is not None and page >= total_pages):
                return None
        return None

    # ------------------------------------------------------------------ HTTP

    def _request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: Mapping[str, Any] | None = None,
        *,
        prefix: str = API_PREFIX,
    ) -> HttpResponse:
        """One REST call, waiting out a bounded number of 429s; StoreUnavailable if the store did not answer, and
        StoreCredentialsRefused if it refused our key."""
        response = self._send(method, prefix + path, query, body, keys_in_query=self._keys_in_query)
        if (
            response.status == 401
            and not self._keys_in_query
            and self._store_url.lower().startswith("https://")
            and _error_code(response) != KEY_REFUSED
        ):
            retried = self._send(method, prefix + path, query, body, keys_in_query=True)
            if retried.status != 401:
                self._keys_in_query = True
                log.warning(
                    "WooCommerce did not see the Authorization header (the host drops it): the REST key is sent"
                    " as the consumer_key and consumer_secret query parameters from now on"
                )
            response = retried
        if response.status in (401, 403):
            raise _credentials_refused(response, method, prefix + path)
        return response

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: Mapping[str, Any] | None,
        *,
        keys_in_query: bool,
    ) -> HttpResponse:
        headers = {"Accept": "application/json", "User-Agent": "bisn-woocommerce/1"}
        params = dict(query)
        if keys_in_query:
            params |= {"consumer_key": self._consumer_key(), "consumer_secret": self._consumer_secret()}
        else:
            credentials = f"{self._consumer_key()}:{self._consumer_secret()}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(credentials).decode("ascii")
        url = f"{self._store_url}{path}" + (f"?{urlencode(params)}" if params else "")
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode("utf-8")
        waits = 0
        while True:
            response = self._transport.send(method, url, headers, data)
            if response.status != 429 or waits >= MAX_429_WAITS:
                return response
            waits += 1
            self._sleep(min(retry_after_s(response), MAX_WAIT_S))


# ---------------------------------------------------------------------- helpers


def _normalised_url(url: str) -> str:
    """scheme://host[:port]/path, lower case, default port and trailing slash dropped (home_url('/') has one)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        return ""
    default = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port in (None, default) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def _gmt(value: str) -> float | None:
    """A WooCommerce *_gmt date ("2026-12-01T20:11:34", UTC without an offset) as epoch seconds."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _int_field(body: Mapping[str, Any], key: str) -> int:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"The delivery's {key} must be a number.", code="invalid_field")
    return value


def _int_or(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value))
        except ValueError:
            return default
    return default


def _numeric(value: str | None) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() and int(value) > 0 else None


def _manages_stock(product: Mapping[str, Any]) -> bool:
    # The variations endpoint answers "parent" when the parent product manages the variation's stock.
    return product.get("manage_stock") in (True, "parent")


def _level(body: Mapping[str, Any]) -> int:
    if _manages_stock(body):
        quantity = body.get("stock_quantity")
        if quantity is not None and (isinstance(quantity, bool) or not isinstance(quantity, int | float)):
            raise BadRequest("The delivery's stock_quantity must be a number.", code="invalid_field")
        # Reserved stock never lowers stock_quantity: the plugin adds the units its live holds reserve, so the
        # level is what the storefront can still sell, as on a platform whose holds take the unit out.
        reserved = body.get(RESERVED_FIELD, 0)
        if isinstance(reserved, bool) or not isinstance(reserved, int) or reserved < 0:
            raise BadRequest(f"The delivery's {RESERVED_FIELD} must be a whole number.", code="invalid_field")
        return max(int(quantity or 0) - reserved, 0)
    status = body.get("stock_status")
    if status == "instock":
        return UNTRACKED_IN_STOCK
    if status in ("outofstock", "onbackorder"):
        return 0  # on backorder can be ordered, but nothing is on the shelf to tell a shopper about
    raise BadRequest("The delivery's stock_status is not one WooCommerce sends.", code="invalid_field")


def _entry(resource: Mapping[str, Any], sku: str, name: str, ids: Mapping[str, str]) -> CatalogEntry:
    price = resource.get("price")
    image = None
    images = resource.get("images")
    if isinstance(images, list) and images and isinstance(images[0], dict):
        image = images[0].get("src")
    elif isinstance(resource.get("image"), dict):  # the variations endpoint has one `image`
        image = resource["image"].get("src")
    permalink = resource.get("permalink")
    return CatalogEntry(
        sku=sku,
        name=name,
        product_url=permalink if isinstance(permalink, str) and permalink else None,
        image_url=image if isinstance(image, str) and image else None,
        price=price if isinstance(price, str) and price else None,
        ids=dict(ids),
        backorder=_sells_on_backorder(resource),
    )


def _sells_on_backorder(resource: Mapping[str, Any]) -> bool:
    # `backorders` (no, notify, yes) counts only where stock is managed; an unmanaged product is on backorder when the
    # shop set its stock_status so (instock, outofstock, onbackorder).
    managed = _manages_stock(resource) and resource.get("backorders") in ("notify", "yes")
    return managed or resource.get("stock_status") == "onbackorder"


def _reservation_ids(order: Mapping[str, Any]) -> tuple[str, ...]:
    meta = order.get("meta_data")
    if not isinstance(meta, list):
        return ()
    return tuple(
        str(m.get("value"))
        for m in meta
        if isinstance(m, dict) and m.get("key") == RESERVATION_META_KEY and m.get("value")
    )


def _order_report(body: Mapping[str, Any]) -> OrderReport:
    order_id = _int_field(body, "id")
    status = body.get("status")
    if not isinstance(status, str):
        raise BadRequest("The delivery's status must be a string.", code="invalid_field")
    if body.get("meta_data") is not None and not isinstance(body.get("meta_data"), list):
        raise BadRequest("The delivery's meta_data must be a list.", code="invalid_field")
    # Paid means processing or completed (wc_get_is_paid_statuses). date_paid also counts for a status past
    # those (refunded after payment), but not for an unpaid status: an order can keep a date_paid after it is
    # put back on hold or cancelled, and that is no payment the hold can count on.
    paid = status in PAID_STATUSES or (bool(body.get("date_paid_gmt")) and status not in UNPAID_STATUSES)
    return OrderReport(order_id=str(order_id), reservation_ids=_reservation_ids(body), paid=paid)


def claim_message(reservation_id: str, order_id: int, expires_at: int) -> bytes:
    """What a claim link's signature covers (the plugin's bisn_claim_message builds the same bytes)."""
    return f"bisn-claim-v1|{reservation_id}|{int(order_id)}|{int(expires_at)}".encode()


def _releasable(order: Mapping[str, Any]) -> bool:
    status = order.get("status")
    if status == DRAFT_STATUS:
        return True  # the shopper has not placed it: only the reservation is ours to end
    # An on-hold order an earlier version made as the hold itself (created over REST, never through a checkout).
    return status in ("on-hold", "pending") and order.get("created_via") == "rest-api"


def _json(response: HttpResponse, error: type[Exception]) -> Any:
    try:
        return json.loads(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise error("WooCommerce's answer is not JSON") from exc


def _listed(response: HttpResponse, doing: str, not_list: str) -> list[Any]:
    """A store call whose answer is a JSON list (orders, webhooks, products); anything else is the store not
    answering as it should, StoreUnavailable (`doing` names the call, `not_list` says what came back)."""
    if response.status != 200:
        raise _transient(response, doing)
    listed = _json(response, StoreUnavailable)
    if not isinstance(listed, list):
        raise StoreUnavailable(not_list)
    return listed


def _int_header(response: HttpResponse, name: str) -> int | None:
    raw = response.headers.get(name, "").strip()
    return int(raw) if raw.isdigit() else None


def _error_code(response: HttpResponse) -> str:
    # REST errors: {"code", "message", "data": {"status"}} (https://woocommerce.github.io/woocommerce-rest-api-docs/#errors).
    # Only the code is kept: a message may echo the request.
    try:
        body = json.loads(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "-"
    code = body.get("code") if isinstance(body, dict) else None
    return code if isinstance(code, str) and len(code) < 100 else "-"


def _transient(response: HttpResponse, doing: str) -> StoreUnavailable:
    wait = retry_after_s(response) if response.status in (429, 503) else None
    return StoreUnavailable(
        f"WooCommerce answered {response.status} ({_error_code(response)}) to {doing}", retry_after_s=wait
    )


def _credentials_refused(response: HttpResponse, method: str, path: str) -> StoreCredentialsRefused:
    # The path names the resource (ids only); the query, which may carry the key, is never part of the message.
    # A 403 is a key WooCommerce knows whose permissions (Read only, say) do not cover the call.
    what = "refused our REST API key" if response.status == 401 else "says our REST API key may not do this"
    return StoreCredentialsRefused(
        f"credentials refused: WooCommerce {what} ({response.status} {_error_code(response)}) for {method}"
        f" {path}; check the key in WooCommerce > Settings > Advanced > REST API (Read/Write) and"
        " the stage's WOOCOMMERCE_CONSUMER_KEY and WOOCOMMERCE_CONSUMER_SECRET"
    )


def _hold_error(response: HttpResponse, doing: str) -> Exception:
    """A 4xx about the item is a refusal; credentials, throttling and 5xx may pass, so they are worth a retry."""
    if 400 <= response.status < 500 and response.status not in (401, 403, 408, 429):
        return StoreRefused(f"WooCommerce refused to {doing}: {response.status} ({_error_code(response)})")
    return _transient(response, doing)
