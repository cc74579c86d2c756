"""The connector seam: what the domain asks of a store platform, and what a platform tells the domain.

A connector verifies and reads a platform's webhooks, reads its catalogue, and places or releases a hold on the
store itself. The domain (detection, orders, holds, the sweep, catalogue sync) speaks SKUs and reservation ids;
connectors translate. Connectors make no AWS call: where a webhook names the platform's own ids, the domain maps
them to SKUs through the catalogue (`LevelReport.store_item_id`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from chalicelib.errors import BadRequest

GENERIC = "generic"
SHOPIFY = "shopify"
WOOCOMMERCE = "woocommerce"
PLATFORMS = (GENERIC, SHOPIFY, WOOCOMMERCE)

# What a delivery is about (WebhookDelivery.kind).
INVENTORY = "inventory"
ORDERS = "orders"
CATALOG = "catalog"
IGNORED = "ignored"


class StoreUnavailable(Exception):
    """The store did not answer usefully now (down, 5xx, 429, a timeout): the same call may succeed later."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class StoreCredentialsRefused(StoreUnavailable):
    """The store answered and refuses our API credentials (a revoked or wrong key, or one without write access).
    The store is up: retrying helps only once the shop fixes its key, so this is reported as its own problem,
    never as a store that is down."""


class StoreRefused(Exception):
    """The store answered and will not do it (the variant is gone, no stock to hold): retrying will not help."""


class CatalogUnavailable(Exception):
    """The catalogue as a whole could not be read; catalogue sync changes nothing. `credentials_refused` says the
    store answered and refused our credentials (StoreCredentialsRefused), which is counted and alarmed apart."""

    def __init__(self, message: str, *, credentials_refused: bool = False) -> None:
        super().__init__(message)
        self.credentials_refused = credentials_refused


@dataclass(frozen=True)
class CatalogEntry:
    """One sellable variant as the platform describes it.

    `ids` are the platform's own ids for this SKU, keyed `<platform>.<name>`, e.g. `shopify.variant_id`,
    `shopify.inventory_item_id`, `woocommerce.product_id`, `woocommerce.variation_id` (all as strings).
    `price` is the decimal string the platform gives (never a float), in `currency`. `backorder`: the platform
    keeps selling the variant once its stock is gone (WooCommerce backorders, Shopify's CONTINUE policy), so a level of
    0 or below is not "sold out" to a shopper.
    """

    sku: str
    name: str
    product_url: str | None = None
    image_url: str | None = None
    price: str | None = None
    currency: str | None = None
    ids: Mapping[str, str] = field(default_factory=dict)
    backorder: bool = False


@dataclass(frozen=True)
class LevelReport:
    """A stock level the platform reports. It names the SKU, or else the platform's inventory item (mapped to a
    SKU through the catalogue's `ids`). With `location_id` it is one location's level, and the SKU's level is
    the sum over the shop's selling locations."""

    available: int
    occurred_at: float | None  # the platform's own time of the change (epoch seconds), when it gives one
    sku: str | None = None
    store_item_id: str | None = None  # e.g. "shopify.inventory_item_id:123", matched against CatalogEntry.ids
    location_id: str | None = None


@dataclass(frozen=True)
class OrderReport:
    """An order the platform reports, with the reservation ids our holds stamped on it (none for an order that
    did not come from a hold)."""

    order_id: str
    reservation_ids: tuple[str, ...] = ()
    paid: bool = True  # False while the platform still waits for payment (the hold stands until it is paid)
    # Set when the report is not the order but the hold's draft order, completed into `order_id` (Shopify's
    # draft_orders/update): the platform's own link from our draft to the order, which says nothing of payment.
    draft_ref: str | None = None
    # Set on an order without reservation ids on a platform that may yet link it to a hold through such a draft
    # report: whether it was paid is then remembered for the draft's report to find.
    linkable: bool = False


