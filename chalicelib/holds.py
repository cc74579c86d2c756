"""Holds: a tapped reserve link holds one unit while the shopper checks out (DESIGN §4 and §5 "Reserve").

`UnitMoves` is DESIGN §4's counter table as code for rows that already exist (hold, lapse, expiry,
conversion): each is ONE transaction that changes the offer row, its counters, the request and the
audit together, conditional on the row's current state. The reserve link, the orders webhook and the
sweep all move units only through it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from chalicelib.clock import Clock
from chalicelib.faults import FaultHook, no_faults
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.catalog import Product
from chalicelib.tables.requests import RequestState
from chalicelib.tables.reservations import Offer, OfferState
from chalicelib.tables.store import Tables
from chalicelib.tokens import TokenExpired, TokenInvalid, Tokens

log = logging.getLogger(__name__)

# What a move did.
DONE = "done"
MOVED = "moved"  # the row was no longer in the state the move starts from (someone else moved it first)
NO_UNIT = "no_unit"  # a hold found units_available at zero

# Why an offer lapsed.
UNUSED = "unused"
JUST_GONE = "just_gone"


@dataclass(frozen=True)
class Move:
    """The result of one counter-table move; `row` is the row's current image when it had MOVED."""

    result: str
    row: Offer | None = None


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


@dataclass(frozen=True, kw_only=True, eq=False)
class UnitMoves:
    """The rows of DESIGN §4's counter table for an existing offer row, each one conditional transaction."""

    tables: Tables

    def _facts(self, row: Offer) -> dict[str, Any]:
        return {
            "token_id": row.token_id,
            "restock_id": row.restock_id,
            "contact_key": row.contact_key,
            "channel": row.channel,
        }

    def _commit(self, tx: Tx, *request: str) -> TransactionCancelled | None:
        """Run the row's move (its "row", counter and "fact" items) with the request's items (`request`
        names them); None when it committed.

        When only the request's items are refused, the request no longer owns this offer (DynamoDB's
        TTL tidied it, or the shopper left the list): the unit must still move (invariant 7), so the
        row, counter and audit go on alone, still conditional on the row's state.
        """
        try:
            self.tables.run(tx)
            return None
        except TransactionCancelled as cancelled:
            request_failed = any(cancelled.failed(name) for name in request)
            if cancelled.failed_other_than(*request) or not request_failed:
                return cancelled
        try:
            self.tables.run(tx.without(*request))
            return None
        except TransactionCancelled as cancelled:
            return cancelled

    @staticmethod
    def _outcome(cancelled: TransactionCancelled | None, *, counter: str | None = None) -> Move:
        if cancelled is None:
            return Move(DONE)
        if cancelled.failed("row"):
            old = cancelled.old("row")
            return Move(MOVED, Offer.from_item(old) if old else None)
        if counter is not None and cancelled.failed(counter):
            return Move(NO_UNIT)
        # Neither condition failed: conflicts outlasted the retries. Nothing was written; let it surface.
        raise cancelled

    def hold(self, row: Offer, now: float, hold_window_s: int) -> Move:
        """Link tapped: offered → held, units_available − 1 (only if ≥ 1), request reserved."""
        sku, token_id = row.sku, row.token_id
        expires = int(now) + int(hold_window_s)
        tx = (
            Tx()
            .add(
                "row",
                self.tables.reservations.transition_item(
                    token_id,
                    OfferState.OFFERED,
                    OfferState.HELD,
                    due_at=expires,
                    held_at=int(now),
                    hold_expires_at=expires,
                ),
            )
            .add("units", self.tables.restocks.hold_item(sku, row.restock_ts))
            .add("fact", self.tables.audit.record_item(sku, "hold", now, hold_expires_at=expires, **self._facts(row)))
            .add("request", self.tables.requests.mark_reserved_item(sku, row.request_joined_ts, token_id=token_id))
        )
        return self._outcome(self._commit(tx, "request"), counter="units")

    def lapse(self, row: Offer, now: float, *, reason: str = UNUSED) -> Move:
        """Offer unused (or its unit just gone): offered → lapsed, units_offerable + 1, request back to waiting.

        The row stays in the sweep's index, due now, until a top-up for the freed promise is queued.
        """
        sku, token_id = row.sku, row.token_id
        tx = (
            Tx()
            .add(
                "row",
                self.tables.reservations.transition_item(
                    token_id,
                    OfferState.OFFERED,
                    OfferState.LAPSED,
                    due_at=min(_int(row.due_at) or int(now), int(now)),
                    lapsed_at=int(now),
                    lapse_reason=reason,
                ),
            )
            .add("units", self.tables.restocks.release_lapsed_offer_item(sku, row.restock_ts))
            .add(
                "fact",
                self.tables.audit.record_item(
                    sku, JUST_GONE if reason == JUST_GONE else "lapse", now, **self._facts(row)
                ),
            )
            .add(
                "request",
                self.tables.requests.back_to_waiting_item(
                    sku, row.request_joined_ts, token_id=token_id, from_state=RequestState.OFFERED
                ),
            )
        )
        cancelled = self._commit(tx, "request")
        if cancelled is not None and not cancelled.failed("row") and cancelled.failed("units"):
            # A level fall already took this promise off the counters: the row still lapses, once.
            cancelled = self._commit(tx.without("units"), "request")
        return self._outcome(cancelled)

    def expire(self, row: Offer, now: float) -> Move:
        """Hold not bought in time: held → expired, units_available + 1 and units_offerable + 1, request waiting.

        The row stays in the sweep's index until a top-up for the returned unit is queued.
        """
        sku, token_id = row.sku, row.token_id
        tx = (
            Tx()
            .add(
                "row",
                self.tables.reservations.transition_item(
                    token_id,
                    OfferState.HELD,
                    OfferState.EXPIRED,
                    due_at=min(_int(row.due_at) or int(now), int(now)),
                    expired_at=int(now),
                ),
            )
            .add("units", self.tables.restocks.return_hold_item(sku, row.restock_ts))
            .add("fact", self.tables.audit.record_item(sku, "expiry", now, **self._facts(row)))
            .add(
                "request",
                self.tables.requests.back_to_waiting_item(
                    sku, row.request_joined_ts, token_id=token_id, from_state=RequestState.RESERVED
                ),
            )
        )
        return self._outcome(self._commit(tx, "request"))

    def convert(self, row: Offer, order_id: str, now: float) -> Move:
        """Order placed: held → converted (leaves the sweep's index), request converted and off the list.

        The unit left units_available at the hold; the sale is counted on the restock so that the lower level
        the platform reports next is known to include it and is not taken off the counters a second time.
        """
        sku, token_id = row.sku, row.token_id
        tx = (
            Tx()
            .add(
                "row",
                self.tables.reservations.transition_item(
                    token_id,
                    OfferState.HELD,
                    OfferState.CONVERTED,
                    due_at=None,
                    order_id=order_id,
                    converted_at=int(now),
                ),
            )
            .add("sale", self.tables.restocks.sale_item(sku, row.restock_ts))
            .add("fact", self.tables.audit.record_item(sku, "conversion", now, order_id=order_id, **self._facts(row)))
            .add("request", self.tables.requests.mark_converted_item(sku, row.request_joined_ts, token_id=token_id))
            # The waiting count moves with the request's state, so it is decremented only if that moved.
            .add("waiting", self.tables.catalog.leave_item(sku))
        )
        return self._outcome(self._commit(tx, "request", "waiting"))


