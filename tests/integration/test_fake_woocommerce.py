"""The WooCommerce connector against the in-memory WooCommerce (devstack/fake_woocommerce.py): no network, no AWS.

The fake keeps the store rules the connector relies on (a hold's unit reserved for its draft order and freed when
the draft is cancelled or its reservation lapses, the checkout taking the stock once; see the fake's docstring for
the sources).
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest

from chalicelib.errors import InvalidSignature
from chalicelib.platforms import base
from chalicelib.platforms.base import HoldRequest, StoreRefused, StoreUnavailable
from chalicelib.platforms.woocommerce import PER_PAGE, WooCommerceConnector
from devstack.fake_woocommerce import DEMO_CUSTOMER, FakeWooCommerce

STOCK = {"WW-THROW-OAT": 2, "WW-CARDI-RUST": 1, "WW-BEANIE-MOSS": 0}


@pytest.fixture
def store() -> FakeWooCommerce:
    return FakeWooCommerce(store_url="https://shop.example", stock=STOCK)


def connector(store: FakeWooCommerce, *, secret: str | None = None) -> WooCommerceConnector:
    return WooCommerceConnector(
        store_url=store.store_url,
        consumer_key=lambda: store.consumer_key,
        consumer_secret=lambda: secret or store.consumer_secret,
        webhook_secrets=lambda: ("old-secret", store.webhook_secret),
        transport=store.transport(),
        sleep=lambda s: None,
    )


def hold_for(store: FakeWooCommerce, sku: str, reservation_id: str = "res_1") -> HoldRequest:
    entry = next(e for e in connector(store).read_catalog() if e.sku == sku)
    return HoldRequest(
        reservation_id=reservation_id, sku=sku, ids=entry.ids, expires_at=2_000_000_000, product_name=entry.name
    )


# ---------------------------------------------------------------- catalogue


def test_the_catalogue_lists_simple_products_and_every_variation(store: FakeWooCommerce) -> None:
    entries = {e.sku: e for e in connector(store).read_catalog()}
    assert set(entries) == {
        "WW-THROW-OAT",
        "WW-BOARD-WALNUT",
        "WW-MUG-SPECKLE",
        "WW-BEANIE-MOSS",
        "WW-BEANIE-MOSS-CHARCOAL",
        "WW-CARDI-RUST",
        "WW-CARDI-RUST-S",
        "WW-CARDI-RUST-L",
    }
    cardigan = entries["WW-CARDI-RUST"]
    assert cardigan.name == "Rust cable-knit cardigan - M"
    assert dict(cardigan.ids) == {"woocommerce.product_id": "107", "woocommerce.variation_id": "109"}
    assert cardigan.price and cardigan.product_url and cardigan.image_url
    assert dict(entries["WW-THROW-OAT"].ids) == {"woocommerce.product_id": "101"}


def test_the_catalogue_follows_the_pages(store: FakeWooCommerce) -> None:
    for n in range(PER_PAGE + 5):
        pid = 1000 + n
        store.products[pid] = type(store.by_sku("WW-THROW-OAT"))(pid, f"Extra {n}", "simple", f"X-{n}", "1.00")
    entries = list(connector(store).read_catalog())
    assert len(entries) == PER_PAGE + 5 + 8
    pages = [q for m, q in store.requests if q.startswith("/wp-json/wc/v3/products?")]
    assert len(pages) == 2


def test_a_draft_product_is_not_in_the_catalogue(store: FakeWooCommerce) -> None:
    store.by_sku("WW-MUG-SPECKLE").status = "draft"
    assert "WW-MUG-SPECKLE" not in {e.sku for e in connector(store).read_catalog()}


def test_wrong_credentials_make_the_catalogue_unavailable(store: FakeWooCommerce) -> None:
    with pytest.raises(base.CatalogUnavailable) as failed:
        list(connector(store, secret="wrong").read_catalog())
    assert "wrong" not in str(failed.value)


# ---------------------------------------------------------------- holds


def test_a_hold_takes_one_unit_off_the_storefront(store: FakeWooCommerce) -> None:
    hold = connector(store).place_hold(hold_for(store, "WW-THROW-OAT"))
    assert store.counts("WW-THROW-OAT") == {"available": 1, "reserved": 1}
    order = store.orders[int(hold.ref)]
    assert order.status == "checkout-draft" and order.created_via == "bisn-claim"
    assert store.by_sku("WW-THROW-OAT").stock == 2  # reserved, not taken: stock_quantity is unchanged
    assert hold.checkout_url.startswith("https://shop.example/?bisn_claim=res_1&")


def test_a_variation_hold_takes_the_variations_unit(store: FakeWooCommerce) -> None:
    connector(store).place_hold(hold_for(store, "WW-CARDI-RUST"))
    assert store.counts("WW-CARDI-RUST") == {"available": 0, "reserved": 1}
    assert store.counts("WW-CARDI-RUST-S")["reserved"] == 0


def test_placing_twice_makes_one_order(store: FakeWooCommerce) -> None:
    request = hold_for(store, "WW-THROW-OAT")
    first = connector(store).place_hold(request)
    second = connector(store).place_hold(request)
    assert first == second
    assert len(store.orders) == 1
    assert store.counts("WW-THROW-OAT") == {"available": 1, "reserved": 1}


def test_release_gives_the_unit_back(store: FakeWooCommerce) -> None:
    hold = connector(store).place_hold(hold_for(store, "WW-THROW-OAT"))
    connector(store).release_hold("res_1", hold.ref)
    assert store.counts("WW-THROW-OAT") == {"available": 2, "reserved": 0}
    assert store.orders[int(hold.ref)].status == "cancelled"
    connector(store).release_hold("res_1", hold.ref)  # again: nothing more moves
    assert store.counts("WW-THROW-OAT") == {"available": 2, "reserved": 0}


def test_release_without_a_ref_finds_the_order(store: FakeWooCommerce) -> None:
    connector(store).place_hold(hold_for(store, "WW-CARDI-RUST"))
    connector(store).release_hold("res_1", None)
    assert store.counts("WW-CARDI-RUST") == {"available": 1, "reserved": 0}


def test_a_paid_hold_is_left_alone(store: FakeWooCommerce) -> None:
    hold = connector(store).place_hold(hold_for(store, "WW-THROW-OAT"))
    body, headers = store.pay_order(int(hold.ref))
    delivery = connector(store).read_webhook(body, headers)
    assert delivery.orders == (base.OrderReport(order_id=hold.ref, reservation_ids=("res_1",), paid=True),)
    connector(store).release_hold("res_1", hold.ref)
    assert store.orders[int(hold.ref)].status == "processing"
    assert store.counts("WW-THROW-OAT") == {"available": 1, "reserved": 0}  # sold once, not taken twice


def test_releasing_an_unknown_hold_is_fine(store: FakeWooCommerce) -> None:
    connector(store).release_hold("res_never", None)
    connector(store).release_hold("res_never", "9999")
    assert store.orders == {}


def test_no_stock_is_a_refusal(store: FakeWooCommerce) -> None:
    with pytest.raises(StoreRefused):
        connector(store).place_hold(hold_for(store, "WW-BEANIE-MOSS"))
    assert store.orders == {}


def test_a_product_gone_is_a_refusal(store: FakeWooCommerce) -> None:
    request = hold_for(store, "WW-THROW-OAT")
    del store.products[101]
    with pytest.raises(StoreRefused):
        connector(store).place_hold(request)


def test_the_last_unit_cannot_be_held_twice(store: FakeWooCommerce) -> None:
    connector(store).place_hold(hold_for(store, "WW-CARDI-RUST", "res_a"))
    with pytest.raises(StoreRefused):
        connector(store).place_hold(hold_for(store, "WW-CARDI-RUST", "res_b"))
    assert store.counts("WW-CARDI-RUST") == {"available": 0, "reserved": 1}


@pytest.mark.parametrize(("status", "headers"), [(500, {}), (503, {"Retry-After": "5"}), (None, {})])
def test_a_store_that_fails_is_unavailable(store: FakeWooCommerce, status: int | None, headers: dict[str, str]) -> None:
    request = hold_for(store, "WW-THROW-OAT")
    store.fail_next(status, headers=headers)
    with pytest.raises(StoreUnavailable):
        connector(store).place_hold(request)
    assert store.orders == {}


def test_a_release_that_fails_is_unavailable_and_can_be_tried_again(store: FakeWooCommerce) -> None:
    hold = connector(store).place_hold(hold_for(store, "WW-THROW-OAT"))
    store.fail_next(None)
    with pytest.raises(StoreUnavailable):
        connector(store).release_hold("res_1", hold.ref)
    connector(store).release_hold("res_1", hold.ref)
    assert store.counts("WW-THROW-OAT") == {"available": 2, "reserved": 0}


def test_throttling_is_waited_out(store: FakeWooCommerce) -> None:
    request = hold_for(store, "WW-THROW-OAT")
    store.fail_next(429, times=2, headers={"Retry-After": "1"})
    assert connector(store).place_hold(request).ref


# ---------------------------------------------------------------- webhooks


def test_a_stock_change_arrives_as_a_verified_level(store: FakeWooCommerce) -> None:
    delivery = connector(store).read_webhook(*store.set_stock("WW-CARDI-RUST", 5))
    assert delivery.kind == base.INVENTORY
    assert delivery.levels[0].sku == "WW-CARDI-RUST" and delivery.levels[0].available == 5
    assert dict(delivery.products[0].ids) == {"woocommerce.product_id": "107", "woocommerce.variation_id": "109"}


def test_the_checked_out_orders_webhook_carries_the_reservation(store: FakeWooCommerce) -> None:
    hold = connector(store).place_hold(hold_for(store, "WW-THROW-OAT"))
    body, headers = store.checkout(store.claim(hold.checkout_url), DEMO_CUSTOMER)
    assert headers["X-WC-Webhook-Topic"] == "order.updated"
    delivery = connector(store).read_webhook(body, headers)
    assert delivery.orders == (base.OrderReport(order_id=hold.ref, reservation_ids=("res_1",), paid=True),)


def test_the_fakes_ping_is_ignored(store: FakeWooCommerce) -> None:
    assert connector(store).read_webhook(*store.ping_request()).reason == "ping"


def test_a_tampered_delivery_from_the_fake_is_refused(store: FakeWooCommerce) -> None:
    body, headers = store.set_stock("WW-THROW-OAT", 3)
    with pytest.raises(InvalidSignature):
        connector(store).read_webhook(body.replace(b'"stock_quantity":3', b'"stock_quantity":30'), headers)


def test_the_wsgi_app_answers_like_the_transport(store: FakeWooCommerce) -> None:
    status: list[str] = []
    headers_seen: list[Any] = []

    def start_response(line: str, headers: list[tuple[str, str]]) -> None:
        status.append(line)
        headers_seen.extend(headers)

    auth = base64.b64encode(f"{store.consumer_key}:{store.consumer_secret}".encode()).decode()
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/wp-json/wc/v3/products",
        "QUERY_STRING": "per_page=2&page=1",
        "HTTP_AUTHORIZATION": f"Basic {auth}",
        "wsgi.input": io.BytesIO(b""),
    }
    body = b"".join(store.wsgi_app(environ, start_response))
    assert status == ["200 OK"]
    assert len(json.loads(body)) == 2
    assert dict(headers_seen)["x-wp-totalpages"] == "3"  # 3 simple products and 2 variable parents
    environ["HTTP_AUTHORIZATION"] = "Basic eDp5"
    assert json.loads(b"".join(store.wsgi_app(environ, start_response)))["data"] == {"status": 401}
