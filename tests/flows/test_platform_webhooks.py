"""The edges of POST /webhooks/shopify and /webhooks/woocommerce, through the HTTP API on each platform.

A delivery the platform must correct (a bad or missing signature, a malformed body, another shop's) is a 4xx
JSON error and writes nothing; one it could never correct (an unknown topic or item, an order that did not come
from a hold, an unknown or malformed reservation id) is 200 `ignored`, so the platform neither retries it for
ever nor drops the subscription. Never a 5xx. Redeliveries count once; product changes and deletions reach the
catalogue; Shopify's per-location levels are summed, each location ordered by its own time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.tables.reservations import OfferState
from devstack.clocks import FixedClock
from tests.notices import drain
from tests.platforms import THROW, Shop, join, platform_shop
from tests.support import tap_link

SECRETS = {"shopify": "SHOPIFY_WEBHOOK_SECRET", "woocommerce": "WOOCOMMERCE_WEBHOOK_SECRET"}
SIGNATURE = {"shopify": "X-Shopify-Hmac-Sha256", "woocommerce": "X-WC-Webhook-Signature"}
WELL_FORMED_UNKNOWN_RESERVATION = "r_0000000000000000000000"


@pytest.fixture(params=["shopify", "woocommerce"])
def shop(request: pytest.FixtureRequest, session: Any, clock: FixedClock) -> Iterator[Shop]:
    with platform_shop(str(request.param), session, clock) as built:
        yield built


def iso_gmt(at: float) -> str:
    """A body's own time as WooCommerce writes `date_modified_gmt` (Shopify's `updated_at` adds its offset)."""
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def answer(response: Any) -> dict[str, Any]:
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    body = json.loads(response.body)
    assert isinstance(body, dict)
    return body


def refused(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.body
    body = answer(response)
    assert set(body) == {"error", "message"} and body["error"] == code, body


def ignored(response: Any, reason: str | None = None) -> dict[str, Any]:
    assert response.status_code == 200, response.body
    body = answer(response)
    assert body["status"] == "ignored", body
    if reason is not None:
        assert body.get("reason") == reason, body
    return body


def resigned(shop: Shop, request: tuple[bytes, dict[str, str]], body: bytes) -> tuple[bytes, dict[str, str]]:
    """The same delivery with another body, signed as the platform signs it."""
    _, headers = request
    secret = shop.store.webhook_secret.encode()
    digest = base64.b64encode(hmac.new(secret, body, hashlib.sha256).digest()).decode()
    return body, {**headers, SIGNATURE[shop.platform]: digest}


def restock_request(shop: Shop, units: int = 3) -> tuple[bytes, dict[str, str]]:
    if shop.platform == "shopify":
        return shop.store.set_available(THROW, units)
    return shop.store.set_stock(THROW, units)


def order_request(shop: Shop, reservation_id: str | None, *, paid: bool = True) -> tuple[bytes, dict[str, str]]:
    """An order delivery stamped (or not) with a reservation id."""
    if shop.platform == "shopify":
        attributes = [{"name": "gift_note", "value": "none"}]
        if reservation_id is not None:
            attributes.append({"name": "bisn_reservation_id", "value": reservation_id})
        payload: dict[str, Any] = {
            "id": 5550009001,
            "financial_status": "paid" if paid else "pending",
            "note_attributes": attributes,
        }
        return shop.store.webhook_request("orders/create", payload)
    meta = [{"id": 1, "key": "_billing_note", "value": "none"}]
    if reservation_id is not None:
        meta.append({"id": 2, "key": "_bisn_reservation_id", "value": reservation_id})
    payload = {
        "id": 901,
        "status": "processing" if paid else "on-hold",
        "date_modified_gmt": iso_gmt(shop.clock.now()),
        "meta_data": meta,
    }
    return shop.store.webhook_request("order.updated", payload)


def product_id(shop: Shop) -> int:
    if shop.platform == "shopify":
        return int(shop.store.variant(THROW).product_id)
    return int(shop.store.by_sku(THROW).id)


# --- refused: a 4xx, and nothing written


@pytest.mark.parametrize("signature", ["wrong", "missing", "other secret"])
def test_a_bad_or_missing_signature_is_401_and_writes_nothing(shop: Shop, signature: str) -> None:
    join(shop, THROW, "ada@example.com")
    before = shop.snapshot()
    body, headers = restock_request(shop)
    name = SIGNATURE[shop.platform]
    if signature == "missing":
        headers = {k: v for k, v in headers.items() if k != name}
    elif signature == "wrong":
        headers = {**headers, name: base64.b64encode(b"\x00" * 32).decode()}
    else:
        digest = hmac.new(b"not-the-secret", body, hashlib.sha256).digest()
        headers = {**headers, name: base64.b64encode(digest).decode()}
    refused(shop.webhook((body, headers)), 401, "invalid_signature")
    assert shop.snapshot() == before  # no restock, no level, no audit fact, no webhook memory


def test_a_delivery_for_another_shop_is_400_wrong_shop_and_writes_nothing(shop: Shop) -> None:
    before = shop.snapshot()
    body, headers = restock_request(shop)
    if shop.platform == "shopify":
        headers = {**headers, "X-Shopify-Shop-Domain": "someone-else.myshopify.com"}
    else:
        headers = {**headers, "X-WC-Webhook-Source": "https://someone-else.example/"}
    refused(shop.webhook((body, headers)), 400, "wrong_shop")
    assert shop.snapshot() == before


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", b'{"id": "twelve"}', b"{", "caf\u00e9".encode("latin-1")],
    ids=["text", "array", "bad-id", "truncated", "not-utf8"],
)
def test_a_malformed_body_with_a_valid_signature_is_400_and_writes_nothing(shop: Shop, body: bytes) -> None:
    before = shop.snapshot()
    response = shop.webhook(resigned(shop, restock_request(shop), body))
    assert response.status_code == 400, response.body
    assert set(answer(response)) == {"error", "message"}
    assert shop.snapshot() == before


@pytest.mark.parametrize(
    "payload",
    [
        {"inventory_item_id": 1, "location_id": 70010001, "available": "3"},
        {"inventory_item_id": 1, "location_id": 70010001, "available": 3, "updated_at": "yesterday"},
        {"inventory_item_id": -4, "location_id": 70010001, "available": 3},
    ],
    ids=["text-available", "bad-time", "negative-item"],
)
def test_a_shopify_level_with_a_malformed_field_is_400(session: Any, clock: FixedClock, payload: Any) -> None:
    with platform_shop("shopify", session, clock) as shop:
        before = shop.snapshot()
        response = shop.webhook(shop.store.webhook_request("inventory_levels/update", payload))
        refused(response, 400, "invalid_field")
        assert shop.snapshot() == before


@pytest.mark.parametrize("platform", ["shopify", "woocommerce"])
def test_a_stage_without_the_dialects_secret_answers_404_not_enabled(
    session: Any, clock: FixedClock, platform: str
) -> None:
    # The stage sells through the other platform, and this one's webhook secret is not set.
    other = "woocommerce" if platform == "shopify" else "shopify"
    with platform_shop(other, session, clock, env={SECRETS[platform]: None}) as stage:
        assert not stage.services.store_webhooks.accepts(platform)
        store = platform_store(platform, clock)
        before = stage.snapshot()
        request = store.set_available(THROW, 3) if platform == "shopify" else store.set_stock(THROW, 3)
        body, headers = request
        response = stage.client.http.post(f"/webhooks/{platform}", headers=headers, body=body)
        refused(response, 404, "not_enabled")
        assert stage.snapshot() == before


def platform_store(platform: str, clock: FixedClock) -> Any:
    from tests.platforms import fake_store

    return fake_store(platform, clock)


# --- acknowledged and ignored: 200, so the platform does not retry


def test_an_unknown_topic_is_200_ignored(shop: Shop) -> None:
    before = shop.snapshot()
    topic = "customers/create" if shop.platform == "shopify" else "coupon.created"
    ignored(shop.webhook(shop.store.webhook_request(topic, {"id": 42})), "unknown_topic")
    assert shop.snapshot() == before


def test_a_shopify_item_no_catalogued_sku_claims_is_200_ignored_unknown_item(session: Any, clock: FixedClock) -> None:
    with platform_shop("shopify", session, clock) as shop:
        before = shop.snapshot()
        payload = {
            "inventory_item_id": 4699999999,
            "location_id": 70010001,
            "available": 5,
            "updated_at": iso_gmt(clock.now()) + "+00:00",
        }
        body = ignored(shop.webhook(shop.store.webhook_request("inventory_levels/update", payload)))
        assert body["results"] == [{"status": "ignored", "reason": "unknown_item"}]
        after = shop.snapshot()
        # Only an audit fact says it happened: no level, no restock, no webhook memory.
        assert {k: v for k, v in after.items() if k != "audit"} == {k: v for k, v in before.items() if k != "audit"}
        facts = [row for row in after["audit"] if row not in before["audit"]]
        assert [row.get("kind") for row in facts] == ["unknown_store_item"]


def test_a_woocommerce_product_without_a_sku_is_200_ignored(session: Any, clock: FixedClock) -> None:
    with platform_shop("woocommerce", session, clock) as shop:
        before = shop.snapshot()
        payload = {**shop.store.product_json(shop.store.by_sku(THROW)), "sku": ""}
        ignored(shop.webhook(shop.store.webhook_request("product.updated", payload)), None)
        assert shop.snapshot() == before


def test_woocommerces_ping_is_200_ignored(session: Any, clock: FixedClock) -> None:
    with platform_shop("woocommerce", session, clock) as shop:
        before = shop.snapshot()
        ignored(shop.webhook(shop.store.ping_request()), "ping")
        assert shop.snapshot() == before


def test_the_same_delivery_twice_is_one_restock(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    request = restock_request(shop, 2)
    first = shop.webhook(request)
    assert first.status_code == 202 and answer(first)["status"] == "restock", first.body
    again = shop.webhook(request)
    assert again.status_code == 200, again.body
    assert answer(again)["results"] == [{"status": "no_restock", "reason": "duplicate"}]
    assert len(shop.snapshot()["restocks"]) == 1
    drain(shop.services)
    assert len(shop.offers(THROW)) == 1


def results_of(response: Any) -> list[dict[str, Any]]:
    body = ignored(response)
    results = body["results"]
    assert isinstance(results, list)
    return results


def test_an_order_with_no_reservation_attribute_is_ignored_not_from_a_hold(shop: Shop) -> None:
    before = shop.snapshot()
    [result] = results_of(shop.webhook(order_request(shop, None)))
    assert (result["status"], result["reason"]) == ("ignored", "not_from_a_hold")
    after = shop.snapshot()
    if shop.platform == "shopify":
        # Only that it was paid is remembered, for a hold's draft order completed into it arriving later
        # (tests/flows/test_shopify_draft_link.py).
        added = [item for item in after["throttle"] if item not in before["throttle"]]
        assert [item["key"] for item in added] == ["storeorder#shopify#paid#5550009001"]
        after["throttle"] = before["throttle"]
    assert after == before


def held_offer(shop: Shop) -> Any:
    join(shop, THROW, "ada@example.com")
    shop.restock(THROW, 1)
    drain(shop.services)
    [offer] = shop.offers(THROW)
    tap = tap_link(shop.client, shop.services.tokens.reserve(offer.token_id))
    assert tap.status_code == 303, tap.body
    [held] = shop.offers(THROW)
    assert held.state == OfferState.HELD
    return held


def test_an_unpaid_order_from_a_hold_is_ignored_not_paid_and_the_hold_stands(shop: Shop) -> None:
    held = held_offer(shop)
    before = shop.snapshot()
    [result] = results_of(shop.webhook(order_request(shop, held.token_id, paid=False)))
    assert (result["status"], result["reason"]) == ("ignored", "not_paid")
    assert shop.snapshot() == before
    assert shop.offers(THROW)[0].state == OfferState.HELD


@pytest.mark.parametrize(
    ("reservation_id", "reason"),
    [
        (WELL_FORMED_UNKNOWN_RESERVATION, "unknown_reservation"),
        ("not a reservation!", "invalid_field"),
        ("x" * 65, "invalid_field"),
    ],
    ids=["unknown", "malformed", "too-long"],
)
def test_an_order_naming_an_unknown_or_malformed_reservation_is_200_ignored(
    shop: Shop, reservation_id: str, reason: str
) -> None:
    held = held_offer(shop)
    before = shop.snapshot()
    [result] = results_of(shop.webhook(order_request(shop, reservation_id)))
    assert (result["status"], result["reason"]) == ("ignored", reason)
    assert shop.snapshot() == before
    assert shop.offers(THROW)[0].token_id == held.token_id
    assert shop.offers(THROW)[0].state == OfferState.HELD


# --- the catalogue follows the store's product webhooks


def test_a_product_update_updates_the_catalogue_entry(shop: Shop) -> None:
    if shop.platform == "shopify":
        variant = shop.store.variant(THROW)
        product = shop.store.products[variant.product_id]
        product.title = "Oatmeal merino throw, large"
        product.image_url = "https://cdn.shopify.com/s/files/1/demo/throw-large.jpg"
        variant.price = "139.50"
        response = shop.webhook(shop.store.product_webhook(THROW))
        expected_image = product.image_url
        expected_ids = shop.store.ids(THROW)
        expected_url = f"https://{shop.store.shop_domain}/products/{product.handle}?variant={variant.id}"
    else:
        product = shop.store.by_sku(THROW)
        product.name = "Oatmeal merino throw, large"
        product.price = "139.50"
        product.modified = shop.clock.now() + 1
        payload = shop.store.product_json(product)
        response = shop.webhook(shop.store.webhook_request("product.updated", payload))
        expected_image = payload["images"][0]["src"]
        expected_ids = {"woocommerce.product_id": str(product.id)}
        expected_url = payload["permalink"]
    assert response.status_code in (200, 202), response.body
    entry = shop.services.tables.catalog.get(THROW, consistent=True)
    assert entry is not None
    assert (entry.name, entry.price, entry.image_url) == ("Oatmeal merino throw, large", "139.50", expected_image)
    assert entry.store_ids == expected_ids
    assert entry.product_url == expected_url
    assert entry.store_product == f"{shop.platform}.product_id:{expected_ids[f'{shop.platform}.product_id']}"
    assert not entry.discontinued


def test_a_product_deletion_discontinues_its_skus_and_people_waiting_keep_their_places(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    join(shop, THROW, "bo@example.com")
    waiting_before = shop.snapshot()["catalog"]
    requests_before = shop.services.tables.requests.table.scan(ConsistentRead=True)["Items"]
    topic = "products/delete" if shop.platform == "shopify" else "product.deleted"
    response = shop.webhook(shop.store.webhook_request(topic, {"id": product_id(shop)}))
    assert response.status_code == 200, response.body
    body = answer(response)
    assert body["status"] == "catalog"
    assert {"sku": THROW, "status": "discontinued"} in body["results"]
    entry = shop.services.tables.catalog.get(THROW, consistent=True)
    assert entry is not None and entry.discontinued
    assert shop.services.tables.catalog.waiting(THROW) == 2
    assert shop.services.tables.requests.table.scan(ConsistentRead=True)["Items"] == requests_before
    # Other products are untouched.
    others = {row["sku"]: row for row in shop.snapshot()["catalog"] if row.get("shard_of", row["sku"]) != THROW}
    assert others == {row["sku"]: row for row in waiting_before if row.get("shard_of", row["sku"]) != THROW}
    # The same deletion again changes nothing more.
    again = shop.webhook(shop.store.webhook_request(topic, {"id": product_id(shop)}))
    assert again.status_code == 200 and {"sku": THROW, "status": "discontinued"} not in answer(again).get("results", [])


# --- replays: only the body is signed, so its topic and event id are whatever the sender writes

TOPIC_HEADER = {"shopify": "X-Shopify-Topic", "woocommerce": "X-WC-Webhook-Topic"}
EVENT_HEADER = {"shopify": "X-Shopify-Event-Id", "woocommerce": "X-WC-Webhook-Delivery-ID"}
DELETE_TOPIC = {"shopify": "products/delete", "woocommerce": "product.deleted"}


def product_update(shop: Shop, *, at: float | None = None) -> tuple[bytes, dict[str, str]]:
    """The store's own product update delivery for THROW, its body stamped `at` (now by default)."""
    at = shop.clock.now() if at is None else at
    if shop.platform == "shopify":
        body, _ = shop.store.product_webhook(THROW)
        payload = json.loads(body)
        payload["updated_at"] = iso_gmt(at) + "+00:00"  # products/update's own `updated_at` (Shopify reference)
        return shop.store.webhook_request("products/update", payload)
    product = shop.store.by_sku(THROW)
    product.modified = at
    # product.updated's body is GET /products/<id>, with its `date_modified_gmt` (WooCommerce REST API docs).
    return shop.store.webhook_request("product.updated", shop.store.product_json(product))