# What a tap on a reserve link came to (app.py answers each kind with its HTTP status).
HELD_NOW = "held"  # a unit is now held
HELD_AGAIN = "held_again"  # a second tap on one's own live hold
JUST_GONE_PAGE = "just_gone"  # no unit left; the shopper keeps their place
EXPIRED_LINK = "expired"  # lapsed offer, expired hold, used or too-old link
INVALID_LINK = "invalid"  # tampered, truncated or foreign token
UNKNOWN_LINK = "unknown"  # a genuine token naming no row
UNAVAILABLE = "unavailable"  # the product has no usable checkout URL; nothing is held


@dataclass(frozen=True)
class ReserveOutcome:
    """What a tap came to; `location` is the checkout URL for a hold, `reason` says why a link expired."""

    kind: str
    location: str | None = None
    reason: str | None = None
    hold_expires_at: int | None = None


def link_lifetime_s(row: Offer, product: Product) -> int:
    """How long a reserve link can be in use: the offer window the row was given, then its hold.

    A held row carries its own hold window; an offer not yet held may still be held for the product's hold
    window, which only ever adds to the limit (a live offer is refused by its own expiry, never by this).
    """
    offer_s = _int(row.offer_expires_at) - _int(row.offered_at)
    if row.held_at is not None and row.hold_expires_at is not None:
        hold_s = _int(row.hold_expires_at) - _int(row.held_at)
    else:
        hold_s = product.hold_window_s
    return max(0, offer_s) + max(0, hold_s)


def checkout_location(template: str, sku: str, reservation_id: str) -> str | None:
    """The product's checkout URL with {sku} and {reservation_id} filled in (URL-encoded); None if unusable."""
    if not template.startswith(("https://", "http://")):
        return None
    # Plain replacement rather than str.format: a shop's URL may hold other braces.
    return template.replace("{sku}", quote(sku, safe="")).replace("{reservation_id}", quote(reservation_id, safe=""))


