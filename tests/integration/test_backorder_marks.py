"""A product's waiting shards carry its backorder mark (chalicelib/tables/catalog.py) even when the shop's choice and
the store's switch are written at the same moment: each write is made only over what it read, and reads again."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.tables.catalog import NOTIFY, PREORDER, WAITING_SHARDS, WaitingShard, shard_key
from chalicelib.wiring import Services


def marks(services: Services, sku: str) -> set[str | None]:
    table = services.tables.catalog.table
    items = [table.get_item(Key={"sku": shard_key(sku, n)}, ConsistentRead=True)["Item"] for n in range(WAITING_SHARDS)]
    return {WaitingShard.from_item(item).on_backorder for item in items}


def test_a_choice_made_between_syncs_read_and_write_is_what_the_shards_carry(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = services.tables.catalog
    catalog.upsert("LAMP", {"name": "Brass lamp"})
    read = catalog.table.get_item
    chosen: list[str] = []

    def racing_read(**kwargs: Any) -> Any:
        item = read(**kwargs)
        if not chosen:
            # The shop chooses notify-me just after catalogue sync read the product, before sync writes.
            chosen.append(NOTIFY)
            catalog.set_backorder_offer("LAMP", NOTIFY)
        return item

    monkeypatch.setattr(catalog.table, "get_item", racing_read)
    catalog.sync_product(
        "LAMP",
        {"name": "Brass lamp", "backorder": True},
        now=1_800_000_000,
        created=False,
        out_of_stock=None,
        marks=True,
    )
    product = catalog.get("LAMP", consistent=True)
    assert product is not None and (product.backorder, product.backorder_offer) == (True, NOTIFY)
    assert marks(services, "LAMP") == {None}  # notify-me: the list is open on every shard

    catalog.set_backorder_offer("LAMP", PREORDER)
    assert marks(services, "LAMP") == {PREORDER}
    catalog.sync_product(
        "LAMP",
        {"name": "Brass lamp", "backorder": False},
        now=1_800_000_060,
        created=False,
        out_of_stock=None,
        marks=True,
    )
    assert marks(services, "LAMP") == {None}  # no longer sold on backorder: sold out at 0, its list open
