"""DESIGN §4's counter table as code: every move of units between a restock's counters and its offer rows.

Each public method is one row of that table (or its undoing) and commits as ONE transaction with the row
change that causes it, conditional on that row's state:

| move | who | method |
|---|---|---|
| notice sent | notifier | `offer` (a batch: k units, k offer rows, k requests marked told) |
| notice not sent after all | notifier | `roll_back` |
| notice refused for its recipient | notifier | `undeliverable` |
| link tapped | reserve link | `hold` |
| offer unused in time, or its unit just gone | sweep, reserve link | `lapse` |
| owner of a live offer leaves the list | leaving | `lapse_leaving` |
| hold not bought in time | sweep | `expire` |
| a store hold placed, or given back (Shopify, WooCommerce) | reserve link, sweep | `store_placed`, `store_released` |
| order placed | orders webhook | `convert`; after the hold ended: `late_order` |
| level rises, falls or closes while a restock is open | detection | `follow_level` |

No other module builds an item that moves a counter; the item builders themselves (the update expressions
and their conditions) are `RestocksTable`'s, in chalicelib/tables/restocks.py. Opening a restock is not a
move: detection writes the new row with its first counters (`RestocksTable.open_item`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chalicelib.tables.base import TransactionCancelled, Tx, TxItem
from chalicelib.tables.catalog import shard_for
from chalicelib.tables.requests import RequestState
from chalicelib.tables.reservations import Offer, OfferState, StoreState
from chalicelib.tables.restocks import ROLLED_BACK, Parked, Restock, WalkMark
from chalicelib.tables.store import Tables

# What a move did.
DONE = "done"
MOVED = "moved"  # the row was no longer in the state the move starts from (someone else moved it first)
NO_UNIT = "no_unit"  # a hold found units_available at zero

# How soon the sweep looks again at a hold whose store hold is not yet placed (a crash, or a store that was down).
STORE_RETRY_S = 60

# Why an offer lapsed.
UNUSED = "unused"
JUST_GONE = "just_gone"


@dataclass(frozen=True)
class Move:
    """The result of one counter-table move; `row` is the row's current image when it had MOVED."""

    result: str
    row: Offer | None = None


@dataclass(frozen=True)
class LevelMove:
    """A restock following a new stock level: its counter item, the audit fact's kind and extra facts, and
    what the webhook's answer says was adjusted (None when only the record of our own sales changed)."""

    item: TxItem
    kind: str
    adjusted: str | None
    facts: dict[str, Any] = field(default_factory=dict)


def lowered(available: int, offerable: int, fall: int) -> tuple[int, int]:
    """Counters after a fall of `fall` units (pure; a negative fall is a rise).

    units_available drops by the whole fall, below zero when the shelf no longer covers the holds already
    granted: they stand (a hold is never taken back), and the shortfall is a debt that later rises and
    expiring holds pay off before anyone can hold again (`units_available >= 1` guards every hold:
    invariant 4). units_offerable keeps its meaning, units_available minus the offers still live: a notice
    cannot be recalled, but a stranded offer that lapses only pays back its share of the debt instead of
    promising a unit that is gone (invariant 5).
    """
    live_offers = max(0, available - offerable)
    new_available = available - fall
    return new_available, new_available - live_offers


@dataclass(frozen=True)
class NewOffer:
    """One person in a batch of notices: the offer row's id, and the place it is for."""

    token_id: str
    request_joined_ts: str
    contact_key: str
    channel: str
    lang: str = "en"  # the place's language, kept on the offer for the pages its link opens
    remind_before_s: int = 0  # its lapse reminder is owed this long before the offer ends (0: none)