@dataclass(frozen=True, kw_only=True, eq=False)
class HoldsService:
    """GET /reserve/{token}: verify the link, hold one unit in one transaction, send the shopper to checkout."""

    tokens: Tokens
    tables: Tables
    moves: UnitMoves
    clock: Clock
    faults: FaultHook = no_faults

    def reserve(self, token: str) -> ReserveOutcome:
        """Handle one tap; every answer is an outcome (a refusal is an answer, not an error)."""
        try:
            # Signature only here: the age limit depends on the product's windows, read from the row's SKU.
            signed = self.tokens.read_reserve(token)
        except TokenExpired:
            return ReserveOutcome(EXPIRED_LINK, reason="link_too_old")
        except TokenInvalid:
            return ReserveOutcome(INVALID_LINK)
        row = self.tables.reservations.get(signed.value)
        if row is None:
            return ReserveOutcome(UNKNOWN_LINK)
        product = self.tables.catalog.get_cached(row.sku) or Product.from_item({"sku": row.sku})
        try:
            # The token's age is measured on the clock that signed it (wall time) against the windows the row
            # was given, never the product's current ones: a window shortened later must not refuse a live link.
            # The row's own expiry, on the app's clock, is the authority on whether it is still live.
            self.tokens.read_reserve(token, max_age_s=link_lifetime_s(row, product))
        except (TokenExpired, TokenInvalid):
            return ReserveOutcome(EXPIRED_LINK, reason="link_too_old")
        return self._answer(row, product, self.clock.now())

    def _answer(self, row: Offer, product: Product, now: float) -> ReserveOutcome:
        state = row.state
        if state == OfferState.HELD:
            # The row is authoritative: a hold past its expiry is over even before the sweep has run.
            if now < _int(row.hold_expires_at):
                return self._redirect(HELD_AGAIN, row, product)
            return ReserveOutcome(EXPIRED_LINK, reason="hold_expired")
        if state == OfferState.OFFERED:
            if now >= _int(row.offer_expires_at):
                return ReserveOutcome(EXPIRED_LINK, reason="offer_lapsed")
            return self._hold(row, product, now)
        if state == OfferState.LAPSED and row.lapse_reason == JUST_GONE:
            return ReserveOutcome(JUST_GONE_PAGE)
        reasons = {OfferState.LAPSED: "offer_lapsed", OfferState.EXPIRED: "hold_expired", OfferState.CONVERTED: "used"}
        return ReserveOutcome(EXPIRED_LINK, reason=reasons.get(state, "ended"))

    def _hold(self, row: Offer, product: Product, now: float) -> ReserveOutcome:
        location = checkout_location(product.checkout_url, row.sku, row.token_id)
        if location is None:
            # Nothing is held that could not be bought; the shop's settings need fixing.
            log.error("product %s has no usable checkout URL; reserve link refused", row.sku)
            return ReserveOutcome(UNAVAILABLE)
        move = self.moves.hold(row, now, product.hold_window_s)
        if move.result == DONE:
            self.faults("reserve.after_hold")
            return ReserveOutcome(HELD_NOW, location, hold_expires_at=int(now) + product.hold_window_s)
        if move.result == NO_UNIT:
            return self._just_gone(row, now)
        # The row moved first (a simultaneous tap, or the sweep): answer for the state it is in now.
        current = move.row or self.tables.reservations.get(row.token_id)
        if current is None or current.state == OfferState.OFFERED:
            raise RuntimeError(f"offer {row.token_id} refused a hold while still offered")
        return self._answer(current, product, now)

    def _just_gone(self, row: Offer, now: float) -> ReserveOutcome:
        """No unit left (the level fell while offers were out): lapse the offer now so the place is kept."""
        move = self.moves.lapse(row, now, reason=JUST_GONE)
        if move.result != DONE:
            # A simultaneous tap or the sweep settled the row; the refusal is still a fact worth keeping.
            self.tables.audit.record(row.sku, JUST_GONE, now, token_id=row.token_id, contact_key=row.contact_key)
        return ReserveOutcome(JUST_GONE_PAGE)

    def _redirect(self, kind: str, row: Offer, product: Product) -> ReserveOutcome:
        location = checkout_location(product.checkout_url, row.sku, row.token_id)
        if location is None:
            log.error("product %s has no usable checkout URL; held shopper cannot be sent on", row.sku)
            return ReserveOutcome(UNAVAILABLE)
        return ReserveOutcome(kind, location, hold_expires_at=_int(row.hold_expires_at))
