"""POST /webhooks/shopify and /webhooks/woocommerce: a platform's own webhooks, read by its connector.

The connector verifies the signature and turns the delivery into levels, orders or catalogue changes in SKUs
and reservation ids; this module hands each to the service that owns it (detection, orders, catalogue sync).
A platform retries every answer that is not a 2xx (Shopify 8 times over 4 hours, WooCommerce until it disables the
webhook), so what it could never fix — an order that did not come from a hold, an item we do not sell — is
answered 200 with the reason, and only a delivery it must correct (a bad signature, a malformed body) is a 4xx.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.catalog_sync import CatalogSync
from chalicelib.detect import DetectService
from chalicelib.errors import BadRequest, Conflict, NotFound
from chalicelib.orders import Order, OrdersService, parse_order
from chalicelib.platforms.base import CATALOG, IGNORED, INVENTORY, ORDERS, WebhookDelivery, WebhookReader

log = logging.getLogger(__name__)


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

    def accepts(self, platform: str) -> bool:
        """Whether the stage takes this platform's webhooks."""
        return platform in self.readers

    def receive(self, platform: str, raw: bytes | None, headers: Mapping[str, str]) -> StoreWebhookOutcome:
        """One delivery: InvalidSignature (401) before anything is read, BadRequest (400) for a malformed body."""
        delivery = self.readers[platform].read_webhook(raw, headers)
        if delivery.kind == INVENTORY:
            return self._levels(delivery)
        if delivery.kind == ORDERS:
            return self._orders(delivery)
        if delivery.kind == CATALOG:
            return self._catalog(delivery)
        assert delivery.kind == IGNORED, delivery.kind
        return StoreWebhookOutcome("ignored", delivery.topic, delivery.reason)

    def _levels(self, delivery: WebhookDelivery) -> StoreWebhookOutcome:
        if delivery.products:
            # A WooCommerce product delivery carries the product itself too: the catalogue follows it first, so that
            # a product created with stock is catalogued before its level is read.
            self.catalog.apply_store_entries(delivery.products, ())
        results = []
        for report in delivery.levels:
            outcome = self.detector.apply_report(delivery.delivery_id, delivery.sent_at, report)
            results.append(outcome.body())
        statuses = {str(result["status"]) for result in results}
        status = next((s for s in ("restock", "no_restock") if s in statuses), "ignored")
        return StoreWebhookOutcome(status, delivery.topic, results=results)

    def _orders(self, delivery: WebhookDelivery) -> StoreWebhookOutcome:
        results: list[dict[str, Any]] = []
        for report in delivery.orders:
            if not report.reservation_ids:
                results.append({"order_id": report.order_id, "status": "ignored", "reason": "not_from_a_hold"})
                continue
            if not report.paid:
                # The hold stands while the store waits for payment; the paid order's delivery converts it.
                results.append({"order_id": report.order_id, "status": "ignored", "reason": "not_paid"})
                continue
            for reservation_id in report.reservation_ids:
                results.append(self._order(Order(reservation_id, report.order_id)))
        converted = any(result["status"] in ("converted", "already_converted") for result in results)
        return StoreWebhookOutcome("orders" if converted else "ignored", delivery.topic, results=results)

    def _order(self, order: Order) -> dict[str, Any]:
        try:
            # The same checks as the generic orders webhook: the id must look like one of ours.
            parsed = parse_order({"reservation_id": order.reservation_id, "order_id": order.order_id})
            return self.orders.record(parsed).body()
        except (BadRequest, NotFound, Conflict) as refused:
            # Not ours to convert (a malformed or unknown id, a link never tapped): said, and never retried.
            return {"order_id": order.order_id, "status": "ignored", "reason": refused.code}

    def _catalog(self, delivery: WebhookDelivery) -> StoreWebhookOutcome:
        report = self.catalog.apply_store_entries(delivery.products, delivery.removed_ids)
        changed = report.created + report.updated + report.restored
        results: list[dict[str, Any]] = [{"sku": sku, "status": "updated"} for sku in changed]
        results += [{"sku": sku, "status": "discontinued"} for sku in report.discontinued]
        results += [{"sku": s.sku, "status": "skipped", "reason": s.reason} for s in report.skipped]
        return StoreWebhookOutcome("catalog", delivery.topic, results=results)
