"""A product the shop marks UNLISTED (Admin API 2025-10) stays on sale here: the catalogue sync keeps it, its
waiting list stays open, and its webhook does not take it off sale.

UNLISTED hides a product from search, collections and recommendations, and sells it through its own URL:
https://shopify.dev/docs/api/admin-graphql/2025-10/enums/ProductStatus and
https://shopify.dev/changelog/new-unlisted-product-status
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.clocks import FixedClock
from tests.platforms import THROW, Shop, platform_shop


@pytest.fixture
def shop(session: Any, clock: FixedClock) -> Iterator[Shop]:
    with platform_shop("shopify", session, clock) as built:
        yield built


def unlist(shop: Shop) -> None:
    shop.store.products[shop.store.variant(THROW).product_id].status = "UNLISTED"


def test_the_catalogue_sync_keeps_an_unlisted_product(shop: Shop) -> None:
    unlist(shop)
    report = shop.services.catalog_sync.run()
    assert report.error is None and THROW not in report.discontinued
    product = shop.services.tables.catalog.get(THROW)
    assert product is not None and not product.discontinued
    assert product.product_url and "/products/oatmeal-merino-throw?variant=" in product.product_url


def test_its_products_update_webhook_keeps_it_too(shop: Shop) -> None:
    unlist(shop)
    response = shop.webhook(shop.store.product_webhook(THROW))
    assert response.status_code == 200, response.body
    body = json.loads(response.body)
    assert body["status"] == "catalog"
    assert all(result["status"] != "discontinued" for result in body.get("results", []))
    product = shop.services.tables.catalog.get(THROW)
    assert product is not None and not product.discontinued
    # And an archived one still goes.
    shop.store.products[shop.store.variant(THROW).product_id].status = "ARCHIVED"
    gone = json.loads(shop.webhook(shop.store.product_webhook(THROW)).body)
    assert {"sku": THROW, "status": "discontinued"} in gone["results"]
