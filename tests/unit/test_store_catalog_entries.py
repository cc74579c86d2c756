"""A platform's catalogue entries (chalicelib/platforms) as catalogue sync validates them: `parse_store_entry` and
`parse_store_catalog`, and the index keys an entry derives (`store_item`, `store_product`)."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.catalog_sync import MAX_NAME_LEN, MAX_URL_LEN, Skipped, parse_store_catalog, parse_store_entry
from chalicelib.errors import BadRequest
from chalicelib.platforms.base import CatalogEntry

SHOPIFY_IDS = {
    "shopify.product_id": "8800000001",
    "shopify.variant_id": "4400000100",
    "shopify.inventory_item_id": "4600000100",
}


def entry(**overrides: Any) -> CatalogEntry:
    fields: dict[str, Any] = {
        "sku": "WW-THROW-OAT",
        "name": "Oatmeal merino throw",
        "product_url": "https://walnut-and-wool.myshopify.com/products/oatmeal-merino-throw?variant=4400000100",
        "image_url": "https://cdn.shopify.com/s/files/1/demo/oatmeal-merino-throw.jpg",
        "price": "128.00",
        "currency": "GBP",
        "ids": SHOPIFY_IDS,
    }
    fields.update(overrides)
    return CatalogEntry(**fields)


def refused(candidate: CatalogEntry, says: str) -> None:
    with pytest.raises(BadRequest, match=says):
        parse_store_entry(candidate)


def test_a_shopify_entry_keeps_what_the_platform_knows_and_derives_its_index_keys() -> None:
    product = parse_store_entry(entry(name="  Oatmeal merino throw  "))
    assert product.sku == "WW-THROW-OAT"
    assert product.threshold is None  # the platform sets none: the shop's own stands
    assert product.settings() == {
        "name": "Oatmeal merino throw",
        "product_url": "https://walnut-and-wool.myshopify.com/products/oatmeal-merino-throw?variant=4400000100",
        "image_url": "https://cdn.shopify.com/s/files/1/demo/oatmeal-merino-throw.jpg",
        "price": "128.00",
        "currency": "GBP",
        "store_ids": SHOPIFY_IDS,
        "store_item": "shopify.inventory_item_id:4600000100",
        "store_product": "shopify.product_id:8800000001",
        "backorder": False,
    }


def test_a_woocommerce_variation_names_its_parent_product_and_no_inventory_item() -> None:
    ids = {"woocommerce.product_id": "105", "woocommerce.variation_id": "107"}
    product = parse_store_entry(entry(ids=ids, product_url=None, image_url="", price=None, currency=None))
    settings = product.settings()
    assert settings == {
        "name": "Oatmeal merino throw",
        "store_ids": ids,
        "store_product": "woocommerce.product_id:105",
        "backorder": False,
    }
    assert "store_item" not in settings  # WooCommerce's stock webhooks name the SKU itself


def test_an_entry_sold_on_backorder_says_so() -> None:
    assert parse_store_entry(entry(backorder=True)).settings()["backorder"] is True


def test_an_entry_with_no_ids_has_no_index_keys() -> None:
    settings = parse_store_entry(entry(ids={})).settings()
    assert "store_item" not in settings and "store_product" not in settings


@pytest.mark.parametrize(
    "value",
    ["12a", "-3", "1.5", "", " 12", "0x1f", "\u00b2", "\u0661\u0662", "1" * 31],
    ids=["letters", "negative", "decimal", "empty", "space", "hex", "superscript", "arabic-indic", "too-long"],
)
def test_ids_that_are_not_whole_numbers_are_refused(value: str) -> None:
    refused(entry(ids={**SHOPIFY_IDS, "shopify.variant_id": value}), "whole number")


@pytest.mark.parametrize("key", ["variant_id", "Shopify.variant_id", "shopify.variant-id", "shopify.variant.id", ""])
def test_ids_under_a_malformed_key_are_refused(key: str) -> None:
    refused(entry(ids={key: "4400000100"}), "platform id")


@pytest.mark.parametrize("price", ["0", "0.00", "24", "1234567.891"])
def test_decimal_prices_of_zero_or_more_are_kept_as_given(price: str) -> None:
    assert parse_store_entry(entry(price=price)).settings()["price"] == price


@pytest.mark.parametrize(
    "price",
    [
        "-1.00",
        "-0.01",
        "abc",
        "",
        "NaN",
        "Infinity",
        "-Infinity",
        "1,00",
        "£12",
        "1e3",
        "1_000",
        " 12.00",
        "12.",
        ".5",
        "\u0661\u0662",
        "1" * 21,
    ],
)
def test_a_negative_or_non_decimal_price_is_refused(price: str) -> None:
    refused(entry(price=price), "price")


@pytest.mark.parametrize("currency", ["gbp", "GB", "GBPX", "£", "G1P", " GBP"])
def test_a_currency_that_is_not_an_iso_code_is_refused(currency: str) -> None:
    refused(entry(currency=currency), "currency")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://cdn.example/throw.jpg",
        "javascript:alert(1)",
        "data:image/png;base64,AAAA",
        "//cdn.example/throw.jpg",
        "/products/throw",
        "https://",
        "https://cdn.example/" + "a" * MAX_URL_LEN,
    ],
)
@pytest.mark.parametrize("field", ["product_url", "image_url"])
def test_a_url_that_is_not_an_absolute_http_url_is_refused(field: str, url: str) -> None:
    refused(entry(**{field: url}), field)


def test_a_name_that_is_empty_too_long_or_has_control_characters_is_refused() -> None:
    assert parse_store_entry(entry(name="n" * MAX_NAME_LEN)).settings()["name"] == "n" * MAX_NAME_LEN
    refused(entry(name="n" * (MAX_NAME_LEN + 1)), "name")
    refused(entry(name="   "), "name")
    refused(entry(name="Oatmeal\x00throw"), "name")


@pytest.mark.parametrize("sku", ["", "has space", "x" * 65])
def test_a_malformed_sku_is_refused(sku: str) -> None:
    with pytest.raises(BadRequest):
        parse_store_entry(entry(sku=sku))


def test_a_catalogue_skips_duplicates_and_bad_entries_and_names_every_sku() -> None:
    entries = [
        entry(),
        entry(name="The same SKU again", price="1.00"),
        entry(sku="WW-MUG-ASH", price="free"),
        entry(sku="WW-MUG-ASH", name="Ash mug"),
        entry(sku="", name="No SKU"),
    ]
    products, skipped, named = parse_store_catalog(entries)
    assert [(p.sku, p.settings()["name"]) for p in products] == [
        ("WW-THROW-OAT", "Oatmeal merino throw"),
        ("WW-MUG-ASH", "Ash mug"),  # the first WW-MUG-ASH was refused, so this one is not a duplicate
    ]
    assert [(s.index, s.sku) for s in skipped] == [(1, "WW-THROW-OAT"), (2, "WW-MUG-ASH"), (4, None)]
    assert skipped[0] == Skipped(1, "WW-THROW-OAT", "the same sku appears earlier in the catalogue")
    assert "price" in skipped[1].reason
    # A SKU named by a refused entry still counts as listed: a full sync does not discontinue it.
    assert named == {"WW-THROW-OAT", "WW-MUG-ASH"}
