"""Holds on the store itself: a unit we hold is taken out of the storefront too (Shopify, WooCommerce).

A store call is a side effect outside DynamoDB, so it is done exactly once by design:
- the intent is written in the same transaction as our own move (`UnitMoves.hold` writes "placing",
  `UnitMoves.expire` writes "releasing" when the store may hold the unit);
- the call is idempotent on the reservation id (the connector finds a hold it already placed);
- the row stays in the sweep's index while anything is owed, so a crash, a timeout or a store that is down is
  finished by the next sweep: a placing hold is placed, a releasing one released, before its unit is offered
  again (DESIGN §5 "Holds on the store");
- a store that cannot make the call idempotent by itself (Shopify's draftOrderCreate takes no key) may be left
  holding a second unit by a retry after a lost answer: the hold is then recorded unsettled, and each sweep asks the
  store to give back every other hold for the reservation until it shows that none can be left (`settle`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from chalicelib.clock import Clock
from chalicelib.counters import DONE, STORE_RETRY_S, UnitMoves
from chalicelib.faults import FaultHook, no_faults
from chalicelib.logs import offer_ref
from chalicelib.metrics import STORE_CREDENTIALS_REFUSED, MetricsFactory
from chalicelib.platforms.base import (
    HoldRequest,
    Store,
    StoreCredentialsRefused,
    StoreHold,
    StoreRefused,
    StoreUnavailable,
)
from chalicelib.tables.catalog import Product
from chalicelib.tables.reservations import Offer, OfferState, StoreState
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)

# How long past our hold's end the store is asked to keep the unit: the sweep releases it well before.
STORE_GRACE_S = 15 * 60

# What placing came to.
PLACED = "placed"  # the store holds the unit; `hold` says where the shopper checks out
STORE_DOWN = "store_down"  # the store did not answer; our hold stands and the placing is tried again
REFUSED = "refused"  # the store will not hold it (the unit is not there): our hold was ended, the place kept
ENDED = "ended"  # the hold ended meanwhile (it expired, or was bought): nothing to place

# What looking for a hold's duplicates came to (`settle`).
SETTLED = "settled"  # the store shows the hold's own hold and gave back any other: nothing left to look for
UNSETTLED = "unsettled"  # the store cannot show it yet (its search lags): the next sweep looks again


@dataclass(frozen=True)
class Placing:
    """What an attempt to place a store hold came to."""

    result: str
    hold: StoreHold | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class StoreHolds:
    """Places and releases the store's own holds for our held rows, finishing what a crash left half done."""

    tables: Tables
    store: Store
    moves: UnitMoves
    clock: Clock
    metrics: MetricsFactory
    faults: FaultHook = no_faults

    def request(self, row: Offer, product: Product) -> HoldRequest:
        """What the store is asked to hold for this row. A store that ends holds by itself (Shopify's reservation)
        is asked to keep the unit a little past our hold's end, so that our release, recorded as our own move of
        its level, is what gives the unit back (chalicelib/counters.py `store_released`)."""
        return HoldRequest(
            reservation_id=row.token_id,
            sku=row.sku,
            ids=dict(product.store_ids),
            expires_at=int(row.hold_expires_at or 0) + STORE_GRACE_S,
            product_name=product.name,
            checkout_url=product.checkout_url,
        )

    def place(self, row: Offer, product: Product) -> Placing:
        """Place the store's hold for a row we hold with the intent "placing", and record it."""
        now = self.clock.now()
        try:
            hold = self.store.place_hold(self.request(row, product))
        except StoreUnavailable as exc:
            self._unanswered(row, "placed", exc)
            self.tables.reservations.store_retry_at(
                row.token_id, min(int(now) + STORE_RETRY_S, int(row.hold_expires_at or now))
            )
            return Placing(STORE_DOWN)
        except StoreRefused as exc:
            # The store says the unit is not there (a walk-in bought it first): give ours back so the next level
            # report settles the counters, and keep the shopper's place.
            log.warning("store refused the hold for %s: %s", offer_ref(row.token_id), exc)
            move = self.moves.expire(row, now, reason="store_refused")
            return Placing(REFUSED if move.result == DONE else ENDED)
        self.faults("store.after_place")
        if self.moves.store_placed(
            row, ref=hold.ref, checkout_url=hold.checkout_url, now=now, unsettled=not hold.settled
        ):
            return Placing(PLACED, hold)
        current = self.tables.reservations.get(row.token_id)
        if current is not None and current.state == OfferState.HELD and current.store_state == StoreState.PLACED:
            # A simultaneous tap (or the sweep) recorded a hold first. The shopper checks out through the recorded
            # one; a different one this call got (or one the store could not show alone) may reserve a second
            # unit, so the recorded hold is flagged for `settle` to give any other back.
            if current.store_ref and current.store_checkout_url:
                if hold.ref != current.store_ref or not hold.settled:
                    due = min(int(now) + STORE_RETRY_S, int(current.hold_expires_at or now))
                    self.tables.reservations.store_unsettle(row.token_id, due)
                return Placing(PLACED, StoreHold(ref=current.store_ref, checkout_url=current.store_checkout_url))
            return Placing(PLACED, hold)
        # The hold ended while we placed it: its release (written by the ending move) gives the unit back.
        return Placing(ENDED)

    def finish(self, row: Offer) -> Placing:
        """The sweep's step for a held row still placing: place it now (the tap that wrote the intent crashed,
        or the store was down)."""
        product = self.tables.catalog.get_cached(row.sku) or Product.from_item({"sku": row.sku})
        return self.place(row, product)

    def settle(self, row: Offer, now: float) -> str:
        """The sweep's step for a live hold recorded unsettled: the store gives back every other hold it has for the
        reservation (never the recorded one, never one paid for), and once it shows the recorded one the flag goes.
        Until then the row is due again within a minute (never past the hold's end, whose release takes every
        hold back). A crash between the store's answer and the flag's removal only repeats the look next run."""
        due_again = min(int(now) + STORE_RETRY_S, int(row.hold_expires_at or now))
        try:
            settled = self.store.release_duplicates(row.token_id, row.store_ref or "")
        except StoreUnavailable as exc:
            self._unanswered(row, "checked for duplicates", exc)
            self.tables.reservations.store_unsettled_retry_at(row.token_id, due_again)
            return STORE_DOWN
        if not settled:
            self.tables.reservations.store_unsettled_retry_at(row.token_id, due_again)
            return UNSETTLED
        self.faults("store.after_duplicates")
        self.tables.reservations.store_settled(row.token_id, int(row.hold_expires_at or now))
        return SETTLED

    def release(self, row: Offer) -> bool:
        """Give an ended hold's unit back to the store; False when the store did not answer (the row stays due)."""
        try:
            self.store.release_hold(row.token_id, row.store_ref)
        except StoreUnavailable as exc:
            self._unanswered(row, "released", exc)
            return False
        self.faults("store.after_release")
        self.moves.store_released(row)
        return True

    def _unanswered(self, row: Offer, done: str, exc: StoreUnavailable) -> None:
        """Log a store call that did not go through. Refused credentials are the shop's to fix, not a store that is
        down: said as an error and counted for the alarm, retried alike."""
        if isinstance(exc, StoreCredentialsRefused):
            log.error("store hold for %s not %s: %s", offer_ref(row.token_id), done, exc)
            self._count_refused()
        else:
            log.warning("store hold for %s not %s yet: %s", offer_ref(row.token_id), done, exc)

    def _count_refused(self) -> None:
        # Flushed at once: a tap's or a sweep's invocation has no other buffer of its own to carry it.
        buffer = self.metrics.start()
        buffer.count(STORE_CREDENTIALS_REFUSED)
        buffer.flush()
