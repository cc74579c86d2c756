"""The reconciliation's pure parts: the generic stock feed's answer (docs/PLATFORMS.md, "The generic stock feed"),
the time a read is applied with, when a read says something new, its delivery id, and the level readers' reading of
one platform resource."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest

from chalicelib.detect import MAX_AVAILABLE
from chalicelib.platforms.base import LevelReport, StoreUnavailable
from chalicelib.platforms.levels import (
    FEED_CHUNK,
    MAX_FEED_BYTES,
    MAX_FEED_LEVEL,
    StockFeed,
    StockQuery,
    parse_stock_feed,
)
from chalicelib.platforms.shopify_levels import _available
from chalicelib.platforms.woocommerce import UNTRACKED_IN_STOCK
from chalicelib.platforms.woocommerce_levels import _number, _report
from chalicelib.reconcile import CLOCK_ALLOWANCE_S, delivery_id_for, differs, read_stamp
from chalicelib.tables.catalog import Product

NOW = 1_800_000_000.0
THROW = "WW-THROW-OAT"
MUG = "WW-MUG-SPECKLE"


def feed(*entries: Any) -> bytes:
    return json.dumps({"levels": list(entries)}).encode()


def levels(reports: Sequence[LevelReport]) -> dict[str | None, int]:
    return {r.sku: r.available for r in reports}


# ---------------------------------------------------------------- the generic stock feed


def test_a_good_feed_gives_each_wanted_skus_level_as_a_whole_sku_report() -> None:
    read = parse_stock_feed(feed({"sku": THROW, "available": 3}, {"sku": MUG, "available": 0}), {THROW, MUG})
    assert read.skipped == []
    assert read.reports == [
        LevelReport(available=0, occurred_at=None, sku=MUG),
        LevelReport(available=3, occurred_at=None, sku=THROW),
    ]


def test_malformed_entries_are_skipped_and_named_while_the_others_are_read() -> None:
    body = feed(
        "WW-THROW-OAT=3",
        {"available": 4},
        {"sku": "", "available": 4},
        {"sku": 17, "available": 4},
        {"sku": THROW, "available": 2},
        {"sku": MUG, "available": "5"},
    )
    read = parse_stock_feed(body, {THROW, MUG})
    assert levels(read.reports) == {THROW: 2}
    assert read.skipped == [
        "entry 0 is not an object",
        "entry 1 has no sku",
        "entry 2 has no sku",
        "entry 3 has no sku",
        "'WW-MUG-SPECKLE': available is not a whole number of units",
    ]


@pytest.mark.parametrize("available", [-1, 2.5, 3.0, True, False, None, "3", [3], {"n": 3}])
def test_a_level_that_is_not_a_whole_number_of_units_is_skipped(available: Any) -> None:
    read = parse_stock_feed(feed({"sku": THROW, "available": available}), {THROW})
    assert read.reports == []
    assert read.skipped == ["'WW-THROW-OAT': available is not a whole number of units"]


def test_a_missing_level_is_skipped_rather_than_read_as_zero() -> None:
    read = parse_stock_feed(feed({"sku": THROW}), {THROW})
    assert read.reports == [] and len(read.skipped) == 1


def test_a_level_beyond_any_shelf_is_capped() -> None:
    read = parse_stock_feed(feed({"sku": THROW, "available": 10**12}), {THROW})
    assert levels(read.reports) == {THROW: MAX_FEED_LEVEL}


def test_skus_not_asked_for_are_neither_read_nor_malformed() -> None:
    # A feed may list every SKU it has, whatever was asked; a bad entry for one nobody asked for is not ours to judge.
    body = feed({"sku": "WW-UNKNOWN", "available": 9}, {"sku": MUG, "available": -4}, {"sku": THROW, "available": 1})
    read = parse_stock_feed(body, {THROW})
    assert levels(read.reports) == {THROW: 1}
    assert read.skipped == []


def test_a_sku_listed_twice_is_read_once_at_its_last_level() -> None:
    read = parse_stock_feed(feed({"sku": THROW, "available": 1}, {"sku": THROW, "available": 4}), {THROW})
    assert read.reports == [LevelReport(available=4, occurred_at=None, sku=THROW)]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"<html>maintenance</html>",
        b"\xff\xfe",
        b"[]",
        b'{"levels": {"WW-THROW-OAT": 3}}',
        b'{"stock": []}',
        b"[" * 100_000,
    ],
)
def test_an_answer_that_is_not_the_feeds_shape_stops_the_run(body: bytes) -> None:
    with pytest.raises(StoreUnavailable):
        parse_stock_feed(body, {THROW})


def test_an_answer_larger_than_any_for_one_chunk_is_refused_unread() -> None:
    padding = [{"sku": f"X-{n}", "available": 1} for n in range(MAX_FEED_BYTES // 20)]
    body = feed(*padding)
    assert len(body) > MAX_FEED_BYTES
    with pytest.raises(StoreUnavailable):
        parse_stock_feed(body, {THROW})


def test_the_feed_is_asked_for_its_skus_a_chunk_at_a_time_and_logs_what_it_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    asked: list[str] = []

    def fetch(url: str) -> bytes:
        asked.append(url)
        return feed({"sku": THROW, "available": 2}, {"sku": MUG, "available": -1})

    skus = [THROW, MUG] + [f"WW-X-{n:03d}" for n in range(FEED_CHUNK)]
    stock = StockFeed("https://shop.example/stock.json?key=abc", fetch)
    with caplog.at_level(logging.WARNING, logger="chalicelib.platforms.levels"):
        reports = stock.read_levels([StockQuery(sku) for sku in skus])
    assert len(asked) == 2
    assert asked[0].startswith("https://shop.example/stock.json?key=abc&sku=WW-THROW-OAT&sku=WW-MUG-SPECKLE&sku=")
    assert asked[0].count("sku=") == FEED_CHUNK and asked[1].count("sku=") == 2
    assert levels(reports) == {THROW: 2}  # the second chunk did not ask for THROW: its listing there is not read
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "1 entries" in warning.getMessage() and MUG in warning.getMessage()


def test_a_local_feed_file_is_read_whole() -> None:
    assert StockFeed("file:///tmp/levels.json", lambda url: b"").chunk_url([THROW]) == "file:///tmp/levels.json"


# ---------------------------------------------------------------- the read's stamp


def test_a_read_is_stamped_the_clock_allowance_before_it_began() -> None:
    assert read_stamp(NOW, None) == NOW - CLOCK_ALLOWANCE_S
    assert read_stamp(NOW, Decimal(str(NOW - 3600))) == NOW - CLOCK_ALLOWANCE_S


def test_a_read_is_never_older_than_the_level_it_corrects() -> None:
    # A level recorded within the allowance: stamped just after it, since detection takes an older event as stale.
    recorded = Decimal("1799999990.250000")
    assert read_stamp(NOW, recorded) == pytest.approx(float(recorded) + 0.000001, abs=1e-7)
    assert read_stamp(NOW, recorded) > float(recorded)
    at_the_edge = Decimal(str(NOW - CLOCK_ALLOWANCE_S))
    assert read_stamp(NOW, at_the_edge) > float(at_the_edge)


# ---------------------------------------------------------------- whether a read says something new


def sku_level(available: int, location: str | None = None) -> LevelReport:
    return LevelReport(available=available, occurred_at=None, sku=THROW, location_id=location)


def test_a_product_with_no_level_recorded_always_differs() -> None:
    assert differs(Product(THROW), sku_level(0))
    assert differs(Product(THROW, level=0, locations={"1": {"n": 0, "ts": "1.0"}}), sku_level(0, "2"))


def test_a_whole_sku_read_is_compared_as_the_shelf_level() -> None:
    # The store no longer counts the units our holds keep there; detection's recorded level does.
    held = Product(THROW, level=3, store_held=2)
    assert not differs(held, sku_level(1))
    assert differs(held, sku_level(3))
    assert not differs(Product(THROW, level=4), sku_level(4))
    assert differs(Product(THROW, level=4), sku_level(5))


def test_a_read_is_clamped_as_detection_clamps_it() -> None:
    assert not differs(Product(THROW, level=0), sku_level(-3))
    assert not differs(Product(THROW, level=MAX_AVAILABLE), sku_level(MAX_AVAILABLE * 5))


def test_a_locations_read_is_compared_with_that_location_only() -> None:
    product = Product(
        THROW,
        level=5,
        store_held=1,
        locations={"70010001": {"n": 2, "ts": "1799999000.0"}, "70010002": {"n": 3, "ts": "1799999000.0"}},
    )
    assert not differs(product, sku_level(2, "70010001"))
    assert not differs(product, sku_level(3, "70010002"))
    assert differs(product, sku_level(5, "70010001"))


# ---------------------------------------------------------------- the read's delivery id


def test_the_same_correction_of_the_same_level_is_the_same_delivery() -> None:
    mark = (0, Decimal("1799999000.000000"))
    first = delivery_id_for(sku_level(2), mark, 2)
    assert first == delivery_id_for(sku_level(2), (0, Decimal("1799999000.000000")), 2)
    assert first.startswith("reconcile:")


def test_another_level_read_or_corrected_is_another_delivery() -> None:
    mark = (0, Decimal("1799999000.000000"))
    ids = {
        delivery_id_for(sku_level(2), mark, 2),
        delivery_id_for(sku_level(3), mark, 3),
        delivery_id_for(sku_level(2), (1, mark[1]), 2),
        delivery_id_for(sku_level(2), (0, Decimal("1799999500.000000")), 2),
        delivery_id_for(sku_level(2), (None, None), 2),
        delivery_id_for(sku_level(2, "70010001"), mark, 2),
        delivery_id_for(sku_level(2, "70010002"), mark, 2),
    }
    assert len(ids) == 7


# ---------------------------------------------------------------- one platform resource's level


def test_shopify_reads_the_available_quantity_only_when_it_is_a_whole_number() -> None:
    # InventoryLevel.quantities(names:) -> [InventoryQuantity {name, quantity: Int!}]
    # (https://shopify.dev/docs/api/admin-graphql/latest/objects/InventoryQuantity).
    assert _available([{"name": "available", "quantity": 4}]) == 4
    assert _available([{"name": "on_hand", "quantity": 9}, {"name": "available", "quantity": -2}]) == -2
    assert _available([{"name": "on_hand", "quantity": 9}]) is None
    assert _available([{"name": "available", "quantity": True}]) is None
    assert _available([{"name": "available", "quantity": "4"}]) is None
    assert _available([]) is None


def woo(product_id: int, **fields: Any) -> dict[str, Any]:
    return {"id": product_id, "status": "publish", "manage_stock": True, "stock_status": "instock", **fields}


def test_woocommerce_reads_stock_quantity_less_the_units_our_holds_reserve() -> None:
    skus = {101: THROW}
    assert _report(woo(101, stock_quantity=5, bisn_reserved=2), skus) == LevelReport(3, None, sku=THROW)
    assert _report(woo(101, stock_quantity=1, bisn_reserved=2), skus) == LevelReport(0, None, sku=THROW)
    assert _report(woo(101, stock_quantity=None, stock_status="outofstock"), skus) == LevelReport(0, None, sku=THROW)
    # A variation whose parent manages its stock answers "parent".
    assert _report(woo(101, manage_stock="parent", stock_quantity=2), skus) == LevelReport(2, None, sku=THROW)


def test_woocommerce_reads_a_product_without_stock_management_by_its_status() -> None:
    skus = {101: THROW}
    untracked = woo(101, manage_stock=False, stock_quantity=None)
    assert _report(untracked, skus) == LevelReport(UNTRACKED_IN_STOCK, None, sku=THROW)
    assert _report({**untracked, "stock_status": "outofstock"}, skus) == LevelReport(0, None, sku=THROW)
    assert _report({**untracked, "stock_status": "onbackorder"}, skus) == LevelReport(0, None, sku=THROW)


@pytest.mark.parametrize(
    "resource",
    [
        woo(101, status="draft", stock_quantity=5),
        woo(101, status="private", stock_quantity=5),
        woo(999, stock_quantity=5),
        woo(True, stock_quantity=5),
        woo(101, stock_quantity="5"),
        woo(101, stock_quantity=5, bisn_reserved=-1),
        woo(101, manage_stock=False, stock_status="sold"),
        [101, 5],
    ],
)
def test_woocommerce_reads_nothing_from_a_resource_not_on_sale_not_asked_for_or_not_its_shape(resource: Any) -> None:
    assert _report(resource, {101: THROW}) is None


def test_woocommerce_ids_are_positive_whole_numbers() -> None:
    assert _number("101") == 101
    assert [_number(v) for v in (None, "", "0", "-3", "1.5", "abc", " 7")] == [None] * 7