@dataclass(frozen=True)
class WebhookDelivery:
    """A verified, parsed delivery. `delivery_id` de-duplicates redeliveries; `sent_at` orders deliveries whose
    body carries no time of its own."""

    delivery_id: str
    sent_at: float
    topic: str
    kind: str  # INVENTORY, ORDERS, CATALOG or IGNORED
    levels: tuple[LevelReport, ...] = ()
    orders: tuple[OrderReport, ...] = ()
    products: tuple[CatalogEntry, ...] = ()  # CATALOG: entries added or changed
    removed_ids: tuple[str, ...] = ()  # CATALOG: ids (as in CatalogEntry.ids values, prefixed) of deleted products
    reason: str | None = None  # IGNORED: why
    # Replays (StoreWebhooks): only the body is signed, so headers are whatever a replayer chose. What the guard can
    # trust is the body itself (its digest) and the time the body gives for its own state, when it gives one.
    body_digest: str = ""
    body_at: float | None = None


@dataclass(frozen=True)
class HoldRequest:
    """Hold one unit of `sku` on the store for the shopper of `reservation_id` until `expires_at` (epoch s)."""

    reservation_id: str
    sku: str
    ids: Mapping[str, str]
    expires_at: int
    product_name: str = ""
    checkout_url: str = ""  # the product's own checkout URL template (the generic store's only way to check out)


@dataclass(frozen=True)
class StoreHold:
    """A hold the store has: its own reference (to release it) and where the shopper checks out.

    `settled` is False when the store could not confirm that this is the hold's only one (a retry after a lost
    answer may have made a second that the store's search did not show yet): the sweep then asks
    `Store.release_duplicates` until it is."""

    ref: str
    checkout_url: str
    settled: bool = field(default=True, compare=False)


def check_topic(
    topic: str,
    body: Mapping[str, object],
    *,
    only: frozenset[str] | None = None,
    required: frozenset[str] = frozenset(),
    forbidden: frozenset[str] = frozenset(),
) -> None:
    """BadRequest `topic_mismatch` for a body whose fields are not `topic`'s resource: keys outside `only`, a
    `required` key missing, or a `forbidden` key (one only another topic's resource has) present. A platform signs
    the body alone, so a body signed for one topic can be sent under another: this refuses it before anything is
    written."""
    keys = set(body)
    if (only is not None and not keys <= only) or not required <= keys or keys & forbidden:
        raise BadRequest(f"The body is not a {topic!r} delivery's body.", code="topic_mismatch")


class WebhookReader(Protocol):
    """A platform's webhook dialect."""

    def read_webhook(self, raw: bytes | None, headers: Mapping[str, str]) -> WebhookDelivery:
        """Verify the signature (InvalidSignature before anything is read), then parse (BadRequest)."""
        ...


class Store(Protocol):
    """The store the stage sells through (PLATFORM), as the domain sees it."""

    @property
    def name(self) -> str:
        """GENERIC, SHOPIFY or WOOCOMMERCE."""
        ...

    @property
    def holds_on_store(self) -> bool:
        """Whether a hold is also placed on the store (False: the hold lives in our tables only)."""
        ...

    def place_hold(self, hold: HoldRequest) -> StoreHold:
        """Hold one unit on the store. Idempotent on the reservation id: a second call returns the same hold.
        StoreUnavailable (try later) or StoreRefused (never)."""
        ...

    def release_hold(self, reservation_id: str, ref: str | None) -> None:
        """Give the unit back to the store. Idempotent: a hold already gone (or never placed) is released.
        A hold the shopper already paid for is left alone. StoreUnavailable to try later."""
        ...

    def release_duplicates(self, reservation_id: str, ref: str) -> bool:
        """Give back every other hold the store has for this reservation (never `ref`, never one already paid for);
        True once the store shows that nothing else can be hiding (settled), False to look again later.
        Idempotent. StoreUnavailable to try later."""
        ...


class Catalogue(Protocol):
    """A platform's own product catalogue."""

    def read_catalog(self) -> Iterator[CatalogEntry]:
        """Every sellable variant, page by page; CatalogUnavailable when the catalogue cannot be read."""
        ...
