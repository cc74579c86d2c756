"""Taking back an unsubscribe by link, for a shopper who pressed Unsubscribe by mistake.

The unsubscribe's done page carries a signed undo token (chalicelib/tokens.py, `UNDO_WINDOW_S` old at most) naming
the person, the suppression row's written-at stamp and the nonce of the undo record the unsubscribe kept in the
throttle table (`UndoRecords.keep_undo`: the lists left, the contact, channel, name and language, gone by TTL
after the window). Pressing Undo lifts that very opt-out, and no other (`OptoutTable.undo_item`: the source is the
unsubscribe link and the stamp is the same), then puts the person back on each list they left through capture's own
proven join: a fresh place at the end of the line, with every condition a tap has, confirmed already (the address
proved itself by opening the unsubscribe link), never the old place (others may have been told meanwhile).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from chalicelib.capture import CaptureService, NotifyMe, NotProven
from chalicelib.clock import Clock
from chalicelib.contacts import match_keys, normalise_contact
from chalicelib.errors import DomainError
from chalicelib.i18n import DEFAULT_LANGUAGE
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)

UNDONE = "undone"  # the opt-out is lifted (and the lists joined again, where they took the place)
ALREADY = "already"  # that unsubscribe was taken back already: nothing more changed
EXPIRED = "expired"  # the window has passed: the person stays unsubscribed
NEWER = "newer"  # the person opted out again since, by the link: that newer opt-out stands
KEPT = "kept"  # messages were stopped another way since (a bounce, a complaint, STOP, staff): that stands


@dataclass(frozen=True)
class UndoOutcome:
    """What pressing Undo did."""

    outcome: str
    back: list[str] = field(default_factory=list)  # SKUs whose list the person is back on, at its end
    refused: list[str] = field(default_factory=list)  # SKUs whose list would not take them (full, no longer sold)
    source: str | None = None  # with KEPT: the source of the opt-out that stands


@dataclass(frozen=True, kw_only=True, eq=False)
class UnsubscribeUndo:
    """Lifts one unsubscribe by link inside its window and puts the person back at the end of the lists they left."""

    tables: Tables
    capture: CaptureService
    clock: Clock
    hash_key: str
    default_region: str

    def undo(self, key: str, at: int, nonce: str) -> UndoOutcome:
        """Take back the unsubscribe an undo token names (its person, opt-out stamp and record nonce); safe to
        repeat: a second press, or one after a newer opt-out, changes nothing and says why."""
        now = self.clock.now()
        kept = self.tables.undo_records.undo_record(key)
        if kept is None or kept.get("nonce") != nonce:
            return self._why_not(key, at)
        if kept.get("lifted") is None:
            if int(kept.get("expires_at") or 0) <= int(now):
                return UndoOutcome(EXPIRED)
            lift = (
                Tx()
                .add("optout", self.tables.optout.undo_item(key, at))
                .add("undo", self.tables.undo_records.lift_undo_item(key, nonce, now))
            )
            try:
                self.tables.run(lift)
            except TransactionCancelled:
                # Another press lifted it this instant, or the opt-out changed: say what stands now.
                return self._why_not(key, at)
        # Lifted (now, or by a press a crash cut short): every list still on the record is joined again.
        rejoined = self._rejoin(key, nonce, kept, now)
        if rejoined is None:
            return self._why_not(key, at)
        self.tables.undo_records.drop_undo(key, nonce)
        return UndoOutcome(UNDONE, *rejoined)

    def _rejoin(self, key: str, nonce: str, kept: dict[str, Any], now: float) -> tuple[list[str], list[str]] | None:
        """Join each list on the record again; (back on, refused), or None when the person opted out again meanwhile
        (nothing more is joined: invariant 3)."""
        places: dict[str, Any] = dict(kept.get("places") or {})
        if not places:
            return [], []
        contact = normalise_contact(str(kept["channel"]), str(kept["contact"]), self.default_region)
        keys = match_keys(contact, self.hash_key)
        back: list[str] = []
        refused: list[str] = []
        for sku in sorted(places):
            place = dict(places[sku] or {})
            tap = NotifyMe(
                sku=sku,
                contact=contact,
                name=str(place.get("name") or ""),
                lang=str(place.get("lang") or DEFAULT_LANGUAGE),
            )

            def proof(sku: str = sku) -> Tx:
                optout, undos = self.tables.optout, self.tables.undo_records
                return (
                    Tx()
                    .add("optout", *(optout.not_suppressed_item(k) for k in keys))
                    .add("proof", undos.take_undo_place_item(key, nonce, sku))
                    .add("fact", self.tables.audit.record_item(sku, "unsubscribe_undone", now, contact_key=key))
                )

            try:
                self.capture.join_proven(tap, proof)
            except NotProven as refusal:
                if refusal.part == "optout":
                    return None
                continue  # another press took this list this instant
            except DomainError as refusal:
                log.info("an undone unsubscribe could not join a list again (%s)", refusal.code)
                self.tables.undo_records.take_undo_place(key, nonce, sku)
                refused.append(sku)
                continue
            back.append(sku)
        return back, refused

    def _why_not(self, key: str, at: int) -> UndoOutcome:
        """The honest answer when the token's unsubscribe cannot be taken back (nothing is changed)."""
        record = self.tables.optout.get(key)
        if record is None:
            return UndoOutcome(ALREADY)
        source = str(record.get("source") or "")
        if source != "unsubscribe":
            return UndoOutcome(KEPT, source=source)
        if int(record.get("at") or 0) != int(at):
            return UndoOutcome(NEWER)
        # That very unsubscribe still stands and its record is gone: the window passed (DynamoDB's TTL took it).
        return UndoOutcome(EXPIRED)
