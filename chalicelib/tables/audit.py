"""bisn-audit: append-only facts per SKU, so every decision can be explained afterwards."""

from __future__ import annotations

import secrets
from typing import Any

from boto3.dynamodb.conditions import Key

from chalicelib.clock import iso
from chalicelib.tables.base import TxItem, query_all


class AuditTable:
    """Facts about restocks, notices, holds and refusals. Contacts appear only as keyed hashes."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def _item(self, sku: str, kind: str, now: float, facts: dict[str, Any]) -> dict[str, Any]:
        clean = {k: v for k, v in facts.items() if v is not None and v != ""}
        return {"sku": sku, "ts": f"{iso(now)}#{secrets.token_hex(3)}", "kind": kind, "at": int(now), **clean}

    def record(self, sku: str, kind: str, now: float, **facts: Any) -> dict[str, Any]:
        """Append one fact."""
        item = self._item(sku, kind, now, facts)
        # Append-only: a fact is written once and never overwritten.
        self.table.put_item(Item=item, ConditionExpression="attribute_not_exists(ts)")
        return item

    def record_item(self, sku: str, kind: str, now: float, **facts: Any) -> TxItem:
        """Transaction item appending one fact together with the change it describes."""
        return {
            "Put": {
                "TableName": self.name,
                "Item": self._item(sku, kind, now, facts),
                "ConditionExpression": "attribute_not_exists(ts)",
            }
        }

    def for_sku(self, sku: str, *, newest_first: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        """The facts about one SKU, in time order."""
        kwargs: dict[str, Any] = {"KeyConditionExpression": Key("sku").eq(sku), "ScanIndexForward": not newest_first}
        items = []
        for item in query_all(self.table, **kwargs):
            items.append(item)
            if limit is not None and len(items) >= limit:
                break
        return items

    def for_contact(self, contact_key: str) -> list[dict[str, Any]]:
        """The facts that mention one person (by keyed hash), in time order."""
        return list(
            query_all(self.table, IndexName="by-contact", KeyConditionExpression=Key("contact_key").eq(contact_key))
        )

    def for_sku_since(self, sku: str, since_ts: str) -> list[dict[str, Any]]:
        """The facts about one SKU from `since_ts` (an ISO-8601 prefix of `ts`) on, in time order."""
        return list(query_all(self.table, KeyConditionExpression=Key("sku").eq(sku) & Key("ts").gte(since_ts)))
