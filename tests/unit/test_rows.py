"""Typed rows at the table boundary: stored items in, typed records out, and back to the same items."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from chalicelib.tables.catalog import Product
from chalicelib.tables.requests import Request, RequestState, UniqueItem
from chalicelib.tables.reservations import Offer, OfferState
from chalicelib.tables.restocks import Restock, RestockState

REQUEST: dict[str, Any] = {
    "sku": "CHAIR",
    "joined_ts": "2026-03-01T10:00:00.000000Z#a1b2c3",
    "channel": "sms",
    "contact": "+447400123456",
    "contact_key": "k1",
    "name": "Ada",
    "lang": "de",
    "state": "offered",
    "created_at": 1772359200,
    "updated_at": 1772359200,
    "ttl": 1780135200,
    "expiry_day": "2026-05-30",
    "last_notified_restock": "rs_1",
    "offer_token": "t1",
    "leave_requested": "unsubscribe",
}
UNIQUE: dict[str, Any] = {
    "sku": "CHAIR",
    "joined_ts": "U#k1",
    "ref": REQUEST["joined_ts"],
    "told_restock": "rs_0",
    "ttl": 1780135200,
}
OFFER: dict[str, Any] = {
    "token_id": "t1",
    "sku": "CHAIR",
    "restock_ts": "2026-03-01T09:00:00.000000Z#rs_1",
    "restock_id": "rs_1",
    "request_joined_ts": REQUEST["joined_ts"],
    "contact_key": "k1",
    "channel": "sms",
    "lang": "fr",
    "state": "converted",
    "offered_at": 1772359200,
    "offer_expires_at": 1772362800,
    "ttl": 1774954800,
    "held_at": 1772359300,
    "hold_expires_at": 1772360200,
    "order_id": "o1",
    "converted_at": 1772359400,
}
RESTOCK: dict[str, Any] = {
    "sku": "CHAIR",
    "restock_ts": OFFER["restock_ts"],
    "restock_id": "rs_1",
    "webhook_id": "wh_1",
    "units_total": 5,
    "units_available": -1,
    "units_offerable": 0,
    "state": "queued",
    "created_at": 1772355600,
    "level_before": 0,
    "level_after": 5,
    "threshold": 1,
    "unseen_sales": 2,
    "copy": {"en": {"sms": "Back in stock", "subject": "It's back"}, "de": {"sms": "Wieder da"}},
    "queued_at": 1772355601,
}
PRODUCT: dict[str, Any] = {
    "sku": "CHAIR",
    "name": "Oak chair",
    "threshold": 2,
    "hold_window_s": 600,
    "offer_window_s": 1800,
    "voice": "warm",
    "checkout_url": "https://shop.example/checkout",
    "waiting_count": 3,
    "level": 0,
    "level_ts": Decimal("1772355600.25"),
    "level_version": 4,
    "level_webhook_id": "wh_1",
    "level_seen_at": 1772355601,
    "open_restock_ts": OFFER["restock_ts"],
    "open_restock_id": "rs_1",
    "demand_key": "out",
}


def stored(item: dict[str, Any]) -> dict[str, Any]:
    """An item as boto3 hands it back: every number a Decimal."""
    return {k: Decimal(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in item.items()}


@pytest.mark.parametrize(
    ("kind", "item"), [(Request, REQUEST), (UniqueItem, UNIQUE), (Offer, OFFER), (Restock, RESTOCK), (Product, PRODUCT)]
)
def test_an_item_round_trips(kind: Any, item: dict[str, Any]) -> None:
    row = kind.from_item(stored(item))
    assert row.to_item() == item
    assert kind.from_item(row.to_item()) == row


@pytest.mark.parametrize(("kind", "item"), [(Request, REQUEST), (Offer, OFFER), (Restock, RESTOCK), (Product, PRODUCT)])
def test_numbers_come_back_as_int_and_unknown_attributes_are_ignored(kind: Any, item: dict[str, Any]) -> None:
    row = kind.from_item({**stored(item), "added_by_a_later_version": Decimal(7)})
    numbers = {k: v for k, v in row.__dict__.items() if isinstance(v, int | Decimal) and k != "level_ts"}
    assert numbers and all(type(v) in (int, bool) for v in numbers.values())
    assert not hasattr(row, "added_by_a_later_version")


def test_states_are_enums_with_the_stored_strings() -> None:
    assert Request.from_item(stored(REQUEST)).state is RequestState.OFFERED
    assert Offer.from_item(stored(OFFER)).state is OfferState.CONVERTED
    assert Restock.from_item(stored(RESTOCK)).state is RestockState.QUEUED
    assert Request.from_item(stored(REQUEST)).to_item()["state"] == "offered"
    assert type(Request.from_item(stored(REQUEST)).to_item()["state"]) is str


def test_missing_optional_attributes_are_none() -> None:
    optional = ("last_notified_restock", "offer_token", "leave_requested", "created_at", "expiry_day", "name")
    request = Request.from_item({k: v for k, v in stored(REQUEST).items() if k not in optional})
    assert request.last_notified_restock is None and request.offer_token is None and request.leave_requested is None
    assert request.created_at is None and request.name == ""
    assert "offer_token" not in request.to_item()

    offer = Offer.from_item({k: v for k, v in stored(OFFER).items() if k not in ("held_at", "order_id")})
    assert offer.held_at is None and offer.order_id is None and offer.due_at is None and offer.due_key is None

    restock = Restock.from_item({k: v for k, v in stored(RESTOCK).items() if k not in ("unseen_sales", "copy")})
    assert restock.unseen_sales == 0 and restock.copy is None and restock.pending_key is None
    assert "unseen_sales" not in restock.to_item()


def test_a_copy_cached_before_languages_reads_as_the_english_copy() -> None:
    legacy = Restock.from_item({**stored(RESTOCK), "copy": {"sms": "Back in stock", "source": "bedrock"}})
    assert legacy.copy == {"en": {"sms": "Back in stock", "source": "bedrock"}}


def test_a_product_takes_the_shop_defaults_for_unset_settings() -> None:
    product = Product.from_item({"sku": "LAMP"})
    assert (product.name, product.threshold, product.hold_window_s, product.offer_window_s, product.voice) == (
        "LAMP",
        1,
        900,
        3600,
        "friendly",
    )
    assert product.checkout_url == "" and product.level is None and product.level_ts is None
    assert product.discontinued is False and "discontinued" not in product.to_item()
    assert Product.from_item({"sku": "LAMP", "discontinued": True}).discontinued is True


def test_a_level_time_keeps_its_fraction() -> None:
    assert Product.from_item(stored(PRODUCT)).level_ts == Decimal("1772355600.25")


def test_a_request_is_live_while_in_line() -> None:
    assert Request.from_item(stored(REQUEST)).live
    assert not Request.from_item({**stored(REQUEST), "state": "converted"}).live


def test_a_stale_row_carries_only_what_the_expiry_index_projects() -> None:
    projected = ("sku", "joined_ts", "expiry_day", "ttl", "state", "contact_key")
    request = Request.from_item({k: v for k, v in stored(REQUEST).items() if k in projected})
    assert (request.sku, request.joined_ts, request.state, request.contact_key) == (
        "CHAIR",
        REQUEST["joined_ts"],
        RequestState.OFFERED,
        "k1",
    )
    assert (request.ttl, request.expiry_day) == (REQUEST["ttl"], REQUEST["expiry_day"])
    assert (request.channel, request.contact, request.name) == ("", "", "")
    assert request.last_notified_restock is None and request.offer_token is None and request.leave_requested is None
    assert request.created_at is None and request.updated_at is None


def test_a_uniqueness_item_names_its_person_and_place() -> None:
    unique = UniqueItem.from_item(stored(UNIQUE))
    assert (unique.contact_key, unique.ref, unique.told_restock, unique.ttl) == (
        "k1",
        REQUEST["joined_ts"],
        "rs_0",
        UNIQUE["ttl"],
    )
    # The memory of a place that left names no place.
    assert UniqueItem.from_item({"sku": "CHAIR", "joined_ts": "U#k1", "told_restock": "rs_0"}).ref is None


def test_a_new_place_is_written_from_its_row() -> None:
    owed = Request.waiting(
        sku="CHAIR",
        joined_ts="2026-03-01T10:00:00.000000Z#a1b2c3",
        channel="email",
        contact="ada@example.com",
        contact_key="k1",
        ttl=1780135200,
        now=1772359200.5,
        told="rs_1",
        unconfirmed=True,
        ticket=7,
        burnt_before=2,
        waiting_shard=3,
    )
    item = owed.to_item()
    assert item["state"] == "waiting" and item["expiry_day"] == "2026-05-30"
    assert item["last_notified_restock"] == "rs_1" and (item["ticket"], item["burnt_before"]) == (7, 2)
    # Owing its confirmation email from now: found by the sweep through the sparse "by-confirm" index.
    assert (item["confirm_owed_at"], item["confirm_day"]) == (1772359200, "2026-03-01")
    assert Request.from_item(item) == owed
    quiet = Request.waiting(
        sku="CHAIR",
        joined_ts="j",
        channel="email",
        contact="a@b.c",
        contact_key="k",
        ttl=1,
        now=0,
        unconfirmed=True,
        owes=False,
    ).to_item()
    assert quiet["unconfirmed"] is True and "confirm_owed_at" not in quiet and "confirm_day" not in quiet
