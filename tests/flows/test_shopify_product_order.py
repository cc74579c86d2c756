"""A Shopify product's deliveries in any order: Shopify does not order a product's webhooks
(https://shopify.dev/docs/apps/build/webhooks, *Ordering*), so an update that was made before the product was taken
off sale (archived, or deleted: tests/flows/test_async_webhooks.py) may arrive after it, and must not list it again;
an update made after it (the product back on sale) does. Each body is ordered by its own `updated_at`
(https://shopify.dev/docs/api/webhooks/2025-10?reference=toml#list-of-topics-products/update).
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


def listed(shop: Shop) -> bool:
    product = shop.services.tables.catalog.get(THROW, consistent=True)
    assert product is not None
    return not product.discontinued


def test_an_update_older_than_the_archiving_lists_nothing_and_a_newer_one_lists_it_again(shop: Shop) -> None:
    product = shop.store.products[shop.store.variant(THROW).product_id]
    shop.clock.advance(1)
    older = shop.store.product_webhook(THROW)
    shop.clock.advance(1)
    product.status = "ARCHIVED"
    archived = shop.store.product_webhook(THROW)

    assert shop.webhook(archived).status_code == 200
    assert not listed(shop)
    late = shop.webhook(older)
    assert late.status_code == 200, late.body
    assert json.loads(late.body)["results"] == [{"sku": THROW, "status": "skipped", "reason": "removed_later"}]
    assert not listed(shop)

    shop.clock.advance(1)
    product.status = "ACTIVE"
    assert shop.webhook(shop.store.product_webhook(THROW)).status_code == 200
    assert listed(shop)


def test_a_late_archiving_does_not_move_a_deletion_back(shop: Shop) -> None:
    product = shop.store.products[shop.store.variant(THROW).product_id]
    shop.clock.advance(1)
    product.status = "ARCHIVED"
    archived = shop.store.product_webhook(THROW)
    shop.clock.advance(1)
    product.status = "ACTIVE"
    back_on_sale = shop.store.product_webhook(THROW)
    shop.clock.advance(1)
    deleted = shop.store.delete_product(THROW)

    # Delivered last first: the deletion is kept as arriving now, and the older archiving leaves it there.
    for request in (deleted, archived, back_on_sale):
        assert shop.webhook(request).status_code == 200
    assert not listed(shop)
