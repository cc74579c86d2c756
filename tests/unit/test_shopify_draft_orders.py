"""draft_orders/update: a hold's draft order completed into an order links that order to the hold, whatever the
order's own note_attributes carry. The body is the REST DraftOrder (tests/fixtures/shopify/draft_orders_update.json,
shaped like https://shopify.dev/docs/api/webhooks/2025-10?reference=toml#list-of-topics-draft_orders/update and
https://shopify.dev/docs/api/admin-rest/2025-10/resources/draftorder: `status`, `order_id`, `note_attributes`,
`tags` as one comma-separated string)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.errors import BadRequest
from chalicelib.platforms.base import IGNORED, ORDERS
from chalicelib.platforms.shopify import reservation_tag
from tests.unit.test_shopify_webhooks import connector, fixture, signed

RESERVATION = "3f0c2a9e8b7d4c1f9a6e5d4c3b2a1f0e"
TOPIC = "draft_orders/update"


def draft(**changes: Any) -> bytes:
    body = json.loads(fixture("draft_orders_update.json"))
    body.update(changes)
    return json.dumps(body).encode()


def test_a_completed_draft_names_the_order_it_became_and_our_hold() -> None:
    body = draft()
    delivery = connector().read_webhook(body, signed(body, TOPIC))
    assert delivery.kind == ORDERS
    (report,) = delivery.orders
    assert (report.order_id, report.reservation_ids) == ("5550000001", (RESERVATION,))
    assert report.draft_ref == "gid://shopify/DraftOrder/1110000001"
    # Completing a draft says nothing of payment: only the order's own delivery says it is paid.
    assert report.paid is False


@pytest.mark.parametrize(("status", "order_id"), [("open", None), ("invoice_sent", None), ("completed", None)])
def test_a_draft_not_completed_into_an_order_is_ignored(status: str, order_id: int | None) -> None:
    body = draft(status=status, order_id=order_id)
    delivery = connector().read_webhook(body, signed(body, TOPIC))
    assert (delivery.kind, delivery.reason) == (IGNORED, "draft_not_completed")


def test_the_hold_is_found_by_the_drafts_tag_when_its_attribute_is_gone() -> None:
    body = draft(note_attributes=[], tags=f"vip, {reservation_tag(RESERVATION)}")
    (report,) = connector().read_webhook(body, signed(body, TOPIC)).orders
    assert report.reservation_ids == (RESERVATION,)


def test_a_digest_tag_never_reads_as_the_id_it_stands_for() -> None:
    # An id that is no safe tag is tagged by its digest, which reads back as an id no hold has (refused later as
    # unknown_reservation), never as the id itself.
    unsafe = "a" * 60
    body = draft(note_attributes=[], tags=reservation_tag(unsafe))
    (report,) = connector().read_webhook(body, signed(body, TOPIC)).orders
    assert unsafe not in report.reservation_ids


def test_a_draft_of_the_shops_own_is_ignored() -> None:
    body = draft(note_attributes=[{"name": "gift_wrap", "value": "no"}], tags="Wholesale")
    delivery = connector().read_webhook(body, signed(body, TOPIC))
    assert (delivery.kind, delivery.reason) == (IGNORED, "not_from_a_hold")


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"status": 3}, "invalid_field"),
        ({"order_id": "5550000001"}, "invalid_field"),
        ({"tags": ["bisn-x"], "note_attributes": []}, "invalid_field"),
        ({"note_attributes": {"name": "bisn_reservation_id"}}, "invalid_field"),
        ({"financial_status": "paid"}, "topic_mismatch"),
    ],
)
def test_a_malformed_draft_is_refused(changes: dict[str, Any], code: str) -> None:
    body = draft(**changes)
    with pytest.raises(BadRequest) as refused:
        connector().read_webhook(body, signed(body, TOPIC))
    assert refused.value.code == code


def test_an_order_and_a_draft_are_each_refused_under_the_others_topic() -> None:
    order = fixture("orders_create.json")
    with pytest.raises(BadRequest) as as_draft:
        connector().read_webhook(order, signed(order, TOPIC))
    body = draft()
    with pytest.raises(BadRequest) as as_order:
        connector().read_webhook(body, signed(body, "orders/paid"))
    assert as_draft.value.code == as_order.value.code == "topic_mismatch"
