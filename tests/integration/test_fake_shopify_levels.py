"""The reconciliation's Shopify level read (chalicelib/platforms/shopify_levels.py) against the in-memory Shopify
(devstack/fake_shopify.py), and against Shopify's documented answer shape.

`nodes(ids:)` answers each id in order and null for one the shop does not have, up to 250 ids
(https://shopify.dev/docs/api/admin-graphql/2025-10/queries/nodes, https://shopify.dev/docs/api/usage/limits);
an InventoryItem has `tracked: Boolean!` and `inventoryLevels`, one InventoryLevel per location stocking it
(https://shopify.dev/docs/api/admin-graphql/2025-10/objects/InventoryItem), whose `quantities(names: ["available"])`
lists InventoryQuantity {name, quantity: Int!}
(https://shopify.dev/docs/api/admin-graphql/2025-10/objects/InventoryLevel). The documented answer is the fixture
tests/fixtures/shopify/graphql_nodes_inventory_levels.json (its README names each source).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from chalicelib.platforms.base import LevelReport, StoreUnavailable
from chalicelib.platforms.http import HttpResponse
from chalicelib.platforms.levels import StockQuery
from chalicelib.platforms.shopify import ShopifyConnector
from chalicelib.platforms.shopify_levels import ITEMS_PER_QUERY, LEVELS_QUERY, ShopifyLevels
from devstack.clocks import FixedClock
from devstack.fake_shopify import ACCESS_TOKEN, SHOP_DOMAIN, WEBHOOK_SECRET, FakeShopify

NOW = 1_800_000_000.0
THROW = "WW-THROW-OAT"
BEANIE = "WW-BEANIE-MOSS"
WORKSHOP, STALL = "70010001", "70010002"
# Shopify's documented answer to LEVELS_QUERY (source beside it in tests/fixtures/shopify/README.md).
DOCUMENTED = Path(__file__).resolve().parents[1] / "fixtures" / "shopify" / "graphql_nodes_inventory_levels.json"


class Answering:
    """A transport that answers every GraphQL request with one fixed body, keeping what was asked."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent: list[dict[str, Any]] = []

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        self.sent.append(json.loads(body or b"{}"))
        return HttpResponse(200, self.body, {"content-type": "application/json"})


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(NOW)


@pytest.fixture
def shop(clock: FixedClock) -> FakeShopify:
    return FakeShopify(clock=clock.now, now=clock.now)


def levels_of(shop: FakeShopify, clock: FixedClock, **kwargs: Any) -> ShopifyLevels:
    return ShopifyLevels(
        ShopifyConnector(
            shop_domain=SHOP_DOMAIN,
            access_token=lambda: ACCESS_TOKEN,
            webhook_secrets=lambda: [WEBHOOK_SECRET],
            transport=shop.transport(),
            sleep=clock.advance,
            **kwargs,
        )
    )


def query(shop: FakeShopify, sku: str) -> StockQuery:
    return StockQuery(sku, shop.ids(sku))


def by_location(reports: list[LevelReport]) -> dict[tuple[str | None, str | None], int]:
    return {(r.sku, r.location_id): r.available for r in reports}


