"""bisn-restocks: one item per detected restock, carrying the two unit counters of DESIGN §4."""

from __future__ import annotations

from typing import Any

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
