"""A Shopify order whose note_attributes lack our reservation id still converts its hold, exactly once, through the
draft order Shopify says it was completed from (draft_orders/update: the draft's `status` "completed" and
`order_id`, https://shopify.dev/docs/api/admin-rest/2025-10/resources/draftorder). The order and its draft arrive in
either order, and again; the hold converts when the order is paid, never on the draft's completion alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from chalicelib.tables.reservations import Offer, OfferState
from devstack.clocks import FixedClock
from tests.notices import drain
from tests.platforms import THROW, Shop, join, platform_shop
from tests.support import tap_link


@pytest.fixture
def shop(session: Any, clock: FixedClock) -> Iterator[Shop]:
    with platform_shop("shopify", session, clock) as built:
        yield built


def hold(shop: Shop) -> Offer:
    join(shop, THROW, "ada@example.com")
    assert shop.restock(THROW, 1).status_code == 202
    drain(shop.services)
    [offer] = shop.offers(THROW)
    assert tap_link(shop.client, shop.services.tokens.reserve(offer.token_id)).status_code == 303
    held = shop.offers(THROW)[0]
    assert held.state == OfferState.HELD and held.store_ref
    return held


def answer(shop: Shop, request: tuple[bytes, dict[str, str]]) -> dict[str, Any]:
    response = shop.client.http.post("/webhooks/shopify", headers=request[1], body=request[0])
    assert response.status_code == 200, response.body
    return dict(json.loads(response.body))


def conversions(shop: Shop) -> list[str]:
    return [f["token_id"] for f in shop.services.tables.audit.for_sku(THROW) if f["kind"] == "conversion"]


def order_id(request: tuple[bytes, Mapping[str, str]]) -> str:
    return str(json.loads(request[0])["id"])


@pytest.mark.parametrize("first", ["order", "draft"])
def test_an_order_without_our_attribute_converts_through_its_draft_once(shop: Shop, first: str) -> None:
    held = hold(shop)
    assert held.store_ref is not None
    order = shop.store.complete_draft_order(held.store_ref, attributes_reach_order=False)
    assert json.loads(order[0])["note_attributes"] == []
    draft = shop.store.draft_order_webhook(held.store_ref)

    arrivals = [order, draft] if first == "order" else [draft, order]
    before = answer(shop, arrivals[0])
    assert before["status"] == "ignored"
    assert shop.offers(THROW)[0].state == OfferState.HELD
    after = answer(shop, arrivals[1])
    assert after["status"] == "orders"
    assert after["results"][0]["status"] == "converted", after
    row = shop.offers(THROW)[0]
    assert (row.state, row.order_id) == (OfferState.CONVERTED, order_id(order))

    # Each again (a retry, or a second subscription's copy): counted once.
    for request in (order, draft, order):
        again = answer(shop, shop.store.redeliver(request))
        assert again["results"][0]["status"] == "already_converted", again
    assert conversions(shop) == [held.token_id]
    assert shop.store.counts(THROW) == {"available": 0, "reserved": 0}


def test_a_completed_draft_waits_for_its_order_to_be_paid(shop: Shop) -> None:
    held = hold(shop)
    assert held.store_ref is not None
    pending = shop.store.complete_draft_order(held.store_ref, financial_status="pending", attributes_reach_order=False)
    linked = answer(shop, shop.store.draft_order_webhook(held.store_ref))
    assert linked["results"] == [{"order_id": order_id(pending), "status": "ignored", "reason": "not_paid"}]
    assert answer(shop, pending)["results"][0]["reason"] == "not_paid"
    assert shop.offers(THROW)[0].state == OfferState.HELD

    # orders/paid carries the same order, now paid (https://shopify.dev/docs/api/webhooks/2025-10, orders/paid).
    paid_body = {**json.loads(pending[0]), "financial_status": "paid"}
    paid = answer(shop, shop.store.webhook_request("orders/paid", paid_body))
    assert paid["results"][0]["status"] == "converted", paid
    assert conversions(shop) == [held.token_id]


def test_a_copy_of_the_holds_draft_converts_nothing(shop: Shop) -> None:
    held = hold(shop)
    assert held.store_ref is not None
    order = shop.store.complete_draft_order(held.store_ref, attributes_reach_order=False)
    # A merchant's copy of the draft order (its attributes and tag copied with it) completed into this order.
    copy = {**json.loads(shop.store.draft_order_webhook(held.store_ref)[0]), "id": 1119999999}
    copy["admin_graphql_api_id"] = "gid://shopify/DraftOrder/1119999999"
    answer(shop, order)
    refused = answer(shop, shop.store.webhook_request("draft_orders/update", copy))
    assert refused["results"][0] == {"order_id": order_id(order), "status": "ignored", "reason": "other_draft"}
    assert shop.offers(THROW)[0].state == OfferState.HELD
    assert conversions(shop) == []
