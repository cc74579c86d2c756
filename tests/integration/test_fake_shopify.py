"""The Shopify connector against the in-memory Shopify (devstack/fake_shopify.py): catalogue, holds, faults, webhooks.

Behaviour modelled on: rate limits https://shopify.dev/docs/api/usage/limits; draft order reservations
https://shopify.dev/docs/api/admin-graphql/2025-10/mutations/draftOrderCreate; draft order statuses
https://shopify.dev/docs/api/admin-graphql/2025-10/enums/DraftOrderStatus.
"""

from __future__ import annotations

import pytest

from chalicelib.platforms.base import (
    CATALOG,
    INVENTORY,
    ORDERS,
    CatalogUnavailable,
    HoldRequest,
    StoreRefused,
    StoreUnavailable,
)
from chalicelib.platforms.shopify import ShopifyConnector, reservation_tag
from devstack.clocks import FixedClock
from devstack.fake_shopify import ACCESS_TOKEN, SHOP_DOMAIN, WEBHOOK_SECRET, FakeShopify

NOW = 1_800_000_000.0
SKU = "WW-THROW-OAT"


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(NOW)


@pytest.fixture
def shop(clock: FixedClock) -> FakeShopify:
    return FakeShopify(clock=clock.now, now=clock.now)


@pytest.fixture
def connector(shop: FakeShopify, clock: FixedClock) -> ShopifyConnector:
    return make(shop, clock)


def make(shop: FakeShopify, clock: FixedClock, token: str = ACCESS_TOKEN, **kwargs: object) -> ShopifyConnector:
    return ShopifyConnector(
        shop_domain=SHOP_DOMAIN,
        access_token=lambda: token,
        webhook_secrets=lambda: ["old-secret", WEBHOOK_SECRET],
        transport=shop.transport(),
        sleep=clock.advance,
        **kwargs,  # type: ignore[arg-type]
    )


def hold(shop: FakeShopify, reservation_id: str = "r-1", sku: str = SKU) -> HoldRequest:
    return HoldRequest(reservation_id, sku, shop.ids(sku), int(NOW) + 900, product_name="Oatmeal merino throw")


# --- catalogue ----------------------------------------------------------------------------------------------------


