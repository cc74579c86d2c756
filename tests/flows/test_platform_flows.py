"""Each platform end to end through the HTTP API: catalogue from the store, a tap on Notify me, the platform's own
inventory webhook, the notice, the reserve link (a hold on the store itself), and the platform's order webhook
converting it — or the sweep giving the unit back to the store when the hold ends unbought.

The stores are devstack's fakes (devstack/fake_shopify.py, devstack/fake_woocommerce.py), reached through their
in-process transports, signing their webhooks exactly as the platforms do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.tables.reservations import OfferState, StoreState
from devstack.clocks import FixedClock
from tests.notices import drain
from tests.platforms import THROW, Shop, join, platform_shop
from tests.support import stored, tap_link


@pytest.fixture(params=["shopify", "woocommerce"])
def shop(request: pytest.FixtureRequest, session: Any, clock: FixedClock) -> Iterator[Shop]:
    with platform_shop(str(request.param), session, clock) as built:
        yield built


def test_the_catalogue_comes_from_the_store_with_its_ids(shop: Shop) -> None:
    product = shop.services.tables.catalog.get(THROW)
    assert product is not None
    prefix = f"{shop.platform}."
    assert product.store_ids and all(key.startswith(prefix) for key in product.store_ids)
    assert product.product_url and product.price


def test_a_tap_to_a_paid_order_holds_the_unit_on_the_store_and_converts(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    response = shop.restock(THROW, 1)
    assert response.status_code == 202, response.body
    assert json.loads(response.body)["status"] == "restock"
    drain(shop.services)
    [offer] = shop.offers(THROW)
    assert shop.store.counts(THROW) == {"available": 1, "reserved": 0}

    # A mail scanner opens the link first: nothing is held, here or on the store.
    link = f"/reserve/{shop.services.tokens.reserve(offer.token_id)}"
    before = stored(shop.services)
    assert shop.client.http.get(link).status_code == 200
    assert shop.client.http.head(link).status_code == 200
    assert stored(shop.services) == before
    assert shop.store.counts(THROW) == {"available": 1, "reserved": 0}

    tap = tap_link(shop.client, shop.services.tokens.reserve(offer.token_id))
    held = shop.offers(THROW)[0]
    assert tap.status_code == 303
    assert (held.state, held.store_state) == (OfferState.HELD, StoreState.PLACED)
    assert tap.headers["Location"] == held.store_checkout_url
    # Taken out of the storefront: nobody else can buy the held unit.
    assert shop.store.counts(THROW) == {"available": 0, "reserved": 1}
    # A second tap goes to the same checkout, and holds nothing more.
    again = tap_link(shop.client, shop.services.tokens.reserve(offer.token_id))
    assert (again.status_code, again.headers["Location"]) == (303, held.store_checkout_url)
    assert shop.store.counts(THROW)["reserved"] == 1

    paid = shop.pay(held)
    assert paid.status_code == 200, paid.body
    assert json.loads(paid.body)["status"] == "orders"
    assert shop.offers(THROW)[0].state == OfferState.CONVERTED
    assert shop.store.counts(THROW)["reserved"] == 0


def test_a_hold_that_ends_unbought_gives_the_unit_back_to_the_store(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    shop.restock(THROW, 1)
    drain(shop.services)
    [offer] = shop.offers(THROW)
    tap_link(shop.client, shop.services.tokens.reserve(offer.token_id))
    assert shop.store.counts(THROW) == {"available": 0, "reserved": 1}

    product = shop.services.tables.catalog.get(THROW)
    assert product is not None
    shop.clock.advance(product.hold_window_s + 1)
    summary = shop.services.sweep.run()
    assert (summary["expired"], summary["store_released"]) == (1, 1)
    row = shop.offers(THROW)[0]
    assert (row.state, row.store_state) == (OfferState.EXPIRED, StoreState.RELEASED)
    assert shop.store.counts(THROW) == {"available": 1, "reserved": 0}


def test_a_store_that_is_down_gets_an_honest_page_and_the_sweep_places_the_hold(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    shop.restock(THROW, 1)
    drain(shop.services)
    [offer] = shop.offers(THROW)
    shop.store.fail_next(503)
    tap = tap_link(shop.client, shop.services.tokens.reserve(offer.token_id))
    assert tap.status_code == 503
    assert "held for you" in tap.body.decode()
    row = shop.offers(THROW)[0]
    assert (row.state, row.store_state) == (OfferState.HELD, StoreState.PLACING)

    shop.clock.advance(61)
    assert shop.services.sweep.run()["store_placed"] == 1
    assert shop.offers(THROW)[0].store_state == StoreState.PLACED
    assert shop.store.counts(THROW)["reserved"] == 1


def counters(shop: Shop, sku: str) -> tuple[int, int]:
    product = shop.services.tables.catalog.get(sku, consistent=True)
    assert product is not None and product.open_restock_ts is not None
    restock = shop.services.tables.restocks.get(sku, product.open_restock_ts)
    assert restock is not None
    return restock.units_available, restock.units_offerable


def report_level(shop: Shop, sku: str) -> None:
    """The platform's own webhook for the level its storefront shows now (our store holds already taken off)."""
    shop.clock.advance(1)
    if shop.platform == "woocommerce":
        # Reserved stock leaves stock_quantity as it was: the product as it stands, with what our holds reserve.
        response = shop.webhook(shop.store.stock_webhook(sku))
    else:
        response = shop.restock(sku, shop.store.counts(sku)["available"])
    assert response.status_code in (200, 202), response.body


def test_the_level_a_store_hold_moves_is_our_own_move_not_a_fall_or_a_rise(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    join(shop, THROW, "bo@example.com")
    shop.restock(THROW, 2)
    drain(shop.services)
    first, second = shop.offers(THROW)
    tap_link(shop.client, shop.services.tokens.reserve(first.token_id))
    # The storefront shows one fewer, and the platform says so: that fall is our own hold, not stock lost.
    report_level(shop, THROW)
    assert counters(shop, THROW) == (1, 0)
    tap = tap_link(shop.client, shop.services.tokens.reserve(second.token_id))
    assert tap.status_code == 303, tap.body
    report_level(shop, THROW)
    assert counters(shop, THROW) == (0, 0)
    assert shop.store.counts(THROW) == {"available": 0, "reserved": 2}

    # The first hold ends unbought: the store has its unit back, and the rise it reports is that unit, once.
    product = shop.services.tables.catalog.get(THROW)
    assert product is not None
    shop.clock.advance(product.hold_window_s + 1)
    tap_link(shop.client, shop.services.tokens.reserve(second.token_id))  # the second is still held
    summary = shop.services.sweep.run()
    assert summary["store_released"] >= 1
    report_level(shop, THROW)
    available, offerable = counters(shop, THROW)
    units_on_store = shop.store.counts(THROW)
    held = [o for o in shop.offers(THROW) if o.state == OfferState.HELD]
    # Every unit the store shows for sale is one we may offer, and each one we hold is reserved there.
    assert units_on_store["reserved"] == len(held)
    assert available == units_on_store["available"]
    assert offerable <= available
