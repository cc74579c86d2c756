"""Shopify's levels read in bulk for the reconciliation: each inventory item's `available` quantity per location.

A level here is what the `inventory_levels/update` webhook reports (chalicelib/platforms/shopify.py `_inventory`):
one location's `available`, for the locations the shop sells from (SHOPIFY_LOCATION_IDS, or every one), so
detection sums them exactly as it sums the webhooks' and orders each location on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chalicelib.platforms.base import LevelReport, StoreUnavailable
from chalicelib.platforms.levels import StockQuery
from chalicelib.platforms.shopify import MAX_THROTTLE_WAITS, ShopifyConnector, _gid_number, _Throttled

# nodes(ids:) takes at most 250 ids (https://shopify.dev/docs/api/usage/limits#input-limits); the query's cost is
# about ITEMS_PER_QUERY x (LEVELS_PER_ITEM + 3), kept well under the 1,000-point single-query maximum.
ITEMS_PER_QUERY = 25
LEVELS_PER_ITEM = 20  # locations stocking one item; more than this and the rest are read by the webhooks only

# nodes(ids: [ID!]!) returns each Node by its global id, null for one that does not exist:
# https://shopify.dev/docs/api/admin-graphql/2025-10/queries/nodes
# InventoryItem.tracked and InventoryItem.inventoryLevels (an InventoryLevelConnection):
# https://shopify.dev/docs/api/admin-graphql/2025-10/objects/InventoryItem
# InventoryLevel.location and InventoryLevel.quantities(names: ["available"]) -> [InventoryQuantity {name, quantity}]:
# https://shopify.dev/docs/api/admin-graphql/2025-10/objects/InventoryLevel and
# https://shopify.dev/docs/apps/build/inventory-management-apps/manage-quantities-states (the "available" state is
# the `available` the inventory_levels/update webhook carries). Needs read_inventory, which the app already has.
LEVELS_QUERY = """
query BisnLevels($ids: [ID!]!) {
  nodes(ids: $ids) {
    ... on InventoryItem {
      id
      tracked
      inventoryLevels(first: 20) {
        nodes {
          location {
            id
          }
          quantities(names: ["available"]) {
            name
            quantity
          }
        }
      }
    }
  }
}
""".strip()


class ShopifyLevels:
    """Reads levels through the connector's own wire (its token renewal, throttling and error mapping)."""

    def __init__(self, connector: ShopifyConnector) -> None:
        self.connector = connector

    def read_levels(self, items: Sequence[StockQuery]) -> list[LevelReport]:
        """Each item's level per counted location, ITEMS_PER_QUERY items a query. Items without an inventory item
        id, untracked items and ones Shopify no longer has are left out. StoreUnavailable otherwise."""
        by_item: dict[str, str] = {}
        for item in items:
            item_id = str(item.ids.get("shopify.inventory_item_id", "")).strip()
            if item_id.isdigit():
                by_item.setdefault(item_id, item.sku)
        ids = list(by_item)
        reports: list[LevelReport] = []
        for start in range(0, len(ids), ITEMS_PER_QUERY):
            chunk = ids[start : start + ITEMS_PER_QUERY]
            data = self._query([f"gid://shopify/InventoryItem/{i}" for i in chunk])
            reports.extend(self._reports(data, by_item))
        return reports

    def _query(self, gids: list[str]) -> dict[str, Any]:
        waits = 0
        while True:
            try:
                data, _ = self.connector._graphql(LEVELS_QUERY, {"ids": gids})
                return data
            except _Throttled as throttled:
                waits += 1
                if waits > MAX_THROTTLE_WAITS:
                    raise StoreUnavailable("Shopify kept throttling the level read.") from None
                self.connector._sleep(throttled.wait_s)

    def _reports(self, data: Mapping[str, Any], by_item: Mapping[str, str]) -> list[LevelReport]:
        counted = self.connector.location_ids
        try:
            nodes = data["nodes"]
            if not isinstance(nodes, list):
                # Iterating a mapping would read its keys and report nothing, hiding the wrong answer.
                raise TypeError("nodes is not a list")
            reports = []
            for node in nodes:
                if not isinstance(node, dict) or not node.get("id"):
                    continue  # deleted since the catalogue was synced
                sku = by_item.get(_gid_number(node["id"], "InventoryItem"))
                if sku is None or node.get("tracked") is False:
                    continue  # an untracked item has no count, as its webhook says
                for level in node["inventoryLevels"]["nodes"]:
                    location = _gid_number(level["location"]["id"], "Location")
                    if counted and location not in counted:
                        continue
                    available = _available(level["quantities"])
                    if available is None:
                        continue
                    reports.append(
                        LevelReport(available=max(0, available), occurred_at=None, sku=sku, location_id=location)
                    )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreUnavailable(f"Shopify's level answer is not the documented shape ({exc!r}).") from None
        return reports


def _available(quantities: Any) -> int | None:
    for quantity in quantities:
        if quantity.get("name") == "available":
            value = quantity.get("quantity")
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None
