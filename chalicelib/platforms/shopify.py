"""Shopify: verify and read its webhooks, read the catalogue and hold a unit with a draft order (Admin GraphQL API).

Every field, header and mutation name here is the one Shopify documents; the page is named next to each use.
What the HMAC covers: Shopify signs the raw body only, never the headers. The topic, shop domain and webhook id
are therefore checked for shape but cannot prove anything on their own; a replayed body is caught by the
delivery id's de-duplication, and a body re-labelled with another topic fails that topic's parsing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from chalicelib.errors import BadRequest, InvalidSignature
from chalicelib.platforms.base import (
    CATALOG,
    IGNORED,
    INVENTORY,
    ORDERS,
    SHOPIFY,
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
from chalicelib.platforms.shopify_auth import AccessTokens, StaticToken
from chalicelib.web import json_object

# The Admin API version every call and every webhook subscription is pinned to. Shopify releases a stable version
# each quarter and supports each for at least twelve months: https://shopify.dev/docs/api/usage/versioning
API_VERSION = "2025-10"

# The topics read_webhook acts on, and the Admin API scopes the connector needs (a write scope grants its read scope:
# https://shopify.dev/docs/api/usage/access-scopes). shopify.app.toml at the repository root subscribes to exactly
# these and asks for exactly these; tests/unit/test_shopify_app_toml.py holds the three together.
WEBHOOK_TOPICS = (
    "inventory_levels/update",
    "orders/create",
    "orders/paid",
    "draft_orders/update",
    "products/create",
    "products/update",
    "products/delete",
)
ACCESS_SCOPES = (
    "read_products",  # productVariants (the catalogue) and the products/* topics
    "read_inventory",  # the inventory_levels/update topic
    "read_orders",  # the orders/create and orders/paid topics
    "write_draft_orders",  # holds: draftOrderCreate, draftOrderDelete, draftOrders and draftOrder to find them, and
    # the draft_orders/update topic (the read scope it needs comes with the write scope)
)

# A products/update delivery carries every variant and image of the product; orders carry every line. Far larger
# than anything a real shop sends is refused before the signature is even computed.
MAX_WEBHOOK_BYTES = 512 * 1024
MAX_DELIVERY_ID_CHARS = 200
# Event ids are UUIDs; these bounds keep the key built from one and its topic within detection's 200 characters.
MAX_EVENT_ID_CHARS = 100
MAX_TOPIC_CHARS = 60

# The order attribute (and draft order custom attribute) our holds stamp, and the tag a draft order is found by.
RESERVATION_ATTRIBUTE = "bisn_reservation_id"
TAG_PREFIX = "bisn-"
MAX_TAG_CHARS = 40  # Shopify tags are at most 40 characters: https://help.shopify.com/en/manual/shopify-admin/productivity-tools/using-tags

# financial_status values that mean the shopper's payment is secured (captured, partly captured, or authorised for a
# manual capture); refunded ones were paid first. "pending" (a manual payment method, or a processor still working),
# "voided" and "expired" are not paid. Values: https://shopify.dev/docs/api/admin-graphql/2025-10/enums/OrderDisplayFinancialStatus
PAID_STATUSES = frozenset({"authorized", "partially_paid", "paid", "partially_refunded", "refunded"})

# ProductStatus values of products a shopper can buy. UNLISTED (2025-10 and later) is for sale through its own URL,
# only hidden from search, collections and recommendations; older versions call it ACTIVE:
# https://shopify.dev/docs/api/admin-graphql/2025-10/enums/ProductStatus
# https://shopify.dev/changelog/new-unlisted-product-status
SELLABLE_STATUSES = frozenset({"ACTIVE", "UNLISTED"})

# After creating a draft order, how long to wait (in turn) for the tag search to show it: _one_draft.
INDEX_WAITS_S = (0.5, 1.0, 1.5)

CATALOG_PAGE_SIZE = 50
MAX_THROTTLE_WAITS = 6  # waits for the cost bucket (or a 429) in one catalogue read before giving up
MAX_WAIT_S = 30.0

_GID = re.compile(r"^gid://shopify/([A-Za-z]+)/([0-9]+)(?:\?.*)?$")
_NUMERIC = re.compile(r"^[0-9]{1,20}$")
_TAG_SAFE = re.compile(r"^[A-Za-z0-9_-]+$")

# --- GraphQL documents --------------------------------------------------------------------------------------------

# productVariants connection, cursor pagination (first/after, pageInfo.hasNextPage/endCursor) and shop.currencyCode:
# https://shopify.dev/docs/api/admin-graphql/2025-10/queries/productVariants
# https://shopify.dev/docs/api/admin-graphql/2025-10/objects/ProductVariant (sku, title, price, image, inventoryItem,
# inventoryPolicy: https://shopify.dev/docs/api/admin-graphql/2025-10/enums/ProductVariantInventoryPolicy, DENY|CONTINUE)
# https://shopify.dev/docs/api/admin-graphql/2025-10/objects/Product (title, handle, status, onlineStoreUrl, featuredMedia)
# https://shopify.dev/docs/api/usage/pagination-graphql
CATALOG_QUERY = """
query BisnCatalogPage($first: Int!, $after: String) {
  shop {
    currencyCode
  }
  productVariants(first: $first, after: $after) {
    pageInfo {
      hasNextPage
      endCursor
    }
    nodes {
      id
      sku
      title
      price
      inventoryPolicy
      image {
        url
      }
      inventoryItem {
        id
      }
      product {
        id
        title
        handle
        status
        onlineStoreUrl
        featuredMedia {
          preview {
            image {
              url
            }
          }
        }
      }
    }
  }
}
""".strip()

# draftOrders with a search query on the tag: https://shopify.dev/docs/api/admin-graphql/2025-10/queries/draftOrders
# DraftOrder.status is OPEN, INVOICE_SENT or COMPLETED: https://shopify.dev/docs/api/admin-graphql/2025-10/enums/DraftOrderStatus
# DraftOrder.createdAt orders two draft orders of one hold: https://shopify.dev/docs/api/admin-graphql/2025-10/objects/DraftOrder
FIND_DRAFT_ORDERS_QUERY = """
query BisnFindDraftOrders($query: String!) {
  draftOrders(first: 10, query: $query) {
    nodes {
      id
      status
      invoiceUrl
      tags
      createdAt
    }
  }
}
""".strip()

# draftOrder by id (null when it does not exist): https://shopify.dev/docs/api/admin-graphql/2025-10/queries/draftOrder
DRAFT_ORDER_QUERY = """
query BisnDraftOrder($id: ID!) {
  draftOrder(id: $id) {
    id
    status
  }
}
""".strip()

# draftOrderCreate(input: DraftOrderInput!): lineItems (variantId, quantity), reserveInventoryUntil, tags,
# customAttributes (key, value; they become the order's note_attributes when it is paid):
# https://shopify.dev/docs/api/admin-graphql/2025-10/mutations/draftOrderCreate
# https://shopify.dev/docs/api/admin-graphql/2025-10/input-objects/DraftOrderInput
# Idempotency: the @idempotent directive (https://shopify.dev/docs/api/usage/idempotent-requests) arrived in 2026-01
# for inventory and refund mutations only (https://shopify.dev/changelog/adding-idempotency-for-inventory-adjustments-and-refund-mutations);
# draftOrderCreate takes no idempotency key in 2025-10, so place_hold looks the draft order up by its tag first.
DRAFT_ORDER_CREATE_MUTATION = """
mutation BisnDraftOrderCreate($input: DraftOrderInput!) {
  draftOrderCreate(input: $input) {
    draftOrder {
      id
      status
      invoiceUrl
    }
    userErrors {
      field
      message
    }
  }
}
""".strip()

# draftOrderDelete(input: DraftOrderDeleteInput!) -> deletedId, userErrors:
# https://shopify.dev/docs/api/admin-graphql/2025-10/mutations/draftOrderDelete
DRAFT_ORDER_DELETE_MUTATION = """
mutation BisnDraftOrderDelete($input: DraftOrderDeleteInput!) {
  draftOrderDelete(input: $input) {
    deletedId
    userErrors {
      field
      message
    }
  }
}
""".strip()


class _Throttled(Exception):
    """The cost bucket (or a 429) says wait this long."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(f"throttled for {wait_s:.1f}s")
        self.wait_s = wait_s


