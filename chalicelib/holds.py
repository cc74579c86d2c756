"""Holds: a tapped reserve link holds one unit while the shopper checks out (DESIGN §4 and §5 "Reserve").

Opening the link only looks (`look`, GET): mail and chat scanners open links before the shopper does, so
nothing is held until the page's form is sent (`reserve`, POST).

The hold itself, like every move of units, is a row of DESIGN §4's counter table in chalicelib/counters.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from urllib.parse import quote

from chalicelib.clock import Clock
from chalicelib.counters import DONE, JUST_GONE, NO_UNIT, UnitMoves
from chalicelib.faults import FaultHook, no_faults
from chalicelib.link_ids import is_link_id
from chalicelib.logs import correlated, offer_ref
from chalicelib.platforms.base import StoreRefused
from chalicelib.store_holds import PLACED, REFUSED, StoreHolds
from chalicelib.store_holds import STORE_DOWN as STORE_IS_DOWN
from chalicelib.tables.catalog import Product
from chalicelib.tables.reservations import Offer, OfferState, StoreState
from chalicelib.tables.store import Tables
from chalicelib.tokens import TokenExpired, TokenInvalid, Tokens

log = logging.getLogger(__name__)

# What opening or tapping a reserve link came to (app.py answers each kind with its HTTP status).
OFFER_PAGE = "offer"  # opened (GET): a live offer; the page's form holds one
HOLDING_PAGE = "holding"  # opened (GET): one's own live hold; the page's form goes on to checkout
HELD_NOW = "held"  # a unit is now held
HELD_AGAIN = "held_again"  # a second tap on one's own live hold
JUST_GONE_PAGE = "just_gone"  # no unit left; the shopper keeps their place
EXPIRED_LINK = "expired"  # lapsed offer, expired hold, used or too-old link
INVALID_LINK = "invalid"  # tampered, truncated or foreign token
UNKNOWN_LINK = "unknown"  # a genuine token naming no row
UNAVAILABLE = "unavailable"  # the product has no usable checkout URL; nothing is held
STORE_DOWN = "store_down"  # held for the shopper, but the store's checkout did not answer: tap again shortly


@dataclass(frozen=True)
class ReserveOutcome:
    """What a tap came to; `location` is the checkout URL for a hold, `reason` says why a link expired.

    A page names the product (its picture and its page in the shop), when the offer (or the hold) ends, and is
    written in the offer's language.
    """

    kind: str
    location: str | None = None
    reason: str | None = None
    hold_expires_at: int | None = None
    product_name: str | None = None
    offer_expires_at: int | None = None
    lang: str | None = None  # the offer's; None when the link names no offer
    product_image_url: str | None = None
    product_url: str | None = None


def link_lifetime_s(row: Offer, product: Product) -> int:
    """How long a reserve link can be in use: the offer window the row was given, then its hold.

    A held row carries its own hold window; an offer not yet held may still be held for the product's hold
    window, which only ever adds to the limit (a live offer is refused by its own expiry, never by this).
    """
    offer_s = (row.offer_expires_at or 0) - (row.offered_at or 0)
    if row.held_at is not None and row.hold_expires_at is not None:
        hold_s = (row.hold_expires_at or 0) - (row.held_at or 0)
    else:
        hold_s = product.hold_window_s
    return max(0, offer_s) + max(0, hold_s)


def checkout_location(template: str, sku: str, reservation_id: str) -> str | None:
    """The product's checkout URL with {sku} and {reservation_id} filled in (URL-encoded); None if unusable."""
    if not template.startswith(("https://", "http://")):
        return None
    # Plain replacement rather than str.format: a shop's URL may hold other braces.
    return template.replace("{sku}", quote(sku, safe="")).replace("{reservation_id}", quote(reservation_id, safe=""))


def _about(outcome: ReserveOutcome, row: Offer, product: Product) -> ReserveOutcome:
    """An outcome with what its page shows of the product, in the offer's language (a redirect needs neither)."""
    if outcome.location is not None:
        return outcome
    return replace(
        outcome,
        lang=row.lang,
        product_name=product.name or row.sku,
        product_image_url=product.image_url,
        product_url=product.product_url,
    )


