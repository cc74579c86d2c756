"""Restock detection's rules as pure functions: the crossing table, the fall rule, event order, body validation."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal

import pytest

from chalicelib.clock import parse_iso
from chalicelib.counters import lowered
from chalicelib.detect import (
    CLOSE,
    CROSSING,
    FALL,
    NONE,
    RISE,
    LevelChange,
    decide,
    is_newer,
    parse_inventory_body,
    restock_id_for,
    restock_ts_for,
)
from chalicelib.errors import BadRequest
from chalicelib.web.errors import error_status

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("before", "after", "threshold", "is_open", "expected"),
    [
        # No restock open: only a crossing from below the threshold to at or above it counts.
        (0, 3, 1, False, LevelChange(CROSSING, 3)),
        (2, 5, 1, False, LevelChange(NONE)),  # above -> above
        (1, 2, 2, False, LevelChange(CROSSING, 2)),  # exactly at the threshold
        (0, 1, 1, False, LevelChange(CROSSING, 1)),
        (0, 1, 2, False, LevelChange(NONE)),  # still below the threshold
        (2, 2, 2, False, LevelChange(NONE)),  # at the threshold, unchanged
        (3, 0, 1, False, LevelChange(NONE)),  # a fall is not a restock
        (0, 0, 1, False, LevelChange(NONE)),
        (None, 4, 1, False, LevelChange(CROSSING, 4)),  # never seen counts as sold out
        (None, 0, 1, False, LevelChange(NONE)),
        # A restock open.
        (2, 5, 1, True, LevelChange(RISE, 3)),
        (5, 2, 1, True, LevelChange(FALL, 3)),
        (5, 0, 1, True, LevelChange(CLOSE, 5)),
        (5, 2, 3, True, LevelChange(CLOSE, 3)),  # below the threshold but not empty
        (1, 2, 3, True, LevelChange(CLOSE, -1)),  # threshold raised since: it rose a unit yet stays below
        (1, 4, 3, True, LevelChange(RISE, 3)),  # a crossing while one is open is a rise, never a second restock
        (3, 3, 1, True, LevelChange(NONE)),
    ],
)
def test_crossing_table(before: int | None, after: int, threshold: int, is_open: bool, expected: LevelChange) -> None:
    assert decide(before, after, threshold, restock_open=is_open) == expected


@pytest.mark.parametrize(
    ("before", "after", "own_sales", "expected"),
    [
        (4, 2, 2, LevelChange(NONE)),  # the level fell by exactly our two sales: nothing else moved
        (4, 1, 2, LevelChange(FALL, 1)),  # our two sales and one walk-in sale
        (4, 5, 1, LevelChange(RISE, 2)),  # our sale and a delivery of two
        (3, 0, 1, LevelChange(CLOSE, 2)),  # sold out: our sale and two others
    ],
)
def test_our_own_sales_in_a_new_level_are_never_counted_as_a_fall(
    before: int, after: int, own_sales: int, expected: LevelChange
) -> None:
    assert decide(before, after, 1, restock_open=True, own_sales=own_sales) == expected


def replay(levels: list[int], threshold: int) -> list[str]:
    """Feed a sequence of levels through `decide`, keeping track of whether a restock is open."""
    kinds, before, is_open = [], None, False
    for level in levels:
        change = decide(before, level, threshold, restock_open=is_open)
        kinds.append(change.kind)
        is_open = (is_open or change.kind == CROSSING) and change.kind != CLOSE
        before = level
    return kinds


def test_falls_then_rises_makes_a_second_restock() -> None:
    assert replay([0, 3, 0, 2], threshold=1) == [NONE, CROSSING, CLOSE, CROSSING]


def test_a_dip_that_stays_at_the_threshold_is_no_new_restock() -> None:
    assert replay([0, 4, 2, 5], threshold=2) == [NONE, CROSSING, FALL, RISE]


@pytest.mark.parametrize(
    ("available", "offerable", "fall", "expected"),
    [
        (5, 5, 2, (3, 3)),
        (5, 3, 2, (3, 1)),  # two live offers: what is left to offer drops with the level
        (4, 1, 3, (1, -2)),  # three live offers, one unit left: two offers are stranded and owe it back
        (2, 0, 3, (-1, -3)),  # the holds already granted stand: the shelf owes one of them a unit
        (2, 2, 5, (-3, -3)),  # a debt that rises and expiring holds pay off before anyone holds again
        (1, 1, -2, (3, 3)),  # a negative fall is a rise
        (1, 3, 0, (1, 1)),  # offerable never exceeds available
    ],
)
def test_a_fall_lowers_available_by_all_of_it_and_keeps_offerable_net_of_live_offers(
    available: int, offerable: int, fall: int, expected: tuple[int, int]
) -> None:
    assert lowered(available, offerable, fall) == expected


def test_stranded_offers_that_lapse_never_promise_units_that_are_gone() -> None:
    # Six units, six offers sent; the level drops to two; then every offer lapses unused.
    available, offerable = lowered(6, 0, 4)
    assert (available, offerable) == (2, -4)
    assert offerable + 6 == available  # all six lapses leave exactly the two real units to offer


def test_only_newer_or_equal_events_update_the_level() -> None:
    assert is_newer(Decimal("10.5"), None)
    assert is_newer(Decimal("10.5"), Decimal("10.4"))
    assert is_newer(Decimal("10.5"), Decimal("10.5"))  # ties go to the later arrival
    assert not is_newer(Decimal("10.4"), Decimal("10.5"))


def test_restock_id_follows_the_contract_and_a_redelivery_maps_to_it() -> None:
    expected = "rs_" + hashlib.sha256(b"CHAIR|msg_1").hexdigest()[:24]
    assert restock_id_for("CHAIR", "msg_1") == expected
    assert restock_id_for("CHAIR", "msg_1") == restock_id_for("CHAIR", "msg_1")
    assert restock_id_for("CHAIR", "msg_2") != expected
    assert restock_ts_for(0.25, expected) == f"1970-01-01T00:00:00.250000Z#{expected[-8:]}"


def body(**fields: object) -> str:
    return json.dumps(fields)


def test_a_valid_body_parses() -> None:
    event = parse_inventory_body(body(sku="CHAIR-WALNUT", available=3), NOW)
    assert (event.sku, event.available, event.occurred_at) == ("CHAIR-WALNUT", 3, None)


def test_occurred_at_in_any_zone_becomes_unix_seconds() -> None:
    event = parse_inventory_body(body(sku="A", available=0, occurred_at="2027-01-15T08:30:00.5+01:00"), NOW)
    assert event.occurred_at == parse_iso("2027-01-15T07:30:00.5Z")


def test_a_whole_float_is_a_whole_number() -> None:
    assert parse_inventory_body(body(sku="A", available=5.0), NOW).available == 5


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("not json", "invalid_json"),
        ("[1, 2]", "invalid_body"),
        (body(available=1), "missing_field"),
        (body(sku="has space", available=1), "invalid_sku"),
        (body(sku=5, available=1), "invalid_field"),
        (body(sku="A"), "missing_field"),
        (body(sku="A", available=True), "invalid_field"),
        (body(sku="A", available="5"), "invalid_field"),
        (body(sku="A", available=-1), "invalid_field"),
        (body(sku="A", available=2.5), "invalid_field"),
        (body(sku="A", available=10**7), "invalid_field"),
        ('{"sku": "A", "available": NaN}', "invalid_field"),
        (body(sku="A", available=1, occurred_at=1700000000), "invalid_field"),
        (body(sku="A", available=1, occurred_at="yesterday"), "invalid_field"),
        (body(sku="A", available=1, occurred_at="2999-01-01T00:00:00Z"), "invalid_field"),
    ],
)
def test_a_malformed_body_is_refused_with_a_reason(text: str, code: str) -> None:
    with pytest.raises(BadRequest) as error:
        parse_inventory_body(text, NOW)
    assert error.value.code == code
    assert error_status(error.value) == 400


def test_occurred_at_slightly_ahead_of_our_clock_is_accepted() -> None:
    event = parse_inventory_body(
        body(sku="A", available=1, occurred_at="2027-01-15T08:04:00Z"), parse_iso("2027-01-15T08:00:00Z")
    )
    assert event.occurred_at == parse_iso("2027-01-15T08:04:00Z")
