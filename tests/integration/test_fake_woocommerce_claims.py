"""A held unit ends in WooCommerce's normal checkout: the connector and the plugin's flow against the fake store.

Sources for what the fake does (see its docstring):
  * src/Checkout/Helpers/ReserveStock.php: a reservation is a wc_reserved_stock row for an order, counted while the
    order is checkout-draft or pending and `expires` is in the future, inserted only if stock less what others
    reserve covers it; stock_quantity itself does not move.
  * WC_Checkout (includes/class-wc-checkout.php) with WC_Countries::get_default_address_fields: the billing name,
    address, city, postcode, country and email are required before an order is placed.
  * wc_release_stock_for_order on payment complete; wc_maybe_reduce_stock_levels on processing.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from chalicelib.platforms import base
from chalicelib.platforms.base import HoldRequest, StoreRefused, StoreUnavailable
from devstack.fake_woocommerce import DEMO_CUSTOMER, FakeWooCommerce, RestError
from tests.platforms import woocommerce_connector as connector

NOW = 1_800_000_000.0
WINDOW = 30 * 60


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> FakeWooCommerce:
    return FakeWooCommerce(store_url="https://shop.example", stock={"WW-THROW-OAT": 1, "WW-CARDI-RUST": 2}, clock=clock)


def hold(store: FakeWooCommerce, sku: str = "WW-THROW-OAT", reservation_id: str = "res_1") -> base.StoreHold:
    entry = next(e for e in connector(store).read_catalog() if e.sku == sku)
    request = HoldRequest(reservation_id, sku, entry.ids, int(store.clock()) + WINDOW, product_name=entry.name)
    return connector(store).place_hold(request)


def test_the_claim_and_checkout_make_a_shippable_paid_order_carrying_the_reservation(store: FakeWooCommerce) -> None:
    placed = hold(store)
    order_id = store.claim(placed.checkout_url)
    assert order_id == int(placed.ref)
    body, headers = store.checkout(order_id, DEMO_CUSTOMER)
    order = store.orders[order_id]
    assert order.status == "processing" and order.date_paid is not None
    as_json = store.order_json(order)
    assert as_json["billing"]["email"] == "ada@example.com" and as_json["shipping"]["postcode"] == "WC1N 1AF"
    assert as_json["shipping_total"] == "4.95" and as_json["shipping_lines"][0]["method_id"] == "flat_rate"
    assert as_json["total"] == f"{float(as_json['line_items'][0]['total']) + 4.95:.2f}"
    assert store.by_sku("WW-THROW-OAT").stock == 0  # taken once, by the paid order
    assert store.counts("WW-THROW-OAT") == {"available": 0, "reserved": 0}
    (report,) = connector(store).read_webhook(body, headers).orders
    assert report == base.OrderReport(order_id=str(order_id), reservation_ids=("res_1",), paid=True)


@pytest.mark.parametrize("missing", ["email", "address_1", "postcode", "country", "first_name"])
def test_no_paid_order_without_an_address_and_an_email(store: FakeWooCommerce, missing: str) -> None:
    order_id = store.claim(hold(store).checkout_url)
    with pytest.raises(RestError) as refused:
        store.checkout(order_id, {k: v for k, v in DEMO_CUSTOMER.items() if k != missing})
    assert refused.value.status == 400 and missing in refused.value.message
    assert store.orders[order_id].status == "checkout-draft"
    assert store.counts("WW-THROW-OAT") == {"available": 0, "reserved": 1}  # still held for them


def test_an_email_that_is_not_one_is_refused(store: FakeWooCommerce) -> None:
    order_id = store.claim(hold(store).checkout_url)
    with pytest.raises(RestError) as refused:
        store.checkout(order_id, {**DEMO_CUSTOMER, "email": "ada at example"})
    assert refused.value.status == 400


def test_nobody_else_can_hold_the_reserved_unit(store: FakeWooCommerce) -> None:
    hold(store)
    with pytest.raises(StoreRefused):
        hold(store, reservation_id="res_2")
    assert store.counts("WW-THROW-OAT") == {"available": 0, "reserved": 1}


def test_the_reservation_lapses_after_the_window(store: FakeWooCommerce, clock: Clock) -> None:
    placed = hold(store)
    clock.now = NOW + WINDOW + 1
    assert store.counts("WW-THROW-OAT") == {"available": 1, "reserved": 0}
    with pytest.raises(RestError) as expired:
        store.claim(placed.checkout_url)
    assert expired.value.status == 410
    hold(store, reservation_id="res_2")  # the unit is anybody's again
    assert store.counts("WW-THROW-OAT") == {"available": 0, "reserved": 1}


def test_a_released_hold_cannot_be_claimed(store: FakeWooCommerce) -> None:
    placed = hold(store)
    connector(store).release_hold("res_1", placed.ref)
    assert store.counts("WW-THROW-OAT") == {"available": 1, "reserved": 0}
    with pytest.raises(RestError) as ended:
        store.claim(placed.checkout_url)
    assert ended.value.status == 410


def test_a_checked_out_order_is_never_cancelled_by_a_release(store: FakeWooCommerce) -> None:
    placed = hold(store)
    store.checkout(store.claim(placed.checkout_url), DEMO_CUSTOMER)
    connector(store).release_hold("res_1", placed.ref)
    assert store.orders[int(placed.ref)].status == "processing"


@pytest.mark.parametrize(
    "change",
    [
        {"bisn_sig": "0" * 64},
        {"bisn_order": "999"},
        {"bisn_expires": str(int(NOW) + 10 * WINDOW)},
        {"bisn_claim": "res_other"},
        {"bisn_expires": "soon"},
    ],
)
def test_an_altered_claim_is_a_400(store: FakeWooCommerce, change: dict[str, str]) -> None:
    url = hold(store).checkout_url
    query = {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()} | change
    with pytest.raises(RestError) as refused:
        store.claim(f"{store.store_url}/?{urlencode(query)}")
    assert refused.value.status == 400


def test_the_level_the_connector_reads_leaves_out_what_our_holds_reserve(store: FakeWooCommerce) -> None:
    hold(store, "WW-CARDI-RUST")
    delivery = connector(store).read_webhook(*store.stock_webhook("WW-CARDI-RUST"))
    assert store.by_sku("WW-CARDI-RUST").stock == 2
    assert delivery.levels[0].available == 1  # what the storefront can still sell


def test_holding_twice_is_one_draft_and_one_reserved_unit(store: FakeWooCommerce) -> None:
    assert hold(store) == hold(store)
    assert len(store.orders) == 1 and store.counts("WW-THROW-OAT")["reserved"] == 1


def test_without_the_plugin_a_hold_is_not_placed_and_says_why(store: FakeWooCommerce) -> None:
    store.plugin_installed = False
    with pytest.raises(StoreUnavailable, match="plugin is not installed"):
        hold(store)
