"""The reconciliation's WooCommerce level read (chalicelib/platforms/woocommerce_levels.py) against the in-memory
WooCommerce (devstack/fake_woocommerce.py), and against the REST v3 resource's documented shape.

REST API v3 (https://woocommerce.github.io/woocommerce-rest-api-docs/): GET /products and
GET /products/<id>/variations take `include` ("Limit result set to specific ids", #list-all-products and
#list-all-product-variations) and `per_page` (at most 100, #pagination); a product's `manage_stock` (boolean; a
variation's is "parent" when its parent manages it), `stock_quantity` (integer, null without stock management) and
`stock_status` (instock, outofstock, onbackorder) are #product-properties and #product-variation-properties. The
documented resources are the fixtures tests/fixtures/woocommerce/product_simple.json and product_variation.json (the
docstring of tests/unit/test_woocommerce_webhooks.py names their source).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from chalicelib.platforms.base import HoldRequest, LevelReport, StoreUnavailable
from chalicelib.platforms.http import HttpResponse
from chalicelib.platforms.levels import StockQuery
from chalicelib.platforms.woocommerce import PER_PAGE, UNTRACKED_IN_STOCK, WooCommerceConnector
from chalicelib.platforms.woocommerce_levels import WooCommerceLevels
from devstack.fake_woocommerce import FakeWooCommerce, Product
from tests.platforms import woocommerce_connector as connector

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "woocommerce"
STOCK = {"WW-THROW-OAT": 2, "WW-CARDI-RUST": 1, "WW-CARDI-RUST-L": 4, "WW-BEANIE-MOSS-CHARCOAL": 3}
API = "/wp-json/wc/v3"


@pytest.fixture
def store() -> FakeWooCommerce:
    return FakeWooCommerce(store_url="https://shop.example", stock=STOCK)


def query(store: FakeWooCommerce, sku: str) -> StockQuery:
    """A SKU's ids as catalogue sync stores them."""
    entry = next(e for e in connector(store).read_catalog() if e.sku == sku)
    return StockQuery(sku, entry.ids)


def levels(reports: list[LevelReport]) -> dict[str | None, int]:
    return {r.sku: r.available for r in reports}


def reads(store: FakeWooCommerce) -> list[tuple[str, dict[str, list[str]]]]:
    """Each level read's path and query (the catalogue reads before it have no `include`)."""
    parts = [urlsplit(path) for method, path in store.requests if method == "GET"]
    return [(p.path, parse_qs(p.query)) for p in parts if "include" in parse_qs(p.query)]


def test_simple_products_and_variations_are_read_by_include(store: FakeWooCommerce) -> None:
    skus = ["WW-THROW-OAT", "WW-CARDI-RUST", "WW-CARDI-RUST-L", "WW-BEANIE-MOSS-CHARCOAL", "WW-MUG-SPECKLE"]
    queries = [query(store, sku) for sku in skus]
    store.requests.clear()
    reports = WooCommerceLevels(connector(store)).read_levels(queries)
    assert levels(reports) == {
        "WW-THROW-OAT": 2,
        "WW-CARDI-RUST": 1,
        "WW-CARDI-RUST-L": 4,
        "WW-BEANIE-MOSS-CHARCOAL": 3,
        "WW-MUG-SPECKLE": 0,
    }
    assert all(r.location_id is None and r.occurred_at is None for r in reports)
    # One request for the simple products, one per parent for its variations, each asking only for its ids.
    assert [(path, q["include"], q["per_page"]) for path, q in reads(store)] == [
        (f"{API}/products", ["101,106"], ["100"]),
        (f"{API}/products/102/variations", ["104"], ["100"]),
        (f"{API}/products/107/variations", ["109,110"], ["100"]),
    ]


def test_a_product_that_does_not_manage_stock_is_read_as_plenty_while_in_stock(store: FakeWooCommerce) -> None:
    # manage_stock false: stock_quantity is null and stock_status says whether it sells, so an in-stock one reads as
    # "plenty", as its webhook does (an out-of-stock one reads 0: tests/unit/test_reconcile_rules.py).
    store.by_sku("WW-THROW-OAT").manage_stock = False
    wanted = [query(store, "WW-THROW-OAT"), query(store, "WW-MUG-SPECKLE")]
    resource = json.loads(connector(store)._request("GET", "/products/101", {}).body)
    assert (resource["manage_stock"], resource["stock_quantity"], resource["stock_status"]) == (False, None, "instock")
    reports = WooCommerceLevels(connector(store)).read_levels(wanted)
    assert levels(reports) == {"WW-THROW-OAT": UNTRACKED_IN_STOCK, "WW-MUG-SPECKLE": 0}


def test_the_units_our_holds_reserve_are_not_read_as_on_the_shelf(store: FakeWooCommerce) -> None:
    woo = connector(store)
    wanted = query(store, "WW-THROW-OAT")
    woo.place_hold(HoldRequest("res_1", "WW-THROW-OAT", wanted.ids, 2_000_000_000, product_name="Oatmeal merino throw"))
    assert store.by_sku("WW-THROW-OAT").stock == 2  # WooCommerce's stock_quantity does not drop for a draft order
    assert levels(WooCommerceLevels(woo).read_levels([wanted])) == {"WW-THROW-OAT": 1}


