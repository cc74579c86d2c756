"""Which products sold on backorder take a waiting list (pure): the mark their shards carry, and when catalogue sync
writes the shards with the product."""

from __future__ import annotations

from chalicelib.catalog_sync import CatalogSync, StoreProduct
from chalicelib.tables.catalog import NOTHING, NOTIFY, PREORDER, Product, backorder_mark


def test_a_product_without_backorder_takes_a_list_as_before() -> None:
    assert backorder_mark({"sku": "A"}) is None
    assert Product.from_item({"sku": "A", "name": "Lamp"}).backorder_mark is None
    assert "backorder" not in Product(sku="A").to_item()


def test_a_product_on_backorder_takes_a_list_only_when_the_shop_chose_notify_me() -> None:
    assert backorder_mark({"backorder": True}) == NOTHING  # nothing chosen: the store sells it
    assert backorder_mark({"backorder": True, "backorder_offer": PREORDER}) == PREORDER
    assert backorder_mark({"backorder": True, "backorder_offer": NOTIFY}) is None
    # A choice made while the store does not sell it on backorder waits for it to.
    assert backorder_mark({"backorder": False, "backorder_offer": PREORDER}) is None


def _write(backorder: bool, current: Product) -> bool:
    product = StoreProduct(current.sku, {"name": current.name, "backorder": backorder})
    write = CatalogSync._write_for(product, current)
    assert write is not None
    return write.marks


def test_sync_writes_the_shards_only_when_backorder_opens_or_closes_the_list() -> None:
    plain = Product(sku="A", name="Lamp", synced_at=1)
    assert CatalogSync._write_for(StoreProduct("A", {"name": "Lamp", "backorder": False}), plain) is None
    assert _write(True, plain) is True
    on = Product(sku="A", name="Lamp", synced_at=1, backorder=True)
    assert _write(False, on) is True
    chosen = Product(sku="A", name="Lamp", synced_at=1, backorder_offer=NOTIFY)
    assert _write(True, chosen) is False  # notify-me: the list stays open either way
