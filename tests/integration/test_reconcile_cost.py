"""What one reconciliation run costs in DynamoDB: items read grow with the SKUs somebody waits for, never with the
catalogue (chalicelib/reconcile.py, docs/PLATFORMS.md "No missed restock", docs/SCALE.md).

Items are counted as DynamoDB bills a read: every item a Query or Scan reads (ScannedCount, before any filter), every
item a GetItem, BatchGetItem or TransactGetItems returns. The store is the Shopify fake with 60 products.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from chalicelib.reconcile import RECONCILE_EVERY_MIN
from chalicelib.sweep import ROLL_UP_EVERY_S
from devstack.clocks import FixedClock
from tests.platforms import Shop, join, platform_shop

CATALOGUE = 60
SOLD_OUT = 30  # of the catalogue, out of stock with nobody waiting: in by-demand, at a waiting count of 0


class ItemsRead:
    """DynamoDB items read, by table, from every client the session builds after it is registered."""

    def __init__(self, session: boto3.session.Session) -> None:
        self.by_table: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._requests: dict[int, str] = {}
        session.events.register("before-call.dynamodb", self._before)
        session.events.register("after-call.dynamodb", self._after)

    def reset(self) -> None:
        with self._lock:
            self.by_table.clear()
            self.calls.clear()

    @property
    def total(self) -> int:
        return sum(self.by_table.values())

    def _before(self, model: Any, params: Any, **_: Any) -> None:
        body = params.get("body") if isinstance(params, dict) else None
        with self._lock:
            self._requests[threading.get_ident()] = str(body or "")

    def _after(self, model: Any, parsed: Any, **_: Any) -> None:
        parsed = parsed or {}
        read: Counter[str] = Counter()
        request = self._requests.get(threading.get_ident(), "")
        if model.name in ("Query", "Scan"):
            read[_table_named(request)] += int(parsed.get("ScannedCount", len(parsed.get("Items", []))))
        elif model.name == "GetItem":
            read[_table_named(request)] += 1 if parsed.get("Item") else 0
        elif model.name == "BatchGetItem":
            for table, items in parsed.get("Responses", {}).items():
                read[_short(table)] += len(items)
        elif model.name == "TransactGetItems":
            read["transact"] += sum(1 for r in parsed.get("Responses", []) if r.get("Item"))
        else:
            return
        with self._lock:
            self.calls[model.name] += 1
            self.by_table.update(read)


def _short(table: str) -> str:
    return table.rsplit("-", 1)[-1]


def _table_named(request: str) -> str:
    marker = '"TableName": "'
    start = request.find(marker)
    if start < 0:
        marker = '"TableName":"'
        start = request.find(marker)
    if start < 0:
        return "?"
    start += len(marker)
    return _short(request[start : request.index('"', start)])


@pytest.fixture
def counted(session: boto3.session.Session) -> ItemsRead:
    # Registered before the stage builds its clients: a client watches only what its session had at its creation.
    return ItemsRead(session)


@pytest.fixture
def shop(session: boto3.session.Session, clock: FixedClock, counted: ItemsRead) -> Iterator[Shop]:
    with platform_shop("shopify", session, clock) as built:
        store = built.store
        have = {v.sku for p in store.products.values() for v in p.variants}
        for n in range(CATALOGUE - len(have)):
            store.add_product(f"Catalogue item {n}", [f"WW-CAT-{n:03d}"])
        report = built.services.catalog_sync.run()
        assert report.error is None, report
        skus = sorted(v.sku for p in store.products.values() for v in p.variants)
        assert len(built.services.tables.catalog.get_many(skus)) == CATALOGUE
        yield built


def sell_out(shop: Shop, skus: list[str]) -> None:
    for sku in skus:
        response = shop.restock(sku, 0)
        assert response.status_code in (200, 202), response.body


def wait_for(shop: Shop, skus: list[str]) -> None:
    """Somebody waits for each SKU, and the demand roll-up has counted them."""
    for n, sku in enumerate(skus):
        join(shop, sku, f"shopper{n}.{sku.lower()}@example.com")
    shop.clock.advance(ROLL_UP_EVERY_S)
    shop.services.sweep.run()


def steady_run(shop: Shop, counted: ItemsRead) -> tuple[int, dict[str, Any]]:
    """Items read by a run once the previous one has corrected what it found (the store's other location)."""
    shop.clock.advance(RECONCILE_EVERY_MIN * 60)
    shop.services.reconcile.run()
    shop.clock.advance(RECONCILE_EVERY_MIN * 60)
    counted.reset()
    report = shop.services.reconcile.run().as_dict()
    return counted.total, report


def test_a_run_reads_items_for_the_skus_waited_for_not_for_the_catalogue(shop: Shop, counted: ItemsRead) -> None:
    catalogue = sorted(v.sku for p in shop.store.products.values() for v in p.variants)
    sold_out = catalogue[:SOLD_OUT]
    sell_out(shop, sold_out)
    wait_for(shop, sold_out[:3])

    three, report = steady_run(shop, counted)
    assert report["skus"] == 3 and report.get("unchanged") == 6, report  # each SKU's two locations, as recorded
    # by-demand (the 3 keys), their 3 recorded levels, the run's cursor.
    assert counted.by_table["catalog"] == 6, counted.by_table
    assert three <= 3 * 3, counted.by_table

    # Twice the catalogue sold out, nobody waiting for the new half: not one more item read.
    sell_out(shop, catalogue[SOLD_OUT:])
    again, report = steady_run(shop, counted)
    assert report["skus"] == 3, report
    assert again == three, counted.by_table

    # Three more SKUs waited for: the reads grow by the same per-SKU cost, and only by it.
    wait_for(shop, sold_out[3:6])
    six, report = steady_run(shop, counted)
    assert report["skus"] == 6, report
    assert six - three == counted.by_table["catalog"] - 6 == 6, counted.by_table
