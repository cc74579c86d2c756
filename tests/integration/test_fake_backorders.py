"""Products sold on backorder, on each platform's fake and read by its connector (in memory: no network, no AWS).

The fakes' fields, each as the platform documents it:
  * WooCommerce REST API v3 product and variation properties `manage_stock`, `stock_quantity`, `backorders`
    (no | notify | yes), `backorders_allowed`, `backordered`, `stock_status` (instock | outofstock | onbackorder):
    https://woocommerce.github.io/woocommerce-rest-api-docs/#product-properties and
    https://woocommerce.github.io/code-reference/classes/Automattic-WooCommerce-Enums-ProductStockStatus.html
  * Shopify Admin GraphQL ProductVariant.inventoryPolicy (DENY | CONTINUE):
    https://shopify.dev/docs/api/admin-graphql/2025-10/enums/ProductVariantInventoryPolicy; the products/update
    webhook's REST variant `inventory_policy` ("deny" | "continue"):
    https://shopify.dev/docs/api/admin-rest/2025-10/resources/product-variant; inventory_levels/update's `available`
    below zero once a CONTINUE variant oversells:
    https://help.shopify.com/en/manual/products/inventory/getting-started-with-inventory/selling-when-out-of-stock
"""

from __future__ import annotations

import json

import pytest

from chalicelib.platforms.base import CATALOG, INVENTORY
from devstack.clocks import FixedClock
from devstack.fake_shopify import FakeShopify
from devstack.fake_woocommerce import FakeWooCommerce, RestError
from tests.platforms import shopify_connector, woocommerce_connector

NOW = 1_800_000_000.0
SKU = "WW-THROW-OAT"


@pytest.fixture
def woo() -> FakeWooCommerce:
    return FakeWooCommerce(store_url="https://shop.example", stock={SKU: 1})


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(NOW)


@pytest.fixture
def shop(clock: FixedClock) -> FakeShopify:
    return FakeShopify(clock=clock.now, now=clock.now)


# --- WooCommerce ---------------------------------------------------------------------------------------------------


def test_woocommerce_stock_status_follows_the_quantity_and_backorders(woo: FakeWooCommerce) -> None:
    body, _ = woo.sell(SKU)
    sold_out = json.loads(body)
    assert (sold_out["stock_quantity"], sold_out["stock_status"], sold_out["backorders_allowed"]) == (
        0,
        "outofstock",
        False,
    )
    with pytest.raises(RestError):
        woo.sell(SKU)  # backorders "no": nothing more is sold
    body, _ = woo.set_backorders(SKU, "notify")
    allowed = json.loads(body)
    assert (allowed["stock_status"], allowed["backorders"], allowed["backordered"]) == ("onbackorder", "notify", True)
    body, _ = woo.sell(SKU, 3)
    assert json.loads(body)["stock_quantity"] == -3  # backorders take the quantity below zero


def test_woocommerce_backorders_reach_the_catalogue_and_the_product_webhook(woo: FakeWooCommerce) -> None:
    connector = woocommerce_connector(woo)
    assert not next(e for e in connector.read_catalog() if e.sku == SKU).backorder
    raw, headers = woo.set_backorders(SKU, "yes")
    delivery = connector.read_webhook(raw, headers)
    # A product.updated carries the product's level and its catalogue entry together.
    assert [p.backorder for p in delivery.products if p.sku == SKU] == [True]
    assert next(e for e in connector.read_catalog() if e.sku == SKU).backorder


def test_a_negative_woocommerce_quantity_is_no_units(woo: FakeWooCommerce) -> None:
    connector = woocommerce_connector(woo)
    woo.set_backorders(SKU, "notify")
    raw, headers = woo.sell(SKU, 4)  # 1 on the shelf, 3 on backorder
    delivery = connector.read_webhook(raw, headers)
    assert [level.available for level in delivery.levels] == [0]


# --- Shopify -------------------------------------------------------------------------------------------------------


def test_shopify_inventory_policy_reaches_the_catalogue_and_products_update(
    shop: FakeShopify, clock: FixedClock
) -> None:
    connector = shopify_connector(shop, clock)
    assert not next(e for e in connector.read_catalog() if e.sku == SKU).backorder
    raw, headers = shop.set_inventory_policy(SKU, "CONTINUE")
    assert json.loads(raw)["variants"][0]["inventory_policy"] == "continue"
    delivery = connector.read_webhook(raw, headers)
    assert delivery.kind == CATALOG and [p.backorder for p in delivery.products] == [True]
    assert next(e for e in connector.read_catalog() if e.sku == SKU).backorder
    raw, headers = shop.set_inventory_policy(SKU, "DENY")
    assert [p.backorder for p in connector.read_webhook(raw, headers).products] == [False]


def test_shopify_oversells_only_under_continue_and_reports_a_negative_level(
    shop: FakeShopify, clock: FixedClock
) -> None:
    connector = shopify_connector(shop, clock)
    with pytest.raises(ValueError):
        shop.sell(SKU)  # DENY with nothing available
    shop.set_inventory_policy(SKU, "CONTINUE")
    raw, headers = shop.sell(SKU, 2)
    assert json.loads(raw)["available"] == -2
    delivery = connector.read_webhook(raw, headers)
    assert delivery.kind == INVENTORY and [level.available for level in delivery.levels] == [0]
