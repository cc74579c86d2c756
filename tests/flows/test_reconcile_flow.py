"""No missed restock: on each platform a webhook is dropped, and the reconciliation (every 5 minutes) reads the
store's level of the SKUs somebody waits for and finds the restock within its period, exactly once, without undoing
a newer webhook and without reading a SKU nobody waits for.

Shopify and WooCommerce are devstack's fakes; the generic shop publishes a stock feed (STOCK_FEED_URL, a local file
here, fetched as the catalogue feed is).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from chalicelib.clock import iso
from chalicelib.platforms.base import LevelReport
from chalicelib.platforms.levels import LevelReader, StockQuery
from chalicelib.reconcile import RECONCILE_EVERY_MIN
from devstack.clocks import FixedClock
from tests.inventory import body, signed
from tests.notices import drain
from tests.platforms import THROW, Shop, join, platform_shop

OTHER = "WW-MUG-SPECKLE"  # in the demo catalogue, and nobody waits for it


class Store:
    """The shop's stock as each platform keeps it: a level change whose webhook can be delivered or dropped."""

    def __init__(self, shop: Shop, feed: Path | None) -> None:
        self.shop = shop
        self.feed = feed
        self.levels: dict[str, int] = {}

    def set(self, sku: str, units: int) -> Any:
        """Change the level on the store; returns the webhook the platform sends for it (undelivered)."""
        if self.shop.platform == "shopify":
            return self.shop.store.set_available(sku, units)
        if self.shop.platform == "woocommerce":
            return self.shop.store.set_stock(sku, units)
        assert self.feed is not None
        self.levels[sku] = units
        self.feed.write_text(json.dumps({"levels": [{"sku": k, "available": v} for k, v in self.levels.items()]}))
        webhook_id = f"msg_{uuid.uuid4().hex}"  # the shop's id for this event, the same on every delivery of it
        return webhook_id, body(sku, units, iso(self.shop.clock.now()))

    def deliver(self, webhook: Any) -> dict[str, Any]:
        if self.shop.platform == "generic":
            webhook_id, text = webhook
            # The signature's 5-minute window is checked against the real clock; the body's time is the shop's.
            headers = signed(self.shop.services, text, webhook_id=webhook_id, at=time.time())
            response = self.shop.client.http.post("/webhooks/inventory", headers=headers, body=text.encode())
        else:
            response = self.shop.webhook(webhook)
        assert response.status_code in (200, 202), response.body
        return dict(json.loads(response.body))


@pytest.fixture(params=["shopify", "woocommerce", "generic"])
def store(request: pytest.FixtureRequest, session: Any, clock: FixedClock, tmp_path: Path) -> Iterator[Store]:
    platform = str(request.param)
    feed = tmp_path / "levels.json" if platform == "generic" else None
    env: dict[str, str | None] = {}
    if feed is not None:
        feed.write_text(json.dumps({"levels": []}))
        env["STOCK_FEED_URL"] = f"file://{feed}"
    with platform_shop(platform, session, clock, env) as shop:
        built = Store(shop, feed)
        if platform == "generic":
            built.deliver(built.set(THROW, 0))
        yield built


def waiting(store: Store) -> None:
    """Somebody waits for THROW, and the sweep's roll-up has counted them (within 10 minutes of their tap)."""
    join(store.shop, THROW, "ada@example.com")
    store.shop.services.sweep.run()


def reconcile(store: Store) -> dict[str, Any]:
    store.shop.clock.advance(RECONCILE_EVERY_MIN * 60)
    return store.shop.services.reconcile.run().as_dict()


def test_a_dropped_webhook_is_found_by_the_next_run_and_told_once(store: Store) -> None:
    waiting(store)
    dropped = store.set(THROW, 2)  # the webhook is lost
    found = reconcile(store)
    assert found["restocks"] == 1, found
    drain(store.shop.services)
    [offer] = store.shop.offers(THROW)
    # The same run again, and the webhook arriving late after all: nothing new is opened or told.
    again = reconcile(store)
    assert again.get("restocks", 0) == 0 and again.get("corrected", 0) == 0, again
    late = store.deliver(dropped)
    assert late["status"] == "no_restock", late
    drain(store.shop.services)
    assert store.shop.offers(THROW) == [offer]
    assert [r.restock_id for r in store.shop.services.tables.restocks.for_sku(THROW)] == found["restock_ids"]


def test_a_restock_its_webhook_reported_is_not_found_again(store: Store) -> None:
    waiting(store)
    assert store.deliver(store.set(THROW, 1))["status"] == "restock"
    drain(store.shop.services)
    assert reconcile(store).get("restocks", 0) == 0
    drain(store.shop.services)
    assert len(store.shop.offers(THROW)) == 1


def test_a_sku_nobody_waits_for_is_never_read(store: Store) -> None:
    waiting(store)
    store.set(OTHER, 5)
    read: list[str] = []
    services = store.shop.services
    reader = services.reconcile.reader
    assert reader is not None

    class Watching:
        def read_levels(self, items: Sequence[StockQuery]) -> list[LevelReport]:
            read.extend(item.sku for item in items)
            return reader.read_levels(items)

    report = replace(services.reconcile, reader=Watching()).run().as_dict()
    assert read == [THROW], report
    other = services.tables.catalog.get(OTHER, consistent=True)
    assert other is not None and other.level in (None, 0)
    if store.shop.platform == "shopify":
        item = services.tables.catalog.get(THROW).store_ids["shopify.inventory_item_id"]  # type: ignore[union-attr]
        assert store.shop.store.level_reads == [[f"gid://shopify/InventoryItem/{item}"]]


def test_a_newer_webhook_is_not_undone_by_an_older_read(store: Store) -> None:
    waiting(store)
    services = store.shop.services
    reader = services.reconcile.reader
    assert reader is not None

    class WebhookDuringTheRead:
        """The store is read at 2 (that webhook was lost); before the read is applied the level rises to 3 and
        that webhook arrives."""

        def read_levels(self, items: Sequence[StockQuery]) -> list[LevelReport]:
            reports = reader.read_levels(items)
            assert store.deliver(store.set(THROW, 3))["status"] == "restock"
            return reports

    racing: LevelReader = WebhookDuringTheRead()
    store.set(THROW, 2)
    store.shop.clock.advance(60)
    report = replace(services.reconcile, reader=racing).run()
    # The read of the level the webhook changed is stale (another Shopify location, never reported, is recorded).
    assert report.restocks == 0 and report.stale == 1
    product = services.tables.catalog.get(THROW, consistent=True)
    assert product is not None and product.level == 3
    drain(services)
    assert len(store.shop.offers(THROW)) == 1


def test_a_read_never_makes_a_later_webhook_stale(store: Store) -> None:
    waiting(store)
    services = store.shop.services
    store.set(THROW, 2)  # lost
    found = reconcile(store)
    assert found["restocks"] == 1, found
    # A sale a second after the read, stamped by the platform's clock: newer than the read, so it lowers the restock.
    store.shop.clock.advance(1)
    later = store.deliver(store.set(THROW, 1))
    later = later.get("results", [later])[0]  # a platform's answer lists each level it carried
    assert (later["status"], later.get("adjusted")) == ("no_restock", "lowered"), later
    product = services.tables.catalog.get(THROW, consistent=True)
    assert product is not None and product.level == 1