def test_a_product_update_body_sent_as_a_deletion_is_refused_and_writes_nothing(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    body, headers = product_update(shop)
    before = shop.snapshot()
    replayed = shop.webhook((body, {**headers, TOPIC_HEADER[shop.platform]: DELETE_TOPIC[shop.platform]}))
    refused(replayed, 400, "topic_mismatch")
    assert shop.snapshot() == before
    entry = shop.services.tables.catalog.get(THROW, consistent=True)
    assert entry is not None and not entry.discontinued


def test_a_deletion_body_sent_as_an_update_is_refused(shop: Shop) -> None:
    body, headers = shop.store.webhook_request(DELETE_TOPIC[shop.platform], {"id": product_id(shop)})
    before = shop.snapshot()
    update = "products/update" if shop.platform == "shopify" else "product.updated"
    refused(shop.webhook((body, {**headers, TOPIC_HEADER[shop.platform]: update})), 400, "topic_mismatch")
    assert shop.snapshot() == before


def test_a_month_old_product_body_under_a_new_event_id_is_refused(shop: Shop) -> None:
    body, headers = product_update(shop, at=shop.clock.now() - 30 * 86400)
    before = shop.snapshot()
    response = shop.webhook((body, {**headers, EVENT_HEADER[shop.platform]: "a-brand-new-event-id"}))
    refused(response, 400, "stale_body")
    assert shop.snapshot() == before


def test_a_product_body_sent_again_under_a_new_event_id_is_a_duplicate(shop: Shop) -> None:
    body, headers = product_update(shop)
    assert shop.webhook((body, headers)).status_code == 200
    # Staff archive the product meanwhile; the old body, replayed under a fresh event id, must not undo that.
    deleted = shop.webhook(shop.store.webhook_request(DELETE_TOPIC[shop.platform], {"id": product_id(shop)}))
    assert deleted.status_code == 200
    before = shop.snapshot()
    again = shop.webhook((body, {**headers, EVENT_HEADER[shop.platform]: "another-new-event-id"}))
    assert again.status_code == 200, again.body
    assert "duplicate" in again.body.decode()
    assert shop.snapshot() == before
    entry = shop.services.tables.catalog.get(THROW, consistent=True)
    assert entry is not None and entry.discontinued


# --- Shopify: one level per location, summed

WORKSHOP, STALL = 70010001, 70010002


def level_of(shop: Shop) -> int | None:
    entry = shop.services.tables.catalog.get(THROW, consistent=True)
    assert entry is not None
    return entry.level


def test_shopify_levels_are_summed_over_locations_each_ordered_by_its_own_time(session: Any, clock: FixedClock) -> None:
    with platform_shop("shopify", session, clock) as shop:
        clock.advance(1)
        late_workshop = shop.store.set_available(THROW, 5, location=WORKSHOP)  # sent late, below
        clock.advance(1)
        stall = shop.store.set_available(THROW, 2, location=STALL)
        clock.advance(1)
        assert shop.webhook(shop.store.set_available(THROW, 1, location=WORKSHOP)).status_code == 202
        assert level_of(shop) == 1
        # The stall's report is older than the workshop's last, but it is the stall's first: it counts.
        assert shop.webhook(stall).status_code == 200
        assert level_of(shop) == 3
        # The workshop's late report is older than the workshop's last: stale, nothing changes.
        before = shop.snapshot()
        stale = shop.webhook(late_workshop)
        assert stale.status_code == 200
        assert answer(stale)["results"] == [{"status": "no_restock", "reason": "stale"}]
        assert shop.snapshot() == before
        assert level_of(shop) == 3
        # A newer report for the stall still applies.
        clock.advance(1)
        assert shop.webhook(shop.store.set_available(THROW, 4, location=STALL)).status_code == 200
        assert level_of(shop) == 5
        entry = shop.services.tables.catalog.get(THROW, consistent=True)
        assert entry is not None
        assert {k: int(v["n"]) for k, v in entry.locations.items()} == {str(WORKSHOP): 1, str(STALL): 4}


def test_with_location_ids_set_another_location_is_ignored(session: Any, clock: FixedClock) -> None:
    with platform_shop("shopify", session, clock, env={"SHOPIFY_LOCATION_IDS": str(WORKSHOP)}) as shop:
        clock.advance(1)
        before = shop.snapshot()
        ignored(shop.webhook(shop.store.set_available(THROW, 7, location=STALL)), "other_location")
        assert shop.snapshot() == before
        clock.advance(1)
        assert shop.webhook(shop.store.set_available(THROW, 2, location=WORKSHOP)).status_code == 202
        assert level_of(shop) == 2


def test_a_woocommerce_product_created_with_stock_is_catalogued_with_its_level(session: Any, clock: FixedClock) -> None:
    with platform_shop("woocommerce", session, clock) as shop:
        product = shop.store.by_sku(THROW)
        payload = {
            **shop.store.product_json(product),
            "id": 990,
            "sku": "WW-THROW-NEW",
            "name": "Oatmeal merino throw, new colour",
            "stock_quantity": 4,
        }
        response = shop.webhook(shop.store.webhook_request("product.created", payload))
        assert response.status_code in (200, 202), response.body
        entry = shop.services.tables.catalog.get("WW-THROW-NEW", consistent=True)
        # Catalogued first, so its stock is recorded in the same delivery rather than waiting for the next one.
        assert entry is not None and entry.level == 4
        assert entry.store_ids == {"woocommerce.product_id": "990"}


def test_a_woocommerce_product_delivery_with_an_overlong_key_is_refused_before_the_catalogue_changes(
    session: Any, clock: FixedClock
) -> None:
    # A product delivery carries the product and its level: the catalogue follows the product before detection
    # reads the level under the delivery's key, which holds the X-WC-Webhook-ID header (WooCommerce's webhook post
    # id). A key too long for detection must be refused before the catalogue write, not after it (a 4xx that wrote,
    # found by tests/reliability/test_fuzz.py).
    with platform_shop("woocommerce", session, clock) as shop:
        shop.store.by_sku(THROW).name = "Oatmeal merino throw, large"
        body, headers = product_update(shop)
        before = shop.snapshot()
        refused(shop.webhook((body, {**headers, "X-WC-Webhook-ID": "7" * 200})), 400, "invalid_header")
        assert shop.snapshot() == before
        assert shop.webhook((body, headers)).status_code == 200
        entry = shop.services.tables.catalog.get(THROW, consistent=True)
        assert entry is not None and entry.name == "Oatmeal merino throw, large"
