"""Leaving a waiting list: one request out, its uniqueness item with it, and any live offer passed on.

Every way a shopper leaves (the unsubscribe link, an SMS STOP, the manage page, an opt-out or
erasure by staff) goes through `QueueExits`, so each of them keeps the same invariants:

- the request, its uniqueness item, the catalogue's `waiting_count` and an audit fact change in ONE
  transaction, conditional on the state the request was seen in (a racing offer or click wins, and
  the leave is retried against the new state);
- a live offer is released as the counters table of DESIGN §4 says (offer `offered` → `lapsed`,
  `units_offerable` + 1: `UnitMoves.lapse_leaving` in chalicelib/counters.py) in that same transaction, and a top-up job is queued so the next person is
  told. The lapsed row stays in the sweep's due-time index until the job is on the queue, so a crash
  between the two is finished by the sweep (invariant 7);
- a unit the shopper already holds is theirs until it is bought or the hold expires; leaving never
  takes it away, and the caller says so. The request is marked, and the sweep takes the place off the list
  when the hold expires unbought (a purchase ends it anyway);
- a place that was told about a restock leaves the memory of that behind (its uniqueness item, naming no
  place), so joining again later never brings a second notice for that restock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.clock import Clock
from chalicelib.counters import UnitMoves
from chalicelib.faults import FaultHook, no_faults
from chalicelib.queue.jobs import JobQueue
from chalicelib.queue.messages import Job
from chalicelib.tables.base import TransactionCancelled, Tx, TxItem
from chalicelib.tables.requests import Request, RequestState
from chalicelib.tables.reservations import OfferState
from chalicelib.tables.store import Tables

# Why someone left; recorded on the audit fact so "why was I not told?" has an answer.
REASONS = ("unsubscribe", "stop", "manage", "admin", "forget", "switch", "bounce", "complaint", "invalid_number")

LEFT = "left"  # the place is gone
RELEASED = "released"  # the place is gone and its live offer went to the next person
HOLDING = "holding"  # the shopper holds a unit; the place stays until it is bought or the hold expires
ERASED = "erased"  # a finished (bought) place was erased on request
GONE = "gone"  # nothing was there any more (already left, bought and tidied, or never joined)

ATTEMPTS = 4  # a request moving under our feet (offered, clicked) is re-read and tried again


class _Moved(Exception):
    """The request or its offer changed between our read and our write."""


@dataclass(frozen=True)
class Exit:
    """What happened to one request when its owner left."""

    sku: str
    joined_ts: str
    outcome: str
    hold_expires_at: int | None = None
    restock_id: str | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class QueueExits:
    """Takes people off waiting lists without losing a unit or a place that is not theirs."""

    tables: Tables
    moves: UnitMoves
    jobs: JobQueue
    clock: Clock
    faults: FaultHook = no_faults

    def places(self, contact_key: str) -> list[Request]:
        """Every request one person has (any state), each re-read strongly consistent, oldest SKU first."""
        found = []
        for seen in self.tables.requests.by_contact(contact_key):
            # The by-contact index is eventually consistent; the table item is the truth.
            current = self.tables.requests.get(seen.sku, seen.joined_ts)
            if current is not None and current.contact_key == contact_key:
                found.append(current)
        return sorted(found, key=lambda r: (r.sku, r.joined_ts))

    def leave_all(self, contact_key: str, *, reason: str, erase_finished: bool = False) -> list[Exit]:
        """Take one person off every list they are on; bought places are erased only when asked."""
        return [
            self.leave(request, reason=reason, erase_finished=erase_finished)
            for request in self.places(contact_key)
            if erase_finished or request.live
        ]

    def leave_sku(self, contact_key: str, sku: str, *, reason: str) -> Exit:
        """Take one person off one SKU's list (the manage page's 'leave this list')."""
        request = self.tables.requests.place_of(sku, contact_key)
        if request is None:
            return Exit(sku, "", GONE)
        return self.leave(request, reason=reason)

    def leave(self, request: Request, *, reason: str, erase_finished: bool = False) -> Exit:
        """Take one request off its list, retrying when it moves between our read and our write."""
        if reason not in REASONS:
            raise ValueError(f"unknown reason {reason!r}")
        sku, joined_ts, key = request.sku, request.joined_ts, request.contact_key
        current: Request | None = request
        for _ in range(ATTEMPTS):
            if current is None or current.contact_key != key:
                return Exit(sku, joined_ts, GONE)
            state = current.state
            try:
                if state == RequestState.WAITING:
                    return self._leave_waiting(current, reason)
                if state == RequestState.OFFERED:
                    return self._leave_offered(current, reason)
                if state == RequestState.RESERVED:
                    return self._holding(current, reason)
                if state == RequestState.CONVERTED and erase_finished:
                    return self._erase_finished(current, reason)
                return Exit(sku, joined_ts, GONE)
            except (TransactionCancelled, _Moved):
                # An offer was made, a link clicked or an order placed meanwhile: look again and act on that.
                current = self.tables.requests.get(sku, joined_ts)
        raise RuntimeError(f"request {sku}/{joined_ts} kept changing; try again")

    # --- One transaction per state the request can be left from.

    def _remove(self, tx: Tx, request: Request, state: str, token_id: str | None = None) -> Tx:
        """Add the items that take the place off its list: the request, its uniqueness item, the count."""
        sku, joined_ts, key = request.sku, request.joined_ts, request.contact_key
        return (
            tx.add(
                "request",
                self.tables.requests.remove_item(sku, joined_ts, contact_key=key, state=state, token_id=token_id),
            )
            .add(
                "unique",
                self.tables.requests.remove_unique_item(
                    sku, key, joined_ts, told=request.last_notified_restock, ttl=request.ttl
                ),
            )
            .add("waiting", self.tables.catalog.leave_item(sku, request.shard))
        )

    def _leave_waiting(self, request: Request, reason: str) -> Exit:
        now = self.clock.now()
        sku, joined_ts = request.sku, request.joined_ts
        tx = self._remove(Tx(), request, RequestState.WAITING).add("fact", self._fact(request, reason, now))
        self.tables.run(tx)
        return Exit(sku, joined_ts, LEFT)

    def _leave_offered(self, request: Request, reason: str) -> Exit:
        now = self.clock.now()
        sku, joined_ts = request.sku, request.joined_ts
        token_id = request.offer_token or ""
        offer = self.tables.reservations.get(token_id) if token_id else None
        if offer is None or offer.state != OfferState.OFFERED:
            # The request says offered but its row moved on (clicked, or lapsed by the sweep this instant).
            raise _Moved(token_id)
        restock_ts, restock_id = offer.restock_ts, offer.restock_id
        # The row stays in the sweep's due-time index (due now) until the top-up is on the queue: if we stop
        # before sending it, the sweep sees a lapsed row and queues it (invariant 7).
        place = self._remove(Tx(), request, RequestState.OFFERED, token_id)
        place.add("fact", self._fact(request, reason, now, restock_id=restock_id, token_id=token_id))
        self.moves.lapse_leaving(offer, now, reason=reason, leaving=place)
        self.faults("leave.after_release")
        self.jobs.send(Job(sku=sku, restock_id=restock_id, restock_ts=restock_ts, kind="topup"))
        self.faults("leave.after_topup")
        self.tables.reservations.clear_due(token_id, OfferState.LAPSED)
        return Exit(sku, joined_ts, RELEASED, restock_id=restock_id)

    def _holding(self, request: Request, reason: str) -> Exit:
        token_id = request.offer_token or ""
        sku, joined_ts = request.sku, request.joined_ts
        if not self.tables.requests.request_leave(sku, joined_ts, token_id=token_id, reason=reason):
            raise _Moved(token_id)  # bought or expired this instant: look again
        hold = self.tables.reservations.get(token_id) if token_id else None
        expires = hold.hold_expires_at if hold else None
        return Exit(sku, joined_ts, HOLDING, hold_expires_at=expires)

    def _erase_finished(self, request: Request, reason: str) -> Exit:
        now = self.clock.now()
        sku, joined_ts = request.sku, request.joined_ts
        # A bought place no longer counts as waiting, so the catalogue's count is left alone.
        key = request.contact_key
        tx = (
            Tx()
            .add(
                "request",
                self.tables.requests.remove_item(sku, joined_ts, contact_key=key, state=RequestState.CONVERTED),
            )
            .add("fact", self._fact(request, reason, now))
        )
        self.tables.run(tx)
        # After a purchase the shopper may have joined again; that newer place keeps its uniqueness item.
        self.tables.requests.drop_unique(sku, key, only_ref=joined_ts)
        return Exit(sku, joined_ts, ERASED)

    def _fact(self, request: Request, reason: str, now: float, **extra: Any) -> TxItem:
        return self.tables.audit.record_item(
            request.sku,
            "leave",
            now,
            contact_key=request.contact_key,
            reason=reason,
            joined_ts=request.joined_ts,
            state=request.state,
            **extra,
        )