def test_more_ids_than_a_page_holds_are_read_a_page_of_ids_at_a_time(store: FakeWooCommerce) -> None:
    extra = PER_PAGE + PER_PAGE // 2
    template = store.by_sku("WW-THROW-OAT")
    queries = []
    for n in range(extra):
        product_id = 1000 + n
        store.products[product_id] = Product(
            product_id, f"Extra {n}", "simple", f"WW-X-{n:03d}", "1.00", stock=n % 3, modified=template.modified
        )
        queries.append(StockQuery(f"WW-X-{n:03d}", {"woocommerce.product_id": str(product_id)}))
    reports = WooCommerceLevels(connector(store)).read_levels(queries)
    assert levels(reports) == {f"WW-X-{n:03d}": n % 3 for n in range(extra)}
    asked = reads(store)
    assert [len(q["include"][0].split(",")) for _, q in asked] == [PER_PAGE, PER_PAGE // 2]
    # per_page covers every id asked for, so no request needs a second page (the fake refuses per_page over 100).
    assert all(q["per_page"] == [str(PER_PAGE)] and "page" not in q for _, q in asked)


def test_products_not_on_sale_gone_or_without_ids_are_left_out(store: FakeWooCommerce) -> None:
    board = query(store, "WW-BOARD-WALNUT")
    store.by_sku("WW-BOARD-WALNUT").status = "draft"
    gone = StockQuery("WW-GONE", {"woocommerce.product_id": "999"})
    unnamed = StockQuery("WW-NO-ID", {})
    bad = StockQuery("WW-BAD-ID", {"woocommerce.product_id": "abc"})
    store.requests.clear()
    reports = WooCommerceLevels(connector(store)).read_levels([board, gone, unnamed, bad, query(store, "WW-THROW-OAT")])
    assert levels(reports) == {"WW-THROW-OAT": 2}
    assert [q["include"] for _, q in reads(store)] == [["101,105,999"]]


def test_nothing_to_read_asks_nothing(store: FakeWooCommerce) -> None:
    store.requests.clear()
    assert WooCommerceLevels(connector(store)).read_levels([StockQuery("WW-NO-ID", {})]) == []
    assert store.requests == []


def test_a_store_that_cannot_answer_stops_the_read(store: FakeWooCommerce) -> None:
    wanted = query(store, "WW-THROW-OAT")
    store.fail_next(503)
    with pytest.raises(StoreUnavailable):
        WooCommerceLevels(connector(store)).read_levels([wanted])


class Answering:
    """A transport answering each path with a fixed JSON body."""

    def __init__(self, answers: Mapping[str, Any]) -> None:
        self.answers = answers

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        answer = self.answers[urlsplit(url).path]
        return HttpResponse(200, json.dumps(answer).encode(), {"content-type": "application/json"})


def documented(store_url: str, answers: Mapping[str, Any]) -> WooCommerceLevels:
    return WooCommerceLevels(
        WooCommerceConnector(
            store_url=store_url,
            consumer_key=lambda: "ck_x",
            consumer_secret=lambda: "cs_x",
            webhook_secrets=lambda: (),
            transport=Answering(answers),
            sleep=lambda s: None,
        )
    )


def test_the_documented_resources_are_read_and_the_fake_answers_with_their_fields(store: FakeWooCommerce) -> None:
    simple = json.loads((FIXTURES / "product_simple.json").read_text())
    variation = json.loads((FIXTURES / "product_variation.json").read_text())
    reader = documented(
        "https://shop.example",
        {
            f"{API}/products": [simple],
            f"{API}/products/{variation['parent_id']}/variations": [variation],
        },
    )
    wanted = [
        StockQuery(simple["sku"], {"woocommerce.product_id": str(simple["id"])}),
        StockQuery(
            variation["sku"],
            {"woocommerce.product_id": str(variation["parent_id"]), "woocommerce.variation_id": str(variation["id"])},
        ),
    ]
    assert levels(reader.read_levels(wanted)) == {
        simple["sku"]: simple["stock_quantity"],
        variation["sku"]: variation["stock_quantity"],
    }
    # The fields the read relies on, in the fake's answers, have the documented resources' types.
    read_fields = ("id", "status", "manage_stock", "stock_quantity", "stock_status")
    woo = connector(store)
    for path, fixture in (
        (f"/products/{simple['id']}", simple),
        (f"/products/{variation['parent_id']}/variations", variation),
    ):
        answer = json.loads(woo._request("GET", path, {}).body)
        faked = answer[0] if isinstance(answer, list) else answer
        assert {k: type(faked[k]) for k in read_fields} == {k: type(fixture[k]) for k in read_fields}


@pytest.mark.parametrize("answer", [{"id": 101}, "[]", None])
def test_an_answer_that_is_not_a_list_stops_the_read(answer: Any) -> None:
    reader = documented("https://shop.example", {f"{API}/products": answer})
    with pytest.raises(StoreUnavailable):
        reader.read_levels([StockQuery("WW-THROW-OAT", {"woocommerce.product_id": "101"})])
