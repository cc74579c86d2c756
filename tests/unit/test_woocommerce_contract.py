"""The REST requests the WooCommerce connector sends match WooCommerce's documented shapes.

Each request is recorded by a transport that answers from a script; the answers are shaped like the documented
resources. References (WooCommerce REST API v3, https://woocommerce.github.io/woocommerce-rest-api-docs/):
  #authentication-over-https - HTTP Basic with consumer key and secret
  #pagination - per_page (at most 100), page, X-WP-Total and X-WP-TotalPages
  #list-all-products, #list-all-product-variations - the catalogue
  #retrieve-a-product, #retrieve-a-product-variation - the stock check before a hold
  #list-all-orders (product, status, orderby, order) - finding a hold's order
  #create-an-order (status, set_paid, line_items, meta_data; payment_url in the answer) - placing a hold
  #update-an-order (status) - releasing one
  #errors - {"code", "message", "data": {"status"}}
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from chalicelib.platforms.base import CatalogUnavailable, HoldRequest, StoreRefused, StoreUnavailable
from chalicelib.platforms.http import HttpResponse
from chalicelib.platforms.woocommerce import WooCommerceConnector

STORE = "https://shop.example"
SECRET = "cs_very_secret_value"


class Recording:
    """A Transport answering from a list of (method, path, response), recording what was sent."""

    def __init__(self, script: list[tuple[str, str, HttpResponse]]) -> None:
        self.script = list(script)
        self.sent: list[dict[str, Any]] = []

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        parts = urlsplit(url)
        self.sent.append(
            {
                "method": method,
                "base": f"{parts.scheme}://{parts.netloc}",
                "path": parts.path,
                "query": {k: v[-1] for k, v in parse_qs(parts.query).items()},
                "headers": dict(headers),
                "json": json.loads(body) if body else None,
            }
        )
        assert self.script, f"unexpected request {method} {url}"
        want_method, want_path, response = self.script.pop(0)
        assert (method, parts.path) == (want_method, want_path)
        return response


def ok(payload: Any, status: int = 200, **headers: str) -> HttpResponse:
    return HttpResponse(status, json.dumps(payload).encode(), {"content-type": "application/json", **headers})


def error(status: int, code: str, **headers: str) -> HttpResponse:
    return ok({"code": code, "message": "No.", "data": {"status": status}}, status, **headers)


def connector(transport: Recording, sleeps: list[float] | None = None) -> WooCommerceConnector:
    return WooCommerceConnector(
        store_url=f"{STORE}/",
        consumer_key=lambda: "ck_key",
        consumer_secret=lambda: SECRET,
        webhook_secrets=lambda: ("w",),
        transport=transport,
        sleep=(sleeps.append if sleeps is not None else lambda s: None),
    )


PRODUCTS = "/wp-json/wc/v3/products"
ORDERS = "/wp-json/wc/v3/orders"
HOLD = HoldRequest(
    reservation_id="res_1",
    sku="WW-CARDI-RUST",
    ids={"woocommerce.product_id": "107", "woocommerce.variation_id": "109"},
    expires_at=2_000_000_000,
)
VARIATION = {
    "id": 109,
    "status": "publish",
    "purchasable": True,
    "manage_stock": True,
    "stock_quantity": 2,
    "backorders": "no",
}
ORDER = {
    "id": 501,
    "status": "on-hold",
    "meta_data": [{"id": 1, "key": "_bisn_reservation_id", "value": "res_1"}],
    "payment_url": f"{STORE}/checkout/order-pay/501/?pay_for_order=true&key=wc_order_abc",
}


def test_every_request_authenticates_with_basic_auth_over_the_store_url() -> None:
    transport = Recording([("GET", PRODUCTS, ok([], **{"x-wp-total": "0", "x-wp-totalpages": "0"}))])
    list(connector(transport).read_catalog())
    (request,) = transport.sent
    assert request["base"] == STORE
    assert request["headers"]["Authorization"] == "Basic " + base64.b64encode(f"ck_key:{SECRET}".encode()).decode()
    assert request["headers"]["Accept"] == "application/json"


def test_the_catalogue_pages_products_and_variations() -> None:
    simple = {"id": 101, "type": "simple", "status": "publish", "sku": "A", "name": "Throw", "price": "89.00"}
    variable = {"id": 107, "type": "variable", "status": "publish", "sku": "P", "name": "Cardigan"}
    draft = {"id": 111, "type": "simple", "status": "draft", "sku": "D", "name": "Draft"}
    variation = {
        "id": 109,
        "status": "publish",
        "sku": "B",
        "price": "120.00",
        "attributes": [{"id": 0, "name": "Size", "option": "M"}],
    }
    transport = Recording(
        [
            ("GET", PRODUCTS, ok([simple, draft], **{"x-wp-total": "3", "x-wp-totalpages": "2"})),
            ("GET", PRODUCTS, ok([variable], **{"x-wp-total": "3", "x-wp-totalpages": "2"})),
            ("GET", f"{PRODUCTS}/107/variations", ok([variation], **{"x-wp-total": "1", "x-wp-totalpages": "1"})),
        ]
    )
    entries = list(connector(transport).read_catalog())
    assert [(e.sku, e.name, dict(e.ids)) for e in entries] == [
        ("A", "Throw", {"woocommerce.product_id": "101"}),
        ("B", "Cardigan - M", {"woocommerce.product_id": "107", "woocommerce.variation_id": "109"}),
    ]
    assert [r["query"] for r in transport.sent] == [
        {"status": "publish", "per_page": "100", "page": "1"},
        {"status": "publish", "per_page": "100", "page": "2"},
        {"per_page": "100", "page": "1"},
    ]
    assert all(r["method"] == "GET" and r["json"] is None for r in transport.sent)


def test_a_429_is_waited_out_within_bounds() -> None:
    sleeps: list[float] = []
    transport = Recording(
        [
            ("GET", PRODUCTS, error(429, "too_many", **{"retry-after": "3"})),
            ("GET", PRODUCTS, error(429, "too_many", **{"retry-after": "9999"})),
            ("GET", PRODUCTS, ok([], **{"x-wp-totalpages": "0"})),
        ]
    )
    assert list(connector(transport, sleeps).read_catalog()) == []
    assert sleeps == [3.0, 30.0]


@pytest.mark.parametrize("status", [401, 500, 503])
def test_a_catalogue_that_cannot_be_read_is_unavailable_without_the_secret(status: int) -> None:
    transport = Recording([("GET", PRODUCTS, error(status, "woocommerce_rest_authentication_error"))])
    with pytest.raises(CatalogUnavailable) as failed:
        list(connector(transport).read_catalog())
    assert SECRET not in str(failed.value) and "ck_key" not in str(failed.value)


def test_an_unreadable_catalogue_page_is_unavailable() -> None:
    transport = Recording([("GET", PRODUCTS, HttpResponse(200, b"<html>maintenance</html>"))])
    with pytest.raises(CatalogUnavailable):
        list(connector(transport).read_catalog())


def test_place_hold_looks_up_checks_stock_then_creates_an_on_hold_order() -> None:
    transport = Recording(
        [
            ("GET", ORDERS, ok([], **{"x-wp-totalpages": "0"})),
            ("GET", f"{PRODUCTS}/107/variations/109", ok(VARIATION)),
            ("POST", ORDERS, ok(ORDER, 201)),
            ("GET", f"{PRODUCTS}/107/variations/109", ok(VARIATION | {"stock_quantity": 1})),
        ]
    )
    hold = connector(transport).place_hold(HOLD)
    assert (hold.ref, hold.checkout_url) == ("501", ORDER["payment_url"])
    lookup, _check, create, _recheck = transport.sent
    assert lookup["query"] == {
        "product": "107",
        "status": "on-hold,pending,processing,completed",
        "orderby": "date",
        "order": "desc",
        "per_page": "100",
        "page": "1",
    }
    assert create["headers"]["Content-Type"] == "application/json"
    body = create["json"]
    assert body["status"] == "on-hold" and body["set_paid"] is False
    assert body["line_items"] == [{"product_id": 107, "variation_id": 109, "quantity": 1}]
    assert body["meta_data"] == [{"key": "_bisn_reservation_id", "value": "res_1"}]


def test_place_hold_for_a_simple_product_sends_no_variation() -> None:
    simple = HoldRequest("res_2", "WW-THROW-OAT", {"woocommerce.product_id": "101"}, 2_000_000_000)
    product = VARIATION | {"id": 101}
    transport = Recording(
        [
            ("GET", ORDERS, ok([])),
            ("GET", f"{PRODUCTS}/101", ok(product)),
            ("POST", ORDERS, ok(ORDER | {"id": 502}, 201)),
            ("GET", f"{PRODUCTS}/101", ok(product)),
        ]
    )
    assert connector(transport).place_hold(simple).ref == "502"
    assert transport.sent[2]["json"]["line_items"] == [{"product_id": 101, "quantity": 1}]


def test_place_hold_returns_the_order_a_first_attempt_made() -> None:
    transport = Recording([("GET", ORDERS, ok([{"id": 499, "meta_data": []}, ORDER]))])
    assert connector(transport).place_hold(HOLD).ref == "501"
    assert len(transport.sent) == 1


def test_place_hold_refuses_when_no_unit_is_left() -> None:
    transport = Recording(
        [("GET", ORDERS, ok([])), ("GET", f"{PRODUCTS}/107/variations/109", ok(VARIATION | {"stock_quantity": 0}))]
    )
    with pytest.raises(StoreRefused):
        connector(transport).place_hold(HOLD)


def test_place_hold_gives_the_unit_back_when_a_sale_got_there_first() -> None:
    transport = Recording(
        [
            ("GET", ORDERS, ok([])),
            ("GET", f"{PRODUCTS}/107/variations/109", ok(VARIATION | {"stock_quantity": 1})),
            ("POST", ORDERS, ok(ORDER, 201)),
            ("GET", f"{PRODUCTS}/107/variations/109", ok(VARIATION | {"stock_quantity": -1})),
            ("PUT", f"{ORDERS}/501", ok(ORDER | {"status": "cancelled"})),
        ]
    )
    with pytest.raises(StoreRefused):
        connector(transport).place_hold(HOLD)
    assert transport.sent[-1]["json"] == {"status": "cancelled"}


@pytest.mark.parametrize(("status", "raised"), [(400, StoreRefused), (500, StoreUnavailable), (401, StoreUnavailable)])
def test_place_hold_maps_order_creation_errors(status: int, raised: type[Exception]) -> None:
    transport = Recording(
        [
            ("GET", ORDERS, ok([])),
            ("GET", f"{PRODUCTS}/107/variations/109", ok(VARIATION)),
            # A 401 is about the key, never the item (tests/unit/test_woocommerce_auth.py).
            ("POST", ORDERS, error(status, "woocommerce_rest_authentication_error" if status == 401 else "invalid")),
        ]
    )
    with pytest.raises(raised) as failed:
        connector(transport).place_hold(HOLD)
    assert SECRET not in str(failed.value)


def test_release_hold_cancels_the_order_by_its_ref() -> None:
    transport = Recording(
        [("GET", f"{ORDERS}/501", ok(ORDER)), ("PUT", f"{ORDERS}/501", ok(ORDER | {"status": "cancelled"}))]
    )
    connector(transport).release_hold("res_1", "501")
    assert transport.sent[1]["method"] == "PUT" and transport.sent[1]["json"] == {"status": "cancelled"}


def test_release_hold_without_a_ref_finds_the_order_by_its_stamp() -> None:
    transport = Recording([("GET", ORDERS, ok([ORDER])), ("PUT", f"{ORDERS}/501", ok(ORDER | {"status": "cancelled"}))])
    connector(transport).release_hold("res_1", None)
    assert transport.sent[0]["query"]["status"] == "on-hold,pending"
    assert "product" not in transport.sent[0]["query"]


@pytest.mark.parametrize("status", ["processing", "completed", "cancelled"])
def test_release_hold_leaves_a_paid_or_finished_order(status: str) -> None:
    transport = Recording([("GET", f"{ORDERS}/501", ok(ORDER | {"status": status}))])
    connector(transport).release_hold("res_1", "501")
    assert len(transport.sent) == 1


def test_release_hold_never_cancels_an_order_another_reservation_stamped() -> None:
    transport = Recording([("GET", f"{ORDERS}/501", ok(ORDER))])
    connector(transport).release_hold("res_other", "501")
    assert len(transport.sent) == 1


def test_release_hold_of_a_gone_order_is_done() -> None:
    transport = Recording([("GET", f"{ORDERS}/501", error(404, "woocommerce_rest_shop_order_invalid_id"))])
    connector(transport).release_hold("res_1", "501")


def test_release_hold_failing_is_unavailable() -> None:
    transport = Recording([("GET", f"{ORDERS}/501", ok(ORDER)), ("PUT", f"{ORDERS}/501", error(502, "bad_gateway"))])
    with pytest.raises(StoreUnavailable):
        connector(transport).release_hold("res_1", "501")
