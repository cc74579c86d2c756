"""A product the store sells on backorder, on each platform end to end through the HTTP API: the store's own switch
(Shopify's inventory policy, WooCommerce's "Allow backorders?") reaching the catalogue by its product webhook, the
tap's answer per the shop's choice, levels below zero, and a restock from below zero offering only real units.

The fakes' fields and the platform pages they follow are named in devstack/fake_shopify.py, devstack/fake_woocommerce.py
and tests/integration/test_fake_backorders.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.tables.catalog import NOTIFY
from devstack.clocks import FixedClock
from tests.notices import drain
from tests.platforms import THROW, Shop, join, platform_shop
from tests.reliability.invariants import assert_invariants


@pytest.fixture(params=["shopify", "woocommerce"])
def shop(request: pytest.FixtureRequest, session: Any, clock: FixedClock) -> Iterator[Shop]:
    with platform_shop(str(request.param), session, clock) as built:
        yield built


def sells_on_backorder(shop: Shop, on: bool) -> None:
    """The shop switches selling when out of stock on or off in its store; the product webhook reaches the app."""
    shop.clock.advance(60)  # a later change: the product body carries its own newer time
    if shop.platform == "shopify":
        change = shop.store.set_inventory_policy(THROW, "CONTINUE" if on else "DENY")
    else:
        change = shop.store.set_backorders(THROW, "notify" if on else "no")
    answer = shop.webhook(change)
    assert answer.status_code in (200, 202), answer.body
    product = shop.services.tables.catalog.get(THROW, consistent=True)
    assert product is not None and product.backorder is on


def level(shop: Shop, units: int) -> dict[str, Any]:
    """The store's level set to `units` (below zero: units sold on backorder and still owed); the app's answer."""
    if shop.platform == "shopify":
        answer = shop.webhook(shop.store.set_available(THROW, units))
    else:
        answer = shop.webhook(shop.store.set_stock(THROW, units))
    assert answer.status_code in (200, 202), answer.body
    return dict(json.loads(answer.body))


def tap(shop: Shop, email: str) -> Any:
    body = json.dumps({"sku": THROW, "channel": "email", "contact": email}).encode()
    return shop.client.http.post("/notify-me", headers={"Content-Type": "application/json"}, body=body)


def test_backorder_levels_open_no_list_unless_chosen_deny_at_zero_is_sold_out_and_a_rise_offers_real_units(
    shop: Shop,
) -> None:
    sells_on_backorder(shop, True)
    refused = tap(shop, "ada@example.com")
    assert refused.status_code == 409
    assert json.loads(refused.body)["error"] == "on_backorder"
    # Switched back to deny with nothing in stock: sold out, so the list is open.
    sells_on_backorder(shop, False)
    join(shop, THROW, "ada@example.com")
    sells_on_backorder(shop, True)
    assert tap(shop, "grace@example.com").status_code == 409
    assert_invariants(shop.services)  # the shards carry the product's mark, and the list its one place

    # Shoppers buy on backorder: the store's level goes below zero, which is no units on the shelf.
    sold = shop.webhook(shop.store.sell(THROW, 3))
    assert sold.status_code in (200, 202), sold.body
    product = shop.services.tables.catalog.get(THROW, consistent=True)
    assert product is not None and product.level == 0 and product.open_restock_id is None

    # The shop chooses notify-me for it: its list opens.
    shop.services.tables.catalog.set_backorder_offer(THROW, NOTIFY)
    join(shop, THROW, "grace@example.com")
    # Two units arrive and go to the orders still owed: still nothing on the shelf, nobody is told.
    assert level(shop, -1)["status"] == "no_restock"
    # Two more: one real unit, so one notice for the two waiting, whatever the level was below zero.
    assert level(shop, 1)["status"] == "restock"
    drain(shop.services)
    assert len(shop.offers(THROW)) == 1
    assert_invariants(shop.services)
