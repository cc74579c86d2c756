"""bisn-throttle: windowed counters (rate limits, unknown-SKU attempts) and remembered webhook ids, expiring by TTL."""

from __future__ import annotations

from typing import Any

from chalicelib.tables.base import TxItem, update_alone


class ThrottleTable:
    """Counters per key and time window, shared by every Lambda instance."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def charge_item(self, key: str, limit: int, expires_at: int) -> TxItem:
        """Transaction item: count one request against `key`, refusing once `limit` is reached."""
        return {
            "Update": {
                "TableName": self.name,
                "Key": {"key": key},
                "UpdateExpression": "ADD n :one SET #ttl = if_not_exists(#ttl, :ttl)",
                # The rate limit holds across Lambda instances because the count lives here.
                "ConditionExpression": "attribute_not_exists(n) OR n < :limit",
                "ExpressionAttributeNames": {"#ttl": "ttl"},
                "ExpressionAttributeValues": {":one": 1, ":limit": limit, ":ttl": expires_at},
            }
        }

    def charge_many(self, key: str, count: int, limit: int, expires_at: int) -> bool:
        """Count `count` at once against `key`; False (nothing counted) when that would pass `limit`."""
        if count <= 0:
            return True
        if count > limit:
            return False
        return update_alone(
            self.table,
            {
                "Update": {
                    "TableName": self.name,
                    "Key": {"key": key},
                    "UpdateExpression": "ADD n :count SET #ttl = if_not_exists(#ttl, :ttl)",
                    "ConditionExpression": "attribute_not_exists(n) OR n <= :room",
                    "ExpressionAttributeNames": {"#ttl": "ttl"},
                    "ExpressionAttributeValues": {":count": count, ":room": limit - count, ":ttl": expires_at},
                }
            },
        )

    def charge(self, key: str, limit: int, expires_at: int) -> bool:
        """Count one request on its own; False when the limit was already reached."""
        return update_alone(self.table, self.charge_item(key, limit, expires_at))

    def remember_item(self, key: str, expires_at: int) -> TxItem:
        """Transaction item: remember that `key` happened (until `expires_at`); refused if it already had."""
        return {
            "Put": {
                "TableName": self.name,
                "Item": {"key": key, "ttl": expires_at},
                # Exactly once (invariant 6): a second delivery of the same webhook or SES event finds the first one's record.
                "ConditionExpression": "attribute_not_exists(#key)",
                "ExpressionAttributeNames": {"#key": "key"},
            }
        }

    def seen(self, key: str) -> bool:
        """Whether `key` is remembered (read strongly consistent: a retry may follow the first delivery at once)."""
        return "Item" in self.table.get_item(
            Key={"key": key}, ConsistentRead=True, ProjectionExpression="#key", ExpressionAttributeNames={"#key": "key"}
        )

    def bump(self, key: str, expires_at: int) -> int:
        """Add one to a counter and return its new value."""
        result = self.table.update_item(
            Key={"key": key},
            UpdateExpression="ADD n :one SET #ttl = if_not_exists(#ttl, :ttl)",
            ExpressionAttributeNames={"#ttl": "ttl"},
            ExpressionAttributeValues={":one": 1, ":ttl": expires_at},
            ReturnValues="UPDATED_NEW",
        )
        return int(result["Attributes"]["n"])

    # --- The unknown-SKU digest: one item per window naming the SKUs that crossed the alert threshold.

    def add_to_digest(self, key: str, sku: str, *, cap: int, expires_at: int) -> None:
        """Name `sku` in a window's digest; past `cap` names only the count of the others grows."""
        try:
            self.table.update_item(
                Key={"key": key},
                UpdateExpression="ADD skus :sku SET #ttl = if_not_exists(#ttl, :ttl)",
                # Bounded: taps on made-up SKUs must not grow one item without limit (400 KB per item).
                ConditionExpression="attribute_not_exists(skus) OR size(skus) < :cap",
                ExpressionAttributeNames={"#ttl": "ttl"},
                ExpressionAttributeValues={":sku": {sku}, ":cap": cap, ":ttl": expires_at},
            )
        except self.table.meta.client.exceptions.ConditionalCheckFailedException:
            self.bump(key, expires_at)

    def digest(self, key: str) -> tuple[list[str], int, bool]:
        """A window's digest: the SKUs named, how many more crossed the threshold, and whether it was sent."""
        item = self.table.get_item(Key={"key": key}, ConsistentRead=True).get("Item") or {}
        return sorted(str(s) for s in item.get("skus", ())), int(item.get("n", 0)), "sent_at" in item

    def mark_digest_sent(self, key: str, now: float) -> bool:
        """Mark a window's digest sent; False when another sweep marked it first."""
        try:
            self.table.update_item(
                Key={"key": key},
                UpdateExpression="SET sent_at = :now",
                # One digest per window: whichever sweep marks it first is the one that sent it.
                ConditionExpression="attribute_exists(skus) AND attribute_not_exists(sent_at)",
                ExpressionAttributeValues={":now": int(now)},
            )
        except self.table.meta.client.exceptions.ConditionalCheckFailedException:
            return False
        return True
