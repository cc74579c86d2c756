"""Shopify webhooks: the signature holds before anything is read, then each topic parses as documented.

Fixtures are tests/fixtures/shopify/*.json, shaped like the examples in Shopify's webhook reference
(https://shopify.dev/docs/api/webhooks/2025-10, one topic each; see the README there). Signature:
https://shopify.dev/docs/apps/build/webhooks/subscribe/https (base64 HMAC-SHA256 of the raw body).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import pytest

from chalicelib.errors import BadRequest, InvalidSignature
from chalicelib.platforms.base import CATALOG, IGNORED, INVENTORY, ORDERS
from chalicelib.platforms.http import HttpResponse
from chalicelib.platforms.shopify import MAX_WEBHOOK_BYTES, ShopifyConnector

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "shopify"
SHOP = "walnut-and-wool.myshopify.com"
SECRET = "app-secret-one"
NEXT_SECRET = "app-secret-two"


class NoCalls:
    def send(self, method: str, url: str, headers: Any, body: bytes | None = None) -> HttpResponse:
        raise AssertionError("reading a webhook makes no call")


def connector(secrets: tuple[str, ...] = (SECRET,), location_ids: tuple[str, ...] = ()) -> ShopifyConnector:
    return ShopifyConnector(
        shop_domain=SHOP,
        access_token=lambda: "shpat_unused",
        webhook_secrets=lambda: secrets,
        transport=NoCalls(),
        location_ids=location_ids,
    )


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def signed(body: bytes, topic: str, *, secret: str = SECRET, **overrides: str) -> dict[str, str]:
    digest = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
    headers = {
        "X-Shopify-Topic": topic,
        "X-Shopify-Hmac-Sha256": digest,
        "X-Shopify-Shop-Domain": SHOP,
        "X-Shopify-Webhook-Id": "b54557e4-8a5f-4b7d-9d0c-bd043a1f2e3c",
        "X-Shopify-Triggered-At": "2025-11-04T14:15:27.877041743Z",
        "X-Shopify-API-Version": "2025-10",
    }
    headers.update(overrides)
    return headers


# --- the signature ------------------------------------------------------------------------------------------------


def test_a_good_signature_reads_the_delivery() -> None:
    body = fixture("inventory_levels_update.json")
    delivery = connector().read_webhook(body, signed(body, "inventory_levels/update"))
    assert delivery.delivery_id == "b54557e4-8a5f-4b7d-9d0c-bd043a1f2e3c"
    assert delivery.topic == "inventory_levels/update"
    assert delivery.sent_at == pytest.approx(1762265727.877041)


def test_header_names_are_case_insensitive() -> None:
    body = fixture("inventory_levels_update.json")
    headers = {k.lower(): v for k, v in signed(body, "inventory_levels/update").items()}
    assert connector().read_webhook(body, headers).kind == INVENTORY


def test_either_secret_verifies_during_a_rotation() -> None:
    body = fixture("products_delete.json")
    rotating = connector((SECRET, NEXT_SECRET))
    assert rotating.read_webhook(body, signed(body, "products/delete", secret=NEXT_SECRET)).kind == CATALOG
    assert rotating.read_webhook(body, signed(body, "products/delete", secret=SECRET)).kind == CATALOG


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Shopify-Hmac-Sha256": ""},
        {"X-Shopify-Hmac-Sha256": "not base64 at all"},
        {"X-Shopify-Hmac-Sha256": base64.b64encode(b"x" * 32).decode()},
    ],
)
def test_a_wrong_or_empty_signature_is_refused(headers: dict[str, str]) -> None:
    body = fixture("inventory_levels_update.json")
    with pytest.raises(InvalidSignature):
        connector().read_webhook(body, signed(body, "inventory_levels/update", **headers))


def test_a_missing_signature_header_is_refused() -> None:
    body = fixture("inventory_levels_update.json")
    headers = signed(body, "inventory_levels/update")
    del headers["X-Shopify-Hmac-Sha256"]
    with pytest.raises(InvalidSignature):
        connector().read_webhook(body, headers)


def test_a_signature_by_another_secret_is_refused() -> None:
    body = fixture("inventory_levels_update.json")
    with pytest.raises(InvalidSignature):
        connector().read_webhook(body, signed(body, "inventory_levels/update", secret="someone-else"))


def test_a_changed_body_no_longer_verifies() -> None:
    body = fixture("inventory_levels_update.json")
    headers = signed(body, "inventory_levels/update")
    with pytest.raises(InvalidSignature):
        connector().read_webhook(body.replace(b'"available": 3', b'"available": 9'), headers)


def test_nothing_is_parsed_before_the_signature_holds() -> None:
    # Malformed JSON, a wrong shop and no webhook id: the signature is what is reported, so nothing was read.
    body = b"{not json"
    headers = signed(b"something else", "orders/create", **{"X-Shopify-Shop-Domain": "other.myshopify.com"})
    del headers["X-Shopify-Webhook-Id"]
    with pytest.raises(InvalidSignature):
        connector().read_webhook(body, headers)


def test_an_oversized_body_is_refused_before_any_hmac() -> None:
    body = b" " * (MAX_WEBHOOK_BYTES + 1)
    with pytest.raises(InvalidSignature):
        connector().read_webhook(body, signed(body, "products/update"))


def test_no_secrets_configured_verifies_nothing() -> None:
    body = fixture("products_delete.json")
    with pytest.raises(InvalidSignature):
        connector(secrets=()).read_webhook(body, signed(body, "products/delete"))


# --- the delivery headers -----------------------------------------------------------------------------------------


def test_another_shop_is_a_bad_request() -> None:
    body = fixture("products_delete.json")
    headers = signed(body, "products/delete", **{"X-Shopify-Shop-Domain": "someone-else.myshopify.com"})
    with pytest.raises(BadRequest) as caught:
        connector().read_webhook(body, headers)
    assert caught.value.code == "wrong_shop"


@pytest.mark.parametrize("webhook_id", ["", "x" * 201])
def test_the_webhook_id_is_required_and_bounded(webhook_id: str) -> None:
    body = fixture("products_delete.json")
    with pytest.raises(BadRequest) as caught:
        connector().read_webhook(body, signed(body, "products/delete", **{"X-Shopify-Webhook-Id": webhook_id}))
    assert caught.value.code == "invalid_field"


EVENT_ID = "3f2b9c1e-6d7a-4e58-9b0f-1c2d3e4f5a6b"


def test_a_redelivery_is_known_by_its_event_id_whatever_its_webhook_id() -> None:
    # The same X-Shopify-Event-Id on more than one delivery is one event delivered again (a retry, or a second
    # subscription to the topic), each delivery with its own X-Shopify-Webhook-Id:
    # https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates
    body = fixture("inventory_levels_update.json")
    first = connector().read_webhook(body, signed(body, "inventory_levels/update", **{"X-Shopify-Event-Id": EVENT_ID}))
    again_headers = {"X-Shopify-Event-Id": EVENT_ID, "X-Shopify-Webhook-Id": "0d9c8b7a-1111-4222-8333-944455556666"}
    again = connector().read_webhook(body, signed(body, "inventory_levels/update", **again_headers))
    assert first.delivery_id == again.delivery_id
    assert EVENT_ID in first.delivery_id and "b54557e4" not in first.delivery_id
    other_event = {"X-Shopify-Event-Id": "7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2918"}
    assert connector().read_webhook(body, signed(body, "inventory_levels/update", **other_event)).delivery_id != (
        first.delivery_id
    )


def test_without_an_event_id_the_webhook_id_tells_redeliveries_apart() -> None:
    body = fixture("inventory_levels_update.json")
    delivery = connector().read_webhook(body, signed(body, "inventory_levels/update"))
    assert delivery.delivery_id == "b54557e4-8a5f-4b7d-9d0c-bd043a1f2e3c"


@pytest.mark.parametrize(
    ("name", "value"), [("X-Shopify-Event-Id", "e" * 101), ("X-Shopify-Topic", "inventory_levels/update" * 3)]
)
def test_an_oversized_event_id_or_topic_is_a_bad_request(name: str, value: str) -> None:
    body = fixture("inventory_levels_update.json")
    with pytest.raises(BadRequest) as caught:
        connector().read_webhook(body, signed(body, "inventory_levels/update", **{name: value}))
    assert caught.value.code == "invalid_field"


def test_without_triggered_at_the_time_of_receipt_stands_in() -> None:
    body = fixture("products_delete.json")
    headers = signed(body, "products/delete")
    del headers["X-Shopify-Triggered-At"]
    before = time.time()
    assert before <= connector().read_webhook(body, headers).sent_at <= time.time()


# --- topics -------------------------------------------------------------------------------------------------------


def test_inventory_levels_update_is_one_location_level() -> None:
    body = fixture("inventory_levels_update.json")
    delivery = connector().read_webhook(body, signed(body, "inventory_levels/update"))
    assert delivery.kind == INVENTORY
    (level,) = delivery.levels
    assert level.available == 3
    assert level.store_item_id == "shopify.inventory_item_id:4600000100"
    assert level.location_id == "70010001"
    assert level.sku is None
    assert level.occurred_at == pytest.approx(1762265727.0)  # 2025-11-04T09:15:27-05:00


def test_a_location_not_configured_is_ignored() -> None:
    body = fixture("inventory_levels_update.json")
    delivery = connector(location_ids=("70010002",)).read_webhook(body, signed(body, "inventory_levels/update"))
    assert (delivery.kind, delivery.reason) == (IGNORED, "other_location")
    counted = connector(location_ids=("70010001", "70010002"))
    assert counted.read_webhook(body, signed(body, "inventory_levels/update")).kind == INVENTORY


def _with(name: str, **changes: Any) -> bytes:
    data = json.loads(fixture(name))
    data.update(changes)
    return json.dumps(data).encode()


def test_an_oversold_location_counts_as_none_available() -> None:
    body = _with("inventory_levels_update.json", available=-2)
    (level,) = connector().read_webhook(body, signed(body, "inventory_levels/update")).levels
    assert level.available == 0


def test_an_untracked_item_is_ignored() -> None:
    body = _with("inventory_levels_update.json", available=None)
    delivery = connector().read_webhook(body, signed(body, "inventory_levels/update"))
    assert (delivery.kind, delivery.reason) == (IGNORED, "untracked")


@pytest.mark.parametrize("topic", ["orders/create", "orders/paid"])
def test_an_order_names_its_reservations(topic: str) -> None:
    body = fixture("orders_create.json")
    delivery = connector().read_webhook(body, signed(body, topic))
    assert delivery.kind == ORDERS
    (order,) = delivery.orders
    assert order.order_id == "5550000001"
    assert order.reservation_ids == ("3f0c2a9e8b7d4c1f9a6e5d4c3b2a1f0e",)
    assert order.paid is True


@pytest.mark.parametrize(
    ("status", "paid"),
    [
        ("paid", True),
        ("partially_paid", True),
        ("authorized", True),
        ("pending", False),
        ("voided", False),
        ("expired", False),
        (None, False),
    ],
)
def test_paid_follows_the_financial_status(status: str | None, paid: bool) -> None:
    body = _with("orders_create.json", financial_status=status)
    (order,) = connector().read_webhook(body, signed(body, "orders/create")).orders
    assert order.paid is paid


def test_an_order_without_our_attribute_has_no_reservations() -> None:
    body = _with("orders_create.json", note_attributes=[])
    (order,) = connector().read_webhook(body, signed(body, "orders/create")).orders
    assert order.reservation_ids == ()


@pytest.mark.parametrize("topic", ["products/update", "products/create"])
def test_a_product_lists_its_variants_with_a_sku(topic: str) -> None:
    body = fixture("products_update.json")
    delivery = connector().read_webhook(body, signed(body, topic))
    assert delivery.kind == CATALOG
    (entry,) = delivery.products  # the second variant has no SKU
    assert entry.sku == "WW-CARDI-RUST"
    assert entry.name == "Cable-knit cardigan - Rust / M"
    assert entry.product_url == f"https://{SHOP}/products/cable-knit-cardigan?variant=4400000600"
    assert entry.image_url == "https://cdn.shopify.com/s/files/1/demo/cable-knit-cardigan-rust.jpg"
    assert entry.price == "145.00"
    assert dict(entry.ids) == {
        "shopify.product_id": "8800000006",
        "shopify.variant_id": "4400000600",
        "shopify.inventory_item_id": "4600000600",
    }


def test_a_default_title_variant_is_named_by_its_product() -> None:
    data = json.loads(fixture("products_update.json"))
    data["variants"][0]["title"] = "Default Title"
    data["variants"][0]["image_id"] = None
    body = json.dumps(data).encode()
    (entry,) = connector().read_webhook(body, signed(body, "products/update")).products
    assert entry.name == "Cable-knit cardigan"
    assert entry.image_url == "https://cdn.shopify.com/s/files/1/demo/cable-knit-cardigan.jpg"


@pytest.mark.parametrize("status", ["archived", "draft"])
def test_a_product_taken_off_sale_is_removed(status: str) -> None:
    body = _with("products_update.json", status=status)
    delivery = connector().read_webhook(body, signed(body, "products/update"))
    assert (delivery.kind, delivery.removed_ids, delivery.products) == (CATALOG, ("shopify.product_id:8800000006",), ())


def test_an_unlisted_product_stays_for_sale() -> None:
    # UNLISTED (2025-10) is sold through its own URL: https://shopify.dev/changelog/new-unlisted-product-status
    body = _with("products_update.json", status="unlisted")
    delivery = connector().read_webhook(body, signed(body, "products/update"))
    assert delivery.kind == CATALOG and delivery.removed_ids == ()
    assert [e.sku for e in delivery.products] == ["WW-CARDI-RUST"]


def test_products_delete_removes_the_product() -> None:
    body = fixture("products_delete.json")
    delivery = connector().read_webhook(body, signed(body, "products/delete"))
    assert delivery.kind == CATALOG
    assert delivery.removed_ids == ("shopify.product_id:8800000001",)


def test_an_unknown_topic_is_ignored() -> None:
    body = b'{"id": 1}'
    delivery = connector().read_webhook(body, signed(body, "customers/update"))
    assert (delivery.kind, delivery.reason) == (IGNORED, "unknown_topic")


# --- malformed bodies ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "topic", "code"),
    [
        (b"{not json", "orders/create", "invalid_json"),
        (b"\xff\xfe", "orders/create", "invalid_json"),
        (b"[1, 2]", "orders/create", "invalid_body"),
        (b"[" * 100_000 + b"]" * 100_000, "orders/create", "invalid_body"),
        (b'{"id": "12"}', "orders/create", "invalid_field"),
        (b'{"id": 12, "note_attributes": {"a": 1}}', "orders/create", "invalid_field"),
        (b'{"id": true}', "products/delete", "invalid_field"),
        (
            b'{"id": 5, "title": "T", "updated_at": "2025-11-04T09:15:02-05:00", "variants": "none"}',
            "products/update",
            "invalid_field",
        ),
        (b'{"inventory_item_id": 1, "location_id": 2, "available": "3"}', "inventory_levels/update", "invalid_field"),
        (
            b'{"inventory_item_id": 1, "location_id": 2, "available": 3, "updated_at": "yesterday"}',
            "inventory_levels/update",
            "invalid_field",
        ),
        (b'{"location_id": 2, "available": 3}', "inventory_levels/update", "invalid_field"),
    ],
)
def test_malformed_bodies_are_bad_requests(body: bytes, topic: str, code: str) -> None:
    with pytest.raises(BadRequest) as caught:
        connector().read_webhook(body, signed(body, topic))
    assert caught.value.code == code
