"""The notifier: tell the front of a SKU's waiting list about a restock, in order, capped, exactly once.

Eligible requests are offered in batches, oldest first: one transaction takes k units from `units_offerable`
(all or none, never below zero), writes the k offer rows and marks the k requests told for this restock.
Only then are the notices sent.
A send that fails is rolled back by the inverse transaction and the job fails, so SQS retries it; a job
redelivered after success finds everyone already told and sends nothing. A send the provider refuses for its
recipient alone is undone and marked undeliverable in one transaction, and the walk goes on; a send still
throttled is undone and told by a later job.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from chalicelib.clock import Clock, iso, parse_iso
from chalicelib.config import Settings
from chalicelib.counters import NewOffer, UnitMoves
from chalicelib.errors import NotFound
from chalicelib.faults import FaultHook, no_faults
from chalicelib.i18n import DEFAULT_LANGUAGE
from chalicelib.link_ids import new_link_id
from chalicelib.links import Links
from chalicelib.logs import correlated, offer_ref
from chalicelib.manage_ids import ManageIds
from chalicelib.messages.compose import Copy, Facts, compose_email, compose_sms
from chalicelib.messages.copywriter import Copywriter
from chalicelib.messages.optout_gate import OPTED_OUT, Addressee, BatchLook, LastLooks
from chalicelib.messages.senders import (
    EMAIL,
    SMS,
    Notice,
    Senders,
    error_code,
    maybe_sent,
    refused_recipient,
    throttled,
)
from chalicelib.metrics import (
    CONTINUATIONS,
    NOTICES_OVER_UNITS,
    NOTICES_SENT,
    NOTICES_UNCONFIRMED,
    NOTICES_UNDELIVERABLE,
    SEND_FAILURES,
    SENDS_THROTTLED,
    UNITS_OFFERABLE,
    UNITS_TOTAL,
    Metrics,
    MetricsFactory,
    skip_metric,
)
from chalicelib.queue.jobs import JobQueue
from chalicelib.queue.messages import Job
from chalicelib.queue.owed import OwedJobs
from chalicelib.reminders import ReminderPolicy
from chalicelib.tables.audit import FACTS_PER_TRANSACTION
from chalicelib.tables.base import TransactionCancelled, Tx, get_together
from chalicelib.tables.catalog import Product
from chalicelib.tables.optout import PersonLinks
from chalicelib.tables.requests import Request, RequestState
from chalicelib.tables.restocks import Parked, Restock, RestockState, WalkMark
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)


class SkipReason(StrEnum):
    """Why a request was passed over (audit `reason`, and one metric each)."""

    OPTED_OUT = "opted_out"
    ALREADY_NOTIFIED = "already_notified"
    CONVERTED = "converted"
    HOLDING_OFFER = "holding_offer"
    HOLDING_UNIT = "holding_unit"
    NOT_WAITING = "not_waiting"
    NO_CONTACT = "no_contact"
    LEAVING = "leaving"  # asked to leave while holding a unit; the place goes when the hold ends
    UNDELIVERABLE = "undeliverable"  # the provider refused this restock's notice for the contact
    # An email place whose address has not confirmed it yet (double opt-in): kept, never consumed, and told about
    # a later restock once confirmed (or this one, if it still has units then: chalicelib/confirm.py).
    UNCONFIRMED = "unconfirmed"


# Reasons that can change while a restock is open (a hold of another restock ends, an address confirms, a contact
# is allowed again or fixed, a leave is taken back): a place passed over for one of them is parked on the restock
# and every later walk looks at it again, before the places after the cursor (fair order). The other reasons
# stand for this restock for good (told, bought, refused by the provider, gone), so the cursor passes them;
# a told place whose offer is rolled back is parked by the roll-back itself.
CHANGEABLE = frozenset(
    {
        SkipReason.HOLDING_OFFER,
        SkipReason.HOLDING_UNIT,
        SkipReason.LEAVING,
        SkipReason.UNCONFIRMED,
        SkipReason.OPTED_OUT,
        SkipReason.NO_CONTACT,
    }
)
# Places parked on one restock at most (one batched read a walk; a few KB on the restock item). Past it, the
# cursor stops before the next place passed over for a changeable reason, and later walks read on from there.
PARKED_MAX = 25


class StopReason(StrEnum):
    """Why a walk ended."""

    QUEUE_END = "queue_end"
    UNITS_EXHAUSTED = "units_exhausted"
    DEADLINE = "deadline"
    SEND_FAILED = "send_failed"
    THROTTLED = "throttled"
    RESTOCK_CLOSED = "closed"
    NO_UNITS = "no_units"
    REOFFERS_STOPPED = "reoffers_stopped"  # REOFFER_LAPSE_LIMIT offers lapsed unused since the last sale


AFTER_OFFER_COMMITTED = "notifier.after_offer_committed"
# A refused recipient's offer undone and its top-up owed, the top-up not yet sent.
AFTER_UNDELIVERABLE = "notifier.after_undeliverable"

# Recipient refusals in a row on one channel, with no notice of it sent between, after which the next is taken
# for a problem of ours (an unverified sender, a paused account) and fails the job instead of marking the
# person undeliverable: a misconfiguration never costs more than this many people their notice of a restock.
MAX_REFUSALS_IN_A_ROW = 5
# When a top-up comes back for the notices the provider kept throttling (SQS DelaySeconds).
THROTTLED_RETRY_S = 60

# Offers committed per transaction: one restock update plus two items per offer, within DynamoDB's 100 items.
OFFER_BATCH = 25
MAX_OFFER_BATCH = 49
# Queue pages follow the units still to offer: one read covers a big restock, a small one reads little.
MAX_PAGE = 1000


# How far before the walk's last place a second look at the end of the queue starts: a join stamp is taken by
# the joining Lambda before its write commits, on its own clock, so a place may sort a little before places
# the walk has already read.
REWALK_MARGIN_S = 60


def rewalk_from(cursor: str) -> str:
    """Where a second look at the end of the queue starts: REWALK_MARGIN_S before the join stamp `cursor`."""
    if not cursor:
        return ""
    return iso(parse_iso(cursor.split("#", 1)[0]) - REWALK_MARGIN_S)


class UnknownRestock(NotFound):
    """A job names a restock that does not exist (or another restock's id): it goes to the DLQ for a person."""

    code = "unknown_restock"


class Withheld(Exception):
    """At the moment of sending, the contact is on the suppression list or the place no longer holds this offer
    (left, switched, lapsed): the notice must not go."""

    def __init__(self, reason: SkipReason) -> None:
        super().__init__(reason)
        self.reason = reason


class LookUnread(RuntimeError):
    """The last look before the send failed, so the notice was not sent."""


class SendFailed(RuntimeError):
    """Some notices could not be sent; their offers were rolled back and the job must be retried."""


def skip_reason(request: Request | None, restock_id: str, suppressed: set[str]) -> SkipReason | None:
    """Why this request must not be told about this restock now, or None when it is eligible (None: it is gone)."""
    if request is None:
        return SkipReason.NOT_WAITING
    state = request.state
    if request.contact_key in suppressed:
        return SkipReason.OPTED_OUT
    if state == RequestState.CONVERTED:
        return SkipReason.CONVERTED
    if request.undeliverable_restock == restock_id:
        return SkipReason.UNDELIVERABLE
    if request.last_notified_restock == restock_id:
        return SkipReason.ALREADY_NOTIFIED
    if state == RequestState.OFFERED:
        return SkipReason.HOLDING_OFFER
    if state == RequestState.RESERVED:
        return SkipReason.HOLDING_UNIT
    if request.leave_requested:
        return SkipReason.LEAVING
    if request.unconfirmed:
        return SkipReason.UNCONFIRMED
    if request.channel not in (SMS, EMAIL) or not request.contact:
        return SkipReason.NO_CONTACT
    return None


@dataclass
class Outcome:
    """What one job did."""

    restock_id: str
    kind: str
    stopped: StopReason
    notices: int = 0
    skipped: Counter[SkipReason] = field(default_factory=Counter)
    continued: bool = False
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Pending:
    """An offer committed whose notice is on its way."""

    token_id: str
    request: Request
    position: int
    channel: str


@dataclass(frozen=True)
class _Candidate:
    """An eligible request waiting for its batch to commit, with its place in line when examined (and, for a place
    parked before the cursor, the set elements that parked it: removed once its offer is made)."""

    request: Request
    position: int
    parked: tuple[str, ...] = ()


class _Walk:
    """The state of one job's pass over the queue (the Notifier itself holds none, so jobs can overlap)."""

    def __init__(self, job: Job, restock: Restock, product: Product, metrics: Metrics) -> None:
        self.job = job
        self.restock = restock
        self.product = product
        self.metrics = metrics
        self.offer_window_s = product.offer_window_s or 3600
        self.left = restock.units_offerable
        self.position = job.passed
        self.start = job.after
        self.cursor = job.after
        self.seen_up_to = ""  # join stamps up to here were looked at by this job already
        self.examined = 0
        self.pages = 0
        self.notices = 0
        self.failures = 0
        self.withdrawn = 0  # offers undone because the contact opted out just before the send
        self.unconfirmed = 0  # notices the provider may have taken, whose answer was lost
        self.undeliverable = 0  # offers undone because the provider refused the recipient for good
        self.owes_topup = False  # an undeliverable roll-back left the restock owing a top-up job (OwedJobs)
        self.throttled = 0  # offers undone because the provider kept throttling: a later job tells them
        self.refused_in_a_row: Counter[str] = Counter()  # per channel, since its last notice sent
        self.skipped: Counter[SkipReason] = Counter()
        self.copy: dict[str, Copy] | None = None  # by language, fetched once per job
        self.facts: dict[str, Facts] = {}  # by language, with the copy
        self.pending: dict[Future[str], _Pending] = {}
        # `notice_sent` facts not yet written: appended a batch at a time, so the walk pays one call per batch.
        self.sent_facts: list[dict[str, Any]] = []
        self.looks: LastLooks | None = None  # the last looks at the suppression list of the pass under way
        # Where the walk left off, kept on the restock (docs/SCALE.md, "Top-ups"). A first job, a top-up or a
        # retried job resumes there: the places parked before it first, then a little before the cursor (join
        # stamps come from the joining Lambda's clock), then on. A continuation resumes after its own `after`.
        self.resumes = job.kind != "continue"
        stored = restock.walk_cursor or ""
        if self.resumes and stored:
            self.position = restock.walk_passed
            self.start = rewalk_from(stored)
            self.cursor = stored
            self.seen_up_to = stored
        self.mark_cursor = stored  # settled up to here: every place at or before it is told or passed for good
        self.mark_passed = restock.walk_passed
        self.written_cursor = stored
        self.parked: dict[str, list[Parked]] = {}  # to look at again, by join stamp (read by the first pass)
        self.parked_at: dict[str, list[Parked]] = {}  # those being looked at again
        for parked in restock.parked() if self.resumes else []:
            self.parked.setdefault(parked.joined_ts, []).append(parked)
        self.parked_count = len(restock.walk_parked)
        # Places passed over for a changeable reason that are parked already, or were met by this job.
        self.known_changeable = {p.joined_ts for p in restock.parked()}
        self.park: list[Parked] = []  # to add to the restock's parked places, with the cursor that passes them
        self.unpark: list[str] = []  # parked places now settled, removed once the walk is done
        self.frozen = False  # PARKED_MAX reached: the cursor moves no further in this job
        # `notice_skipped` facts not yet written: a batch at a time, and always before the cursor passes them.
        self.skip_facts: list[dict[str, Any]] = []

    def restart(self, *, after: str) -> None:
        """Walk again from `after`: places up to the cursor were counted (and passed over with a reason) already."""
        self.seen_up_to = self.cursor
        self.start = after
        self.pages = 0


@dataclass(frozen=True, kw_only=True, eq=False)
class Notifier:
    """Handles one notifier job at a time per call; safe to call from several threads at once."""

    settings: Settings
    tables: Tables
    moves: UnitMoves
    jobs: JobQueue
    owed: OwedJobs
    links: Links
    copywriter: Copywriter
    senders: Senders
    metrics: MetricsFactory
    clock: Clock
    faults: FaultHook = no_faults
    page_size: int = 100
    deadline_margin_ms: int = 10_000
    offer_batch: int = OFFER_BATCH

    def __post_init__(self) -> None:
        if not 1 <= self.offer_batch <= MAX_OFFER_BATCH:
            raise ValueError(f"offer_batch must be 1..{MAX_OFFER_BATCH}, got {self.offer_batch}")

    @cached_property
    def reminders(self) -> ReminderPolicy:
        """Which offers are written owing a reminder before they lapse (LAPSE_REMINDER)."""
        return ReminderPolicy.of(self.settings)

    @cached_property
    def manage_ids(self) -> ManageIds:
        """The SMS's short manage ids; one lives as long as a signed manage link (a place's REQUEST_TTL_DAYS)."""
        return ManageIds(optout=self.tables.optout, lifetime_s=self.settings.request_ttl_days * 86400)

    def handle(self, job: Job, remaining_ms: Callable[[], int]) -> Outcome:
        """Run one job; `remaining_ms` is the Lambda's time left. Raises so SQS retries (or dead-letters) it."""
        with correlated(restock_id=job.restock_id, sku=job.sku, job_kind=job.kind):
            metrics = self.metrics.start()
            metrics.metadata("restock_id", job.restock_id)
            metrics.metadata("sku", job.sku)
            metrics.metadata("job_kind", job.kind)
            try:
                outcome = self._run(job, remaining_ms, metrics)
            finally:
                totals = metrics.flush()
            outcome.metrics = totals
            log.info(
                "notifier job done: restock=%s kind=%s notices=%d skipped=%s stopped=%s continued=%s",
                job.restock_id,
                job.kind,
                outcome.notices,
                {str(reason): count for reason, count in outcome.skipped.items()},
                outcome.stopped,
                outcome.continued,
            )
            return outcome

    def _run(self, job: Job, remaining_ms: Callable[[], int], metrics: Metrics) -> Outcome:
        restock = self.tables.restocks.get(job.sku, job.restock_ts)
        if restock is None or restock.restock_id != job.restock_id:
            raise UnknownRestock(f"no restock {job.restock_id} at {job.sku}/{job.restock_ts}")
        if restock.state == RestockState.CLOSED:
            # Someone freed from this restock (a lapse, an expiry, a leave) may be owed a notice of the one open
            # now, which passed them over while they held this restock's offer (invariant 7).
            forwarded = self._open_restock_instead(job)
            if forwarded is None:
                return Outcome(job.restock_id, job.kind, StopReason.RESTOCK_CLOSED)
            job, restock = forwarded
        metrics.gauge(UNITS_TOTAL, restock.units_total)
        metrics.gauge(UNITS_OFFERABLE, restock.units_offerable)
        product = self.tables.catalog.get_cached(job.sku) or Product.from_item({"sku": job.sku})
        if restock.units_offerable <= 0:
            self._clear_idle(job, product)
            return Outcome(job.restock_id, job.kind, StopReason.NO_UNITS)
        if self._reoffers_stopped(restock):
            self._clear_idle(job, product)
            return Outcome(job.restock_id, job.kind, StopReason.REOFFERS_STOPPED)
        walk = _Walk(job, restock, product, metrics)
        # Keep back enough time to let the sends in flight finish and to queue the continuation.
        reserve_ms = min(self.deadline_margin_ms, max(0, remaining_ms()) // 4)
        stopped = self._walk(walk, remaining_ms, reserve_ms)
        if (
            stopped == StopReason.QUEUE_END
            and walk.left > 0
            and not walk.failures + walk.throttled
            and self._mark_idle(walk)
        ):
            # Units are left and nobody eligible waits: say so on the product, where every new place looks
            # (capture sends a job when it sees it), then read the end of the queue once more, so a place
            # that joined before the mark was visible is walked here instead (one of the two always sees the
            # other). Join stamps come from the joining Lambda's clock, so look a little before the cursor.
            walk.restart(after=rewalk_from(walk.cursor))
            stopped = self._walk(walk, remaining_ms, reserve_ms)
        if stopped == StopReason.UNITS_EXHAUSTED:
            self._clear_idle(job, product)
        if walk.withdrawn + walk.undeliverable and stopped != StopReason.DEADLINE and not walk.failures:
            # Units came back from offers withdrawn at the last moment: the next walk hands them on. The refused
            # recipients' roll-backs recorded that job as owed, so a crash before here leaves it to the sweep;
            # sending it through OwedJobs clears the record (one job walks for every unit that came back).
            if walk.owes_topup:
                self.owed.send(job.sku, job.restock_ts, self.clock.now())
            else:
                self.jobs.send(Job(job.sku, job.restock_id, job.restock_ts, kind="topup"))
        if walk.throttled and not walk.failures:
            # Back-pressure, not a failure: the people rolled back wait untold, and a later walk tells them first.
            self.jobs.send(Job(job.sku, job.restock_id, job.restock_ts, kind="topup"), delay_s=THROTTLED_RETRY_S)
        if walk.failures:
            raise SendFailed(f"{walk.failures} notice(s) for restock {job.restock_id} could not be sent; retrying")
        outcome = Outcome(job.restock_id, job.kind, stopped, notices=walk.notices, skipped=walk.skipped)
        if stopped == StopReason.DEADLINE:
            self.jobs.send(
                Job(job.sku, job.restock_id, job.restock_ts, kind="continue", after=walk.cursor, passed=walk.position)
            )
            metrics.count(CONTINUATIONS)
            outcome.continued = True
        return outcome

    def _reoffers_stopped(self, restock: Restock) -> bool:
        """Whether the restock's units are no longer offered (SMS pumping: a run of offers nobody used, however many
        numbers wait); the first to see it records why (`reoffers_stopped`)."""
        limit = self.settings.reoffer_lapse_limit
        if not restock.reoffers_capped(limit):
            return False
        if restock.reoffers_stopped_at is None:
            self.moves.stop_reoffers(restock, lapse_limit=limit, now=self.clock.now())
        return True

    def _open_restock_instead(self, job: Job) -> tuple[Job, Restock] | None:
        """The SKU's open restock, when it is not the (closed) one the job names: the job's work goes to it."""
        product = self.tables.catalog.get(job.sku, consistent=True)
        restock_ts = product.open_restock_ts if product else None
        if not restock_ts or restock_ts == job.restock_ts:
            return None
        restock = self.tables.restocks.get(job.sku, str(restock_ts))
        if restock is None or restock.state == RestockState.CLOSED:
            return None
        return Job(job.sku, restock.restock_id, str(restock_ts), kind="topup"), restock

    def _mark_idle(self, walk: _Walk) -> bool:
        """Mark the product as having units nobody eligible waits for; False when the restock has none left."""
        job = walk.job
        try:
            self.tables.run(
                Tx()
                .add("restock", self.tables.restocks.has_units_check(job.sku, job.restock_ts))
                .add("marks", *self.tables.catalog.idle_items(job.sku, job.restock_ts, job.restock_id))
            )
        except TransactionCancelled as cancelled:
            if cancelled.conflicted and not cancelled.failed_other_than():
                # Taps held its shards through every retry (a hot drop): the units may still wait for nobody, so
                # the job fails and comes back to walk and mark again, never taken as "none left" (invariant 7).
                raise
            return False
        return True

    def _clear_idle(self, job: Job, product: Product) -> None:
        """Take the idle mark off once every unit of the restock is promised (it stays if one is freed meanwhile)."""
        if product.idle_restock_ts != job.restock_ts:
            return  # not marked as far as we know (the product is cached; a stale mark costs one empty job)
        with contextlib.suppress(TransactionCancelled):
            self.tables.run(
                Tx()
                .add("restock", self.tables.restocks.no_units_check(job.sku, job.restock_ts))
                .add("marks", *self.tables.catalog.clear_idle_items(job.sku, job.restock_ts))
            )

    def _walk(self, walk: _Walk, remaining_ms: Callable[[], int], reserve_ms: int) -> StopReason:
        """Go down the queue until the units, the queue or the time run out; returns why it stopped."""
        # Offers run at most four rounds of sends ahead of them: enough to keep every sender busy while the walk
        # reads a page or commits a batch, and few enough that a crash strands only that many offers until they lapse.
        max_in_flight = self.settings.sends_concurrency * 4
        # The reader outlives the senders (it shuts down last), so a send never waits on a read nobody makes.
        with (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="optout-read") as reader,
            ThreadPoolExecutor(max_workers=self.settings.sends_concurrency, thread_name_prefix="send") as pool,
        ):
            # Each batch's last look is read about one round of sends before its first send, off the send threads.
            walk.looks = LastLooks(
                lambda addressees: self._withheld(walk.job.sku, addressees),
                lead=self.settings.sends_concurrency,
                reader=reader,
                # The app's clock, not the process's: a test clock that stands still keeps a walk's reads the same
                # from run to run (the crash tests cut before the k-th call), and a test that lets time pass sees
                # the looks made again.
                clock=self.clock.now,
            )
            try:
                for from_parked, page in self._pages(walk):
                    suppressed = self.tables.optout.suppressed_among([r.contact_key for r in page if r.contact_key])
                    batch: list[_Candidate] = []
                    for request in page:
                        self._collect(walk, block=len(walk.pending) >= max_in_flight)
                        if walk.failures:
                            return StopReason.SEND_FAILED
                        if walk.throttled:
                            return StopReason.THROTTLED
                        if walk.examined and remaining_ms() < reserve_ms:
                            # Everyone examined is offered or skipped before the continuation resumes after them.
                            return (
                                StopReason.DEADLINE
                                if self._commit_batch(walk, batch, pool)
                                else StopReason.UNITS_EXHAUSTED
                            )
                        if not batch and walk.left <= 0 and not self._units_left(walk):
                            return StopReason.UNITS_EXHAUSTED
                        walk.examined += 1
                        if from_parked:
                            self._look_again(walk, request, suppressed, batch)
                            full = bool(batch) and len(batch) >= min(self.offer_batch, walk.left)
                            if full and not self._commit_batch(walk, batch, pool):
                                return StopReason.UNITS_EXHAUSTED
                            continue
                        # A second look passes places this job already counted and audited again: once each.
                        again = request.joined_ts <= walk.seen_up_to
                        if request.live and not again:
                            walk.position += 1
                        reason = skip_reason(request, walk.job.restock_id, suppressed)
                        if reason:
                            # A place looked at again is passed over without a second fact, unless it is a late
                            # joiner sorting before the cursor, met now for the first time for a reason that can
                            # change: it is parked like any other, or the cursor would leave it behind.
                            first_time = reason in CHANGEABLE and request.joined_ts not in walk.known_changeable
                            if not again or first_time:
                                self._skip(walk, request, reason, walk.position)
                        else:
                            batch.append(_Candidate(request, walk.position))
                        walk.cursor = request.joined_ts
                        if not batch:
                            self._settled(walk)
                        full = bool(batch) and len(batch) >= min(self.offer_batch, walk.left)
                        if full and not self._commit_batch(walk, batch, pool):
                            return StopReason.UNITS_EXHAUSTED
                    if not self._commit_batch(walk, batch, pool):
                        return StopReason.UNITS_EXHAUSTED
                return StopReason.QUEUE_END
            finally:
                # Whatever ended the walk, the notices already committed go out and are accounted for.
                while walk.pending:
                    self._collect(walk, block=True)
                self._write_facts(walk.sent_facts)
                self._write_mark(walk)

    def _pages(self, walk: _Walk) -> Iterator[tuple[bool, list[Request]]]:
        """The pages to walk: the places parked before the cursor (read once a job, by key), then the list."""
        if walk.parked:
            parked, walk.parked = walk.parked, {}
            found = self.tables.requests.get_many(walk.job.sku, list(parked))
            for joined_ts, entries in parked.items():
                if joined_ts not in found:
                    walk.unpark.extend(p.element for p in entries)  # the place is gone: nothing to tell
            walk.parked_at = parked
            page = [found[ts] for ts in sorted(found)]
            if page:
                yield True, page
        pages = self.tables.requests.queue_pages(walk.job.sku, after=walk.start, page_size=lambda: self._page(walk))
        yield from zip(itertools.repeat(False), pages, strict=False)

    def _look_again(self, walk: _Walk, request: Request, suppressed: set[str], batch: list[_Candidate]) -> None:
        """A place parked before the cursor, read again: a candidate now, parked still, or settled for good."""
        entries = walk.parked_at[request.joined_ts]
        elements = tuple(p.element for p in entries)
        known = next((p.position for p in entries if p.position is not None), None)
        position = known if known is not None else walk.position
        reason = skip_reason(request, walk.job.restock_id, suppressed)
        if reason is None:
            batch.append(_Candidate(request, position, parked=elements))
            return
        if all(p.reason == reason for p in entries):
            return  # passed over for the same reason as before: still parked, and its fact stands
        # A new reason: its fact, parked under it if it can still change, then the old entries go.
        self._skip(walk, request, reason, position if request.live else None, park=False)
        if reason in CHANGEABLE:
            walk.park.append(Parked(request.joined_ts, reason, position))
        walk.unpark.extend(elements)

    def _settled(self, walk: _Walk) -> None:
        """Every place examined so far is told or passed over: the cursor may move up to the last one."""
        if not walk.frozen and walk.cursor > walk.mark_cursor:
            walk.mark_cursor, walk.mark_passed = walk.cursor, walk.position

    def _park(self, walk: _Walk, request: Request, reason: SkipReason, position: int | None) -> None:
        """Keep a place passed over for a changeable reason, so later walks look at it again; past PARKED_MAX,
        stop the cursor before it instead (later walks then read on from there)."""
        if walk.frozen:
            return
        if walk.parked_count >= PARKED_MAX:
            walk.frozen = True
            return
        walk.parked_count += 1
        walk.park.append(Parked(request.joined_ts, reason, position))

    def _mark(self, walk: _Walk, cursor: str, passed: int) -> WalkMark | None:
        """The mark to write with the cursor at `cursor`: the cursor if it moved, the places parked up to it.
        Skip facts are written first, so the cursor never passes a place whose fact is not kept."""
        moved = cursor > walk.written_cursor
        park = tuple(p.element for p in walk.park if p.joined_ts <= cursor)
        if not moved and not park:
            return None
        if moved:
            self._write_facts(walk.skip_facts)
        return WalkMark(cursor=cursor if moved else None, passed=passed, park=park)

    def _marked(self, walk: _Walk, mark: WalkMark | None) -> None:
        """A mark was written."""
        if mark is None:
            return
        if mark.cursor is not None:
            walk.written_cursor = mark.cursor
        walk.park = [p for p in walk.park if p.element not in mark.park]

    def _write_mark(self, walk: _Walk) -> None:
        """Write where the walk left off, once it is done: whatever no offer transaction carried already. Parked
        places first, then those now settled come off (never the other way round, so none is ever lost)."""
        self._write_facts(walk.skip_facts)
        job = walk.job
        mark = self._mark(walk, walk.mark_cursor, walk.mark_passed)
        if mark is not None:
            self.tables.restocks.mark_walk(job.sku, job.restock_ts, mark)
            self._marked(walk, mark)
        if walk.unpark and not walk.park:
            self.tables.restocks.mark_walk(job.sku, job.restock_ts, WalkMark(unpark=tuple(walk.unpark)))
            walk.unpark = []

    def _page(self, walk: _Walk) -> int:
        """How many requests to read next: a short first page so the first notices go out at once, then enough
        for the units left in one read (up to MAX_PAGE), so a big restock is not read a hundred at a time."""
        walk.pages += 1
        return self.page_size if walk.pages == 1 else min(MAX_PAGE, max(self.page_size, walk.left))

    def _units_left(self, walk: _Walk, *, after_last_offers: bool = False) -> bool:
        """Re-read the counter once the local estimate reaches zero: lapses may have freed units meanwhile.

        `after_last_offers`: read just after a batch took what the walk counted as the last units. That batch's
        decrement was conditional on the units being there, so the counter cannot be below zero now unless
        more offers are live than units (invariant 5 broken; a fall reported in the instant between would
        also show): NoticesOverUnits counts by how many, and is 0 when the rule held. A cancelled batch proves
        nothing of the kind (another job or a fall took units first), so it is not counted.
        """
        fresh = self.tables.restocks.get(walk.job.sku, walk.job.restock_ts)
        closed = fresh is not None and (fresh.state == RestockState.CLOSED or self._reoffers_stopped(fresh))
        offerable = fresh.units_offerable if fresh is not None else 0
        if after_last_offers and not closed:
            over = max(0, -offerable)
            walk.metrics.count(NOTICES_OVER_UNITS, over)
            if over:
                log.error("restock %s has %d live offer(s) more than its units", walk.job.restock_id, over)
        walk.left = 0 if closed else offerable
        return walk.left > 0

    def _commit_batch(self, walk: _Walk, batch: list[_Candidate], pool: ThreadPoolExecutor) -> bool:
        """Offer the batch, oldest first, then send its notices; False when the units ran out before its end.

        Empties `batch`: each candidate is offered, skipped (told meanwhile elsewhere), or left for lack of units.
        """
        while batch:
            if walk.left <= 0 and not self._units_left(walk):
                batch.clear()
                return False
            if walk.copy is None:
                # Fetched before the first offer commits, so a slow model never sits between an offer and its notice.
                walk.copy = self.copywriter.copy_for(walk.restock, walk.product, walk.metrics)
                walk.facts = self.copywriter.facts(walk.product)
            # Fair order: always the oldest candidates, as many as the units last read allow.
            chosen = batch[: min(len(batch), walk.left)]
            # Each offer row's id is its reserve link's random id (128 bits): the link is the id, looked up.
            tokens = [new_link_id() for _ in chosen]
            # Once these offers are made, the walk has settled up to the last place examined (or, when units run
            # short of the batch, up to the last one chosen): the cursor moves there in the same transaction.
            cursor, passed = walk.mark_cursor, walk.mark_passed
            if not walk.frozen:
                whole = len(chosen) == len(batch)
                last = walk.cursor if whole else chosen[-1].request.joined_ts
                if last > cursor:
                    cursor, passed = last, walk.position if whole else chosen[-1].position
            mark = self._mark(walk, cursor, passed)
            try:
                self.tables.run(self._offers(walk, chosen, tokens, mark))
            except TransactionCancelled as cancelled:
                self._after_cancel(walk, batch, chosen, cancelled)
                continue
            self._marked(walk, mark)
            walk.mark_cursor, walk.mark_passed = cursor, passed
            walk.unpark.extend(e for c in chosen for e in c.parked)
            del batch[: len(chosen)]
            walk.left -= len(chosen)
            # A crash here leaves offers nobody was told about; they lapse at their due time and the sweep passes
            # the units on. The retry of this job must not send them either: the requests are marked told already.
            self.faults(AFTER_OFFER_COMMITTED)
            assert walk.looks is not None
            check = walk.looks.batch(
                [
                    Addressee(c.request.contact_key, c.request.joined_ts, token_id)
                    for c, token_id in zip(chosen, tokens, strict=True)
                ]
            )
            # An email's manage link is signed at its person's current link version (signing out everywhere
            # raises it); an SMS's is the person's short manage id, issued on their first SMS.
            people = self.manage_ids.for_people(
                [c.request.contact_key for c in chosen],
                {c.request.contact_key for c in chosen if c.request.channel == SMS},
                self.clock.now(),
            )
            for turn, (candidate, token_id) in enumerate(zip(chosen, tokens, strict=True), start=check.first_turn):
                person = people.get(candidate.request.contact_key) or PersonLinks()
                # Each recipient's message is in their place's language (a place from before languages is English).
                lang = candidate.request.lang if candidate.request.lang in walk.copy else DEFAULT_LANGUAGE
                notice = self._notice(walk.copy[lang], walk.facts[lang], candidate.request, token_id, person)
                addressee = Addressee(candidate.request.contact_key, candidate.request.joined_ts, token_id)
                future = pool.submit(self._deliver, notice, addressee, check, walk.looks, turn)
                walk.pending[future] = _Pending(token_id, candidate.request, candidate.position, notice.channel)
            if walk.left <= 0:
                self._units_left(walk, after_last_offers=True)
        return True

    def _offers(self, walk: _Walk, chosen: list[_Candidate], tokens: list[str], mark: WalkMark | None = None) -> Tx:
        """One transaction: k units from units_offerable (and the walk's mark), each offer row, its request told."""
        job = walk.job
        return self.moves.offer(
            sku=job.sku,
            restock_ts=job.restock_ts,
            restock_id=job.restock_id,
            offers=[
                NewOffer(
                    token_id=token_id,
                    request_joined_ts=candidate.request.joined_ts,
                    contact_key=candidate.request.contact_key,
                    channel=candidate.request.channel,
                    lang=candidate.request.lang,
                    remind_before_s=self.reminders.remind_before_s(candidate.request.channel, walk.offer_window_s),
                )
                for candidate, token_id in zip(chosen, tokens, strict=True)
            ],
            now=self.clock.now(),
            offer_window_s=walk.offer_window_s,
            lapse_limit=self.settings.reoffer_lapse_limit,
            mark=mark,
        )

    def _after_cancel(
        self, walk: _Walk, batch: list[_Candidate], chosen: list[_Candidate], cancelled: TransactionCancelled
    ) -> None:
        """Learn from a cancelled batch which requests to drop and how many units are really left, or re-raise."""
        job = walk.job
        understood = False
        dropped: list[_Candidate] = []
        for i, candidate in enumerate(chosen):
            if cancelled.failed(f"told {i}"):
                # Another invocation told them first, or their state moved: say which, from a fresh read.
                joined_ts = candidate.request.joined_ts
                fresh = self.tables.requests.get(job.sku, joined_ts)
                reason = skip_reason(fresh, job.restock_id, set()) or SkipReason.ALREADY_NOTIFIED
                self._skip(walk, candidate.request, reason, candidate.position)
                dropped.append(candidate)
                understood = True
            elif cancelled.failed(f"offer {i}"):
                understood = True  # a token id already taken: the retry draws new ones
        batch[:] = [c for c in batch if all(c is not d for d in dropped)]
        if cancelled.failed("units"):
            # Fewer units than last read (holds or another invocation took some): read again, retry with fewer.
            self._units_left(walk)
            understood = True
        if not understood:
            raise cancelled

    def _notice(self, copy: Copy, facts: Facts, request: Request, token_id: str, person: PersonLinks) -> Notice:
        """The message for one recipient, with their own links (short ones in an SMS, to fit its segments)."""
        contact_key = request.contact_key
        reserve_url = self.links.reserve(token_id)
        manage_url = self.links.manage(contact_key, person.version)
        to = request.contact
        if request.channel == SMS:
            manage_url = self.links.manage_short(person.link_id) if person.link_id else manage_url
            text = compose_sms(copy.sms, facts, reserve_url, manage_url, two_way=self.settings.sms_two_way)
            return Notice(channel=SMS, to=to, text=text)
        return compose_email(
            copy,
            to=to,
            name=request.name,
            facts=facts,
            reserve_url=reserve_url,
            manage_url=manage_url,
            unsubscribe_url=self.links.unsubscribe(contact_key),
        )

    def _deliver(self, notice: Notice, addressee: Addressee, check: BatchLook, looks: LastLooks, turn: int) -> str:
        """Send one notice, unless its person opted out, left or switched since the queue page was read (invariant
        3): the look that lets it go is no older than optout_gate.MAX_LOOK_AGE_S at each call to the provider."""

        def still_allowed() -> None:
            looks.reached(turn)  # this notice is going: the batches behind it may start their looks
            try:
                reason = check.withheld(addressee)
            except Exception as error:
                # Nothing went to the provider: a failed send to roll back and retry, never "maybe sent".
                raise LookUnread(str(error)) from error
            if reason:
                raise Withheld(SkipReason(reason))

        try:
            return self.senders.send(notice, just_before=still_allowed)
        finally:
            looks.reached(turn)  # gone without reaching the provider counts as gone too

    def _withheld(self, sku: str, addressees: Sequence[Addressee]) -> dict[str, str]:
        """The offers among these whose notice must not go now, each with why (read strongly consistent)."""
        optout, requests = self.tables.optout, self.tables.requests
        # One strongly consistent call for both: an opt-out, leave or switch a moment ago must be seen (invariant 3).
        suppression, found = get_together(
            [
                optout.suppression_read([a.contact_key for a in addressees]),
                requests.offers_read(sku, [a.joined_ts for a in addressees]),
            ],
            consistent=True,
        )
        suppressed, places = optout.suppressed_in(suppression), requests.offers_in(found)
        withheld: dict[str, str] = {}
        for addressee in addressees:
            place = places.get(addressee.joined_ts)
            if addressee.contact_key in suppressed:
                withheld[addressee.token_id] = OPTED_OUT
            elif (
                place is None
                or place.state != RequestState.OFFERED
                or place.offer_token != addressee.token_id
                or place.contact_key != addressee.contact_key
            ):
                # Left, switched to another contact, or the offer lapsed: this notice is nobody's now.
                withheld[addressee.token_id] = SkipReason.NOT_WAITING
        return withheld

    def _collect(self, walk: _Walk, *, block: bool) -> None:
        """Account for finished sends: audit the sent ones, roll back the failed ones."""
        if not walk.pending:
            return
        done, _ = wait(list(walk.pending), timeout=None if block else 0, return_when=FIRST_COMPLETED)
        for future in done:
            pending = walk.pending.pop(future)
            error = future.exception()
            if error is None:
                self._sent(walk, pending, future.result())
            elif isinstance(error, Withheld):
                self._withdraw(walk, pending, error.reason)
            elif maybe_sent(error):
                self._unconfirmed(walk, pending, error)
            elif refused_recipient(pending.channel, error) and self._refusal_believed(walk, pending):
                self._undeliverable(walk, pending, error)
            elif throttled(error):
                self._throttled(walk, pending, error)
            else:
                self._send_failed(walk, pending, error)

    def _sent(self, walk: _Walk, pending: _Pending, message_id: str) -> None:
        walk.refused_in_a_row[pending.channel] = 0
        walk.notices += 1
        walk.metrics.count(NOTICES_SENT)
        self._notice_fact(walk, pending, "notice_sent", message_id=message_id)

    def _notice_fact(self, walk: _Walk, pending: _Pending, kind: str, **extra: Any) -> None:
        """Keep the fact of a notice that went (or may have), written with the next batch of them."""
        walk.sent_facts.append(
            self.tables.audit.fact(
                walk.job.sku,
                kind,
                self.clock.now(),
                restock_id=walk.job.restock_id,
                position=pending.position,
                channel=pending.channel,
                contact_key=pending.request.contact_key,
                token_id=pending.token_id,
                request_joined_ts=pending.request.joined_ts,
                job_kind=walk.job.kind,
                **extra,
            )
        )
        self._write_facts(walk.sent_facts, at_least=FACTS_PER_TRANSACTION)

    def _write_facts(self, facts: list[dict[str, Any]], *, at_least: int = 1) -> None:
        """Write a walk's kept facts, of notices sent or of places passed over alike, once there are `at_least` of
        them (a full transaction while walking, whatever is left at the end), and start the list again."""
        if len(facts) >= at_least:
            self.tables.audit.record_many(facts)
            facts.clear()

    def _roll_back(self, walk: _Walk, pending: _Pending) -> bool:
        """Undo the offer of a notice that did not go: unit back, row gone, request waiting and untold.

        False when it could not be undone (the shopper's opt-out lapsed it first, or a write failed): the offer
        then stays and lapses at its due time, and the sweep returns the unit.
        """
        job, request = walk.job, pending.request
        try:
            self.moves.roll_back(
                sku=job.sku,
                restock_ts=job.restock_ts,
                token_id=pending.token_id,
                request_joined_ts=request.joined_ts,
                previous_restock=request.last_notified_restock,
                channel=pending.channel,
                position=pending.position,
            )
        except Exception:
            log.exception("rolling back the offer %s failed; the sweep will lapse it", offer_ref(pending.token_id))
            return False
        return True

    def _send_failed(self, walk: _Walk, pending: _Pending, error: BaseException) -> None:
        """A provider refused or could not be reached: roll the offer back; the job fails, so its retry tells them."""
        walk.failures += 1
        walk.metrics.count(SEND_FAILURES)
        job = walk.job
        log.warning("send failed for restock %s (%s): %s", job.restock_id, pending.channel, error_code(error))
        self._roll_back_unsent(walk, pending, "send_failed", error)

    def _roll_back_unsent(self, walk: _Walk, pending: _Pending, kind: str, error: BaseException) -> None:
        """Roll back the offer of a notice that was not sent, and record why (`kind`) and whether it came back."""
        rolled_back = self._roll_back(walk, pending)
        self.tables.audit.record(
            walk.job.sku,
            kind,
            self.clock.now(),
            restock_id=walk.job.restock_id,
            channel=pending.channel,
            contact_key=pending.request.contact_key,
            token_id=pending.token_id,
            error=error_code(error),
            rolled_back=rolled_back,
        )

    def _refusal_believed(self, walk: _Walk, pending: _Pending) -> bool:
        """Whether a refusal of the recipient is taken as theirs: not after MAX_REFUSALS_IN_A_ROW on the channel
        with nothing sent between, which look like our own problem (the job fails and a person must look)."""
        walk.refused_in_a_row[pending.channel] += 1
        return walk.refused_in_a_row[pending.channel] <= MAX_REFUSALS_IN_A_ROW

    def _undeliverable(self, walk: _Walk, pending: _Pending, error: BaseException) -> None:
        """The provider refused this notice for its recipient alone (an address SES will not take, a number SNS
        will not send to). One transaction undoes the offer and marks the person undeliverable for this restock,
        with the fact: no retry offers or sends it again, the place stays for later restocks, and the unit goes
        to the next person while the walk goes on."""
        job, request = walk.job, pending.request
        code = error_code(error)
        walk.undeliverable += 1
        walk.metrics.count(NOTICES_UNDELIVERABLE)
        log.warning("notice of offer %s undeliverable (%s): the unit goes on", offer_ref(pending.token_id), code)
        facts: dict[str, Any] = {
            "restock_id": job.restock_id,
            "position": pending.position,
            "channel": pending.channel,
            "contact_key": request.contact_key,
            "token_id": pending.token_id,
            "request_joined_ts": request.joined_ts,
            "job_kind": job.kind,
            "error": code,
        }
        try:
            owed = self.moves.undeliverable(
                sku=job.sku,
                restock_ts=job.restock_ts,
                token_id=pending.token_id,
                request_joined_ts=request.joined_ts,
                restock_id=job.restock_id,
                now=self.clock.now(),
                facts={**facts, "rolled_back": True},
            )
        except Exception:
            # The offer stands, told about this restock: the sweep lapses it and returns the unit; never resent.
            log.exception(
                "undoing the undeliverable offer %s failed; the sweep will lapse it", offer_ref(pending.token_id)
            )
            self.tables.audit.record(job.sku, "notice_undeliverable", self.clock.now(), **facts, rolled_back=False)
            return
        walk.owes_topup = walk.owes_topup or owed
        self.faults(AFTER_UNDELIVERABLE)
        walk.left += 1  # the unit is offerable again: the walk offers it onward

    def _throttled(self, walk: _Walk, pending: _Pending, error: BaseException) -> None:
        """The provider still throttled after the sender's tries: nothing was sent. The offer is rolled back (the
        person waits, untold), the walk makes no more offers, and a delayed top-up tells them: back-pressure,
        never a failed job."""
        walk.throttled += 1
        walk.metrics.count(SENDS_THROTTLED)
        job = walk.job
        log.warning("send throttled for restock %s (%s); told later", job.restock_id, pending.channel)
        self._roll_back_unsent(walk, pending, "send_throttled", error)

    def _withdraw(self, walk: _Walk, pending: _Pending, reason: SkipReason) -> None:
        """The person opted out, left or switched after the page was read and before the send: nothing went; the
        unit comes back (by this roll-back, or by the opt-out or leave that lapsed the offer already)."""
        if self._roll_back(walk, pending):
            walk.withdrawn += 1
        # The roll-back parked the place already (it waits untold): a later walk looks at it again.
        self._skip(walk, pending.request, reason, pending.position, park=False)

    def _unconfirmed(self, walk: _Walk, pending: _Pending, error: BaseException) -> None:
        """The provider may have accepted the notice and its answer was lost: the offer stands as if sent (its
        link works, or lapses unused), and nothing is sent again (invariant 6)."""
        walk.unconfirmed += 1
        walk.metrics.count(NOTICES_UNCONFIRMED)
        log.warning(
            "send of offer %s unconfirmed (%s); kept, never resent", offer_ref(pending.token_id), error_code(error)
        )
        self._notice_fact(walk, pending, "notice_unconfirmed", error=error_code(error))

    def _skip(
        self, walk: _Walk, request: Request, reason: SkipReason, position: int | None, *, park: bool = True
    ) -> None:
        """Pass a place over: its fact (written with the next batch of them), and parked if the reason can change."""
        walk.skipped[reason] += 1
        walk.metrics.count(skip_metric(reason))
        live = request.live
        walk.skip_facts.append(
            self.tables.audit.fact(
                walk.job.sku,
                "notice_skipped",
                self.clock.now(),
                restock_id=walk.job.restock_id,
                reason=reason,
                position=position if live else None,
                contact_key=request.contact_key,
                request_joined_ts=request.joined_ts,
            )
        )
        if park and reason in CHANGEABLE:
            walk.known_changeable.add(request.joined_ts)
            self._park(walk, request, reason, position if live else None)
        self._write_facts(walk.skip_facts, at_least=FACTS_PER_TRANSACTION)