def shape(value: Any) -> Any:
    """A JSON value's keys and types, lists by their first element: what a documented example fixes."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_each_location_of_each_item_is_read_as_its_webhook_reports_it(shop: FakeShopify, clock: FixedClock) -> None:
    shop.set_available(THROW, 3, location=int(WORKSHOP))
    shop.set_available(THROW, 1, location=int(STALL))
    reports = levels_of(shop, clock).read_levels([query(shop, THROW), query(shop, BEANIE)])
    assert by_location(reports) == {(THROW, WORKSHOP): 3, (THROW, STALL): 1, (BEANIE, WORKSHOP): 0, (BEANIE, STALL): 0}
    assert all(r.occurred_at is None and r.store_item_id is None for r in reports)
    [read] = shop.level_reads
    assert read == [f"gid://shopify/InventoryItem/{shop.ids(s)['shopify.inventory_item_id']}" for s in (THROW, BEANIE)]


def test_more_items_than_one_query_takes_are_read_in_several_queries(shop: FakeShopify, clock: FixedClock) -> None:
    extra = [f"WW-EXTRA-{n:02d}" for n in range(2 * ITEMS_PER_QUERY + 10 - 5)]
    for sku in extra:
        shop.add_product(f"Extra {sku}", [sku])
    skus = sorted({v.sku for p in shop.products.values() for v in p.variants})
    assert len(skus) == 2 * ITEMS_PER_QUERY + 10
    for n, sku in enumerate(skus):
        shop.set_available(sku, n % 4, location=int(STALL))
    reports = levels_of(shop, clock).read_levels([query(shop, s) for s in skus])
    assert [len(ids) for ids in shop.level_reads] == [ITEMS_PER_QUERY, ITEMS_PER_QUERY, 10]
    read = by_location(reports)
    assert read == {
        **{(s, WORKSHOP): 0 for s in skus},
        **{(s, STALL): n % 4 for n, s in enumerate(skus)},
    }
    # Each query's requested cost stays under the single-query maximum (1,000 points).
    asked = [r for r in shop.requests if "BisnLevels" in r["query"]]
    assert len(asked) == 3 and all(len(r["variables"]["ids"]) <= ITEMS_PER_QUERY for r in asked)


def test_a_drained_bucket_is_waited_for_and_the_read_completes(shop: FakeShopify, clock: FixedClock) -> None:
    shop.set_available(THROW, 2)
    shop.drain_bucket()
    before = clock.now()
    reports = levels_of(shop, clock).read_levels([query(shop, THROW)])
    assert clock.now() > before  # it slept as extensions.cost.throttleStatus said, not a retry storm
    assert by_location(reports)[(THROW, WORKSHOP)] == 2


def test_a_variant_whose_inventory_is_not_tracked_is_left_out(shop: FakeShopify, clock: FixedClock) -> None:
    shop.set_available(THROW, 4)
    shop.untracked.add(int(shop.ids(BEANIE)["shopify.inventory_item_id"]))
    reports = levels_of(shop, clock).read_levels([query(shop, THROW), query(shop, BEANIE)])
    assert {r.sku for r in reports} == {THROW}


def test_an_item_the_shop_no_longer_has_or_never_named_is_left_out(shop: FakeShopify, clock: FixedClock) -> None:
    gone = StockQuery("WW-GONE", {"shopify.inventory_item_id": "4699999999"})
    unnamed = StockQuery("WW-NO-ITEM", {"shopify.variant_id": "4400000100"})
    malformed = StockQuery("WW-BAD-ITEM", {"shopify.inventory_item_id": "gid://shopify/InventoryItem/1"})
    reports = levels_of(shop, clock).read_levels([gone, unnamed, malformed, query(shop, THROW)])
    assert {r.sku for r in reports} == {THROW}
    # Only well-formed item ids are asked for: the fake answers null for the one it does not have.
    [read] = shop.level_reads
    assert read == ["gid://shopify/InventoryItem/4699999999", "gid://shopify/InventoryItem/4600000100"]


def test_nothing_to_read_asks_nothing(shop: FakeShopify, clock: FixedClock) -> None:
    assert levels_of(shop, clock).read_levels([]) == []
    assert levels_of(shop, clock).read_levels([StockQuery("WW-NO-ITEM", {})]) == []
    assert shop.level_reads == []


def test_only_the_locations_the_shop_sells_from_are_read(shop: FakeShopify, clock: FixedClock) -> None:
    shop.set_available(THROW, 5, location=int(WORKSHOP))
    shop.set_available(THROW, 2, location=int(STALL))
    reports = levels_of(shop, clock, location_ids=(STALL,)).read_levels([query(shop, THROW)])
    assert by_location(reports) == {(THROW, STALL): 2}


def test_the_documented_answer_is_read_and_the_fake_answers_in_its_shape(shop: FakeShopify, clock: FixedClock) -> None:
    documented = DOCUMENTED.read_bytes()
    transport = Answering(documented)
    connector = ShopifyConnector(
        shop_domain=SHOP_DOMAIN, access_token=lambda: ACCESS_TOKEN, webhook_secrets=lambda: [], transport=transport
    )
    reports = ShopifyLevels(connector).read_levels(
        [query(shop, THROW), query(shop, BEANIE), StockQuery("WW-GONE", {"shopify.inventory_item_id": "4699999999"})]
    )
    # The tracked item at both locations; the untracked one and the null node read nothing.
    assert by_location(reports) == {(THROW, WORKSHOP): 3, (THROW, STALL): 0}
    [sent] = transport.sent
    assert sent == {
        "query": LEVELS_QUERY,
        "variables": {
            "ids": [
                "gid://shopify/InventoryItem/4600000100",
                "gid://shopify/InventoryItem/4600000200",
                "gid://shopify/InventoryItem/4699999999",
            ]
        },
    }
    # The fake's answer to the same document has the documented answer's fields, no more and no fewer.
    shop.untracked.add(4600000200)
    answer = shop.transport().send(
        "POST",
        f"https://{SHOP_DOMAIN}/admin/api/{connector.api_version}/graphql.json",
        {"X-Shopify-Access-Token": ACCESS_TOKEN, "Content-Type": "application/json"},
        json.dumps(sent).encode(),
    )
    faked = json.loads(answer.body)
    expected = json.loads(documented)
    assert shape(faked["data"]) == shape(expected["data"])
    assert [n is None for n in faked["data"]["nodes"]] == [n is None for n in expected["data"]["nodes"]]
    assert set(faked["extensions"]["cost"]) == set(expected["extensions"]["cost"])


@pytest.mark.parametrize(
    "answer",
    [
        {"data": {"nodes": [{"id": "gid://shopify/InventoryItem/4600000100", "tracked": True}]}},
        {"data": {"nodes": [{"id": "gid://shopify/InventoryItem/4600000100", "inventoryLevels": {"edges": []}}]}},
        {"data": {"nodes": {"id": "gid://shopify/InventoryItem/4600000100"}}},
        {"data": {}},
    ],
)
def test_an_answer_not_in_the_documented_shape_stops_the_read(shop: FakeShopify, answer: dict[str, Any]) -> None:
    connector = ShopifyConnector(
        shop_domain=SHOP_DOMAIN,
        access_token=lambda: ACCESS_TOKEN,
        webhook_secrets=lambda: [],
        transport=Answering(json.dumps(answer).encode()),
    )
    with pytest.raises(StoreUnavailable):
        ShopifyLevels(connector).read_levels([query(shop, THROW)])
