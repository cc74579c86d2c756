"""POST /webhooks/shopify and /webhooks/woocommerce: a platform's own webhooks, read by its connector.

The connector verifies the signature and turns the delivery into levels, orders or catalogue changes in SKUs
and reservation ids; this module hands each to the service that owns it (detection, orders, catalogue sync).
A platform retries every answer that is not a 2xx (Shopify 8 times over 4 hours, WooCommerce until it disables the
webhook), so what it could never fix — an order that did not come from a hold, an item we do not sell — is
answered 200 with the reason, and only a delivery it must correct (a bad signature, a malformed body) is a 4xx.

Only the body is signed: the topic and the event id are headers anyone who saw a delivery can change. So a body is
taken only under its own topic (the connector checks its fields, 400 `topic_mismatch`), a body whose own time is
older than BODY_MAX_AGE_S is refused (400 `stale_body`), and every catalogue body acted on is remembered,
by its event id and by its digest (orders convert a hold once, levels are remembered by detection), for longer than that age: a body sent again under a new event id is a duplicate
while remembered and stale after, so it never acts twice.

An order is matched to its hold by the reservation id it carries, or else through the hold's draft order the platform
says it was completed from (Shopify's draft_orders/update): the order's payment and the draft's link to it are each
remembered, so whichever of the two arrives second converts the hold (docs/PLATFORMS.md, Shopify §4).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from chalicelib.catalog_sync import CatalogSync
from chalicelib.clock import Clock
from chalicelib.detect import DetectService, check_delivery_id
from chalicelib.errors import BadRequest, Conflict, NotFound
from chalicelib.orders import MAX_ORDER_ID_LEN, RESERVATION_ID, Order, OrdersService, parse_order
from chalicelib.platforms.base import (
    IGNORED,
    INVENTORY,
    ORDERS,
    CatalogEntry,
    OrderReport,
    WebhookDelivery,
    WebhookReader,
)
from chalicelib.tables.throttle import SavedStates, SeenEvents

log = logging.getLogger(__name__)

# A body whose own time (Shopify `updated_at`, WooCommerce `date_modified_gmt`) is older than this is refused. Both
# platforms build the body when the change happens (Shopify retries it for 4 hours, WooCommerce sends it from its
# queue within minutes), so a real delivery is never near it.
BODY_MAX_AGE_S = 7 * 86400
# How long a catalogue or order body acted on is remembered: longer than BODY_MAX_AGE_S, so a body is refused as a
# duplicate until it is old enough to be refused as stale.
MEMORY_S = BODY_MAX_AGE_S + 86400
# A hold's draft order names one hold; a body naming more is read for a few, never enough to outgrow a stored item.
MAX_LINKED_HOLDS = 5
# A platform product id longer than this is never remembered under a key (real ones are a few digits).
MAX_STORE_ID_CHARS = 200


@dataclass(frozen=True)
class StoreWebhookOutcome:
    """The answer: `status` is restock, no_restock, orders, catalog or ignored; `results` one line per item."""

    status: str
    topic: str
    reason: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        """The JSON body."""
        body: dict[str, Any] = {"status": self.status, "topic": self.topic}
        if self.reason:
            body["reason"] = self.reason
        if self.results:
            body["results"] = self.results
        return body


@dataclass(frozen=True, kw_only=True, eq=False)
class StoreWebhooks:
    """Routes a verified platform delivery to detection, orders or catalogue sync."""

    readers: Mapping[str, WebhookReader]  # the dialects this stage accepts (each enabled by its webhook secret)
    detector: DetectService
    orders: OrdersService
    catalog: CatalogSync
    memory: SeenEvents  # the deliveries acted on (keys with a ttl)
    states: SavedStates  # an order's link to its hold's draft order, a removed product's tombstone
    clock: Clock

    def accepts(self, platform: str) -> bool:
        """Whether the stage takes this platform's webhooks."""
        return platform in self.readers

    def receive(self, platform: str, raw: bytes | None, headers: Mapping[str, str]) -> StoreWebhookOutcome:
        """One delivery: InvalidSignature (401) before anything is read, BadRequest (400) for a malformed body."""
        delivery = self.readers[platform].read_webhook(raw, headers)
        if delivery.kind == IGNORED:
            return StoreWebhookOutcome("ignored", delivery.topic, delivery.reason)
        now = self.clock.now()
        if delivery.body_at is not None and now - delivery.body_at > BODY_MAX_AGE_S:
            raise BadRequest(
                f"The body describes the item as it was more than {BODY_MAX_AGE_S // 86400} days ago.",
                code="stale_body",
            )
        if delivery.kind == ORDERS:
            # An order converts a hold once whatever delivers it (OrdersService), so it needs no memory of its
            # deliveries; only of which orders were paid and which draft order each was completed from.
            return self._orders(platform, delivery)
        # Refused before anything is written: a WooCommerce product delivery changes the catalogue before its level
        # reaches detection, which would refuse the id only then.
        check_delivery_id(delivery.delivery_id)
        if delivery.kind == INVENTORY and not delivery.products:
            # Levels alone are remembered by detection itself, by delivery id, and ordered by their own time.
            return self._levels(delivery, platform)
        # The catalogue changes: a product delivery (WooCommerce's carries the product's level too) or a deletion.
        keys = self._memory_keys(platform, delivery)
        if any(self.memory.seen(key) for key in keys):
            if delivery.levels:
                # Answered as detection answers a level it has seen (docs/WEBHOOKS.md, "duplicate").
                results = [{"status": "no_restock", "reason": "duplicate"} for _ in delivery.levels]
                return StoreWebhookOutcome("no_restock", delivery.topic, results=results)
            return StoreWebhookOutcome("ignored", delivery.topic, "duplicate")
        outcome = self._levels(delivery, platform) if delivery.kind == INVENTORY else self._catalog(delivery, platform)
        for key in keys:
            self.memory.remember(key, int(now) + MEMORY_S)
        return outcome

    @staticmethod
    def _memory_keys(platform: str, delivery: WebhookDelivery) -> tuple[str, ...]:
        """A delivery's event id (a retry's), and its body under its topic (the same body under any event id)."""
        keys = [f"storehook#{platform}#{delivery.delivery_id}"]
        if delivery.body_digest:
            keys.append(f"storebody#{platform}#{delivery.topic}#{delivery.body_digest}")
        return tuple(keys)

    def _levels(self, delivery: WebhookDelivery, platform: str) -> StoreWebhookOutcome:
        removed: set[str] = set()
        if delivery.products:
            # A WooCommerce product delivery carries the product itself too: the catalogue follows it first, so that
            # a product created with stock is catalogued before its level is read.
            current, gone = self._not_removed_since(platform, delivery)
            self.catalog.apply_store_entries(current, ())
            removed = {entry.sku for entry in gone}
        results: list[dict[str, Any]] = []
        for report in delivery.levels:
            if report.sku is not None and report.sku in removed:
                # The level of a product as it was before it was taken off sale: no restock for it.
                results.append({"sku": report.sku, "status": "ignored", "reason": "removed_later"})
                continue
            outcome = self.detector.apply_report(delivery.delivery_id, delivery.sent_at, report)
            results.append(outcome.body())
        statuses = {str(result["status"]) for result in results}
        status = next((s for s in ("restock", "no_restock") if s in statuses), "ignored")
        return StoreWebhookOutcome(status, delivery.topic, results=results)

    def _orders(self, platform: str, delivery: WebhookDelivery) -> StoreWebhookOutcome:
        results: list[dict[str, Any]] = []
        for report in delivery.orders:
            if (report.linkable or report.draft_ref is not None) and len(report.order_id) > MAX_ORDER_ID_LEN:
                # Never remembered under a key no real order id makes (the generic webhook refuses it alike).
                results.append(
                    {"order_id": report.order_id[:MAX_ORDER_ID_LEN], "status": "ignored", "reason": "invalid_field"}
                )
                continue
            if report.draft_ref is not None:
                results.extend(self._completed_draft(platform, report))
                continue
            orders = [Order(reservation_id, report.order_id) for reservation_id in report.reservation_ids]
            if report.linkable:
                if report.paid:
                    # Written before the draft link is read, as the link is written before this is read: of an order
                    # and its completed draft, whichever arrives second finds the other, in any order and concurrently.
                    self.memory.remember(_paid_key(platform, report.order_id), int(self.clock.now()) + MEMORY_S)
                # The attribute did not reach the order: the draft order it was completed from may still name the hold.
                orders = self._linked(platform, report.order_id)
            if not orders:
                results.append({"order_id": report.order_id, "status": "ignored", "reason": "not_from_a_hold"})
                continue
            if not report.paid:
                # The hold stands while the store waits for payment; the paid order's delivery converts it.
                results.append({"order_id": report.order_id, "status": "ignored", "reason": "not_paid"})
                continue
            results.extend(self._order(order) for order in orders)
        converted = any(result["status"] in ("converted", "already_converted") for result in results)
        return StoreWebhookOutcome("orders" if converted else "ignored", delivery.topic, results=results)

    def _completed_draft(self, platform: str, report: OrderReport) -> list[dict[str, Any]]:
        """A hold's draft order completed into `report.order_id`: the link is kept for the order's own deliveries, and
        the hold converts now if that order was already paid (the order converts it once, whichever comes first)."""
        reservation_ids = [r for r in report.reservation_ids if RESERVATION_ID.match(r)][:MAX_LINKED_HOLDS]
        if not reservation_ids:
            return [{"order_id": report.order_id, "status": "ignored", "reason": "invalid_field"}]
        link = {"reservation_ids": reservation_ids, "draft_ref": report.draft_ref}
        # Kept as a small keyed state with a ttl, the kind of item a sync's cursor is.
        self.states.save(_link_key(platform, report.order_id), link, int(self.clock.now()) + MEMORY_S)
        if not self.memory.seen(_paid_key(platform, report.order_id)):
            return [{"order_id": report.order_id, "status": "ignored", "reason": "not_paid"}]
        return [self._order(Order(r, report.order_id, report.draft_ref)) for r in reservation_ids]

    def _linked(self, platform: str, order_id: str) -> list[Order]:
        """The holds a completed draft order linked to this order (none when no draft of ours became it)."""
        link = self.states.get(_link_key(platform, order_id))
        if link is None:
            return []
        draft_ref = link.get("draft_ref")
        draft_ref = draft_ref if isinstance(draft_ref, str) else None
        return [Order(str(r), order_id, draft_ref) for r in link.get("reservation_ids") or []]

    def _order(self, order: Order) -> dict[str, Any]:
        try:
            # The same checks as the generic orders webhook: the id must look like one of ours.
            parsed = parse_order({"reservation_id": order.reservation_id, "order_id": order.order_id})
            return self.orders.record(replace(parsed, draft_ref=order.draft_ref)).body()
        except (BadRequest, NotFound, Conflict) as refused:
            # Not ours to convert (a malformed or unknown id, a link never tapped): said, and never retried.
            return {"order_id": order.order_id, "status": "ignored", "reason": refused.code}

    def _catalog(self, delivery: WebhookDelivery, platform: str) -> StoreWebhookOutcome:
        self._remember_removed(platform, delivery)
        current, removed = self._not_removed_since(platform, delivery)
        report = self.catalog.apply_store_entries(current, delivery.removed_ids)
        changed = report.created + report.updated + report.restored
        results: list[dict[str, Any]] = [{"sku": sku, "status": "updated"} for sku in changed]
        results += [{"sku": sku, "status": "discontinued"} for sku in report.discontinued]
        results += [{"sku": s.sku, "status": "skipped", "reason": s.reason} for s in report.skipped]
        results += [{"sku": entry.sku, "status": "skipped", "reason": "removed_later"} for entry in removed]
        return StoreWebhookOutcome("catalog", delivery.topic, results=results)

    def _remember_removed(self, platform: str, delivery: WebhookDelivery) -> None:
        """Keep a tombstone of each product the delivery takes off sale, stamped with the time of that state: the
        body's own time (an archived product's updated_at), or for a deletion, whose body is the id alone, the time
        it reached us, which is after the deletion and so after every update the product had before it."""
        at = delivery.body_at if delivery.body_at is not None else self.clock.now()
        expires_at = int(self.clock.now()) + MEMORY_S
        for removed_id in delivery.removed_ids:
            if len(removed_id) > MAX_STORE_ID_CHARS:
                continue
            key = _removed_key(platform, removed_id)
            # Only ever moved on: a removal that arrives late, stamped before one already kept, changes nothing.
            if (_tombstone_at(self.states.get(key)) or 0.0) >= math.ceil(at):
                continue
            # A small keyed state with a ttl, the kind of item a sync's cursor is.
            self.states.save(key, {"at": math.ceil(at)}, expires_at)

    def _not_removed_since(
        self, platform: str, delivery: WebhookDelivery
    ) -> tuple[tuple[CatalogEntry, ...], tuple[CatalogEntry, ...]]:
        """The delivery's product entries split into those it may list and those whose product was taken off sale
        after the state the body describes: neither platform orders a product's deliveries, so the update that
        came before a deletion may arrive after it, and must not list the product again. A body without a time of
        its own cannot be ordered after a tombstone, and lists nothing it names."""
        if not delivery.products:
            return (), ()
        tombstones: dict[str, float] = {}
        for product_id in {key for entry in delivery.products if (key := _product_key(entry)) is not None}:
            removed_at = _tombstone_at(self.states.get(_removed_key(platform, product_id)))
            if removed_at is not None:
                tombstones[product_id] = removed_at
        if not tombstones:
            return tuple(delivery.products), ()
        body_at = delivery.body_at

        def gone(entry: CatalogEntry) -> bool:
            removed_at = tombstones.get(_product_key(entry) or "")
            return removed_at is not None and (body_at is None or body_at <= removed_at)

        return (
            tuple(entry for entry in delivery.products if not gone(entry)),
            tuple(entry for entry in delivery.products if gone(entry)),
        )


def _paid_key(platform: str, order_id: str) -> str:
    """The memory that a platform's order was paid."""
    return f"storeorder#{platform}#paid#{order_id}"


def _link_key(platform: str, order_id: str) -> str:
    """The memory of the hold's draft order a platform's order was completed from (the holds it names)."""
    return f"storeorder#{platform}#draft#{order_id}"


def _removed_key(platform: str, removed_id: str) -> str:
    """The tombstone of a platform product taken off sale (deleted, archived)."""
    return f"storeremoved#{platform}#{removed_id}"


def _product_key(entry: CatalogEntry) -> str | None:
    """The entry's product as a removal names it (`shopify.product_id:<id>`): platforms take whole products off
    sale, never one variant, so their removed ids are product ids."""
    for name, value in entry.ids.items():
        if name.endswith(".product_id") and len(name) + len(value) < MAX_STORE_ID_CHARS:
            return f"{name}:{value}"
    return None


def _tombstone_at(state: Mapping[str, Any] | None) -> float | None:
    """When a tombstone says its product was taken off sale (epoch seconds), None for no tombstone."""
    at = state.get("at") if state is not None else None
    return float(at) if isinstance(at, int | float | Decimal) else None
