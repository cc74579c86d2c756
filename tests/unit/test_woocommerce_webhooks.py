"""WooCommerce webhooks: the signature holds before anything is read, then each topic is read from its payload.

The fixtures in tests/fixtures/woocommerce/ are shaped like the REST v3 resources WooCommerce sends as webhook
bodies (WC_Webhook::get_wp_api_payload posts GET /wc/v3/<resource>s/<id>):
  product_simple.json, product_variation.json, product_variable.json - the product resource,
    https://woocommerce.github.io/woocommerce-rest-api-docs/#product-properties
  order_paid.json - the order resource, https://woocommerce.github.io/woocommerce-rest-api-docs/#order-properties
  product_deleted.json - a deletion carries only {"id": N} (WC_Webhook::build_payload)
Headers and signature as WC_Webhook::deliver and ::generate_signature send them (includes/class-wc-webhook.php in
woocommerce/woocommerce), documented at https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chalicelib.errors import BadRequest, InvalidSignature
from chalicelib.platforms import base
from chalicelib.platforms.woocommerce import MAX_WEBHOOK_BYTES, UNTRACKED_IN_STOCK, WooCommerceConnector

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "woocommerce"
SECRET = "s3cret-&-more"
STORE = "https://shop.example"


class NoTransport:
    def send(self, method: str, url: str, headers: Any, body: bytes | None = None) -> Any:
        raise AssertionError("reading a webhook makes no request")


def connector(secrets: tuple[str, ...] = (SECRET,)) -> WooCommerceConnector:
    return WooCommerceConnector(
        store_url=STORE,
        consumer_key=lambda: "ck_x",
        consumer_secret=lambda: "cs_x",
        webhook_secrets=lambda: secrets,
        transport=NoTransport(),
    )


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


def signed(topic: str, payload: Any, secret: str = SECRET, source: str = f"{STORE}/") -> tuple[bytes, dict[str, str]]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload, separators=(",", ":")).encode()
    signature = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
    resource, _, event = topic.partition(".")
    return body, {
        "Content-Type": "application/json",
        "X-WC-Webhook-Source": source,
        "X-WC-Webhook-Topic": topic,
        "X-WC-Webhook-Resource": resource,
        "X-WC-Webhook-Event": event,
        "X-WC-Webhook-Signature": signature,
        "X-WC-Webhook-ID": "7",
        "X-WC-Webhook-Delivery-ID": "36e520ebabc2fa725092ff4a47acedf2",
    }


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


# ---------------------------------------------------------------- signature


def test_a_good_signature_is_read() -> None:
    delivery = connector().read_webhook(*signed("product.updated", fixture("product_simple.json")))
    assert delivery.kind == base.INVENTORY


def test_a_wrong_signature_is_refused() -> None:
    body, headers = signed("product.updated", fixture("product_simple.json"), secret="another")
    with pytest.raises(InvalidSignature):
        connector().read_webhook(body, headers)


def test_a_changed_body_is_refused() -> None:
    body, headers = signed("product.updated", fixture("product_simple.json"))
    with pytest.raises(InvalidSignature):
        connector().read_webhook(body.replace(b'"stock_quantity":4', b'"stock_quantity":9'), headers)


def test_during_a_rotation_either_secret_holds() -> None:
    both = connector(("new-secret", SECRET))
    assert both.read_webhook(*signed("product.updated", fixture("product_simple.json"))).kind == base.INVENTORY
    assert both.read_webhook(*signed("product.deleted", {"id": 5}, secret="new-secret")).kind == base.CATALOG


def test_a_missing_signature_is_refused() -> None:
    body, headers = signed("product.updated", fixture("product_simple.json"))
    del headers["X-WC-Webhook-Signature"]
    with pytest.raises(InvalidSignature):
        connector().read_webhook(body, headers)


def test_header_names_are_case_insensitive() -> None:
    body, headers = signed("product.deleted", fixture("product_deleted.json"))
    lowered = {k.lower(): v for k, v in headers.items()}
    upper = {k.upper(): v for k, v in headers.items()}
    assert connector().read_webhook(body, lowered).kind == base.CATALOG
    assert connector().read_webhook(body, upper).kind == base.CATALOG


def test_nothing_is_parsed_before_the_signature_holds() -> None:
    # Not JSON at all, and too big: both are signature failures, never a 400 that would show it was read.
    with pytest.raises(InvalidSignature):
        connector().read_webhook(b"{not json", {"X-WC-Webhook-Signature": "AAAA", "X-WC-Webhook-Topic": "x"})
    big, headers = signed("product.updated", b"{" + b" " * MAX_WEBHOOK_BYTES + b"}")
    with pytest.raises(InvalidSignature):
        connector().read_webhook(big, headers)
    with pytest.raises(InvalidSignature):
        connector().read_webhook(None, {})


def test_a_delivery_from_another_store_is_refused() -> None:
    body, headers = signed("product.updated", fixture("product_simple.json"), source="https://other.example/")
    with pytest.raises(BadRequest) as refused:
        connector().read_webhook(body, headers)
    assert refused.value.code == "wrong_shop"


def test_the_source_is_compared_as_a_url() -> None:
    # home_url( '/' ) ends in a slash and may differ in case or carry the default port.
    body, headers = signed("product.deleted", {"id": 1}, source="HTTPS://Shop.Example:443/")
    assert connector().read_webhook(body, headers).kind == base.CATALOG


def test_the_save_time_ping_is_ignored() -> None:
    # WC_Webhook::deliver_ping: a form body `webhook_id=N`, no signature and no X-WC headers.
    delivery = connector().read_webhook(b"webhook_id=7", {"Content-Type": "application/x-www-form-urlencoded"})
    assert (delivery.kind, delivery.reason) == (base.IGNORED, "ping")


def test_only_the_exact_ping_shape_passes_unsigned() -> None:
    with pytest.raises(InvalidSignature):
        connector().read_webhook(b"webhook_id=7&topic=order.created", {})


# ---------------------------------------------------------------- topics


def test_a_simple_product_reports_its_level_and_catalogue_entry() -> None:
    delivery = connector().read_webhook(*signed("product.updated", fixture("product_simple.json")))
    assert delivery.kind == base.INVENTORY
    assert delivery.levels == (
        base.LevelReport(available=4, occurred_at=at("2026-12-01T20:11:34"), sku="WW-THROW-OAT"),
    )
    (entry,) = delivery.products
    assert entry.sku == "WW-THROW-OAT"
    assert entry.name == "Oatmeal merino throw"
    assert entry.price == "89.00"
    assert entry.product_url == "https://shop.example/product/oatmeal-merino-throw/"
    assert entry.image_url == "https://shop.example/wp-content/uploads/2026/11/throw-oat.jpg"
    assert dict(entry.ids) == {"woocommerce.product_id": "101"}


def test_product_created_is_read_like_updated() -> None:
    delivery = connector().read_webhook(*signed("product.created", fixture("product_simple.json")))
    assert delivery.kind == base.INVENTORY and delivery.levels[0].available == 4


def test_a_variation_reports_under_its_parent_and_its_own_id() -> None:
    delivery = connector().read_webhook(*signed("product.updated", fixture("product_variation.json")))
    assert delivery.levels == (
        base.LevelReport(available=2, occurred_at=at("2026-12-01T21:02:10"), sku="WW-CARDI-RUST"),
    )
    assert dict(delivery.products[0].ids) == {"woocommerce.product_id": "107", "woocommerce.variation_id": "109"}


def test_a_variable_parent_is_ignored() -> None:
    delivery = connector().read_webhook(*signed("product.updated", fixture("product_variable.json")))
    assert (delivery.kind, delivery.reason) == (base.IGNORED, "variable_parent")


def test_negative_stock_is_reported_as_none_available() -> None:
    product = fixture("product_simple.json") | {"stock_quantity": -2, "stock_status": "outofstock"}
    assert connector().read_webhook(*signed("product.updated", product)).levels[0].available == 0


def test_a_product_without_managed_stock_reports_its_stock_status() -> None:
    untracked = fixture("product_simple.json") | {"manage_stock": False, "stock_quantity": None}
    instock = connector().read_webhook(*signed("product.updated", untracked | {"stock_status": "instock"}))
    out = connector().read_webhook(*signed("product.updated", untracked | {"stock_status": "outofstock"}))
    assert instock.levels[0].available == UNTRACKED_IN_STOCK
    assert out.levels[0].available == 0


def test_a_product_without_a_sku_is_ignored() -> None:
    delivery = connector().read_webhook(*signed("product.updated", fixture("product_simple.json") | {"sku": ""}))
    assert (delivery.kind, delivery.reason) == (base.IGNORED, "no_sku")


def test_a_deleted_product_is_removed_from_the_catalogue() -> None:
    delivery = connector().read_webhook(*signed("product.deleted", fixture("product_deleted.json")))
    assert delivery.kind == base.CATALOG
    assert delivery.removed_ids == ("woocommerce.product_id:101",)


def test_a_paid_order_reports_its_reservation() -> None:
    delivery = connector().read_webhook(*signed("order.updated", fixture("order_paid.json")))
    assert delivery.kind == base.ORDERS
    assert delivery.orders == (base.OrderReport(order_id="501", reservation_ids=("res_7f3a9c",), paid=True),)


def test_an_order_on_hold_is_not_paid() -> None:
    held = fixture("order_paid.json") | {"status": "on-hold", "date_paid": None, "date_paid_gmt": None}
    delivery = connector().read_webhook(*signed("order.created", held))
    assert delivery.orders[0].paid is False
    assert delivery.orders[0].reservation_ids == ("res_7f3a9c",)


def test_an_order_put_back_on_hold_keeps_no_payment() -> None:
    # date_paid stays set when an order goes back to on-hold; the status decides.
    back = fixture("order_paid.json") | {"status": "on-hold"}
    assert connector().read_webhook(*signed("order.updated", back)).orders[0].paid is False


def test_an_order_from_the_shop_has_no_reservation() -> None:
    plain = fixture("order_paid.json") | {"meta_data": []}
    assert connector().read_webhook(*signed("order.created", plain)).orders[0].reservation_ids == ()


def test_an_unknown_topic_is_ignored() -> None:
    delivery = connector().read_webhook(*signed("coupon.created", {"id": 3}))
    assert (delivery.kind, delivery.reason) == (base.IGNORED, "unknown_topic")


@pytest.mark.parametrize(
    ("topic", "body", "code"),
    [
        ("product.updated", b"{not json", "invalid_json"),
        ("product.updated", b"[1, 2]", "invalid_body"),
        ("product.updated", b"\xff\xfe", "invalid_body"),
        ("product.deleted", b'{"id": "101"}', "invalid_field"),
        (
            "product.updated",
            json.dumps(
                {
                    "id": 1,
                    "sku": "A",
                    "manage_stock": True,
                    "stock_quantity": "x",
                    "date_modified_gmt": "2025-11-04T14:15:27",
                }
            ).encode(),
            "invalid_field",
        ),
        ("order.updated", b'{"id": 1}', "invalid_field"),
        ("order.updated", b'{"id": 1, "status": "processing", "meta_data": "x"}', "invalid_field"),
    ],
)
def test_malformed_bodies_are_bad_requests(topic: str, body: bytes, code: str) -> None:
    with pytest.raises(BadRequest) as refused:
        connector().read_webhook(*signed(topic, body))
    assert refused.value.code == code


# ---------------------------------------------------------------- de-duplication


def test_the_same_change_sent_twice_has_one_delivery_id() -> None:
    # WooCommerce makes a new X-WC-Webhook-Delivery-ID for every send; ours comes from what does not change.
    body, first = signed("product.updated", fixture("product_simple.json"))
    second = first | {"X-WC-Webhook-Delivery-ID": "9d1b0a2c5e7f4c3b8a6d2e1f0c9b8a7d"}
    assert connector().read_webhook(body, first).delivery_id == connector().read_webhook(body, second).delivery_id


def test_two_changes_in_one_second_have_different_delivery_ids() -> None:
    product = fixture("product_simple.json")
    one = connector().read_webhook(*signed("product.updated", product))
    two = connector().read_webhook(*signed("product.updated", product | {"stock_quantity": 3}))
    assert one.delivery_id != two.delivery_id
    assert one.sent_at == two.sent_at == at("2026-12-01T20:11:34")
