"""An in-memory Shopify shop for tests and the local stack (never shipped): the Admin GraphQL calls the connector
makes, and the webhooks the shop sends, signed as Shopify signs them.

It answers exactly the documents chalicelib/platforms/shopify.py sends, matched by their root field
(productVariants, nodes of inventory items, draftOrders, draftOrder, draftOrderCreate, draftOrderDelete), with the documented answer shape
including extensions.cost, and a leaky cost bucket that throttles (THROTTLED) when drained. Products, variants,
inventory items and locations are seeded from devstack/demo-catalog.json with deterministic ids.

Every document is first validated against Shopify's published Admin API schema of the connector's API_VERSION
(tests/fixtures/shopify/admin_<version>.graphql.gz, loaded by support/shopify_schema.py), and its variables against
the document's own definitions: a field, argument or input field Shopify does not have is refused here as Shopify
refuses it, with the errors in the answer and no data.

Access tokens: the static token of an admin-created app (`access_token`), and tokens the client credentials grant
issues to a Dev Dashboard app (`client_id`, `client_secret`) at POST /admin/oauth/access_token. Those expire after
`token_lifetime_s` (Shopify answers expires_in 86399), and the Admin API answers 401 to an expired or unknown one:
https://shopify.dev/docs/apps/build/authentication-authorization/client-credentials-grant
https://shopify.dev/docs/apps/build/authentication-authorization/client-secrets
A refused grant is HTTP 400 with an OAuth error body, {"error": <code>, "error_description": <text>}: Shopify's
response codes page gives 400 for a token request it refuses (https://shopify.dev/docs/api/usage/response-codes),
and reported refusals carry app_not_installed and shop_not_permitted. Shopify does not document the code for a
wrong secret; the fake uses RFC 6749 section 5.2's invalid_client.

Webhooks: a delivery carries X-Shopify-Event-Id, the same on every delivery of one event (a retry, or a second
subscription to the topic), and X-Shopify-Webhook-Id for the delivery itself: `redeliver` sends one again with the
same event id and a new webhook id. https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates
Each change's delivery is returned to the caller; after `queue_webhooks(post)` it is also queued, as Shopify sends
webhooks from its own queue, and `deliver(order=, repeat=, drop=, seed=)` posts the queue (devstack/webhook_outbox.py):
  * late and out of order ("reversed", "shuffled"): Shopify does not guarantee ordering within a topic or across
    topics for one resource (https://shopify.dev/docs/apps/build/webhooks, *Ordering*); bodies carry `updated_at`
    and X-Shopify-Triggered-At to order them by;
  * repeated: every send of one event has its body, signature, X-Shopify-Event-Id and X-Shopify-Triggered-At, and a
    new X-Shopify-Webhook-Id (ignore-duplicates, above);
  * retried: a delivery no send of which was answered 2xx stays queued for the next `deliver`, until 8 retries are
    spent (https://shopify.dev/changelog/updates-to-webhook-retry-mechanism);
  * lost (`drop`): the reason Shopify recommends reconciliation jobs (https://shopify.dev/docs/apps/build/webhooks).
`delete_product` sends products/delete, whose body is the product's `id` alone.

Selling when out of stock: each variant has an inventory policy, DENY (the default) or CONTINUE, read as
ProductVariant.inventoryPolicy (https://shopify.dev/docs/api/admin-graphql/2025-10/enums/ProductVariantInventoryPolicy)
and as the REST variant's `inventory_policy` "deny" or "continue" in products/update
(https://shopify.dev/docs/api/admin-rest/2025-10/resources/product-variant). `sell` is a storefront sale at one
location: under DENY it is refused beyond what is available there; under CONTINUE it goes through and the location's
`available` goes below zero, which its inventory_levels/update carries as a negative `available`
(https://help.shopify.com/en/manual/products/inventory/getting-started-with-inventory/selling-when-out-of-stock: a
product is out of stock "at zero or below"). `set_inventory_policy` is the shop switching it (products/update).

The draftOrders tag search shows a new draft order only `search_lag_s` after it was created (0 by default), and
every draft order at least that old: an index that catches up. Shopify does not say how soon its search shows a new
object (https://shopify.dev/docs/api/admin-graphql/2025-10/queries/draftOrders,
https://shopify.dev/docs/api/usage/search-syntax), and the connector must be safe whatever it is.

Draft orders: one created with reserveInventoryUntil moves a unit from available to reserved at the first location
that has one (Shopify documents the reservation but not what happens without stock; here it is refused with a
userError); deleting it, or the reservation lapsing, gives the unit back; completing it sells the reserved unit and
produces two webhooks: orders/create, the order with the draft's custom attributes as its note_attributes, and
draft_orders/update, the draft order (REST DraftOrder) now `status` "completed" with the `order_id` it became
(https://shopify.dev/docs/api/webhooks/2025-10?reference=toml#list-of-topics-draft_orders/update,
https://shopify.dev/docs/api/admin-rest/2025-10/resources/draftorder: order_id is "the ID of the order that's created
and associated with the draft order after the draft order is completed"). The order names no draft order: neither
the REST order nor the GraphQL Order object has such a field
(https://shopify.dev/docs/api/admin-graphql/2025-10/objects/Order; the link is DraftOrder.order). Whether every
custom attribute reaches the order is Shopify's to keep; `attributes_reach_order=False` (an argument of
`complete_draft_order`, or the fake's own default) models an order without them, for the app's safety net.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from graphql import GraphQLError, OperationDefinitionNode, parse, validate
from graphql.execution.values import get_variable_values

from chalicelib.platforms.base import StoreUnavailable
from chalicelib.platforms.http import HttpResponse
from chalicelib.platforms.shopify import API_VERSION
from devstack.webhook_outbox import Delivery, Post, SendOrder, Sent, WebhookOutbox
from support.shopify_schema import load_schema

DEMO_CATALOG = Path(__file__).with_name("demo-catalog.json")
SHOP_DOMAIN = "walnut-and-wool.myshopify.com"
ACCESS_TOKEN = "shpat_local_fake_token"
CLIENT_ID = "0f6e5d4c3b2a19080f6e5d4c3b2a1908"
CLIENT_SECRET = "local-fake-shopify-secret"  # a Dev Dashboard app's client secret also signs its webhooks
TOKEN_LIFETIME_S = 86399
# The scopes the app is installed with, as the grant's answer lists them.
GRANTED_SCOPES = "read_products,read_inventory,read_orders,write_draft_orders"
INVALID_TOKEN = "[API] Invalid API key or access token (unrecognized login or wrong password)"
WEBHOOK_SECRET = "local-fake-shopify-secret"
SUPPORTED_VERSIONS = ("2025-04", "2025-07", "2025-10", "2026-01")
WEBHOOK_VERSION = "2025-10"
# A delivery not answered 2xx is tried again 8 times over 4 hours, then given up:
# https://shopify.dev/changelog/updates-to-webhook-retry-mechanism
WEBHOOK_RETRIES = 8

_PRICES = ("128.00", "34.00", "72.00", "24.00", "145.00")


@dataclass
class Variant:
    id: int
    product_id: int
    inventory_item_id: int
    sku: str
    title: str
    price: str
    inventory_policy: str = "DENY"  # ProductVariantInventoryPolicy: DENY or CONTINUE


@dataclass
class Product:
    id: int
    title: str
    handle: str
    status: str  # ACTIVE, ARCHIVED, DRAFT, UNLISTED (sold through its own URL only)
    image_url: str | None
    variants: list[Variant] = field(default_factory=list)


@dataclass
class Level:
    available: int = 0
    reserved: int = 0


@dataclass
class DraftOrder:
    id: int
    variant_id: int
    tags: list[str]
    custom_attributes: list[dict[str, str]]
    reserve_until: float | None
    status: str = "OPEN"
    reserved_at: int | None = None  # the location holding the reserved unit, while it is held
    order_id: int | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def gid(self) -> str:
        return f"gid://shopify/DraftOrder/{self.id}"


class FakeShopify:
    """One shop. `clock` drives the cost bucket (monotonic seconds), `now` the wall time (epoch seconds)."""

    def __init__(
        self,
        *,
        shop_domain: str = SHOP_DOMAIN,
        access_token: str = ACCESS_TOKEN,
        webhook_secret: str = WEBHOOK_SECRET,
        client_id: str = CLIENT_ID,
        client_secret: str = CLIENT_SECRET,
        token_lifetime_s: int = TOKEN_LIFETIME_S,
        catalog_path: Path | None = DEMO_CATALOG,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
        maximum_available: float = 1000.0,
        restore_rate: float = 100.0,
        currency: str = "GBP",
        storefront_url: str | None = None,
    ) -> None:
        self.shop_domain = shop_domain
        # The shop's primary domain, where invoices (draft order checkouts) live; a shop with no domain of its own
        # uses its myshopify.com one. The local stack serves the invoices on a port of this machine.
        self.storefront_url = (storefront_url or f"https://{shop_domain}").rstrip("/")
        self.access_token = access_token
        self.webhook_secret = webhook_secret
        self.client_id = client_id
        self.client_secret = client_secret
        self.token_lifetime_s = token_lifetime_s
        self.app_installed = True
        self.issued: dict[str, float] = {}  # tokens from the client credentials grant, and when each expires
        self.refused_tokens = 0  # Admin API calls answered 401
        # How long a new draft order stays out of the draftOrders tag search. Shopify does not say how soon its
        # search shows a new object (https://shopify.dev/docs/api/admin-graphql/2025-10/queries/draftOrders); the
        # connector must be safe whatever it is (set it to test that).
        self.search_lag_s = 0.0
        # Whether a completed draft order's custom attributes reach its order (complete_draft_order's default).
        self.attributes_reach_order = True
        self._token_ids = itertools.count(1)
        self.currency = currency
        self._clock = clock
        self._now = now
        self.maximum_available = maximum_available
        self.restore_rate = restore_rate
        self._bucket = maximum_available
        self._bucket_at = clock()
        self._lock = threading.RLock()
        self.locations: dict[int, str] = {70010001: "Workshop", 70010002: "Market stall"}
        self.products: dict[int, Product] = {}
        self.levels: dict[tuple[int, int], Level] = {}
        self.draft_orders: dict[int, DraftOrder] = {}
        self.requests: list[dict[str, Any]] = []  # every GraphQL request body received, parsed
        self.level_reads: list[list[str]] = []  # the inventory item ids of each level read (nodes query)
        self.untracked: set[int] = set()  # inventory items whose quantities Shopify does not track
        self._faults: list[Callable[[], HttpResponse | None]] = []
        self._after_faults: list[str] = []
        self._last_root: str | None = None
        self._ids = itertools.count(1)
        self._draft_ids = itertools.count(1_110_000_001)
        # None: each change's delivery is only returned, for the caller to post; see queue_webhooks.
        self.outbox: WebhookOutbox | None = None
        self._order_ids = itertools.count(5_550_000_001)
        self._draft_updates: dict[int, tuple[bytes, dict[str, str]]] = {}  # each draft order's last draft_orders/update
        if catalog_path is not None:
            for product in json.loads(catalog_path.read_text())["products"]:
                self.add_product(str(product["name"]), [str(product["sku"])])

    # --- seeding and inspection -------------------------------------------------------------------------------

    def add_product(
        self,
        title: str,
        skus: Iterable[str],
        *,
        status: str = "ACTIVE",
        variant_titles: Iterable[str] | None = None,
        price: str | None = None,
    ) -> Product:
        """A product with one variant per SKU (a single SKU gets Shopify's "Default Title" variant)."""
        with self._lock:
            n = next(self._ids)
            skus = list(skus)
            titles = list(variant_titles) if variant_titles is not None else None
            handle = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
            product = Product(
                8_800_000_000 + n, title, handle, status, f"https://cdn.shopify.com/s/files/1/demo/{handle}.jpg"
            )
            for i, sku in enumerate(skus):
                m = n * 100 + i
                variant_title = titles[i] if titles else ("Default Title" if len(skus) == 1 else sku)
                variant = Variant(
                    4_400_000_000 + m,
                    product.id,
                    4_600_000_000 + m,
                    sku,
                    variant_title,
                    price or _PRICES[(n - 1) % len(_PRICES)],
                )
                product.variants.append(variant)
                for location in self.locations:
                    self.levels[(variant.inventory_item_id, location)] = Level()
            self.products[product.id] = product
            return product

    def variant(self, sku: str) -> Variant:
        """The variant with this SKU."""
        for product in self.products.values():
            for variant in product.variants:
                if variant.sku == sku:
                    return variant
        raise KeyError(sku)

    def ids(self, sku: str) -> dict[str, str]:
        """The connector's ids for a SKU, as a catalogue entry carries them."""
        v = self.variant(sku)
        return {
            "shopify.product_id": str(v.product_id),
            "shopify.variant_id": str(v.id),
            "shopify.inventory_item_id": str(v.inventory_item_id),
        }

    def counts(self, sku: str) -> dict[str, int]:
        """Available and reserved units of a SKU over every location."""
        with self._lock:
            self._lapse_reservations()
            item = self.variant(sku).inventory_item_id
            levels = [lv for (i, _), lv in self.levels.items() if i == item]
            return {"available": sum(lv.available for lv in levels), "reserved": sum(lv.reserved for lv in levels)}

    def drafts_for(self, reservation_id: str) -> list[DraftOrder]:
        """Draft orders stamped with this reservation id."""
        return [
            d for d in self.draft_orders.values() if any(a.get("value") == reservation_id for a in d.custom_attributes)
        ]

    def draft_for_invoice(self, path: str) -> DraftOrder | None:
        """The draft order whose invoice URL has this path (/<shop id>/invoices/<token>)."""
        with self._lock:
            return next(
                (d for d in self.draft_orders.values() if self._invoice_url(d).endswith(path.rstrip("/"))), None
            )

    def drain_bucket(self) -> None:
        """Empty the cost bucket, as another app's burst of calls would."""
        with self._lock:
            self._bucket = 0.0
            self._bucket_at = self._clock()

    # --- faults -----------------------------------------------------------------------------------------------

    def fail_next(self, status: int = 503, *, count: int = 1, retry_after: str | None = None) -> None:
        """The next `count` calls answer this HTTP status."""
        headers = {"retry-after": retry_after} if retry_after else {}
        for _ in range(count):
            self._faults.append(lambda: HttpResponse(status, b'{"errors":"Internal error"}', headers))

    def timeout_next(self, *, count: int = 1) -> None:
        """The next `count` calls time out before Shopify sees them."""
        for _ in range(count):
            self._faults.append(_timeout)

    def timeout_after_next(self, root_field: str = "*") -> None:
        """The next call (to this root field, e.g. draftOrderCreate) is done but its answer is lost: a timeout."""
        self._after_faults.append(root_field)

    # --- webhooks ---------------------------------------------------------------------------------------------

    def webhook_request(self, topic: str, payload: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
        """A delivery as Shopify sends it: the JSON body and its headers, HMAC-signed with the app's secret."""
        body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
        digest = hmac.new(self.webhook_secret.encode("utf-8"), body, hashlib.sha256).digest()
        headers = {
            "Content-Type": "application/json",
            "X-Shopify-Topic": topic,
            "X-Shopify-Hmac-Sha256": base64.b64encode(digest).decode("ascii"),
            "X-Shopify-Shop-Domain": self.shop_domain,
            "X-Shopify-Webhook-Id": str(uuid.uuid4()),
            "X-Shopify-Event-Id": str(uuid.uuid4()),
            "X-Shopify-Triggered-At": _iso(self._now(), micros=True),
            "X-Shopify-API-Version": WEBHOOK_VERSION,
        }
        if self.outbox is not None:
            self.outbox.queue(body, headers)
        return body, headers

    def queue_webhooks(self, post: Post) -> WebhookOutbox:
        """From now on every delivery the shop produces is also queued, and posted by `deliver` through `post`
        (devstack/webhook_outbox.py): late, in any order, repeated. The methods still return each delivery; a
        caller using the outbox posts only through it."""
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
        """Post the queued deliveries (WebhookOutbox.deliver). A repeat is a retry or a second subscription's copy:
        the same body, signature, X-Shopify-Event-Id and X-Shopify-Triggered-At, a new X-Shopify-Webhook-Id. One no
        send of which was answered 2xx stays queued for the next call, until WEBHOOK_RETRIES retries are spent."""
        if self.outbox is None:
            raise RuntimeError("queue_webhooks first: deliveries are returned to the caller, not queued")
        return self.outbox.deliver(order=order, repeat=repeat, drop=drop, seed=seed)

    def _again(self, delivery: Delivery) -> dict[str, str]:
        return self.redeliver((delivery.body, delivery.headers))[1]

    @staticmethod
    def _settle(delivery: Delivery, status: int | None) -> bool:
        return (status is not None and 200 <= status < 300) or delivery.sends > WEBHOOK_RETRIES

    @staticmethod
    def redeliver(request: tuple[bytes, Mapping[str, str]]) -> tuple[bytes, dict[str, str]]:
        """A delivery sent again: a retry after an answer that was not a 2xx (8 tries over 4 hours,
        https://shopify.dev/changelog/updates-to-webhook-retry-mechanism), or the same event for a second
        subscription to its topic. The original body, signature and X-Shopify-Triggered-At, the same
        X-Shopify-Event-Id, and a new X-Shopify-Webhook-Id."""
        body, headers = request
        again = dict(headers)
        again["X-Shopify-Webhook-Id"] = str(uuid.uuid4())
        return body, again

    def set_available(self, sku: str, n: int, location: int | None = None) -> tuple[bytes, dict[str, str]]:
        """Set a location's available count (the first location by default); the inventory_levels/update it sends."""
        with self._lock:
            variant = self.variant(sku)
            location_id = location if location is not None else next(iter(self.locations))
            level = self.levels[(variant.inventory_item_id, location_id)]
            level.available = n
            return self._level_webhook(variant.inventory_item_id, location_id, level)

    def set_inventory_policy(self, sku: str, policy: str) -> tuple[bytes, dict[str, str]]:
        """The shop turns "Continue selling when out of stock" on (CONTINUE) or off (DENY); the products/update."""
        if policy not in ("DENY", "CONTINUE"):
            raise ValueError(policy)
        with self._lock:
            self.variant(sku).inventory_policy = policy
        return self.product_webhook(sku)

    def sell(self, sku: str, quantity: int = 1, location: int | None = None) -> tuple[bytes, dict[str, str]]:
        """A storefront sale at a location (the first by default); its inventory_levels/update. ValueError under DENY
        when the location has too few available; under CONTINUE `available` goes below zero."""
        with self._lock:
            variant = self.variant(sku)
            location_id = location if location is not None else next(iter(self.locations))
            level = self.levels[(variant.inventory_item_id, location_id)]
            if variant.inventory_policy == "DENY" and level.available < quantity:
                raise ValueError(f"{sku} has {level.available} available at {location_id}")
            level.available -= quantity
            return self._level_webhook(variant.inventory_item_id, location_id, level)

    def level_webhook(self, sku: str, location: int | None = None) -> tuple[bytes, dict[str, str]]:
        """The inventory_levels/update a location (the first by default) sends for its level as it stands now, stamped
        now: Shopify sends one whenever `available` changes, a draft order's reservation and its end included."""
        with self._lock:
            self._lapse_reservations()
            item = self.variant(sku).inventory_item_id
            location_id = location if location is not None else next(iter(self.locations))
            return self._level_webhook(item, location_id, self.levels[(item, location_id)])

    def _level_webhook(self, item: int, location_id: int, level: Level) -> tuple[bytes, dict[str, str]]:
        payload = {
            "inventory_item_id": item,
            "location_id": location_id,
            "available": level.available,
            "updated_at": _iso(self._now(), offset=True),
            "admin_graphql_api_id": f"gid://shopify/InventoryLevel/{location_id}?inventory_item_id={item}",
        }
        return self.webhook_request("inventory_levels/update", payload)

    def product_webhook(self, sku: str, topic: str = "products/update") -> tuple[bytes, dict[str, str]]:
        """The products/update (or products/create) delivery for the product selling this SKU."""
        product = self.products[self.variant(sku).product_id]
        image_id = product.id + 1
        payload = {
            "admin_graphql_api_id": f"gid://shopify/Product/{product.id}",
            "body_html": "",
            "created_at": _iso(self._now(), offset=True),
            "handle": product.handle,
            "id": product.id,
            "product_type": "",
            "published_at": _iso(self._now(), offset=True),
            "template_suffix": None,
            "title": product.title,
            "updated_at": _iso(self._now(), offset=True),
            "vendor": "Walnut & Wool",
            "status": product.status.lower(),
            "published_scope": "web",
            "tags": "",
            "variants": [
                {
                    "admin_graphql_api_id": f"gid://shopify/ProductVariant/{v.id}",
                    "barcode": None,
                    "compare_at_price": None,
                    "created_at": _iso(self._now(), offset=True),
                    "id": v.id,
                    "inventory_policy": v.inventory_policy.lower(),
                    "position": i + 1,
                    "price": v.price,
                    "product_id": product.id,
                    "sku": v.sku,
                    "taxable": True,
                    "title": v.title,
                    "updated_at": _iso(self._now(), offset=True),
                    "option1": v.title,
                    "option2": None,
                    "option3": None,
                    "image_id": None,
                    "inventory_item_id": v.inventory_item_id,
                    "inventory_quantity": self._sum_available(v.inventory_item_id),
                    "old_inventory_quantity": self._sum_available(v.inventory_item_id),
                }
                for i, v in enumerate(product.variants)
            ],
            "options": [],
            "images": [{"id": image_id, "product_id": product.id, "position": 1, "src": product.image_url}],
            "image": {"id": image_id, "product_id": product.id, "position": 1, "src": product.image_url},
            "media": [],
            "variant_gids": [
                {"admin_graphql_api_id": f"gid://shopify/ProductVariant/{v.id}", "updated_at": _iso(self._now())}
                for v in product.variants
            ],
            "has_variants_that_requires_components": False,
            "category": None,
        }
        return self.webhook_request(topic, payload)

    def delete_product(self, sku: str) -> tuple[bytes, dict[str, str]]:
        """The shop deletes the product selling this SKU; the products/delete it sends, whose body is the product's
        `id` alone (https://shopify.dev/docs/api/webhooks?reference=toml#list-products/delete)."""
        with self._lock:
            product = self.products.pop(self.variant(sku).product_id)
            return self.webhook_request("products/delete", {"id": product.id})

    def complete_draft_order(
        self, ref: str, *, financial_status: str = "paid", attributes_reach_order: bool | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """The shopper pays: the draft order becomes an order, the reserved unit is sold; the orders/create sent (and
        returned) and the draft order's draft_orders/update sent (`draft_order_webhook` returns it)."""
        with self._lock:
            self._lapse_reservations()
            draft = self.draft_orders[_gid_id(ref, "DraftOrder") or 0]
            if draft.status == "COMPLETED":
                raise ValueError("draft order already completed")
            variant = self._variant_by_id(draft.variant_id)
            if draft.reserved_at is not None:
                self.levels[(variant.inventory_item_id, draft.reserved_at)].reserved -= 1
                draft.reserved_at = None
            else:  # the reservation had lapsed: the unit comes out of what is available (Shopify may oversell)
                self.levels[(variant.inventory_item_id, next(iter(self.locations)))].available -= 1
            draft.status = "COMPLETED"
            draft.order_id = next(self._order_ids)
            draft.updated_at = self._now()
            payload = self._order_payload(draft, variant, financial_status)
            if not (self.attributes_reach_order if attributes_reach_order is None else attributes_reach_order):
                payload["note_attributes"] = []
            order = self.webhook_request("orders/create", payload)
            self._draft_updates[draft.id] = self.webhook_request("draft_orders/update", self._draft_payload(draft))
        return order

    def draft_order_webhook(self, ref: str) -> tuple[bytes, dict[str, str]]:
        """The last draft_orders/update this draft order sent (its completion)."""
        with self._lock:
            return self._draft_updates[_gid_id(ref, "DraftOrder") or 0]

    def _draft_payload(self, draft: DraftOrder) -> dict[str, Any]:
        """The draft order as draft_orders/update carries it: the REST DraftOrder's fields (custom attributes as
        note_attributes, tags as one comma-separated string), the ones a webhook reader needs and their neighbours.
        https://shopify.dev/docs/api/admin-rest/2025-10/resources/draftorder"""
        variant = self._variant_by_id(draft.variant_id)
        product = self.products.get(variant.product_id)
        return {
            "id": draft.id,
            "admin_graphql_api_id": draft.gid,
            "name": f"#D{draft.id % 1000}",
            "status": draft.status.lower(),
            "order_id": draft.order_id,
            "invoice_url": self._invoice_url(draft),
            "invoice_sent_at": None,
            "note": "Held for a shopper on the back-in-stock list.",
            "note_attributes": [{"name": a["key"], "value": a["value"]} for a in draft.custom_attributes],
            "tags": ", ".join(draft.tags),
            "currency": self.currency,
            "created_at": _iso(draft.created_at, offset=True),
            "updated_at": _iso(draft.updated_at or draft.created_at, offset=True),
            "completed_at": _iso(draft.updated_at, offset=True) if draft.status == "COMPLETED" else None,
            "total_price": variant.price,
            "line_items": [
                {
                    "id": draft.id + 1,
                    "variant_id": variant.id,
                    "product_id": variant.product_id,
                    "title": product.title if product else variant.sku,
                    "variant_title": None if variant.title == "Default Title" else variant.title,
                    "sku": variant.sku,
                    "quantity": 1,
                    "price": variant.price,
                }
            ],
        }

    def _order_payload(self, draft: DraftOrder, variant: Variant, financial_status: str) -> dict[str, Any]:
        product = self.products[variant.product_id]
        assert draft.order_id is not None
        at = _iso(self._now(), offset=True)
        return {
            "id": draft.order_id,
            "admin_graphql_api_id": f"gid://shopify/Order/{draft.order_id}",
            "created_at": at,
            "currency": self.currency,
            "financial_status": financial_status,
            "fulfillment_status": None,
            "name": f"#{1000 + draft.order_id % 1000}",
            "note": None,
            "note_attributes": [{"name": a["key"], "value": a["value"]} for a in draft.custom_attributes],
            "source_name": "shopify_draft_order",
            "tags": ", ".join(draft.tags),
            "test": False,
            "total_price": variant.price,
            "updated_at": at,
            "line_items": [
                {
                    "id": draft.order_id + 1,
                    "admin_graphql_api_id": f"gid://shopify/LineItem/{draft.order_id + 1}",
                    "name": product.title,
                    "price": variant.price,
                    "product_id": product.id,
                    "quantity": 1,
                    "sku": variant.sku,
                    "title": product.title,
                    "variant_id": variant.id,
                    "variant_title": None if variant.title == "Default Title" else variant.title,
                }
            ],
        }

    # --- the API ------------------------------------------------------------------------------------------------

    def transport(self) -> FakeTransport:
        """An in-process Transport onto this shop (no network)."""
        return FakeTransport(self)

    def handle(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None) -> HttpResponse:
        """One HTTP request to the Admin API, answered as Shopify would."""
        if self._faults:
            answer = self._faults.pop(0)()
            if answer is not None:
                return answer
        self._last_root = None
        response = self._handle(method, url, {k.lower(): v for k, v in headers.items()}, body or b"")
        if self._after_faults and self._after_faults[0] in ("*", self._last_root):
            self._after_faults.pop(0)
            raise StoreUnavailable("the store could not be reached: TimeoutError")
        return response

    def _handle(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> HttpResponse:
        if url == f"https://{self.shop_domain}/admin/oauth/access_token":
            return self._grant(method, headers, body)
        match = re.fullmatch(r"https?://([^/]+)/admin/api/([^/]+)/graphql\.json", url)
        if not match or match.group(1) != self.shop_domain:
            return _json(404, {"errors": "Not Found"})
        if match.group(2) not in SUPPORTED_VERSIONS:
            return _json(404, {"errors": "Not Found"})
        if not self._token_valid(headers.get("x-shopify-access-token", "")):
            self.refused_tokens += 1
            return _json(401, {"errors": INVALID_TOKEN})
        if method != "POST":
            return _json(405, {"errors": "Method not allowed"})
        if not headers.get("content-type", "").startswith("application/json"):
            return _json(415, {"errors": "Unsupported Media Type"})
        try:
            request = json.loads(body.decode("utf-8"))
            query = request["query"]
            variables = request.get("variables") or {}
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            return _json(400, {"errors": {"query": "Required parameter missing or invalid"}})
        with self._lock:
            self.requests.append(request)
            self._lapse_reservations()
            return self._graphql(str(query), dict(variables))

    def _token_valid(self, token: str) -> bool:
        if token and hmac.compare_digest(token, self.access_token):
            return True
        with self._lock:
            expires_at = self.issued.get(token)
            return expires_at is not None and self._now() < expires_at

    def _grant(self, method: str, headers: Mapping[str, str], body: bytes) -> HttpResponse:
        """The client credentials grant: a form-encoded POST answered with a token that expires."""
        if method != "POST":
            return _json(405, {"errors": "Method not allowed"})
        if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return _oauth_error("invalid_request", "The request must be form-encoded.")
        try:
            form = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=True))
        except (UnicodeDecodeError, ValueError):
            return _oauth_error("invalid_request", "The request body could not be read.")
        if form.get("grant_type") != "client_credentials":
            return _oauth_error("unsupported_grant_type", "Only client_credentials is served here.")
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        if not hmac.compare_digest(client_id, self.client_id) or not hmac.compare_digest(secret, self.client_secret):
            return _oauth_error("invalid_client", "Client authentication failed.")
        if not self.app_installed:
            return _oauth_error("app_not_installed", "The application is not installed on this shop.")
        with self._lock:
            n = next(self._token_ids)
            token = "shpat_" + hashlib.sha256(f"{self.shop_domain}:grant:{n}".encode()).hexdigest()[:32]
            self.issued[token] = self._now() + self.token_lifetime_s
        answer = {"access_token": token, "scope": GRANTED_SCOPES, "expires_in": self.token_lifetime_s}
        return _json(200, answer)

    def revoke_tokens(self) -> None:
        """Every issued token stops working at once (the app's secret was rotated, or the app reinstalled)."""
        with self._lock:
            self.issued.clear()

    def _graphql(self, query: str, variables: dict[str, Any]) -> HttpResponse:
        refused = _refused(query, variables)
        if refused:
            return _json(200, {"errors": refused})
        text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', query)
        text = re.sub(r"^\s*(query|mutation)\s+[_A-Za-z][_0-9A-Za-z]*", r"\1", text)  # the operation's own name
        root = _root_field(text)
        self._last_root = root
        requested = self._requested_cost(root, variables)
        self._refill()
        if requested > self.maximum_available:
            return _json(
                200,
                {
                    "errors": [
                        {"message": "Query cost exceeds the maximum", "extensions": {"code": "MAX_COST_EXCEEDED"}}
                    ]
                },
            )
        if requested > self._bucket:
            error = {
                "message": "Throttled",
                "extensions": {"code": "THROTTLED", "documentation": "https://shopify.dev/api/usage/limits"},
            }
            return _json(200, {"errors": [error], "extensions": {"cost": self._cost(requested, None)}})
        self._bucket -= requested
        handlers: dict[str, Callable[[dict[str, Any]], tuple[dict[str, Any], float]]] = {
            "productVariants": self._product_variants,
            "nodes": self._nodes,
            "draftOrders": self._draft_orders,
            "draftOrder": self._draft_order,
            "draftOrderCreate": self._draft_order_create,
            "draftOrderDelete": self._draft_order_delete,
        }
        handler = handlers.get(root or "")
        if handler is None:
            return _json(
                200, {"errors": [{"message": "No field the fake knows", "extensions": {"code": "undefinedField"}}]}
            )
        try:
            data, actual = handler(variables)
        except _VariableError as exc:
            self._bucket += requested
            return _json(200, {"errors": [{"message": str(exc), "extensions": {"code": "INVALID_VARIABLE"}}]})
        self._bucket = min(self.maximum_available, self._bucket + max(0.0, requested - actual))
        return _json(200, {"data": data, "extensions": {"cost": self._cost(requested, actual)}})

    def _requested_cost(self, root: str | None, variables: Mapping[str, Any]) -> float:
        # Shopify's calculated cost: one per object, connections by their `first`; mutations cost 10.
        if root == "productVariants":
            return 2.0 + 4.0 * float(variables.get("first") or 0)
        if root == "nodes":
            # Each inventory item, and its inventoryLevels connection of up to 20 levels with their quantities.
            ids = variables.get("ids")
            return 1.0 + 23.0 * (len(ids) if isinstance(ids, list) else 0)
        if root == "draftOrders":
            return 12.0
        if root in ("draftOrderCreate", "draftOrderDelete"):
            return 10.0
        return 1.0

    def _cost(self, requested: float, actual: float | None) -> dict[str, Any]:
        return {
            "requestedQueryCost": requested,
            "actualQueryCost": actual,
            "throttleStatus": {
                "maximumAvailable": self.maximum_available,
                "currentlyAvailable": round(self._bucket, 3),
                "restoreRate": self.restore_rate,
            },
        }

    def _refill(self) -> None:
        at = self._clock()
        self._bucket = min(self.maximum_available, self._bucket + (at - self._bucket_at) * self.restore_rate)
        self._bucket_at = at

    def _product_variants(self, variables: dict[str, Any]) -> tuple[dict[str, Any], float]:
        first = variables.get("first")
        if not isinstance(first, int) or not 1 <= first <= 250:
            raise _VariableError("first must be between 1 and 250")
        after = variables.get("after")
        ordered = sorted(((p, v) for p in self.products.values() for v in p.variants), key=lambda pv: pv[1].id)
        start = 0
        if after is not None:
            start = next((i + 1 for i, (_, v) in enumerate(ordered) if _cursor(v.id) == after), -1)
            if start < 0:
                raise _VariableError("Invalid cursor for current pagination sort.")
        page = ordered[start : start + first]
        nodes = [
            {
                "id": f"gid://shopify/ProductVariant/{v.id}",
                "sku": v.sku,
                "title": v.title,
                "price": v.price,
                "inventoryPolicy": v.inventory_policy,
                "image": None,
                "inventoryItem": {"id": f"gid://shopify/InventoryItem/{v.inventory_item_id}"},
                "product": {
                    "id": f"gid://shopify/Product/{p.id}",
                    "title": p.title,
                    "handle": p.handle,
                    "status": p.status,
                    "onlineStoreUrl": f"https://{self.shop_domain}/products/{p.handle}"
                    if p.status == "ACTIVE"
                    else None,
                    "featuredMedia": {"preview": {"image": {"url": p.image_url}}} if p.image_url else None,
                },
            }
            for p, v in page
        ]
        has_next = start + first < len(ordered)
        data = {
            "shop": {"currencyCode": self.currency},
            "productVariants": {
                "pageInfo": {"hasNextPage": has_next, "endCursor": _cursor(page[-1][1].id) if page else None},
                "nodes": nodes,
            },
        }
        return data, 2.0 + 4.0 * len(page)

    def _nodes(self, variables: dict[str, Any]) -> tuple[dict[str, Any], float]:
        # nodes(ids:) answers each id in order, null for one that does not exist, and refuses more than 250 ids:
        # https://shopify.dev/docs/api/admin-graphql/2025-10/queries/nodes, https://shopify.dev/docs/api/usage/limits
        # An InventoryItem's inventoryLevels list one level per location stocking it, each with
        # quantities(names: ["available"]): https://shopify.dev/docs/api/admin-graphql/2025-10/objects/InventoryLevel
        ids = variables.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise _VariableError("ids must be a list of IDs")
        if len(ids) > 250:
            raise _VariableError("The input array size of 251 is greater than the maximum allowed of 250.")
        self._lapse_reservations()
        items = {v.inventory_item_id for p in self.products.values() for v in p.variants}
        nodes: list[dict[str, Any] | None] = []
        actual = 1.0
        for gid in ids:
            item = _gid_id(gid, "InventoryItem")
            if item is None or item not in items:
                nodes.append(None)
                continue
            levels = [(loc, lv) for (i, loc), lv in sorted(self.levels.items()) if i == item][:20]
            nodes.append(
                {
                    "id": gid,
                    "tracked": item not in self.untracked,
                    "inventoryLevels": {
                        "nodes": [
                            {
                                "location": {"id": f"gid://shopify/Location/{loc}"},
                                "quantities": [{"name": "available", "quantity": lv.available}],
                            }
                            for loc, lv in levels
                        ]
                    },
                }
            )
            actual += 3.0 + len(levels)
        self.level_reads.append([i for i in ids if isinstance(i, str)])
        return {"nodes": nodes}, actual

    def _draft_orders(self, variables: dict[str, Any]) -> tuple[dict[str, Any], float]:
        query = variables.get("query")
        if not isinstance(query, str):
            raise _VariableError("query must be a string")
        match = re.fullmatch(r"""tag:(?:"([^"]*)"|'([^']*)'|(\S+))""", query.strip())
        wanted = next((g for g in match.groups() if g is not None), None) if match else None
        # The search reads an index that shows a new draft order only `search_lag_s` after it was created.
        indexed_by = self._now() - self.search_lag_s
        nodes = [
            {
                "id": d.gid,
                "status": d.status,
                "invoiceUrl": self._invoice_url(d),
                "tags": list(d.tags),
                "createdAt": _iso(d.created_at),
            }
            for d in self.draft_orders.values()
            if wanted is not None and wanted.lower() in (t.lower() for t in d.tags) and d.created_at <= indexed_by
        ][:10]
        return {"draftOrders": {"nodes": nodes}}, 2.0 + len(nodes)

    def _draft_order(self, variables: dict[str, Any]) -> tuple[dict[str, Any], float]:
        draft = self.draft_orders.get(_gid_id(variables.get("id"), "DraftOrder") or 0)
        return {"draftOrder": {"id": draft.gid, "status": draft.status} if draft else None}, 1.0

    def _draft_order_create(self, variables: dict[str, Any]) -> tuple[dict[str, Any], float]:
        data = variables.get("input")
        if not isinstance(data, dict):
            raise _VariableError("Variable $input of type DraftOrderInput! was provided invalid value")
        lines = data.get("lineItems")
        if not isinstance(lines, list) or len(lines) != 1 or not isinstance(lines[0], dict):
            return _user_error("draftOrderCreate", ["lineItems"], "The fake takes exactly one line item."), 10.0
        variant_id = _gid_id(lines[0].get("variantId"), "ProductVariant")
        try:
            variant = self._variant_by_id(variant_id or 0)
        except KeyError:
            return _user_error(
                "draftOrderCreate", ["lineItems", "0", "variantId"], "Product variant does not exist"
            ), 10.0
        if lines[0].get("quantity") != 1:
            return _user_error("draftOrderCreate", ["lineItems", "0", "quantity"], "The fake holds one unit."), 10.0
        if self.products[variant.product_id].status not in ("ACTIVE", "UNLISTED"):
            return _user_error("draftOrderCreate", ["lineItems", "0", "variantId"], "Product is not active"), 10.0
        until = data.get("reserveInventoryUntil")
        reserve_until = _parse_iso(until) if until is not None else None
        if until is not None and reserve_until is None:
            raise _VariableError("reserveInventoryUntil is not a DateTime")
        reserved_at = None
        if reserve_until is not None:
            reserved_at = next(
                (loc for loc in self.locations if self.levels[(variant.inventory_item_id, loc)].available > 0), None
            )
            if reserved_at is None:
                return _user_error("draftOrderCreate", ["lineItems", "0"], "Not enough inventory to reserve"), 10.0
            level = self.levels[(variant.inventory_item_id, reserved_at)]
            level.available -= 1
            level.reserved += 1
        draft = DraftOrder(
            id=next(self._draft_ids),
            variant_id=variant.id,
            tags=[str(t) for t in data.get("tags") or []],
            custom_attributes=[
                {"key": str(a["key"]), "value": str(a["value"])} for a in data.get("customAttributes") or []
            ],
            reserve_until=reserve_until,
            reserved_at=reserved_at,
            created_at=self._now(),
        )
        self.draft_orders[draft.id] = draft
        node = {"id": draft.gid, "status": draft.status, "invoiceUrl": self._invoice_url(draft)}
        return {"draftOrderCreate": {"draftOrder": node, "userErrors": []}}, 10.0

    def _draft_order_delete(self, variables: dict[str, Any]) -> tuple[dict[str, Any], float]:
        data = variables.get("input")
        draft_id = _gid_id(data.get("id") if isinstance(data, dict) else None, "DraftOrder")
        draft = self.draft_orders.get(draft_id or 0)
        if draft is None:
            return _user_error("draftOrderDelete", ["id"], "Draft order does not exist"), 10.0
        if draft.status == "COMPLETED":
            return _user_error("draftOrderDelete", ["id"], "A completed draft order cannot be deleted"), 10.0
        self._give_back(draft)
        del self.draft_orders[draft.id]
        return {"draftOrderDelete": {"deletedId": draft.gid, "userErrors": []}}, 10.0

    # --- inventory bookkeeping -----------------------------------------------------------------------------------

    def _give_back(self, draft: DraftOrder) -> None:
        if draft.reserved_at is None:
            return
        level = self.levels[(self._variant_by_id(draft.variant_id).inventory_item_id, draft.reserved_at)]
        level.reserved -= 1
        level.available += 1
        draft.reserved_at = None

    def _lapse_reservations(self) -> None:
        now = self._now()
        for draft in self.draft_orders.values():
            if draft.status != "COMPLETED" and draft.reserve_until is not None and draft.reserve_until <= now:
                self._give_back(draft)

    def _variant_by_id(self, variant_id: int) -> Variant:
        for product in self.products.values():
            for variant in product.variants:
                if variant.id == variant_id:
                    return variant
        raise KeyError(variant_id)

    def _sum_available(self, item: int) -> int:
        return sum(lv.available for (i, _), lv in self.levels.items() if i == item)

    def _invoice_url(self, draft: DraftOrder) -> str:
        token = hashlib.sha256(f"{self.shop_domain}:{draft.id}".encode()).hexdigest()[:32]
        return f"{self.storefront_url}/70000000/invoices/{token}"

    # --- WSGI ---------------------------------------------------------------------------------------------------

    def wsgi_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        """The same API over HTTP, for the local stack (the connector's URL host is the shop domain)."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = str(environ["CONTENT_TYPE"])
        path = str(environ.get("PATH_INFO", ""))
        url = f"https://{self.shop_domain}{path}"
        try:
            response = self.handle(str(environ.get("REQUEST_METHOD", "GET")), url, headers, body)
        except StoreUnavailable:
            response = HttpResponse(504, b'{"errors":"Gateway Timeout"}', {})
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests"}.get(
            response.status, ""
        )
        start_response(
            f"{response.status} {reason}".strip(),
            [("Content-Type", "application/json"), *((k, v) for k, v in response.headers.items())],
        )
        return iter([response.body])


class FakeTransport:
    """A Transport straight into a FakeShopify."""

    def __init__(self, shop: FakeShopify) -> None:
        self.shop = shop

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        """One request, answered in process."""
        return self.shop.handle(method, url, headers, body)


class _VariableError(Exception):
    """A variable the schema would refuse."""


def _timeout() -> HttpResponse | None:
    raise StoreUnavailable("the store could not be reached: TimeoutError")


def _json(status: int, body: Any) -> HttpResponse:
    headers = {"content-type": "application/json; charset=utf-8", "x-shopify-api-version": WEBHOOK_VERSION}
    return HttpResponse(status, json.dumps(body).encode("utf-8"), headers)


def _oauth_error(code: str, description: str) -> HttpResponse:
    return HttpResponse(
        400,
        json.dumps({"error": code, "error_description": description}).encode("utf-8"),
        {"content-type": "application/json; charset=utf-8"},
    )


def _user_error(root: str, field_path: list[str], message: str) -> dict[str, Any]:
    empty = {"draftOrderCreate": {"draftOrder": None}, "draftOrderDelete": {"deletedId": None}}[root]
    return {root: {**empty, "userErrors": [{"field": field_path, "message": message}]}}


@functools.lru_cache(maxsize=64)
def _checked_document(query: str) -> tuple[OperationDefinitionNode | None, tuple[dict[str, Any], ...]]:
    """The document's one operation, or Shopify's schema's errors for it. Cached: the connector sends a handful of
    documents many times over, and validating one walks the whole selection against some 2,900 types."""
    try:
        document = parse(query)
    except GraphQLError as exc:
        return None, (dict(exc.formatted),)
    errors = validate(load_schema(API_VERSION), document)
    if errors:
        return None, tuple(dict(e.formatted) for e in errors)
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if len(operations) != 1:
        # The connector never sends operationName, and Shopify needs it to choose among several operations.
        return None, ({"message": "An operation name is required when a document has several operations."},)
    return operations[0], ()


def _refused(query: str, variables: dict[str, Any]) -> list[dict[str, Any]]:
    """Shopify's errors for a document or variables it would refuse before running anything; [] when it runs.

    Variables are coerced against the operation's definitions as Shopify does: a required one missing, one of the
    wrong type, or an input object field the input type does not have is an INVALID_VARIABLE error."""
    operation, errors = _checked_document(query)
    if operation is None:
        return list(errors)
    coerced = get_variable_values(load_schema(API_VERSION), operation.variable_definitions or (), variables)
    if isinstance(coerced, list):
        return [{**e.formatted, "extensions": {"code": "INVALID_VARIABLE"}} for e in coerced]
    return []


def _root_field(query: str) -> str | None:
    # The first field inside the operation's selection set (after `query Name(...) {` or `mutation Name(...) {`),
    # skipping `shop { ... }`, which the catalogue query asks for alongside.
    body = query[query.index("{") + 1 :] if "{" in query else ""
    for name in re.findall(r"([_A-Za-z][_0-9A-Za-z]*)\s*[({]", body):
        if name != "shop":
            return str(name)
    return None


def _cursor(variant_id: int) -> str:
    return base64.b64encode(json.dumps({"last_id": variant_id}).encode()).decode("ascii")


def _gid_id(gid: Any, kind: str) -> int | None:
    match = re.fullmatch(rf"gid://shopify/{kind}/([0-9]+)", gid) if isinstance(gid, str) else None
    return int(match.group(1)) if match else None


def _parse_iso(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo else None


def _iso(epoch_s: float, *, micros: bool = False, offset: bool = False) -> str:
    at = datetime.fromtimestamp(epoch_s, tz=UTC)
    if offset:
        return at.strftime("%Y-%m-%dT%H:%M:%S+00:00")
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micros else "%Y-%m-%dT%H:%M:%SZ")