@dataclass(frozen=True, kw_only=True, eq=False)
class HoldsService:
    """Reserve links: GET looks and writes nothing; POST holds one unit in one transaction and sends the shopper
    to checkout."""

    tokens: Tokens
    tables: Tables
    moves: UnitMoves
    store_holds: StoreHolds  # the stage's store: where the shopper checks out, and whether it holds units too
    clock: Clock
    faults: FaultHook = no_faults

    def look(self, token: str) -> ReserveOutcome:
        """An opened link (GET or HEAD): what its page shows. Reads only, never writes, never calls the store."""
        found = self._verified(token)
        if isinstance(found, ReserveOutcome):
            return found
        row, product = found
        now = self.clock.now()
        if row.state == OfferState.HELD and now < (row.hold_expires_at or 0):
            return _about(ReserveOutcome(HOLDING_PAGE, hold_expires_at=row.hold_expires_at), row, product)
        if row.state == OfferState.OFFERED and now < (row.offer_expires_at or 0):
            return _about(ReserveOutcome(OFFER_PAGE, offer_expires_at=row.offer_expires_at), row, product)
        return _about(self._ended(row), row, product)

    def reserve(self, token: str) -> ReserveOutcome:
        """Handle one tap (the page's form, POST); every answer is an outcome (a refusal is an answer, not an
        error)."""
        found = self._verified(token)
        if isinstance(found, ReserveOutcome):
            return found
        row, product = found
        with correlated(offer=offer_ref(row.token_id)):
            return _about(self._answer(row, product, self.clock.now()), row, product)

    def _verified(self, token: str) -> tuple[Offer, Product] | ReserveOutcome:
        """The offer row a genuine, young enough link names, with its product; or the outcome that refuses it."""
        if is_link_id(token):
            # A short link is the row's own random id: one GetItem, and the row's expiry is the only clock.
            row = self.tables.reservations.get(token)
            if row is None:
                return ReserveOutcome(UNKNOWN_LINK)
            return row, self.tables.catalog.get_cached(row.sku) or Product.from_item({"sku": row.sku})
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
        return row, product

    def _answer(self, row: Offer, product: Product, now: float) -> ReserveOutcome:
        # The row is authoritative: a hold (or an offer) past its own expiry is over even before the sweep has run.
        if row.state == OfferState.HELD and now < (row.hold_expires_at or 0):
            return self._redirect(HELD_AGAIN, row, product)
        if row.state == OfferState.OFFERED and now < (row.offer_expires_at or 0):
            return self._hold(row, product, now)
        return self._ended(row)

    @staticmethod
    def _ended(row: Offer) -> ReserveOutcome:
        """The page for a row that is not (or no longer) live: just gone, or expired and why."""
        state = row.state
        if state == OfferState.HELD:
            return ReserveOutcome(EXPIRED_LINK, reason="hold_expired")
        if state == OfferState.OFFERED:
            return ReserveOutcome(EXPIRED_LINK, reason="offer_lapsed")
        if state == OfferState.LAPSED and row.lapse_reason == JUST_GONE:
            return ReserveOutcome(JUST_GONE_PAGE)
        reasons = {OfferState.LAPSED: "offer_lapsed", OfferState.EXPIRED: "hold_expired", OfferState.CONVERTED: "used"}
        return ReserveOutcome(EXPIRED_LINK, reason=reasons.get(state, "ended"))

    def _hold(self, row: Offer, product: Product, now: float) -> ReserveOutcome:
        on_store = self.store_holds.store.holds_on_store
        location = None
        if on_store:
            if not product.store_ids:
                # Not (yet) synced from the platform: nothing could be held on the store, so nothing is held.
                log.error("product %s has no platform ids; reserve link refused until catalogue sync", row.sku)
                return ReserveOutcome(UNAVAILABLE)
        else:
            location = self._checkout(row, product)
            if location is None:
                # Nothing is held that could not be bought; the shop's settings need fixing.
                log.error("product %s has no usable checkout URL; reserve link refused", row.sku)
                return ReserveOutcome(UNAVAILABLE)
        move = self.moves.hold(row, now, product.hold_window_s, on_store=on_store)
        if move.result == DONE:
            self.faults("reserve.after_hold")
            expires = int(now) + product.hold_window_s
            if on_store:
                held = replace(
                    row,
                    state=OfferState.HELD,
                    held_at=int(now),
                    hold_expires_at=expires,
                    store_state=StoreState.PLACING,
                )
                return self._place(HELD_NOW, held, product)
            return ReserveOutcome(HELD_NOW, location, hold_expires_at=expires)
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

    def _checkout(self, row: Offer, product: Product) -> str | None:
        """Where a store that holds nothing itself sends the shopper (the generic store: the product's checkout
        URL with the reservation id); None when it has no usable one."""
        try:
            return self.store_holds.store.place_hold(self.store_holds.request(row, product)).checkout_url
        except StoreRefused:
            return None

    def _place(self, kind: str, row: Offer, product: Product) -> ReserveOutcome:
        """Our hold stands; the store's is placed now (or was, by a crash's retry), and the shopper goes to its
        checkout. A store that is down gets an honest page: the unit stays held and a second tap tries again."""
        placing = self.store_holds.place(row, product)
        if placing.result == PLACED and placing.hold is not None:
            return ReserveOutcome(kind, placing.hold.checkout_url, hold_expires_at=row.hold_expires_at)
        if placing.result == STORE_IS_DOWN:
            return ReserveOutcome(STORE_DOWN, hold_expires_at=row.hold_expires_at)
        if placing.result == REFUSED:
            return ReserveOutcome(JUST_GONE_PAGE)
        current = self.tables.reservations.get(row.token_id)
        if current is None or current.state == OfferState.HELD:
            raise RuntimeError(f"hold {row.token_id} ended while still held")
        return self._answer(current, product, self.clock.now())

    def _redirect(self, kind: str, row: Offer, product: Product) -> ReserveOutcome:
        if row.store_state == StoreState.PLACED and row.store_checkout_url:
            return ReserveOutcome(kind, row.store_checkout_url, hold_expires_at=(row.hold_expires_at or 0))
        if row.store_state == StoreState.PLACING:
            return self._place(kind, row, product)
        location = self._checkout(row, product)
        if location is None:
            log.error("product %s has no usable checkout URL; held shopper cannot be sent on", row.sku)
            return ReserveOutcome(UNAVAILABLE)
        return ReserveOutcome(kind, location, hold_expires_at=(row.hold_expires_at or 0))
