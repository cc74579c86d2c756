"""The orders webhook: a shop platform says a held unit was bought (POST /webhooks/orders, Standard Webhooks)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib.clock import Clock
from chalicelib.counters import DONE, UnitMoves
from chalicelib.errors import BadRequest, Conflict, NotFound
from chalicelib.faults import FaultHook, no_faults
from chalicelib.logs import correlated, offer_ref
from chalicelib.tables.base import TransactionCancelled
from chalicelib.tables.reservations import (
    Offer,
    OfferState,
)
from chalicelib.tables.store import Tables
from chalicelib.webhooks import parse_json_body, verify

RESERVATION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_ORDER_ID_LEN = 128

# What an order came to (every one answers 200).
CONVERTED_NOW = "converted"
ALREADY_CONVERTED = "already_converted"
HOLD_ENDED = "hold_expired"


@dataclass(frozen=True)
class Order:
    """A parsed order notice. `draft_ref` is the store's draft order the order was completed from, when the order
    was matched to the hold through that draft (Shopify) rather than through the reservation id it carries."""

    reservation_id: str
    order_id: str
    draft_ref: str | None = None


@dataclass(frozen=True)
class OrderOutcome:
    """What the order did to its reservation; `order_id` is the order that converted it, when one did."""

    status: str
    reservation_id: str
    order_id: str

    def body(self) -> dict[str, str]:
        """The JSON answer."""
        return {"status": self.status, "reservation_id": self.reservation_id, "order_id": self.order_id}


def parse_order(data: Any) -> Order:
    """Validate an order body `{"reservation_id", "order_id"}` (pure: no AWS)."""
    if not isinstance(data, Mapping):
        raise BadRequest("The body must be a JSON object.", code="invalid_body")
    reservation_id = data.get("reservation_id")
    if reservation_id is None or reservation_id == "":
        raise BadRequest("reservation_id is required.", code="missing_field")
    if not isinstance(reservation_id, str) or not RESERVATION_ID.match(reservation_id):
        raise BadRequest(
            "reservation_id must be the id from the checkout URL (letters, digits, - and _).", code="invalid_field"
        )
    order_id = data.get("order_id")
    if order_id is None or order_id == "":
        raise BadRequest("order_id is required.", code="missing_field")
    # Platforms number orders as integers or strings; both are kept as text.
    if isinstance(order_id, bool) or not isinstance(order_id, str | int):
        raise BadRequest("order_id must be a string or a whole number.", code="invalid_field")
    text = str(order_id).strip()
    if not text or len(text) > MAX_ORDER_ID_LEN or any(ord(c) < 32 for c in text):
        raise BadRequest(f"order_id must be 1 to {MAX_ORDER_ID_LEN} printable characters.", code="invalid_field")
    return Order(reservation_id, text)


@dataclass(frozen=True, kw_only=True, eq=False)
class OrdersService:
    """Marks holds converted. Idempotent: a redelivered webhook finds the work done and says so."""

    tables: Tables
    moves: UnitMoves
    clock: Clock
    webhook_secrets: Callable[[], Sequence[str]]
    faults: FaultHook = no_faults

    def receive(self, raw: bytes | None, headers: Mapping[str, str]) -> OrderOutcome:
        """Verify a delivery's signature, parse it, and record the order; DomainError for anything refused."""
        delivery = verify(raw, headers, self.webhook_secrets())
        return self.record(parse_order(parse_json_body(delivery)))

    def record(self, order: Order) -> OrderOutcome:
        """Convert the order's hold, or record why it could not be."""
        with correlated(offer=offer_ref(order.reservation_id)):
            row = self.tables.reservations.get(order.reservation_id)
            if row is None:
                raise NotFound("No reservation has this id.", code="unknown_reservation")
            if order.draft_ref is not None and row.store_ref is not None and row.store_ref != order.draft_ref:
                # A copy of the hold's draft order (its attributes and tag copied with it) is not the one whose
                # checkout the shopper was sent to: only that one buys the held unit.
                raise Conflict("The order was completed from another draft order than this hold's.", code="other_draft")
            return self._settle(row, order, self.clock.now())

    def _settle(self, row: Offer, order: Order, now: float) -> OrderOutcome:
        state = row.state
        if state == OfferState.HELD:
            # Converted even a moment past its expiry while the sweep has not returned the unit:
            # the unit is still out of stock on our books, which is what the sale needs.
            move = self.moves.convert(row, order.order_id, now)
            if move.result == DONE:
                self.faults("orders.after_convert")
                return OrderOutcome(CONVERTED_NOW, order.reservation_id, order.order_id)
            current = move.row or self.tables.reservations.get(order.reservation_id)
            if current is None or current.state == OfferState.HELD:
                raise RuntimeError(f"hold {order.reservation_id} refused conversion while still held")
            return self._settle(current, order, now)
        if state == OfferState.CONVERTED:
            return OrderOutcome(ALREADY_CONVERTED, order.reservation_id, row.order_id or order.order_id)
        if state in (OfferState.LAPSED, OfferState.EXPIRED):
            self._record_late(row, order, now)
            return OrderOutcome(HOLD_ENDED, order.reservation_id, order.order_id)
        if state == OfferState.OFFERED:
            raise Conflict(
                "This reservation was never held: its link was not tapped, so no unit was set aside for this order.",
                code="not_held",
            )
        raise Conflict(f"This reservation is in state {state!r} and cannot take an order.", code="not_held")

    def _record_late(self, row: Offer, order: Order, now: float) -> None:
        """An order on a lapsed offer or expired hold: audit and count it once per order id."""
        try:
            self.moves.late_order(row, order.order_id, now)
        except TransactionCancelled as cancelled:
            if not cancelled.failed("row"):
                raise
            # Already recorded for this order id: a redelivery counts nothing twice.