def test_the_catalogue_is_every_active_variant_with_a_sku(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.add_product("Old stock", ["WW-OLD"], status="ARCHIVED")
    shop.add_product("Coming soon", ["WW-SOON"], status="DRAFT")
    shop.add_product("Socks", ["WW-SOCK-S", "WW-SOCK-M"], variant_titles=["Small", "Medium"])
    entries = {e.sku: e for e in connector.read_catalog()}
    assert set(entries) == {
        "WW-THROW-OAT",
        "WW-BEANIE-MOSS",
        "WW-BOARD-WALNUT",
        "WW-MUG-SPECKLE",
        "WW-CARDI-RUST",
        "WW-SOCK-S",
        "WW-SOCK-M",
    }
    assert entries["WW-SOCK-M"].name == "Socks - Medium"
    throw = entries[SKU]
    assert throw.name == "Oatmeal merino throw"
    assert throw.currency == "GBP" and throw.price == "128.00"
    assert dict(throw.ids) == shop.ids(SKU)
    assert (
        throw.product_url
        == f"https://{SHOP_DOMAIN}/products/oatmeal-merino-throw?variant={shop.ids(SKU)['shopify.variant_id']}"
    )


def test_an_unlisted_product_is_in_the_catalogue_and_can_be_held(
    shop: FakeShopify, connector: ShopifyConnector
) -> None:
    # UNLISTED hides a product from search, collections and recommendations but sells it through its own URL:
    # https://shopify.dev/docs/api/admin-graphql/2025-10/enums/ProductStatus
    product = shop.add_product("Private sale scarf", ["WW-SCARF-PRIVATE"], status="UNLISTED")
    entries = {e.sku: e for e in connector.read_catalog()}
    scarf = entries["WW-SCARF-PRIVATE"]
    variant = product.variants[0].id
    # Not on the Online Store channel's listings, so no onlineStoreUrl: the product's own URL by its handle.
    assert scarf.product_url == f"https://{SHOP_DOMAIN}/products/private-sale-scarf?variant={variant}"
    shop.set_available("WW-SCARF-PRIVATE", 1)
    placed = connector.place_hold(hold(shop, "r-unlisted", "WW-SCARF-PRIVATE"))
    assert placed.checkout_url and shop.counts("WW-SCARF-PRIVATE") == {"available": 0, "reserved": 1}


def test_the_catalogue_follows_cursors_across_pages(shop: FakeShopify, connector: ShopifyConnector) -> None:
    for i in range(120):
        shop.add_product(f"Extra {i}", [f"EXTRA-{i:03d}"])
    skus = [e.sku for e in connector.read_catalog()]
    assert len(skus) == 125 and len(set(skus)) == 125
    assert sum(1 for r in shop.requests if "productVariants" in r["query"]) == 3


def test_a_drained_bucket_is_waited_out(shop: FakeShopify, clock: FixedClock, connector: ShopifyConnector) -> None:
    shop.drain_bucket()
    skus = [e.sku for e in connector.read_catalog()]
    assert len(skus) == 5
    # requested 202 points at 100 points/s: the connector slept about two seconds on the fake clock
    assert 2.0 <= clock.now() - NOW <= 4.0


def test_a_small_bucket_throttles_between_pages(clock: FixedClock) -> None:
    shop = FakeShopify(clock=clock.now, now=clock.now, maximum_available=300.0, restore_rate=50.0)
    for i in range(150):
        shop.add_product(f"Extra {i}", [f"EXTRA-{i:03d}"])
    skus = [e.sku for e in make(shop, clock).read_catalog()]
    assert len(skus) == 155
    assert clock.now() > NOW  # it waited for the bucket to refill rather than fail


def test_a_bucket_that_never_refills_gives_up(clock: FixedClock) -> None:
    shop = FakeShopify(clock=clock.now, now=clock.now, restore_rate=0.001)
    shop.drain_bucket()
    with pytest.raises(CatalogUnavailable):
        list(make(shop, clock).read_catalog())


def test_429_with_retry_after_is_waited_out(shop: FakeShopify, clock: FixedClock, connector: ShopifyConnector) -> None:
    shop.fail_next(429, retry_after="3")
    assert len(list(connector.read_catalog())) == 5
    assert clock.now() - NOW == pytest.approx(3.0)


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_makes_the_catalogue_unavailable(
    shop: FakeShopify, connector: ShopifyConnector, status: int
) -> None:
    shop.fail_next(status)
    with pytest.raises(CatalogUnavailable):
        list(connector.read_catalog())


def test_a_wrong_token_makes_the_catalogue_unavailable_without_naming_it(shop: FakeShopify, clock: FixedClock) -> None:
    with pytest.raises(CatalogUnavailable) as caught:
        list(make(shop, clock, token="shpat_wrong_secret_value").read_catalog())
    assert "401" in str(caught.value) and "shpat_wrong_secret_value" not in str(caught.value)


def test_an_unknown_api_version_is_refused(shop: FakeShopify, clock: FixedClock) -> None:
    with pytest.raises(CatalogUnavailable):
        list(make(shop, clock, api_version="2019-04").read_catalog())


def test_a_timeout_makes_the_catalogue_unavailable(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.timeout_next()
    with pytest.raises(CatalogUnavailable):
        list(connector.read_catalog())


# --- holds --------------------------------------------------------------------------------------------------------


def test_a_hold_reserves_one_unit(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.set_available(SKU, 2)
    held = connector.place_hold(hold(shop))
    assert held.ref.startswith("gid://shopify/DraftOrder/")
    assert held.checkout_url.startswith(f"https://{SHOP_DOMAIN}/")
    assert shop.counts(SKU) == {"available": 1, "reserved": 1}


def test_placing_twice_makes_one_draft_order(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.set_available(SKU, 2)
    first = connector.place_hold(hold(shop))
    second = connector.place_hold(hold(shop))
    assert first == second
    assert len(shop.drafts_for("r-1")) == 1
    assert shop.counts(SKU) == {"available": 1, "reserved": 1}


def test_a_lost_answer_then_a_retry_makes_one_draft_order(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.set_available(SKU, 2)
    shop.timeout_after_next("draftOrderCreate")  # Shopify creates it, the answer never arrives
    with pytest.raises(StoreUnavailable):
        connector.place_hold(hold(shop))
    assert shop.counts(SKU) == {"available": 1, "reserved": 1}
    held = connector.place_hold(hold(shop))
    assert [d.gid for d in shop.drafts_for("r-1")] == [held.ref]
    assert shop.counts(SKU) == {"available": 1, "reserved": 1}


# Shopify does not say how soon a new draft order shows in the draftOrders tag search
# (https://shopify.dev/docs/api/admin-graphql/2025-10/queries/draftOrders, https://shopify.dev/docs/api/usage/search-syntax):
# the fake's search_lag_s keeps one out of it for a while, and a hold must stay one unit whatever the lag.


def test_a_lost_answer_then_a_retry_while_the_search_lags_keeps_one_unit(
    shop: FakeShopify, clock: FixedClock, connector: ShopifyConnector
) -> None:
    shop.set_available(SKU, 3)
    shop.search_lag_s = 2.0
    shop.timeout_after_next("draftOrderCreate")
    with pytest.raises(StoreUnavailable):
        connector.place_hold(hold(shop))
    [first] = shop.drafts_for("r-1")
    # The retry's lookup misses the first draft order (not in the search yet) and creates a second one; once the
    # search shows its own, it shows the first too, and the second is taken back.
    held = connector.place_hold(hold(shop))
    assert held.ref == first.gid
    assert [d.gid for d in shop.drafts_for("r-1")] == [first.gid]
    assert shop.counts(SKU) == {"available": 2, "reserved": 1}


def test_a_search_lagging_past_the_waits_leaves_the_duplicate_to_the_release(
    shop: FakeShopify, clock: FixedClock, connector: ShopifyConnector
) -> None:
    shop.set_available(SKU, 3)
    shop.search_lag_s = 60.0
    shop.timeout_after_next("draftOrderCreate")
    with pytest.raises(StoreUnavailable):
        connector.place_hold(hold(shop))
    held = connector.place_hold(hold(shop))
    assert len(shop.drafts_for("r-1")) == 2  # nothing could show the first one yet
    clock.advance(600)  # the hold runs its course; the sweep releases it by its ref
    connector.release_hold("r-1", held.ref)
    assert shop.drafts_for("r-1") == []
    assert shop.counts(SKU) == {"available": 3, "reserved": 0}


def test_a_lagging_search_alone_makes_no_duplicate_and_takes_nothing_back(
    shop: FakeShopify, clock: FixedClock, connector: ShopifyConnector
) -> None:
    shop.set_available(SKU, 3)
    shop.search_lag_s = 1.2
    held = connector.place_hold(hold(shop))
    assert [d.gid for d in shop.drafts_for("r-1")] == [held.ref]
    assert shop.counts(SKU) == {"available": 2, "reserved": 1}


def test_a_duplicate_the_search_cannot_show_yet_leaves_the_hold_unsettled_until_the_search_catches_up(
    shop: FakeShopify, clock: FixedClock, connector: ShopifyConnector
) -> None:
    shop.set_available(SKU, 3)
    assert connector.place_hold(hold(shop, "r-0")).settled  # the search showed it alone
    shop.search_lag_s = 60.0
    shop.timeout_after_next("draftOrderCreate")
    with pytest.raises(StoreUnavailable):
        connector.place_hold(hold(shop))
    held = connector.place_hold(hold(shop))
    assert not held.settled
    [lost] = [d for d in shop.drafts_for("r-1") if d.gid != held.ref]
    # The search does not show the recorded draft order yet: nothing can be told apart, nothing is deleted.
    assert connector.release_duplicates("r-1", held.ref) is False
    assert len(shop.drafts_for("r-1")) == 2
    clock.advance(60)
    # Caught up: the other one goes, the recorded one stays, and it is settled.
    assert connector.release_duplicates("r-1", held.ref) is True
    assert [d.gid for d in shop.drafts_for("r-1")] == [held.ref]
    assert lost.id not in shop.draft_orders
    assert shop.counts(SKU) == {"available": 1, "reserved": 2}
    # Again, as after a crash before the flag was cleared: nothing more to delete, still settled.
    assert connector.release_duplicates("r-1", held.ref) is True
    assert [d.gid for d in shop.drafts_for("r-1")] == [held.ref]


def test_release_duplicates_never_deletes_a_completed_draft_order(
    shop: FakeShopify, clock: FixedClock, connector: ShopifyConnector
) -> None:
    shop.set_available(SKU, 3)
    shop.search_lag_s = 10_000.0
    first = connector.place_hold(hold(shop))
    second = connector.place_hold(hold(shop))
    shop.complete_draft_order(first.ref)  # the shopper paid through the other one
    shop.search_lag_s = 0.0
    assert connector.release_duplicates("r-1", second.ref) is True
    assert {d.gid: d.status for d in shop.drafts_for("r-1")} == {first.ref: "COMPLETED", second.ref: "OPEN"}


def test_a_lookup_that_finds_two_draft_orders_returns_the_older_unsettled(
    shop: FakeShopify, connector: ShopifyConnector
) -> None:
    shop.set_available(SKU, 3)
    shop.search_lag_s = 10_000.0
    first = connector.place_hold(hold(shop))
    connector.place_hold(hold(shop))
    shop.search_lag_s = 0.0
    found = connector.place_hold(hold(shop))
    assert found == first and not found.settled
    assert len(shop.drafts_for("r-1")) == 2


def test_two_calls_that_each_made_one_agree_on_the_older(shop: FakeShopify, connector: ShopifyConnector) -> None:
    # Two attempts' draft orders, both in the search: whichever call looks, the older one is the hold.
    shop.set_available(SKU, 3)
    shop.search_lag_s = 10_000.0
    first = connector.place_hold(hold(shop))
    second = connector.place_hold(hold(shop))
    assert first != second
    shop.search_lag_s = 0.0
    assert connector.place_hold(hold(shop)) == first  # found by the lookup, nothing created
    again = connector._one_draft(reservation_tag("r-1"), second)
    assert again == first
    assert [d.gid for d in shop.drafts_for("r-1")] == [first.ref]
    assert shop.counts(SKU) == {"available": 2, "reserved": 1}


def test_release_gives_the_unit_back(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.set_available(SKU, 1)
    held = connector.place_hold(hold(shop))
    connector.release_hold("r-1", held.ref)
    assert shop.counts(SKU) == {"available": 1, "reserved": 0}
    assert shop.drafts_for("r-1") == []
    connector.release_hold("r-1", held.ref)  # again: already gone is done


def test_release_without_a_ref_finds_it_by_tag(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.set_available(SKU, 1)
    connector.place_hold(hold(shop))
    connector.release_hold("r-1", None)
    assert shop.counts(SKU) == {"available": 1, "reserved": 0}


def test_release_of_a_completed_draft_order_leaves_it(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.set_available(SKU, 1)
    held = connector.place_hold(hold(shop))
    shop.complete_draft_order(held.ref)
    connector.release_hold("r-1", held.ref)
    connector.release_hold("r-1", None)
    (draft,) = shop.drafts_for("r-1")
    assert draft.status == "COMPLETED"
    assert shop.counts(SKU) == {"available": 0, "reserved": 0}


def test_release_of_an_unknown_hold_is_fine(connector: ShopifyConnector) -> None:
    connector.release_hold("never-placed", None)
    connector.release_hold("never-placed", "gid://shopify/DraftOrder/999")
    connector.release_hold("never-placed", "not-a-gid")


def test_a_lapsed_reservation_returns_the_unit(
    shop: FakeShopify, clock: FixedClock, connector: ShopifyConnector
) -> None:
    shop.set_available(SKU, 1)
    connector.place_hold(hold(shop))
    clock.advance(901)
    assert shop.counts(SKU) == {"available": 1, "reserved": 0}


def test_no_stock_is_refused(shop: FakeShopify, connector: ShopifyConnector) -> None:
    with pytest.raises(StoreRefused):
        connector.place_hold(hold(shop))
    assert shop.drafts_for("r-1") == []


def test_a_variant_that_is_gone_is_refused(shop: FakeShopify, connector: ShopifyConnector) -> None:
    gone = HoldRequest("r-1", SKU, {"shopify.variant_id": "123"}, int(NOW) + 900)
    with pytest.raises(StoreRefused):
        connector.place_hold(gone)
    with pytest.raises(StoreRefused):
        connector.place_hold(HoldRequest("r-1", SKU, {}, int(NOW) + 900))


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_are_unavailable(shop: FakeShopify, connector: ShopifyConnector, status: int) -> None:
    shop.set_available(SKU, 1)
    shop.fail_next(status, retry_after="7")
    with pytest.raises(StoreUnavailable):
        connector.place_hold(hold(shop))
    shop.fail_next(status)
    with pytest.raises(StoreUnavailable):
        connector.release_hold("r-1", None)


def test_429_is_unavailable_with_its_retry_after(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.fail_next(429, retry_after="4")
    with pytest.raises(StoreUnavailable) as caught:
        connector.place_hold(hold(shop))
    assert caught.value.retry_after_s == 4.0


def test_throttled_is_unavailable_with_the_refill_time(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.set_available(SKU, 1)
    shop.drain_bucket()
    with pytest.raises(StoreUnavailable) as caught:
        connector.place_hold(hold(shop))
    assert caught.value.retry_after_s == pytest.approx(0.5, abs=0.2)  # 12 points at 100/s, at least half a second


def test_timeouts_are_unavailable(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.timeout_next()
    with pytest.raises(StoreUnavailable):
        connector.place_hold(hold(shop))
    shop.timeout_next()
    with pytest.raises(StoreUnavailable):
        connector.release_hold("r-1", None)


# --- webhooks -----------------------------------------------------------------------------------------------------


def test_the_fakes_webhooks_verify_with_the_connector(shop: FakeShopify, connector: ShopifyConnector) -> None:
    body, headers = shop.set_available(SKU, 4, location=70010002)
    delivery = connector.read_webhook(body, headers)
    assert delivery.kind == INVENTORY
    (level,) = delivery.levels
    assert (level.available, level.location_id) == (4, "70010002")
    assert level.store_item_id == f"shopify.inventory_item_id:{shop.ids(SKU)['shopify.inventory_item_id']}"

    body, headers = shop.product_webhook(SKU)
    (entry,) = connector.read_webhook(body, headers).products
    assert entry.sku == SKU and dict(entry.ids) == shop.ids(SKU)
    assert connector.read_webhook(body, headers).kind == CATALOG


def test_a_paid_draft_order_reports_its_reservation(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.set_available(SKU, 1)
    held = connector.place_hold(hold(shop))
    body, headers = shop.complete_draft_order(held.ref)
    delivery = connector.read_webhook(body, headers)
    assert delivery.kind == ORDERS
    (order,) = delivery.orders
    assert order.reservation_ids == ("r-1",) and order.paid


def test_a_completed_draft_order_names_the_order_it_became(shop: FakeShopify, connector: ShopifyConnector) -> None:
    shop.set_available(SKU, 1)
    held = connector.place_hold(hold(shop))
    order_body, order_headers = shop.complete_draft_order(held.ref, attributes_reach_order=False)
    (order,) = connector.read_webhook(order_body, order_headers).orders
    assert order.reservation_ids == () and order.paid and order.linkable

    body, headers = shop.draft_order_webhook(held.ref)
    assert headers["X-Shopify-Topic"] == "draft_orders/update"
    delivery = connector.read_webhook(body, headers)
    assert delivery.kind == ORDERS
    (link,) = delivery.orders
    assert (link.order_id, link.reservation_ids, link.draft_ref) == (order.order_id, ("r-1",), held.ref)
    assert not link.paid


def test_a_location_filter_ignores_other_locations(shop: FakeShopify, clock: FixedClock) -> None:
    connector = make(shop, clock, location_ids=("70010001",))
    body, headers = shop.set_available(SKU, 4, location=70010002)
    assert connector.read_webhook(body, headers).reason == "other_location"
