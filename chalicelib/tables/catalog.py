"""bisn-catalog: products, their per-SKU settings, and the last stock level seen."""

from __future__ import annotations

import threading
import time
from typing import Any

from chalicelib.tables.base import TxItem

PRODUCT_FIELDS = ("name", "threshold", "hold_window_s", "offer_window_s", "voice", "checkout_url")
DEFAULTS: dict[str, Any] = {"threshold": 1, "hold_window_s": 900, "offer_window_s": 3600, "voice": "friendly"}
DEMAND_OUT = "out"  # demand_key of a product below its threshold (sparse GSI by-demand)


class CatalogTable:
    """Products keyed by SKU, with a short in-Lambda cache for the hot read paths."""

    def __init__(self, table: Any, cache_ttl_s: float = 30.0) -> None:
        self.table = table
        self.cache_ttl_s = cache_ttl_s
        self._cache: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def get(self, sku: str, *, consistent: bool = False) -> dict[str, Any] | None:
        """A product with defaults filled in, or None."""
        kwargs: dict[str, Any] = {"Key": {"sku": sku}}
        if consistent:
            kwargs["ConsistentRead"] = True
        item = self.table.get_item(**kwargs).get("Item")
        return with_defaults(item) if item else None

    def get_cached(self, sku: str) -> dict[str, Any] | None:
        """A product's settings, cached briefly: settings change rarely and every notice reads them."""
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(sku)
            if hit and now - hit[0] < self.cache_ttl_s:
                return hit[1]
        product = self.get(sku)
        with self._lock:
            self._cache[sku] = (now, product)
        return product

    def upsert(self, sku: str, settings: dict[str, Any]) -> dict[str, Any]:
        """Create or update a product's settings, leaving its stock level and counters alone."""
        names = {f"#{k}": k for k in settings}
        values = {f":{k}": v for k, v in settings.items()}
        sets = [f"#{k} = :{k}" for k in settings]
        sets.append("waiting_count = if_not_exists(waiting_count, :zero)")
        values[":zero"] = 0
        result = self.table.update_item(
            Key={"sku": sku},
            UpdateExpression="SET " + ", ".join(sets),
            ExpressionAttributeNames=names or None,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        with self._lock:
            self._cache.pop(sku, None)
        return with_defaults(result["Attributes"])

    def all(self) -> list[dict[str, Any]]:
        """Every product (dev console and catalogue sync only: the catalogue is small)."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {}
        while True:
            page = self.table.scan(**kwargs)
            items.extend(with_defaults(i) for i in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return sorted(items, key=lambda i: i["sku"])
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def join_item(self, sku: str) -> TxItem:
        """Transaction item: count one more shopper waiting, only for a product that is sold."""
        return {
            "Update": {
                "TableName": self.name,
                "Key": {"sku": sku},
                "UpdateExpression": "ADD waiting_count :one",
                # Nobody joins a list for a SKU we do not sell (no ghost queues).
                "ConditionExpression": "attribute_exists(sku) AND (attribute_not_exists(discontinued) OR discontinued = :no)",
                "ExpressionAttributeValues": {":one": 1, ":no": False},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def leave_item(self, sku: str) -> TxItem:
        """Transaction item: count one fewer shopper waiting."""
        return {
            "Update": {
                "TableName": self.name,
                "Key": {"sku": sku},
                # No condition: it moves in the same transaction as the request's state, so it stays
                # in step, and a leave must never be refused because of a counter.
                "UpdateExpression": "ADD waiting_count :minus",
                "ExpressionAttributeValues": {":minus": -1},
            }
        }

    # --- Demand: out-of-stock products ranked by people waiting, from the sparse by-demand index.

    def demand(self, *, limit: int = 20) -> list[dict[str, Any]]:
        """Out-of-stock products with the most people waiting first, read from GSI by-demand (never a scan)."""
        from boto3.dynamodb.conditions import Key

        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "IndexName": "by-demand",
            "KeyConditionExpression": Key("demand_key").eq(DEMAND_OUT),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        while len(items) < limit:
            page = self.table.query(**kwargs)
            items.extend(with_defaults(i) for i in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return items[:limit]


def with_defaults(item: dict[str, Any]) -> dict[str, Any]:
    """A catalogue item with unset settings filled from the shop-wide defaults."""
    merged = dict(DEFAULTS)
    merged.update({k: v for k, v in item.items() if v is not None})
    for key in ("threshold", "hold_window_s", "offer_window_s", "waiting_count"):
        if key in merged:
            merged[key] = int(merged[key])
    merged.setdefault("name", merged.get("sku", ""))
    merged.setdefault("checkout_url", "")
    return merged