class ShopifyConnector:
    """One Shopify shop, reached through its Admin GraphQL API with an access token."""

    def __init__(
        self,
        *,
        shop_domain: str,
        webhook_secrets: Callable[[], Sequence[str]],
        transport: Transport,
        access_token: Callable[[], str] | None = None,
        tokens: AccessTokens | None = None,
        location_ids: tuple[str, ...] = (),
        sleep: Callable[[float], None] = time.sleep,
        api_version: str = API_VERSION,
    ) -> None:
        """`access_token` is an admin-created app's static token; `tokens` a Dev Dashboard app's renewed one."""
        self.shop_domain = shop_domain.strip().lower()
        if tokens is None:
            if access_token is None:
                raise ValueError("a Shopify connector needs an access token or a token source")
            tokens = StaticToken(access_token)
        self.tokens = tokens
        self._webhook_secrets = webhook_secrets
        self._transport = transport
        self.location_ids = tuple(str(x) for x in location_ids)
        self._sleep = sleep
        self.api_version = api_version

    name = SHOPIFY
    # A hold is also a draft order that reserves the unit on the shop.
    holds_on_store = True

    # --- webhooks -------------------------------------------------------------------------------------------------

    def read_webhook(self, raw: bytes | None, headers: Mapping[str, str]) -> WebhookDelivery:
        """Verify X-Shopify-Hmac-Sha256 (InvalidSignature), then the shop and the delivery, then parse the body."""
        data = raw or b""
        lowered = {str(k).lower(): str(v) for k, v in headers.items()}
        if len(data) > MAX_WEBHOOK_BYTES:
            raise InvalidSignature("The body is larger than any signed delivery we accept.")
        self._verify(data, lowered.get("x-shopify-hmac-sha256", ""))

        shop = lowered.get("x-shopify-shop-domain", "").strip().lower()
        if shop != self.shop_domain:
            raise BadRequest("The delivery is for another shop.", code="wrong_shop")
        webhook_id = lowered.get("x-shopify-webhook-id", "").strip()
        if not webhook_id or len(webhook_id) > MAX_DELIVERY_ID_CHARS:
            raise BadRequest("X-Shopify-Webhook-Id is missing or too long.", code="invalid_field")
        event_id = lowered.get("x-shopify-event-id", "").strip()
        if len(event_id) > MAX_EVENT_ID_CHARS:
            raise BadRequest("X-Shopify-Event-Id is too long.", code="invalid_field")
        topic = lowered.get("x-shopify-topic", "").strip()
        if not topic or len(topic) > MAX_TOPIC_CHARS:
            raise BadRequest("X-Shopify-Topic is missing or too long.", code="invalid_field")
        delivery_id = _delivery_key(topic, event_id, webhook_id)
        # Triggered-At is when Shopify fired the event; without it (or unreadable) the time of receipt stands in.
        sent_at = _parse_time(lowered.get("x-shopify-triggered-at", "")) or time.time()

        body = _json_object(data)
        if topic in TOPIC_SHAPES:
            check_topic(topic, body, **TOPIC_SHAPES[topic])
        body_at = _body_time(body)
        digest = hashlib.sha256(data).hexdigest()

        def make(kind: str, **fields: Any) -> WebhookDelivery:
            return WebhookDelivery(
                delivery_id=delivery_id,
                sent_at=sent_at,
                topic=topic,
                kind=kind,
                body_digest=digest,
                body_at=body_at,
                **fields,
            )

        if topic == "inventory_levels/update":
            return self._inventory(make, body)
        if topic in ("orders/create", "orders/paid"):
            return make(ORDERS, orders=(_order(body),))
        if topic == "draft_orders/update":
            return _draft_order(make, body)
        if topic in ("products/create", "products/update"):
            return self._product(make, body)
        if topic == "products/delete":
            product_id = _id(body, "id")
            return make(CATALOG, removed_ids=(f"shopify.product_id:{product_id}",))
        # Shopify retries a non-2xx answer (8 times over 4 hours), so a topic we do not use is acknowledged and ignored.
        return make(IGNORED, reason="unknown_topic")

    def _verify(self, data: bytes, given: str) -> None:
        # https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-2-validate-the-origin-of-your-webhook-to-ensure-its-coming-from-shopify
        # base64(HMAC-SHA256(app client secret, raw body)); compared in constant time against every current secret.
        given_bytes = given.strip().encode("ascii", "replace")
        if given_bytes:
            for secret in self._webhook_secrets():
                if not secret:
                    continue
                digest = hmac.new(secret.encode("utf-8"), data, hashlib.sha256).digest()
                if hmac.compare_digest(base64.b64encode(digest), given_bytes):
                    return
        raise InvalidSignature("The webhook signature is missing or wrong.")

    def _inventory(self, make: Callable[..., WebhookDelivery], body: dict[str, Any]) -> WebhookDelivery:
        # inventory_levels/update: inventory_item_id, location_id, available, updated_at
        # https://shopify.dev/docs/api/webhooks/2025-10?reference=toml#list-of-topics-inventory_levels/update
        item_id = _id(body, "inventory_item_id")
        location_id = _id(body, "location_id")
        if self.location_ids and location_id not in self.location_ids:
            return make(IGNORED, reason="other_location")
        available = body.get("available")
        if available is None:
            # Null when the item's quantity is not tracked: there is no count to act on.
            return make(IGNORED, reason="untracked")
        if isinstance(available, bool) or not isinstance(available, int):
            raise BadRequest("available must be a whole number.", code="invalid_field")
        # Shopify reports a negative available when a location is oversold (it sold units it did not have). For
        # back-in-stock purposes that is simply nothing to sell: 0 units available, never a debt carried forward.
        updated_at = body.get("updated_at")
        occurred_at = None
        if updated_at is not None:
            occurred_at = _parse_time(updated_at) if isinstance(updated_at, str) else None
            if occurred_at is None:
                raise BadRequest("updated_at must be an ISO 8601 time.", code="invalid_field")
        level = LevelReport(
            available=max(0, available),
            occurred_at=occurred_at,
            store_item_id=f"shopify.inventory_item_id:{item_id}",
            location_id=location_id,
        )
        return make(INVENTORY, levels=(level,))

    def _product(self, make: Callable[..., WebhookDelivery], body: dict[str, Any]) -> WebhookDelivery:
        # products/create and products/update carry the product with its variants and images:
        # https://shopify.dev/docs/api/webhooks/2025-10?reference=toml#list-of-topics-products/update
        product_id = _id(body, "id")
        status = body.get("status")
        if status is not None and not isinstance(status, str):
            raise BadRequest("status must be a string.", code="invalid_field")
        if status is not None and status.upper() not in SELLABLE_STATUSES:
            # Archived or draft: not for sale any more (or not yet). The catalogue read skips such products, so the
            # webhook removes it; "unlisted" is still sold through its own URL and stays.
            return make(CATALOG, removed_ids=(f"shopify.product_id:{product_id}",))
        title = _text(body, "title") or ""
        handle = _text(body, "handle")
        variants = body.get("variants")
        if not isinstance(variants, list):
            raise BadRequest("variants must be a list.", code="invalid_field")
        images = _images(body)
        product_image = _image_src(body.get("image"))
        if product_image is None:
            product_image = next(iter(images.values()), None)
        entries = []
        for variant in variants:
            if not isinstance(variant, dict):
                raise BadRequest("Each variant must be an object.", code="invalid_field")
            sku = _text(variant, "sku")
            if not sku or not sku.strip():
                continue
            variant_id = _id(variant, "id")
            ids = {"shopify.product_id": product_id, "shopify.variant_id": variant_id}
            if variant.get("inventory_item_id") is not None:
                ids["shopify.inventory_item_id"] = _id(variant, "inventory_item_id")
            image_id = variant.get("image_id")
            image = images.get(str(image_id)) if image_id is not None else None
            entries.append(
                CatalogEntry(
                    sku=sku.strip(),
                    name=_display_name(title, _text(variant, "title")),
                    product_url=self._product_url(None, handle, variant_id),
                    image_url=image or product_image,
                    price=_price(variant.get("price")),
                    ids=ids,
                    # The webhook's variant is the REST resource: inventory_policy "deny" or "continue".
                    backorder=variant.get("inventory_policy") == "continue",
                )
            )
        return make(CATALOG, products=tuple(entries))

    def _product_url(self, online_store_url: str | None, handle: str | None, variant_id: str) -> str | None:
        if online_store_url:
            return f"{online_store_url}?variant={variant_id}"
        if handle:
            return f"https://{self.shop_domain}/products/{handle}?variant={variant_id}"
        return None

    # --- catalogue ------------------------------------------------------------------------------------------------

    def read_catalog(self) -> Iterator[CatalogEntry]:
        """Every variant with a SKU of every active product, page by page; CatalogUnavailable if it cannot be read."""
        after: str | None = None
        waits = 0
        while True:
            try:
                data, cost = self._graphql(CATALOG_QUERY, {"first": CATALOG_PAGE_SIZE, "after": after})
            except _Throttled as throttled:
                waits += 1
                if waits > MAX_THROTTLE_WAITS:
                    raise CatalogUnavailable("Shopify kept throttling the catalogue read.") from None
                self._sleep(throttled.wait_s)
                continue
            except StoreUnavailable as exc:
                raise CatalogUnavailable(
                    f"Shopify's catalogue could not be read: {exc}",
                    credentials_refused=isinstance(exc, StoreCredentialsRefused),
                ) from None
            try:
                currency = _currency(data)
                connection = data["productVariants"]
                nodes = connection["nodes"]
                page_info = connection["pageInfo"]
                has_next = page_info["hasNextPage"] is True
                cursor = page_info.get("endCursor")
                entries = [self._catalog_entry(node, currency) for node in nodes]
            except (KeyError, TypeError, ValueError) as exc:
                raise CatalogUnavailable(f"Shopify's catalogue answer is not the documented shape ({exc!r}).") from None
            for entry in entries:
                if entry is not None:
                    yield entry
            if not has_next:
                return
            if not isinstance(cursor, str) or not cursor or cursor == after:
                raise CatalogUnavailable("Shopify's catalogue answer has no usable cursor for the next page.")
            after = cursor
            # Proactively let the bucket refill to the cost of another page rather than be throttled.
            wait = _refill_wait(cost)
            if wait > 0:
                self._sleep(wait)

    def _catalog_entry(self, node: Mapping[str, Any], currency: str | None) -> CatalogEntry | None:
        product = node["product"]
        if str(product["status"]).upper() not in SELLABLE_STATUSES:
            return None  # ARCHIVED and DRAFT products are not sold
        sku = node.get("sku")
        if not isinstance(sku, str) or not sku.strip():
            return None
        variant_id = _gid_number(node["id"], "ProductVariant")
        ids = {"shopify.product_id": _gid_number(product["id"], "Product"), "shopify.variant_id": variant_id}
        item = node.get("inventoryItem")
        if isinstance(item, dict) and item.get("id"):
            ids["shopify.inventory_item_id"] = _gid_number(item["id"], "InventoryItem")
        image = _url(node.get("image"))
        if image is None:
            media = product.get("featuredMedia")
            preview = media.get("preview") if isinstance(media, dict) else None
            image = _url(preview.get("image")) if isinstance(preview, dict) else None
        return CatalogEntry(
            sku=sku.strip(),
            name=_display_name(str(product.get("title") or ""), node.get("title")),
            product_url=self._product_url(product.get("onlineStoreUrl"), product.get("handle"), variant_id),
            image_url=image,
            price=_price(node.get("price")),
            currency=currency,
            ids=ids,
            backorder=node.get("inventoryPolicy") == "CONTINUE",
        )

    # --- holds ----------------------------------------------------------------------------------------------------

    def place_hold(self, hold: HoldRequest) -> StoreHold:
        """A draft order for one unit of the variant, reserving it until hold.expires_at; the same one on a retry."""
        variant_id = str(hold.ids.get("shopify.variant_id", "")).strip()
        if not _NUMERIC.match(variant_id):
            raise StoreRefused(f"{hold.sku} has no Shopify variant id to hold.")
        tag = reservation_tag(hold.reservation_id)
        try:
            drafts = self._find_drafts(tag)
            for found in drafts:
                url = found.get("invoiceUrl")
                if isinstance(url, str) and url:
                    # Two attempts' draft orders both in the search: the other still reserves a unit until the
                    # sweep's release_duplicates takes it back.
                    others = [d for d in drafts if d is not found and d.get("status") != "COMPLETED"]
                    return StoreHold(ref=str(found["id"]), checkout_url=url, settled=not others)
            variables = {
                "input": {
                    "lineItems": [{"variantId": f"gid://shopify/ProductVariant/{variant_id}", "quantity": 1}],
                    "reserveInventoryUntil": _iso(hold.expires_at),
                    "tags": [tag],
                    "customAttributes": [{"key": RESERVATION_ATTRIBUTE, "value": hold.reservation_id}],
                    "note": "Held for a shopper on the back-in-stock list.",
                }
            }
            data, _ = self._graphql(DRAFT_ORDER_CREATE_MUTATION, variables)
        except _Throttled as throttled:
            raise StoreUnavailable("Shopify is throttling calls.", retry_after_s=throttled.wait_s) from None
        payload = data.get("draftOrderCreate")
        if not isinstance(payload, dict):
            raise StoreUnavailable("Shopify's draftOrderCreate answer is not the documented shape.")
        errors = _user_errors(payload)
        if errors:
            raise StoreRefused(f"Shopify refused the draft order: {errors}")
        draft = payload.get("draftOrder")
        if not isinstance(draft, dict) or not draft.get("id") or not draft.get("invoiceUrl"):
            raise StoreUnavailable("Shopify created no draft order with an invoice URL.")
        created = StoreHold(ref=str(draft["id"]), checkout_url=str(draft["invoiceUrl"]))
        return self._one_draft(tag, created)

    def _one_draft(self, tag: str, created: StoreHold) -> StoreHold:
        """The hold to keep once the draft order just created shows in the tag search.

        The search is an index, and Shopify does not say how soon a new draft order appears in it. The lookup
        before the create can therefore miss one made by an earlier attempt whose answer was lost, and this
        create then reserves a second unit. Once the index shows the new draft order it shows every older one
        too: an older open draft order for the same hold is kept (a concurrent call may have recorded it) and the
        new one, which nobody has seen yet, is deleted. An index still behind after the waits (or a search that
        failed) leaves both: the hold is returned unsettled, and the sweep's release_duplicates takes the other
        back once the search shows this one."""
        unsettled = StoreHold(ref=created.ref, checkout_url=created.checkout_url, settled=False)
        for wait in (0.0, *INDEX_WAITS_S):
            if wait:
                self._sleep(wait)
            try:
                found = self._find_drafts(tag)
            except (_Throttled, StoreUnavailable):
                return unsettled  # the hold stands; a duplicate, if any, is the sweep's to find
            if not any(d.get("id") == created.ref for d in found):
                continue
            ours = next(d for d in found if d.get("id") == created.ref)
            older = [
                d
                for d in found
                if d.get("status") != "COMPLETED"
                and d.get("id") != created.ref
                and isinstance(d.get("invoiceUrl"), str)
                and d.get("invoiceUrl")
                and _age_key(d) < _age_key(ours)
            ]
            if not older:
                return created
            # Two calls that each created one see the same pair and agree which is older: only the newer goes.
            keep = min(older, key=_age_key)
            try:
                self._release_one(created.ref)
            except (_Throttled, StoreUnavailable):
                return unsettled  # could not take ours back: keep it, and the sweep takes the older one back
            # More than one older one (several lost answers): the others are the sweep's to take back.
            return StoreHold(ref=str(keep["id"]), checkout_url=str(keep["invoiceUrl"]), settled=len(older) == 1)
        return unsettled

    def release_hold(self, reservation_id: str, ref: str | None) -> None:
        """Delete the hold's draft order; already gone is done, and a completed (paid) one is left alone."""
        try:
            if ref is not None and _gid_kind(ref) == "DraftOrder":
                self._release_one(ref)
            # Every other open draft order with the hold's tag goes too: one an attempt whose answer was lost
            # created while the tag search had not yet caught up (see _one_draft).
            for draft in self._find_drafts(reservation_tag(reservation_id)):
                if draft.get("id") and draft.get("id") != ref and draft.get("status") != "COMPLETED":
                    self._release_one(str(draft["id"]))
        except _Throttled as throttled:
            raise StoreUnavailable("Shopify is throttling calls.", retry_after_s=throttled.wait_s) from None

    def release_duplicates(self, reservation_id: str, ref: str) -> bool:
        """Delete every open draft order with the hold's tag but `ref` (a completed one is the shopper's order and
        stays); settled once the search shows `ref` itself. The search is an index that may lag (see _one_draft):
        once it shows the hold's own draft order, it shows every older one, so none can be hiding any more. Run
        again after a crash, it finds what is left and deletes that (deleting one already gone is done)."""
        try:
            found = self._find_drafts(reservation_tag(reservation_id))
            for draft in found:
                if draft.get("id") and draft.get("id") != ref and draft.get("status") != "COMPLETED":
                    self._release_one(str(draft["id"]))
        except _Throttled as throttled:
            raise StoreUnavailable("Shopify is throttling calls.", retry_after_s=throttled.wait_s) from None
        return any(d.get("id") == ref for d in found)

    def _release_one(self, draft_id: str) -> None:
        status = self._draft_status(draft_id)
        if status is None or status == "COMPLETED":
            return
        data, _ = self._graphql(DRAFT_ORDER_DELETE_MUTATION, {"input": {"id": draft_id}})
        payload = data.get("draftOrderDelete")
        if not isinstance(payload, dict):
            raise StoreUnavailable("Shopify's draftOrderDelete answer is not the documented shape.")
        if payload.get("deletedId") or not _user_errors(payload):
            return
        # Refused: gone meanwhile (deleted elsewhere, or completed by the shopper) is fine; anything else is not.
        if self._draft_status(draft_id) in (None, "COMPLETED"):
            return
        raise StoreUnavailable(f"Shopify did not delete the draft order: {_user_errors(payload)}")

    def _draft_status(self, draft_id: str) -> str | None:
        data, _ = self._graphql(DRAFT_ORDER_QUERY, {"id": draft_id})
        draft = data.get("draftOrder")
        if draft is None:
            return None
        if not isinstance(draft, dict) or not isinstance(draft.get("status"), str):
            raise StoreUnavailable("Shopify's draftOrder answer is not the documented shape.")
        return str(draft["status"])

    def _find_drafts(self, tag: str) -> list[dict[str, Any]]:
        # Search syntax: https://shopify.dev/docs/api/usage/search-syntax; the search is matched loosely, so the
        # exact tag is checked on each result.
        data, _ = self._graphql(FIND_DRAFT_ORDERS_QUERY, {"query": f'tag:"{tag}"'})
        try:
            nodes = data["draftOrders"]["nodes"]
            found = [n for n in nodes if isinstance(n, dict) and tag in (n.get("tags") or [])]
        except (KeyError, TypeError) as exc:
            raise StoreUnavailable(f"Shopify's draftOrders answer is not the documented shape ({exc!r}).") from None
        # An open one first: a completed one is the shopper's order, still the same hold. Then the oldest, so that
        # every call picks the same one of two an earlier attempt left.
        return sorted(found, key=lambda n: (n.get("status") == "COMPLETED", _age_key(n)))

    # --- the wire -------------------------------------------------------------------------------------------------

    def _graphql(self, query: str, variables: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """POST one document; (data, extensions.cost). _Throttled to wait, StoreUnavailable for any other failure.

        Endpoint, token header and answer shape: https://shopify.dev/docs/api/admin-graphql#endpoints and
        https://shopify.dev/docs/api/usage/authentication; throttling: https://shopify.dev/docs/api/usage/limits
        """
        url = f"https://{self.shop_domain}/admin/api/{self.api_version}/graphql.json"
        body = json.dumps({"query": query, "variables": dict(variables)}).encode("utf-8")
        token = self.tokens.current()
        response = self._transport.send("POST", url, _headers(token), body)
        # A renewed token can still be refused (revoked, or lapsed before its expires_in said): one more try with
        # a freshly obtained one, never a loop. A static token is not retried, as the same one would be refused.
        if response.status == 401 and self.tokens.refused(token):
            response = self._transport.send("POST", url, _headers(self.tokens.current()), body)
        if response.status == 429:
            raise _Throttled(min(MAX_WAIT_S, retry_after_s(response)))
        if response.status >= 500:
            raise StoreUnavailable(
                f"Shopify answered HTTP {response.status}.",
                retry_after_s=retry_after_s(response) if response.status == 503 else None,
            )
        if response.status in (401, 403):
            raise StoreCredentialsRefused(f"Shopify refused the access token (HTTP {response.status}).")
        if response.status != 200:
            raise StoreUnavailable(f"Shopify answered HTTP {response.status}.")
        answer = _answer(response)
        extensions = answer.get("extensions")
        cost = extensions.get("cost") if isinstance(extensions, dict) else None
        cost = cost if isinstance(cost, dict) else {}
        errors = answer.get("errors")
        if errors:
            if _throttled(errors):
                raise _Throttled(_throttle_wait(cost))
            raise StoreUnavailable(f"Shopify's GraphQL API answered with errors: {_error_messages(errors)}")
        data = answer.get("data")
        if not isinstance(data, dict):
            raise StoreUnavailable("Shopify's GraphQL answer has no data.")
        return data, cost


# --- helpers ------------------------------------------------------------------------------------------------------


def reservation_tag(reservation_id: str) -> str:
    """The draft order tag for a reservation: `bisn-<id>`, or a digest of the id when that would not be a safe tag."""
    tag = f"{TAG_PREFIX}{reservation_id}"
    if len(tag) <= MAX_TAG_CHARS and _TAG_SAFE.match(reservation_id):
        return tag
    return TAG_PREFIX + hashlib.sha256(reservation_id.encode("utf-8")).hexdigest()[: MAX_TAG_CHARS - len(TAG_PREFIX)]


# What each topic's body is, from the example payloads of https://shopify.dev/docs/api/webhooks/2025-10 ("List of
# topics"): products/delete carries only the product's `id`; products/create and products/update the product with
# its `title`, `variants` and `updated_at`; inventory_levels/update an item's level at a location with its
# `updated_at`; an order its `line_items`; draft_orders/update the draft order with its `status`, `order_id` and
# `invoice_url`, and no `financial_status`. A body of one topic is refused under another.
_PRODUCT_ONLY = frozenset({"variants", "title", "handle", "product_type"})
_ORDER_ONLY = frozenset({"line_items", "financial_status", "order_number"})
_LEVEL_ONLY = frozenset({"inventory_item_id"})  # an order has a location_id too
_DRAFT_ONLY = frozenset({"invoice_url", "order_id"})  # a draft order names its invoice and the order it became
TOPIC_SHAPES: dict[str, dict[str, frozenset[str]]] = {
    "products/delete": {"only": frozenset({"id"}), "required": frozenset({"id"})},
    "products/create": {"required": frozenset({"id", "title", "variants", "updated_at"}), "forbidden": _ORDER_ONLY},
    "products/update": {"required": frozenset({"id", "title", "variants", "updated_at"}), "forbidden": _ORDER_ONLY},
    "inventory_levels/update": {"forbidden": _PRODUCT_ONLY | _ORDER_ONLY | {"id"}},
    "orders/create": {"forbidden": _PRODUCT_ONLY | _LEVEL_ONLY | _DRAFT_ONLY},
    "orders/paid": {"forbidden": _PRODUCT_ONLY | _LEVEL_ONLY | _DRAFT_ONLY},
    "draft_orders/update": {
        "required": frozenset({"id", "status", "order_id"}),
        "forbidden": _PRODUCT_ONLY | _LEVEL_ONLY | {"financial_status", "order_number"},
    },
}


def _body_time(body: Mapping[str, Any]) -> float | None:
    """The time the body gives for its own state (`updated_at`), None when it gives none (products/delete)."""
    value = body.get("updated_at")
    return _parse_time(value) if isinstance(value, str) else None


def _delivery_key(topic: str, event_id: str, webhook_id: str) -> str:
    """What a redelivery is recognised by. Every delivery of one event carries the same X-Shopify-Event-Id: a retry
    (8 over 4 hours) and the event sent again for a second subscription to its topic alike, each with its own
    X-Shopify-Webhook-Id. https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates and
    https://shopify.dev/changelog/updates-to-webhook-retry-mechanism. The topic keeps two topics of one event
    apart; a delivery without an event id falls back to its webhook id, as before."""
    if event_id:
        return f"shopify-event:{topic}:{event_id}"
    return webhook_id


def _headers(token: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Accept": "application/json", "X-Shopify-Access-Token": token}


def _json_object(data: bytes) -> dict[str, Any]:
    """A webhook body read by the rule every JSON body is (chalicelib/web `json_object`); bytes that are not UTF-8
    are answered as JSON that does not parse, as they always were here."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest("The body is not valid JSON.", code="invalid_json") from exc
    return json_object(text)


def _id(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise BadRequest(f"{key} must be a positive whole number.", code="invalid_field")
    return str(value)


def _text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key} must be a string.", code="invalid_field")
    return value


def _price(value: Any) -> str | None:
    # Shopify gives prices as decimal strings ("24.00"); the Money scalar is the same string in GraphQL.
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value.strip()):
        return value.strip()
    return None


def _display_name(product_title: str, variant_title: Any) -> str:
    # A product without options has one variant titled "Default Title", which is not worth showing.
    if isinstance(variant_title, str) and variant_title.strip() and variant_title.strip() != "Default Title":
        return f"{product_title} - {variant_title.strip()}" if product_title else variant_title.strip()
    return product_title


def _images(body: Mapping[str, Any]) -> dict[str, str]:
    images = body.get("images")
    out: dict[str, str] = {}
    if isinstance(images, list):
        for image in images:
            src = _image_src(image)
            if src is not None and isinstance(image, dict) and image.get("id") is not None:
                out[str(image["id"])] = src
    return out


def _image_src(image: Any) -> str | None:
    src = image.get("src") if isinstance(image, dict) else None
    return src if isinstance(src, str) and src.startswith("https://") else None


def _url(image: Any) -> str | None:
    url = image.get("url") if isinstance(image, dict) else None
    return url if isinstance(url, str) and url.startswith("https://") else None


def _order(body: Mapping[str, Any]) -> OrderReport:
    # orders/create and orders/paid: id, financial_status, note_attributes [{name, value}]
    # https://shopify.dev/docs/api/webhooks/2025-10?reference=toml#list-of-topics-orders/create
    order_id = _id(body, "id")
    status = body.get("financial_status")
    if status is not None and not isinstance(status, str):
        raise BadRequest("financial_status must be a string.", code="invalid_field")
    reservation_ids = _attributed(body)
    return OrderReport(
        order_id=order_id,
        reservation_ids=reservation_ids,
        paid=status in PAID_STATUSES,
        linkable=not reservation_ids,  # its draft_orders/update may still name the hold
    )


def _draft_order(make: Callable[..., WebhookDelivery], body: Mapping[str, Any]) -> WebhookDelivery:
    """A hold's draft order completed into an order: Shopify's own link from the draft to the order.

    The order converts a hold through the reservation id its note_attributes carry, copied from the draft's custom
    attributes. Shopify documents that link from the draft's side only (the Order object has no field naming its
    draft order), so a completed draft is read too, and an order whose attributes lost the id is still matched:
    draft_orders/update carries the REST DraftOrder, with `status` (open, invoice_sent, completed), `order_id` ("the
    ID of the order that's created and associated with the draft order after the draft order is completed", null
    before), and the draft's own `note_attributes` and `tags`, which we wrote.
    https://shopify.dev/docs/api/webhooks/2025-10?reference=toml#list-of-topics-draft_orders/update
    https://shopify.dev/docs/api/admin-rest/2025-10/resources/draftorder
    """
    draft_id = _id(body, "id")
    status = body.get("status")
    if not isinstance(status, str):
        raise BadRequest("status must be a string.", code="invalid_field")
    if status != "completed" or body.get("order_id") is None:
        return make(IGNORED, reason="draft_not_completed")
    order_id = _id(body, "order_id")
    reservation_ids = _attributed(body) or _tagged(body)
    if not reservation_ids:
        return make(IGNORED, reason="not_from_a_hold")
    report = OrderReport(
        order_id=order_id,
        reservation_ids=reservation_ids,
        paid=False,  # a completed draft says nothing of payment: the order's own paid delivery does
        draft_ref=f"gid://shopify/DraftOrder/{draft_id}",
    )
    return make(ORDERS, orders=(report,))


def _attributed(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The reservation ids a body's note_attributes ([{name, value}]) carry under RESERVATION_ATTRIBUTE."""
    attributes = body.get("note_attributes") or []
    if not isinstance(attributes, list):
        raise BadRequest("note_attributes must be a list.", code="invalid_field")
    reservation_ids: list[str] = []
    for attribute in attributes:
        if not isinstance(attribute, dict):
            raise BadRequest("Each note attribute must be an object.", code="invalid_field")
        value = attribute.get("value")
        value = value.strip() if isinstance(value, str) else ""
        if attribute.get("name") == RESERVATION_ATTRIBUTE and value and value not in reservation_ids:
            reservation_ids.append(value)
    return tuple(reservation_ids)


def _tagged(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The reservation ids a draft order's tags name (`bisn-<id>`, comma-separated in REST bodies). The digest tag of
    an id that is no safe tag reads back as an id no hold has, so such a hold is found by its attribute only."""
    tags = body.get("tags")
    if tags is None:
        return ()
    if not isinstance(tags, str):
        raise BadRequest("tags must be a string.", code="invalid_field")
    found: list[str] = []
    for tag in (t.strip() for t in tags.split(",")):
        reservation_id = tag[len(TAG_PREFIX) :] if tag.startswith(TAG_PREFIX) else ""
        if reservation_id and reservation_tag(reservation_id) == tag and reservation_id not in found:
            found.append(reservation_id)
    return tuple(found)


def _parse_time(text: str) -> float | None:
    """ISO 8601 (Shopify sends offsets and up to nanoseconds) as epoch seconds; None if unreadable."""
    text = text.strip()
    if not text:
        return None
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)  # keep microseconds, drop finer digits
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp()


def _iso(epoch_s: int) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _age_key(draft: Mapping[str, Any]) -> tuple[float, str]:
    """Older first: createdAt, then the id, so that every caller orders the same draft orders the same way. One
    whose time cannot be read sorts last, so it is never kept over one that can."""
    created = draft.get("createdAt")
    at = _parse_time(created) if isinstance(created, str) else None
    return (at if at is not None else float("inf"), str(draft.get("id")))


def _gid_kind(gid: Any) -> str | None:
    match = _GID.match(gid) if isinstance(gid, str) else None
    return match.group(1) if match else None


def _gid_number(gid: Any, kind: str) -> str:
    match = _GID.match(gid) if isinstance(gid, str) else None
    if not match or match.group(1) != kind:
        raise ValueError(f"not a {kind} id")
    return match.group(2)


def _currency(data: Mapping[str, Any]) -> str | None:
    shop = data.get("shop")
    code = shop.get("currencyCode") if isinstance(shop, dict) else None
    return code if isinstance(code, str) and code else None


def _answer(response: HttpResponse) -> dict[str, Any]:
    try:
        answer = json.loads(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise StoreUnavailable("Shopify's answer is not JSON.") from None
    if not isinstance(answer, dict):
        raise StoreUnavailable("Shopify's answer is not a JSON object.")
    return answer


def _throttled(errors: Any) -> bool:
    # A throttled call is answered with errors[].extensions.code "THROTTLED" (message "Throttled"):
    # https://shopify.dev/docs/api/usage/limits#rate-limits and https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits
    if not isinstance(errors, list):
        return False
    for error in errors:
        if isinstance(error, dict):
            extensions = error.get("extensions")
            code = extensions.get("code") if isinstance(extensions, dict) else None
            if code == "THROTTLED" or error.get("message") == "Throttled":
                return True
    return False


def _throttle_wait(cost: Mapping[str, Any]) -> float:
    """Seconds until the bucket holds the requested cost: (requestedQueryCost - currentlyAvailable) / restoreRate."""
    try:
        status = cost["throttleStatus"]
        needed = float(cost["requestedQueryCost"]) - float(status["currentlyAvailable"])
        rate = float(status["restoreRate"])
    except (KeyError, TypeError, ValueError):
        return 1.0
    if rate <= 0:
        return MAX_WAIT_S
    return min(MAX_WAIT_S, max(0.5, needed / rate))


def _refill_wait(cost: Mapping[str, Any]) -> float:
    """Before the next page: wait if the bucket holds less than the last page's requested cost."""
    try:
        status = cost["throttleStatus"]
        needed = float(cost["requestedQueryCost"]) - float(status["currentlyAvailable"])
        rate = float(status["restoreRate"])
    except (KeyError, TypeError, ValueError):
        return 0.0
    if needed <= 0 or rate <= 0:
        return 0.0
    return min(MAX_WAIT_S, needed / rate)


def _error_messages(errors: Any) -> str:
    if isinstance(errors, list):
        messages = [str(e.get("message", "")) for e in errors if isinstance(e, dict)]
        return "; ".join(m for m in messages if m)[:300] or "unknown"
    return str(errors)[:300]


def _user_errors(payload: Mapping[str, Any]) -> str:
    errors = payload.get("userErrors") or []
    if not isinstance(errors, list):
        return "unreadable userErrors"
    return "; ".join(str(e.get("message", "")) for e in errors if isinstance(e, dict))[:300]
