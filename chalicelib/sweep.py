"""The sweep (every minute): lapse unused offers, expire unbought holds, top up, tidy stale places.

Everything it touches is found through sparse indexes, never a scan: offer/hold rows through the
reservations table's `by-due` index, stale requests through the requests table's `by-expiry` index.
Every change is one transaction conditional on the state it was seen in, so a re-run, or two sweeps
at once, return each unit exactly once (invariant 6), and a crash between any two steps is finished
by the next run (invariant 7).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from chalicelib.clock import Clock, Deadline
from chalicelib.confirm import OWED_AFTER_S, OWED_LOOKBACK_DAYS
from chalicelib.counters import DONE, Move, UnitMoves
from chalicelib.faults import FaultHook, no_faults
from chalicelib.leaving import QueueExits
from chalicelib.queue.jobs import PROOF_OWED_AFTER_S, PROOF_OWED_LOOKBACK_DAYS, JobQueue
from chalicelib.queue.messages import ConfirmEmail, Job, LapseReminder, ResubscribeProof
from chalicelib.reminders import ReminderPolicy
from chalicelib.store_holds import PLACED, SETTLED, STORE_DOWN, StoreHolds
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.store import Tables

if TYPE_CHECKING:
    from chalicelib.detect import DetectService
    from chalicelib.optout_service import OptoutService
    from chalicelib.unknown_skus import UnknownSkus
from chalicelib.tables.requests import RequestState
from chalicelib.tables.reservations import Offer, OfferState, StoreState

# The store may still hold the unit of an ended hold in these states (the ending move wrote "releasing").
STORE_OWED = (StoreState.PLACING, StoreState.PLACED, StoreState.RELEASING)

# The sweep expires a place this long before its ttl, so it (and not DynamoDB's own TTL deletion, which
# never comes before the ttl) removes the request, keeping its uniqueness item and the waiting count in step.
STALE_LEAD_S = 600
# Day buckets read behind today: DynamoDB's TTL tidies anything older within about two days anyway.
STALE_LOOKBACK_DAYS = 3
# A sweep stops taking new work after this long; the next minute's run carries on where it stopped.
BUDGET_S = 20.0
# ...and with this much of the Lambda's time left: the longest single step it may be in when it looks (a store
# call's timeout, chalicelib/platforms/http.py) and the top-up of what it settled must still fit.
MARGIN_S = 10.0
# The by-demand ranking's refresh from the waiting shards, its place kept for a day in the throttle table. The
# reconciliation (chalicelib/reconcile.py, every 5 minutes) reads only products the roll-up has counted, so a pass
# starts every 9 minutes: a new list is counted within 10 (9, plus the sweep's own minute) and read within 15.
ROLL_UP_EVERY_S = 9 * 60
ROLL_UP_CURSOR = "cursor#demand-rollup"
ROLL_UP_CURSOR_KEEP_S = 24 * 3600
# Rows settled before the deadline have their top-up sent even past it; taking them out of the index (a write
# each) stops this long before the timeout, and what is left is cleared by the next run (its top-up sent again,
# which the notifier takes as a no-op).
LAST_CALL_S = 3.0


def _tallied(move: Move, summary: dict[str, int], done: str) -> bool:
    """Count a sweep's move as `done` when it moved the row, or as raced when something else moved it first."""
    moved = move.result == DONE
    summary[done if moved else "raced"] += 1
    return moved


@dataclass
class _Owed:
    """Rows of one restock whose freed units still need a top-up job."""

    sku: str
    restock_id: str
    restock_ts: str
    rows: list[tuple[str, str]] = field(default_factory=list)  # (token_id, settled state)


