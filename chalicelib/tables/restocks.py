"""bisn-restocks: one item per detected restock, carrying the two unit counters of DESIGN §4."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Key

from chalicelib.tables.base import query_all

PENDING = "pending"  # written, job not yet on the queue
QUEUED = "queued"  # job on the queue; offers being made
CLOSED = "closed"  # level fell below threshold, or every unit is held or sold


class RestocksTable:
    """Restocks keyed by (sku, restock_ts). Fields: restock_id, webhook_id, units_total,
    units_available (not held or sold), units_offerable (not held, sold or promised to a live offer),
    state, copy (cached message text), pending_key/pending_since (sparse index of restocks not yet queued).
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def get(self, sku: str, restock_ts: str) -> dict[str, Any] | None:
        """One restock, read strongly consistent (its counters decide who is told)."""
        return self.table.get_item(Key={"sku": sku, "restock_ts": restock_ts}, ConsistentRead=True).get("Item")

    # --- Counter moves of DESIGN §4. Each returns a transaction item, so the row change that causes it
    # --- commits in the same transaction, conditional on the row's state.

    def _counter_item(self, sku: str, restock_ts: str, expression: str, condition: str | None, values: dict) -> dict:
        update: dict[str, Any] = {
            "TableName": self.name,
            "Key": {"sku": sku, "restock_ts": restock_ts},
            "UpdateExpression": expression,
            "ExpressionAttributeValues": values,
        }
        if condition:
            update["ConditionExpression"] = condition
        return {"Update": update}

    def take_offer_item(self, sku: str, restock_ts: str) -> dict:
        """Notice sent: units_offerable - 1, only while at least one unit is neither held nor promised."""
        return self._counter_item(
            sku,
            restock_ts,
            "ADD units_offerable :minus",
            # Never over-promise (invariant 5): live offers never exceed units_available.
            "units_offerable >= :one",
            {":minus": -1, ":one": 1},
        )

    def release_offer_item(self, sku: str, restock_ts: str) -> dict:
        """Offer lapsed unused, or a send failed and was rolled back: units_offerable + 1."""
        return self._counter_item(sku, restock_ts, "ADD units_offerable :one", None, {":one": 1})

    def hold_item(self, sku: str, restock_ts: str) -> dict:
        """Link clicked: units_available - 1, only while a unit is left."""
        return self._counter_item(
            sku,
            restock_ts,
            "ADD units_available :minus",
            # Never oversell (invariant 4): a unit is held only by a conditional decrement.
            "units_available >= :one",
            {":minus": -1, ":one": 1},
        )

    def return_hold_item(self, sku: str, restock_ts: str) -> dict:
        """Hold expired unbought: the unit is available and offerable again."""
        return self._counter_item(sku, restock_ts, "ADD units_available :one, units_offerable :one", None, {":one": 1})

    def for_sku(self, sku: str, *, since_ts: str = "") -> list[dict[str, Any]]:
        """A SKU's restocks from `since_ts` (a restock_ts prefix, ISO-8601) on, oldest first (support tools)."""
        condition = Key("sku").eq(sku) & Key("restock_ts").gte(since_ts) if since_ts else Key("sku").eq(sku)
        return list(query_all(self.table, KeyConditionExpression=condition, ScanIndexForward=True))

    def release_lapsed_offer_item(self, sku: str, restock_ts: str) -> dict:
        """Offer lapsed unused: units_offerable + 1, only while it is below units_available."""
        return self._counter_item(
            sku,
            restock_ts,
            "ADD units_offerable :one",
            # Never over-promise (invariant 5): when a level fall already took this promise off the counters
            # (units_offerable floored at units_available), it is not handed out a second time.
            "units_offerable < units_available",
            {":one": 1},
        )