@dataclass(frozen=True, kw_only=True, eq=False)
class UnitMoves:
    """The rows of DESIGN §4's counter table for an existing offer row, each one conditional transaction."""

    tables: Tables

    def _move_row(self, row: Offer, start: OfferState, end: OfferState, **fields: Any) -> Tx:
        """A move's transaction, begun with its offer row going from `start` to `end` (only from `start`)."""
        return Tx().add("row", self.tables.reservations.transition_item(row.token_id, start, end, **fields))

    def _facts(self, row: Offer) -> dict[str, Any]:
        return {
            "token_id": row.token_id,
            "restock_id": row.restock_id,
            "contact_key": row.contact_key,
            "channel": row.channel,
        }

    def _commit(self, tx: Tx, *request: str, alone: Tx | None = None) -> TransactionCancelled | None:
        """Run the row's move (its "row", counter and "fact" items) with the request's items (`request`
        names them); None when it committed.

        When only the request's items are refused, the request no longer owns this offer (DynamoDB's
        TTL tidied it, or the shopper left the list): the unit must still move (invariant 7), so the
        row, counter and audit go on alone, still conditional on the row's state, with `alone`'s items (what the
        request's items carried that must move anyway).
        """
        try:
            self.tables.run(tx)
            return None
        except TransactionCancelled as cancelled:
            request_failed = any(cancelled.failed(name) for name in request)
            if cancelled.failed_other_than(*request) or not request_failed:
                return cancelled
        try:
            retry = tx.without(*request)
            self.tables.run(retry.join(alone) if alone is not None else retry)
            return None
        except TransactionCancelled as cancelled:
            return cancelled

    @staticmethod
    def _outcome(cancelled: TransactionCancelled | None, *, counter: str | None = None) -> Move:
        if cancelled is None:
            return Move(DONE)
        if cancelled.failed("row"):
            return Move(MOVED, cancelled.old("row", Offer))
        if counter is not None and cancelled.failed(counter):
            return Move(NO_UNIT)
        # Neither condition failed: conflicts outlasted the retries. Nothing was written; let it surface.
        raise cancelled

    def offer(
        self,
        *,
        sku: str,
        restock_ts: str,
        restock_id: str,
        offers: Sequence[NewOffer],
        now: float,
        offer_window_s: int,
        lapse_limit: int | None = None,
        mark: WalkMark | None = None,
    ) -> Tx:
        """Notices about to go: units_offerable − k (only if ≥ k, the restock not closed and, with `lapse_limit`,
        re-offering not stopped by that many unused offers since the last sale), k offer rows, and
        each request marked told for this restock. Returned to run, so the caller reads a cancellation by its
        names: "units", "offer <i>" and "told <i>" for the i-th offer. `mark`: where the walk has settled up to
        once these offers are made, written with them (never before them)."""
        channels = Counter(new.channel for new in offers)
        units = self.tables.restocks.take_offers_item(sku, restock_ts, len(offers), lapse_limit, channels, mark=mark)
        tx = Tx().add("units", units)
        for i, new in enumerate(offers):
            tx.add(
                f"offer {i}",
                self.tables.reservations.offer_put_item(
                    token_id=new.token_id,
                    sku=sku,
                    restock_ts=restock_ts,
                    restock_id=restock_id,
                    request_joined_ts=new.request_joined_ts,
                    contact_key=new.contact_key,
                    channel=new.channel,
                    lang=new.lang,
                    now=now,
                    offer_window_s=offer_window_s,
                    remind_before_s=new.remind_before_s,
                ),
            )
            tx.add(
                f"told {i}",
                self.tables.requests.mark_offered_item(
                    sku, new.request_joined_ts, restock_id=restock_id, token_id=new.token_id
                ),
            )
        return tx

    def _withdraw_offer(
        self, sku: str, restock_ts: str, token_id: str, channel: str | None, park: Parked | None = None
    ) -> Tx:
        """A notice that did not go, begun: its offer row deleted, its unit offerable again, (when its channel is
        known) no longer tallied as notified, and (with `park`) its place parked for the next walk."""
        return (
            Tx()
            .add("row", self.tables.reservations.delete_offer_item(token_id))
            .add("units", self.tables.restocks.release_offer_item(sku, restock_ts, unsent=channel, park=park))
        )

    def roll_back(
        self,
        *,
        sku: str,
        restock_ts: str,
        token_id: str,
        request_joined_ts: str,
        previous_restock: str | None,
        channel: str | None = None,
        position: int | None = None,
    ) -> None:
        """Undo a notice that did not go: the offer row gone, units_offerable + 1, the request waiting and untold
        (told about `previous_restock` again), and parked on the restock, so the next walk tells it even when
        the walk's cursor is past it already. Raises when it could not be undone."""
        park = Parked(request_joined_ts, ROLLED_BACK, position, token_id)
        tx = self._withdraw_offer(sku, restock_ts, token_id, channel, park).add(
            "request",
            self.tables.requests.unmark_offered_item(
                sku, request_joined_ts, token_id=token_id, previous_restock=previous_restock
            ),
        )
        self.tables.run(tx)

    def undeliverable(
        self,
        *,
        sku: str,
        restock_ts: str,
        token_id: str,
        request_joined_ts: str,
        restock_id: str,
        now: float,
        facts: dict[str, Any],
    ) -> bool:
        """The provider refused a notice for its recipient alone: the offer row gone, units_offerable + 1 (the unit
        goes to the next person), the request waiting but still told about this restock and marked undeliverable
        for it (never offered or sent again for it), the fact `notice_undeliverable` (with `facts`) appended, and a
        top-up job owed by the restock (`OwedJobs` sends it; the sweep does if the notifier dies first): all in one
        transaction. True when the top-up is owed; False when the restock had closed meanwhile, which owes none.
        Raises when it could not be undone."""
        request = self.tables.requests.mark_undeliverable_item(
            sku, request_joined_ts, token_id=token_id, restock_id=restock_id
        )
        fact = self.tables.audit.record_item(sku, "notice_undeliverable", now, **facts)
        owing = self.tables.restocks.release_offer_owing_topup_item(
            sku, restock_ts, token=f"undeliverable#{token_id}", now=now, unsent=facts.get("channel")
        )
        tx = (
            Tx()
            .add("row", self.tables.reservations.delete_offer_item(token_id))
            .add("units", owing)
            .add("request", request)
            .add("fact", fact)
        )
        try:
            self.tables.run(tx)
            return True
        except TransactionCancelled as cancelled:
            if not cancelled.failed("units") or cancelled.failed_other_than("units"):
                raise
        withdrawn = self._withdraw_offer(sku, restock_ts, token_id, facts.get("channel"))
        self.tables.run(withdrawn.add("request", request).add("fact", fact))
        return False

    def hold(self, row: Offer, now: float, hold_window_s: int, *, on_store: bool = False) -> Move:
        """Link tapped: offered → held, units_available − 1 (only if ≥ 1), request reserved.

        `on_store`: the platform holds the unit too. The intent to place that hold is written with the move, and
        the row is due soon, so that a crash before the store call is finished by the sweep (store_holds.py).
        """
        sku, token_id = row.sku, row.token_id
        expires = int(now) + int(hold_window_s)
        store: dict[str, Any] = {}
        due_at = expires
        if on_store:
            store = {"store_state": str(StoreState.PLACING)}
            due_at = min(expires, int(now) + STORE_RETRY_S)
        tx = (
            self._move_row(
                row,
                OfferState.OFFERED,
                OfferState.HELD,
                due_at=due_at,
                held_at=int(now),
                hold_expires_at=expires,
                **store,
            )
            .add("units", self.tables.restocks.hold_item(sku, row.restock_ts))
            .add("fact", self.tables.audit.record_item(sku, "hold", now, hold_expires_at=expires, **self._facts(row)))
            .add("request", self.tables.requests.mark_reserved_item(sku, row.request_joined_ts, token_id=token_id))
        )
        return self._outcome(self._commit(tx, "request"), counter="units")

    def stop_reoffers(self, restock: Restock, *, lapse_limit: int, now: float) -> bool:
        """Re-offering a restock's units stops: `lapse_limit` offers lapsed unused since its last sale. Marked on
        the restock with the fact `reoffers_stopped` (why, and the units left unoffered), once; the units stay in
        the counters for the next level report (a rise starts afresh) or staff. False when already stopped."""
        sku, restock_ts = restock.sku, restock.restock_ts
        tx = (
            Tx()
            .add("units", self.tables.restocks.stop_reoffers_item(sku, restock_ts, lapse_limit=lapse_limit, now=now))
            .add(
                "fact",
                self.tables.audit.record_item(
                    sku,
                    "reoffers_stopped",
                    now,
                    restock_id=restock.restock_id,
                    reason="lapse_limit",
                    lapses_unsold=restock.lapses_unsold,
                    lapse_limit=lapse_limit,
                    units_left=restock.units_offerable,
                ),
            )
        )
        return self._ran_unless(tx, "units")

    def _lapse(self, row: Offer, now: float, reason: str) -> Tx:
        """offered → lapsed and units_offerable + 1: the part every lapse shares.

        The row stays in the sweep's index, due now, until a top-up for the freed promise is queued. The
        counter item needs no condition of its own: the row's state lets only one lapse through, and a fall
        has already lowered units_offerable with the shelf (DESIGN §4), so the + 1 never promises a unit twice.
        """
        return self._move_row(
            row,
            OfferState.OFFERED,
            OfferState.LAPSED,
            due_at=min(row.due_at or int(now), int(now)),
            lapsed_at=int(now),
            lapse_reason=reason,
        ).add(
            "units",
            # An offer nobody used counts towards REOFFER_LAPSE_LIMIT; a unit just gone, or a leave, does not.
            self.tables.restocks.lapse_unused_item(row.sku, row.restock_ts)
            if reason == UNUSED
            else self.tables.restocks.release_offer_item(row.sku, row.restock_ts, lapsed=True),
        )

    def lapse(self, row: Offer, now: float, *, reason: str = UNUSED) -> Move:
        """Offer unused (or its unit just gone): offered → lapsed, units_offerable + 1, request back to waiting."""
        tx = (
            self._lapse(row, now, reason)
            .add(
                "fact",
                self.tables.audit.record_item(
                    row.sku, JUST_GONE if reason == JUST_GONE else "lapse", now, **self._facts(row)
                ),
            )
            .add(
                "request",
                self.tables.requests.back_to_waiting_item(
                    row.sku, row.request_joined_ts, token_id=row.token_id, from_state=RequestState.OFFERED
                ),
            )
        )
        return self._outcome(self._commit(tx, "request"))

    def lapse_leaving(self, row: Offer, now: float, *, reason: str, leaving: Tx) -> None:
        """The owner of a live offer leaves the list: the same lapse, with `leaving` (the items that take their
        place off, and its fact) instead of a return to waiting. All or nothing: a cancellation is raised, for
        the caller to look at the request again."""
        self.tables.run(self._lapse(row, now, reason).join(leaving))

    def expire(self, row: Offer, now: float, *, reason: str | None = None) -> Move:
        """Hold not bought in time (or refused by the store): held → expired, units_available + 1 and
        units_offerable + 1, request waiting.

        The row stays in the sweep's index until a top-up for the returned unit is queued. A hold the store may
        have too gets the intent to give it back instead, written with the move, and its unit returns to the
        counters only when the store has it back (`store_released`): until then nobody can be offered a unit
        the storefront still holds.
        """
        sku, token_id = row.sku, row.token_id
        on_store = row.store_state in (StoreState.PLACING, StoreState.PLACED)
        store = {"store_state": str(StoreState.RELEASING)} if on_store else {}
        facts = self._facts(row) | ({"reason": reason} if reason else {})
        tx = self._move_row(
            row,
            OfferState.HELD,
            OfferState.EXPIRED,
            due_at=min(row.due_at or int(now), int(now)),
            expired_at=int(now),
            **store,
        )
        if not on_store:
            tx.add("units", self.tables.restocks.return_hold_item(sku, row.restock_ts))
        tx = tx.add("fact", self.tables.audit.record_item(sku, "expiry", now, **facts)).add(
            "request",
            self.tables.requests.back_to_waiting_item(
                sku, row.request_joined_ts, token_id=token_id, from_state=RequestState.RESERVED
            ),
        )
        return self._outcome(self._commit(tx, "request"))

    def convert(self, row: Offer, order_id: str, now: float) -> Move:
        """Order placed: held → converted (leaves the sweep's index), request converted and off the list.

        The unit left units_available at the hold; the sale is counted on the restock so that the lower level
        the platform reports next is known to include it and is not taken off the counters a second time.
        """
        sku, token_id = row.sku, row.token_id
        # Sold from the store's own hold: no longer held there, so the shelf level (the store's plus our holds
        # there) falls by it, as a sale does on a store that holds nothing.
        from_store = -1 if row.store_state == StoreState.PLACED else 0
        # The place's shard (it may have moved to another contact since the offer): one read, on a sale only.
        request = self.tables.requests.get(sku, row.request_joined_ts)
        shard = request.shard if request is not None else shard_for(row.contact_key)
        tx = (
            self._move_row(
                row, OfferState.HELD, OfferState.CONVERTED, due_at=None, order_id=order_id, converted_at=int(now)
            )
            .add("sale", self.tables.restocks.sale_item(sku, row.restock_ts, channel=row.channel, at=now))
            .add("fact", self.tables.audit.record_item(sku, "conversion", now, order_id=order_id, **self._facts(row)))
            .add("request", self.tables.requests.mark_converted_item(sku, row.request_joined_ts, token_id=token_id))
            # The waiting count moves with the request's state, so it is decremented only if that moved.
            .add("waiting", self.tables.catalog.leave_item(sku, shard))
        )
        if from_store:
            # On the product item, not the shard: it moves even when the request's items are refused.
            tx.add("shelf", self.tables.catalog.store_held_item(sku, from_store))
        return self._outcome(self._commit(tx, "request", "waiting"))

    def store_placed(self, row: Offer, *, ref: str, checkout_url: str, now: float, unsettled: bool = False) -> bool:
        """The store now holds the unit too: record its hold, and count it among the SKU's units held on the store
        (the store's own level no longer shows it; the shelf level detection compares adds it back). False when
        the row had moved on. `unsettled`: the store may hold a second unit for it (chalicelib/store_holds.py
        `settle`), recorded with the hold so that the sweep looks within a minute."""
        due_at = int(row.hold_expires_at or now)
        if unsettled:
            due_at = min(due_at, int(now) + STORE_RETRY_S)
        tx = Tx().add(
            "row",
            self.tables.reservations.store_placed_item(
                row.token_id, ref=ref, checkout_url=checkout_url, due_at=due_at, unsettled=unsettled
            ),
        )
        tx.add("shelf", self.tables.catalog.store_held_item(row.sku, 1))
        return self._ran_unless(tx, "row")

    def store_released(self, row: Offer) -> bool:
        """The store has the unit of an ended hold back: the unit is available and offerable again (the return
        `expire` left for now), and where its placing was recorded (it has a reference), it leaves the SKU's units
        held on the store. False when it was recorded already."""
        tx = (
            Tx()
            .add("row", self.tables.reservations.store_released_item(row.token_id))
            .add("units", self.tables.restocks.return_hold_item(row.sku, row.restock_ts))
        )
        if row.store_ref is not None:
            tx.add("shelf", self.tables.catalog.store_held_item(row.sku, -1))
        return self._ran_unless(tx, "row")

    def _ran_unless(self, tx: Tx, which: str) -> bool:
        """Run a move that happens at most once; False when its item `which` refused it because it had happened
        already (or its row had moved on). Any other refusal is not that, so it is raised."""
        try:
            self.tables.run(tx)
        except TransactionCancelled as cancelled:
            if cancelled.failed(which):
                return False
            raise
        return True

    def late_order(self, row: Offer, order_id: str, now: float) -> None:
        """An order for a hold that had already ended: recorded on the row once per order id, and tallied on
        the restock beside its counters (which it never moves). Raises when the row refused it (already
        recorded)."""
        tx = (
            Tx()
            .add("row", self.tables.reservations.late_order_item(row.token_id, order_id, now))
            .add("tally", self.tables.restocks.count_late_order_item(row.sku, row.restock_ts))
            .add(
                "fact",
                self.tables.audit.record_item(
                    row.sku,
                    "order_on_expired_hold",
                    now,
                    token_id=row.token_id,
                    restock_id=row.restock_id,
                    contact_key=row.contact_key,
                    order_id=order_id,
                    hold_state=row.state,
                ),
            )
        )
        self.tables.run(tx)

    def follow_level(self, restock: Restock, kind: str, amount: int, *, webhook_id: str, now: float) -> LevelMove:
        """The open restock follows a new level: a rise, a fall or a close by `amount` (each net of our own sales
        the level includes), or, when the level moved by exactly those sales, only the record of them.
        `kind` is detection's: "rise", "fall", "close", anything else for the sales alone."""
        sku, restock_ts = restock.sku, restock.restock_ts
        if kind == "rise":
            item = self.tables.restocks.rise_item(sku, restock_ts, rise=amount, seen=restock, token=webhook_id, now=now)
            return LevelMove(item, "restock_topped_up", "topped_up", {"units_added": amount})
        if kind in ("fall", "close"):
            available, offerable = restock.units_available, restock.units_offerable
            new_available, new_offerable = lowered(available, offerable, amount)
            facts: dict[str, Any] = {"units_available": new_available, "units_offerable": new_offerable}
            if kind == "fall":
                item = self.tables.restocks.fall_item(
                    sku, restock_ts, seen=restock, available=new_available, offerable=new_offerable
                )
                return LevelMove(item, "restock_lowered", "lowered", facts)
            # Closed: no more offers are made (the notifier and the offer's condition check the state), but the
            # counters stay exact, so live offers and holds still settle against them.
            item = self.tables.restocks.close_item(
                sku, restock_ts, seen=restock, available=new_available, offerable=new_offerable, now=now
            )
            return LevelMove(item, "restock_closed", "closed", {"reason": "below_threshold", **facts})
        return LevelMove(self.tables.restocks.sales_seen_item(sku, restock_ts, seen=restock), "own_sales_seen", None)
