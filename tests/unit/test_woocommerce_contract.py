"""The REST requests the WooCommerce connector sends match WooCommerce's documented shapes.

Each request is recorded by a transport that answers from a script; the answers are shaped like the documented
resources. References (WooCommerce REST API v3, https://woocommerce.github.io/woocommerce-rest-api-docs/):
  #authentication-over-https - HTTP Basic with consumer key and secret
  #pagination - per_page (at most 100), page, X-WP-Total and X-WP-TotalPages
  #list-all-products, #list-all-product-variations - the catalogue
  #list-all-orders (product, status, orderby, order) - finding a hold's draft order
  #update-an-order (status) - releasing one (a cancelled draft leaves ReserveStock's query, which counts
    checkout-draft and pending orders only: src/Checkout/Helpers/ReserveStock.php)
  #errors - {"code", "message", "data": {"status"}}
The plugin's own route (POST /wp-json/wc-bisn/v1/holds, integrations/woocommerce/bisn-holds.php) answers 409
`woocommerce_product_not_enough_stock` when ReserveStock::reserve_stock_for_order throws (its ReserveStockException
code), and WordPress answers 404 `rest_no_route` where the plugin is missing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from chalicelib.platforms.base import (
    CatalogUnavailable,
    HoldRequest,
    StoreCredentialsRefused,
    StoreRefused,
    StoreUnavailable,
)
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
    "status": "checkout-draft",
    "created_via": "bisn-claim",
    "meta_data": [{"id": 1, "key": "_bisn_reservation_id", "value": "res_1"}],
}
# The plugin's answer to POST /wp-json/wc-bisn/v1/holds (integrations/woocommerce/bisn-holds.php).
HOLDS = "/wp-json/wc-bisn/v1/holds"
PLACED = {"order_id": 501, "status": "checkout-draft", "reservation_id": "res_1", "reserved_until": 2_000_000_000}


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


def test_place_hold_asks_the_plugin_to_reserve_and_sends_the_shopper_to_a_signed_claim() -> None:
    transport = Recording([("POST", HOLDS, ok(PLACED, 201))])
    hold = connector(transport).place_hold(HOLD)
    (request,) = transport.sent
    assert request["json"] == {
        "reservation_id": "res_1",
        "product_id": 107,
        "variation_id": 109,
        "expires_at": 2_000_000_000,
    }
    assert request["headers"]["Authorization"].startswith("Basic ")  # the same key: a `wc-` namespace
    assert hold.ref == "501"
    claim = urlsplit(hold.checkout_url)
    assert f"{claim.scheme}://{claim.netloc}{claim.path}" == f"{STORE}/"
    query = {k: v[-1] for k, v in parse_qs(claim.query).items()}
    message = b"bisn-claim-v1|res_1|501|2000000000"
    assert query == {
        "bisn_claim": "res_1",
        "bisn_order": "501",
        "bisn_expires": "2000000000",
        "bisn_sig": hmac.new(b"w", message, hashlib.sha256).hexdigest(),
    }


def test_a_claim_is_signed_under_every_webhook_secret_during_a_rotation() -> None:
    transport = Recording([("POST", HOLDS, ok(PLACED))])
    woo = WooCommerceConnector(
        store_url=STORE,
        consumer_key=lambda: "ck_key",
        consumer_secret=lambda: SECRET,
        webhook_secrets=lambda: ("old", "new"),
        transport=transport,
    )
    signatures = parse_qs(urlsplit(woo.place_hold(HOLD).checkout_url).query)["bisn_sig"][0].split(",")
    message = b"bisn-claim-v1|res_1|501|2000000000"
    assert signatures == [hmac.new(k, message, hashlib.sha256).hexdigest() for k in (b"old", b"new")]


def test_place_hold_for_a_simple_product_sends_variation_zero() -> None:
    transport = Recording([("POST", HOLDS, ok(PLACED))])
    connector(transport).place_hold(HoldRequest("res_1", "A", {"woocommerce.product_id": "101"}, 2_000_000_000))
    assert transport.sent[0]["json"]["variation_id"] == 0


def test_place_hold_without_a_product_id_is_refused_without_a_call() -> None:
    transport = Recording([])
    with pytest.raises(StoreRefused):
        connector(transport).place_hold(HoldRequest("res_1", "A", {}, 2_000_000_000))


@pytest.mark.parametrize(
    ("status", "code", "raised"),
    [
        (409, "woocommerce_product_not_enough_stock", StoreRefused),  # ReserveStockException
        (404, "bisn_invalid_product", StoreRefused),
        (404, "rest_no_route", StoreUnavailable),  # the plugin is missing: every hold needs it
        (500, "internal_server_error", StoreUnavailable),
        (401, "woocommerce_rest_authentication_error", StoreCredentialsRefused),
        (403, "woocommerce_rest_cannot_create", StoreCredentialsRefused),
    ],
)
def test_place_hold_maps_the_plugins_answers(status: int, code: str, raised: type[Exception]) -> None:
    transport = Recording([("POST", HOLDS, error(status, code))])
    with pytest.raises(raised) as failed:
        connector(transport).place_hold(HOLD)
    assert SECRET not in str(failed.value)


def test_place_hold_needs_a_draft_order_in_the_answer() -> None:
    transport = Recording([("POST", HOLDS, ok({"status": "checkout-draft"}))])
    with pytest.raises(StoreUnavailable):
        connector(transport).place_hold(HOLD)


def test_release_hold_cancels_the_draft_by_its_ref() -> None:
    transport = Recording(
        [("GET", f"{ORDERS}/501", ok(ORDER)), ("PUT", f"{ORDERS}/501", ok(ORDER | {"status": "cancelled"}))]
    )
    connector(transport).release_hold("res_1", "501")
    assert transport.sent[1]["method"] == "PUT" and transport.sent[1]["json"] == {"status": "cancelled"}


def test_release_hold_without_a_ref_finds_the_draft_by_its_stamp() -> None:
    transport = Recording([("GET", ORDERS, ok([ORDER])), ("PUT", f"{ORDERS}/501", ok(ORDER | {"status": "cancelled"}))])
    connector(transport).release_hold("res_1", None)
    assert transport.sent[0]["query"]["status"] == "checkout-draft,on-hold,pending"
    assert "product" not in transport.sent[0]["query"]


@pytest.mark.parametrize("status", ["pending", "on-hold", "processing", "completed", "cancelled"])
def test_release_hold_never_touches_an_order_the_shopper_placed(status: str) -> None:
    # Past the draft the order is the shopper's (awaiting a bank transfer, say): our hold's end is not theirs.
    transport = Recording([("GET", f"{ORDERS}/501", ok(ORDER | {"status": status, "created_via": "store-api"}))])
    connector(transport).release_hold("res_1", "501")
    assert len(transport.sent) == 1


def test_release_hold_cancels_an_on_hold_order_an_earlier_version_held_with() -> None:
    legacy = ORDER | {"status": "on-hold", "created_via": "rest-api"}
    transport = Recording(
        [("GET", f"{ORDERS}/501", ok(legacy)), ("PUT", f"{ORDERS}/501", ok(legacy | {"status": "cancelled"}))]
    )
    connector(transport).release_hold("res_1", "501")
    assert len(transport.sent) == 2


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