@dataclass(frozen=True, kw_only=True, eq=False)
class SweepService:
    """Runs one sweep "as if at" a moment (the injected clock, or an explicit time) and says what it did."""

    tables: Tables
    moves: UnitMoves
    exits: QueueExits  # someone who opted out while holding a unit leaves the list once the hold expires
    jobs: JobQueue
    detector: DetectService  # restocks written but never put on the queue are finished by restock detection
    unknown_skus: UnknownSkus  # staff hear once per window about SKUs shoppers asked for that do not exist
    optouts: OptoutService  # SMS STOP replies recorded by SNS become opt-outs here (and their places leave)
    store_holds: StoreHolds  # holds on the store itself: placed when a crash or an outage left them owed, released
    clock: Clock
    reminders: ReminderPolicy = field(default_factory=ReminderPolicy)  # which offers get one reminder before they lapse
    faults: FaultHook = no_faults
    page_size: int = 100
    budget_s: float = BUDGET_S

    def run(
        self,
        now: float | None = None,
        *,
        remaining_ms: Callable[[], int] | None = None,
        deadline: Deadline | None = None,
    ) -> dict[str, int]:
        """One sweep; returns counts: lapsed, reminders_queued, expired, topups, stale_requests, pending_requeued,
        unknown_sku_digests, optouts_synced, raced, store_placed, store_settled, store_released, store_unanswered,
        confirmations_requeued, proofs_requeued, demand_rolled_up and out_of_time (1 when it stopped early; the next run carries on).

        It stops starting new work at `deadline`, by default the earlier of its budget and the Lambda's remaining
        time (`remaining_ms`) less MARGIN_S. Every part is safe to leave for the next run: rows stay in their
        indexes until settled, and the STOP sync saves where it stopped."""
        at = self.clock.now() if now is None else float(now)
        last_call = deadline
        if deadline is None:
            deadline = Deadline.for_run(self.budget_s, remaining_ms=remaining_ms, margin_s=MARGIN_S)
            last_call = Deadline.for_run(
                self.budget_s + MARGIN_S - LAST_CALL_S, remaining_ms=remaining_ms, margin_s=LAST_CALL_S
            )
        assert last_call is not None
        summary = dict.fromkeys(
            (
                "lapsed",
                "reminders_queued",
                "expired",
                "topups",
                "stale_requests",
                "pending_requeued",
                "unknown_sku_digests",
                "optouts_synced",
                "raced",
                "store_placed",
                "store_settled",
                "store_released",
                "store_unanswered",
                "confirmations_requeued",
                "proofs_requeued",
                "out_of_time",
                "demand_rolled_up",
            ),
            0,
        )
        owed: dict[tuple[str, str], _Owed] = {}
        # The clock is read between rows, not pages: a page of rows each settled by its own transaction can take
        # longer than the margin. A row left unsettled stays in the index for the next run; every run settles one
        # at least, so a run that starts late still moves on.
        settled = 0
        for page in self.tables.reservations.due_pages(at, page_size=self.page_size):
            for row in page:
                if settled and deadline.passed():
                    break
                self._settle(row, at, summary, owed)
                settled += 1
            if deadline.passed():
                break
        # Always: the units these rows freed go on to the next people now (the rows are bounded by the pages read).
        summary["topups"] = self._top_up(owed, last_call)
        if not deadline.passed():
            summary["stale_requests"] = self._expire_stale(at, deadline)
        if not deadline.passed():
            summary["pending_requeued"] = self.requeue_restocks_stuck_in_pending(at)
        if not deadline.passed():
            summary["confirmations_requeued"] = self._requeue_confirmations(at, deadline)
        if not deadline.passed():
            summary["demand_rolled_up"] = self._roll_up_demand(at, deadline)
        if not deadline.passed():
            summary["proofs_requeued"] = self._requeue_proofs(at, deadline)
        if not deadline.passed():
            summary["unknown_sku_digests"] = int(self.unknown_skus.send_due(at))
        # Last: units and places first, so a slow or failing SNS call never holds them up.
        if not deadline.passed():
            summary["optouts_synced"] = self.optouts.sync_sms_optouts(deadline).newly_suppressed
        summary["out_of_time"] = int(deadline.passed())
        return summary

    def _settle(self, row: Offer, at: float, summary: dict[str, int], owed: dict[tuple[str, str], _Owed]) -> None:
        state = row.state
        if state == OfferState.OFFERED and (row.offer_expires_at or 0) <= at:
            if not _tallied(self.moves.lapse(row, at), summary, "lapsed"):
                return
            self.faults("sweep.after_lapse")
            state = OfferState.LAPSED
        elif state == OfferState.OFFERED and row.reminder_queued_at is None:
            # Due before its end: the offer's reminder is owed (chalicelib/reminders.py).
            summary["reminders_queued"] += self._remind(row, at)
            return
        elif state == OfferState.HELD and (row.hold_expires_at or 0) <= at:
            if not _tallied(self.moves.expire(row, at), summary, "expired"):
                return
            self.faults("sweep.after_expiry")
            state = OfferState.EXPIRED
        elif state == OfferState.HELD and row.store_state == StoreState.PLACING:
            # A live hold whose store hold is still owed (the tap crashed, or the store was down).
            if not summary["store_unanswered"]:
                placing = self.store_holds.finish(row)
                summary["store_placed"] += placing.result == PLACED
                summary["store_unanswered"] += placing.result == STORE_DOWN
            return
        elif state == OfferState.HELD and row.store_state == StoreState.PLACED and row.store_unsettled:
            # A live hold the store may hold a second unit for (a retry after a lost answer): look for it again.
            if not summary["store_unanswered"]:
                settling = self.store_holds.settle(row, at)
                summary["store_settled"] += settling == SETTLED
                summary["store_unanswered"] += settling == STORE_DOWN
            return
        elif state not in (OfferState.LAPSED, OfferState.EXPIRED):
            # Not yet past its own expiry (the row is authoritative), or already final elsewhere.
            return
        if state == OfferState.EXPIRED and row.store_state in STORE_OWED:
            # The store gives the unit back before anyone is offered it again; one store that does not answer
            # is not asked again this run, and its rows stay due for the next.
            if summary["store_unanswered"] or not self.store_holds.release(row):
                summary["store_unanswered"] += 1
                return
            summary["store_released"] += 1
        if state == OfferState.EXPIRED:
            # Before the top-up, so a crash after the expiry is finished here by the next run (invariant 3).
            self._leave_if_asked(row)
        # Lapsed or expired and still in the index: its top-up is owed (this run's, or one a crash cut short).
        key = (row.sku, row.restock_ts)
        entry = owed.setdefault(key, _Owed(key[0], row.restock_id, key[1]))
        entry.rows.append((row.token_id, str(state)))

    def _remind(self, row: Offer, at: float) -> int:
        """Queue a live offer's reminder (unless the shop has turned reminders off for its channel since), then
        make the row due at the offer's end again. A crash between the two queues it again next run: the notifier
        sends one reminder however many messages ask (ReservationsTable.claim_reminder)."""
        queued = 0
        if self.reminders.reminds(row.channel):
            self.jobs.send(LapseReminder(row.token_id))
            queued = 1
        self.tables.reservations.reminder_queued(row.token_id, due_at=int(row.offer_expires_at or at), now=at)
        return queued

    def _leave_if_asked(self, row: Offer) -> None:
        """A hold ended unbought whose owner asked to leave while holding (the manage page's "leave this list",
        or opting out): with the unit back, their place leaves the list, as it would have had they been waiting.
        """
        request = self.tables.requests.get(row.sku, row.request_joined_ts)
        if request is None or request.contact_key != row.contact_key:
            return
        reason = request.leave_requested
        if reason is None and self.tables.optout is not None:
            record = self.tables.optout.get(row.contact_key)
            reason = (record.get("source") or "unsubscribe") if record is not None else None
        if reason is not None:
            self.exits.leave(request, reason=str(reason))

    def _top_up(self, owed: dict[tuple[str, str], _Owed], last_call: Deadline) -> int:
        """One top-up job per restock that freed units, then the rows leave the index.

        A crash after the send and before the clear sends the job again next run: the notifier treats a
        repeated job as a no-op, so the only cost is one empty job, never a lost unit.
        """
        sent = 0
        for entry in owed.values():
            self.jobs.send(Job(entry.sku, entry.restock_id, entry.restock_ts, kind="topup"))
            sent += 1
            self.faults("sweep.after_topup")
            for token_id, state in entry.rows:
                if last_call.passed():
                    break
                self.tables.reservations.clear_due(token_id, state)
        return sent

    def _expire_stale(self, at: float, deadline: Deadline) -> int:
        """Delete places whose ttl passed, with their uniqueness items, keeping the waiting count in step."""
        cutoff = at + STALE_LEAD_S
        removed = 0
        for seen in self.tables.requests.stale(cutoff, lookback_days=STALE_LOOKBACK_DAYS, page_size=self.page_size):
            if deadline.passed():
                break
            # The by-expiry index carries the keys, ttl, state and contact_key only. The place itself says which
            # restock it was told about, which its uniqueness item must remember once it goes (one notice per
            # person per restock, invariant 2): read it whole.
            place = self.tables.requests.get(seen.sku, seen.joined_ts)
            if place is None:
                continue
            state = place.state
            # A place with a live offer or hold is left until its unit has come back through it.
            if state not in (RequestState.WAITING, RequestState.CONVERTED):
                continue
            sku, joined_ts = place.sku, place.joined_ts
            request, unique = self.tables.requests.expire_items(
                sku,
                joined_ts,
                state=str(state),
                contact_key=place.contact_key,
                cutoff=cutoff,
                told=place.last_notified_restock,
            )
            tx = Tx().add("request", request).add("unique", unique)
            if state == RequestState.WAITING:  # a converted request already left the waiting count when it converted
                tx.add("waiting", self.tables.catalog.leave_item(sku, place.shard))
            try:
                self.tables.run(tx)
            except TransactionCancelled as cancelled:
                if cancelled.failed("request"):
                    continue  # refreshed by a repeat tap, or offered meanwhile: no longer stale
                if not cancelled.failed("unique"):
                    raise
                # The uniqueness item names a newer place (or is gone): remove this request alone.
                try:
                    self.tables.run(tx.without("unique"))
                except TransactionCancelled as again:
                    if again.failed("request"):
                        continue
                    raise
            removed += 1
        return removed

    def _roll_up_demand(self, at: float, deadline: Deadline) -> int:
        """Refresh the waiting count the by-demand ranking sorts on, for each out-of-stock product, from its shards
        (taps move only the shards: docs/SCALE.md). A pass starts at most every ROLL_UP_EVERY_S, in SKU order, and
        one cut short by the deadline carries on next run from the last SKU done, so its cost is bounded per
        quarter hour whatever the lists' lengths (WAITING_SHARDS eventually consistent reads a product), and never
        a shopper's. Returns how many products were read this run."""
        state = self.tables.saved_states.get(ROLL_UP_CURSOR) or {}
        after = state.get("after")
        started = int(state.get("started") or 0)
        if after is None:
            if at - started < ROLL_UP_EVERY_S:
                return 0
            started = int(at)
        rolled, done = 0, True
        last = str(after) if after is not None else None
        for sku in sorted(self.tables.catalog.demand_skus()):
            if last is not None and sku <= last:
                continue
            if deadline.passed():
                done = False
                break
            self.tables.catalog.roll_up_waiting(sku)
            rolled += 1
            last = sku
        # A finished pass keeps only when it started (the next starts ROLL_UP_EVERY_S after); an unfinished one
        # also where it got to.
        resume = None if done else last
        self.tables.saved_states.save(
            ROLL_UP_CURSOR, {"started": started, "after": resume}, int(at) + ROLL_UP_CURSOR_KEEP_S
        )
        return rolled

    def _requeue_confirmations(self, at: float, deadline: Deadline) -> int:
        """Confirmation emails owed for over a minute (a tap cut short before its message): send the message
        again. The notifier takes an owed email once, so a message sent twice sends one email."""
        sent = 0
        for sku, joined_ts in self.tables.requests.owed_confirmations(
            at - OWED_AFTER_S, lookback_days=OWED_LOOKBACK_DAYS, page_size=self.page_size
        ):
            if deadline.passed():
                break
            self.jobs.send(ConfirmEmail(sku, joined_ts))
            sent += 1
        return sent

    def _requeue_proofs(self, at: float, deadline: Deadline) -> int:
        """Re-subscribe emails and codes owed for over a minute (a tap cut short before its message,
        chalicelib/shopper/resubscribe.py): send the message again. The notifier takes an owed message once."""
        sent = 0
        for key in self.tables.optout.owed_proofs(
            at - PROOF_OWED_AFTER_S, lookback_days=PROOF_OWED_LOOKBACK_DAYS, page_size=self.page_size
        ):
            if deadline.passed():
                break
            self.jobs.send(ResubscribeProof(key))
            sent += 1
        return sent

    def requeue_restocks_stuck_in_pending(self, at: float) -> int:
        """Hook: restocks written but never put on the queue are re-enqueued by restock detection."""
        return self.detector.requeue_pending(at)
