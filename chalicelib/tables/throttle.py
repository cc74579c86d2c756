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
