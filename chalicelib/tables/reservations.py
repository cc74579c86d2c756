"""bisn-reservations: offers and holds, one row per signed link."""

from __future__ import annotations

from typing import Any

OFFERED = "offered"
HELD = "held"
LAPSED = "lapsed"
EXPIRED = "expired"
CONVERTED = "converted"
DUE_KEY = "due"  # every row that the sweep must look at carries due_key/due_at (a sparse index)


class ReservationsTable:
    """Offer/hold rows keyed by token_id. Fields: sku, restock_ts, restock_id, request_joined_ts,
    contact_key, channel, state, offer_expires_at, hold_expires_at, due_key/due_at, ttl.
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def get(self, token_id: str) -> dict[str, Any] | None:
        """One offer or hold, read strongly consistent."""
        return self.table.get_item(Key={"token_id": token_id}, ConsistentRead=True).get("Item")
