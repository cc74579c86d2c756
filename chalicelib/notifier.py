"""The notifier: tell the front of a SKU's waiting list about a restock, in order, capped, exactly once.

Eligible requests are offered in batches, oldest first: one transaction takes k units from `units_offerable`
(all or none, never below zero), writes the k offer rows and marks the k requests told for this restock.
Only then are the notices sent.
A send that fails is rolled back by the inverse transaction and the job fails, so SQS retries it; a job
redelivered after success finds everyone already told and sends nothing. A send the provider refuses for its
recipient alone is undone and marked undeliverable in one transaction, and the walk goes on; a send still
throttled is undone and told by a later job.

A job builds a walk and runs it: the walk (chalicelib/walk.py) keeps where it is in the queue and what it passed
over, its dispatch (chalicelib/dispatch.py) the sends in flight and what became of them, and both keep their audit
facts in one buffer (chalicelib/fact_buffer.py). The Notifier reads the pages, commits the offers and hands the
notices to the send threads.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from chalicelib.clock import Clock
from chalicelib.config import DEFAULT_OFFER_WINDOW_S, Settings
from chalicelib.counters import NewOffer, UnitMoves
from chalicelib.dispatch import Dispatch, Pending, Withheld
from chalicelib.errors import NotFound
from chalicelib.fact_buffer import FactBuffer
from chalicelib.faults import FaultHook, no_faults
from chalicelib.i18n import DEFAULT_LANGUAGE
from chalicelib.link_ids import new_link_id
from chalicelib.links import Links
from chalicelib.logs import correlated
from chalicelib.manage_ids import ManageIds
from chalicelib.messages.compose import Copy, Facts, compose_email, compose_sms
from chalicelib.messages.copywriter import Copywriter
from chalicelib.messages.optout_gate import OPTED_OUT, Addressee, BatchLook, LastLooks
from chalicelib.messages.senders import (
    SMS,
    Notice,
    Senders,
)
from chalicelib.metrics import (
    CONTINUATIONS,
    NOTICES_OVER_UNITS,
    UNITS_OFFERABLE,
    UNITS_TOTAL,
    Metrics,
    MetricsFactory,
)
from chalicelib.queue.jobs import JobQueue
from chalicelib.queue.messages import Job
from chalicelib.queue.owed import OwedJobs
from chalicelib.reminders import ReminderPolicy
from chalicelib.tables.base import TransactionCancelled, Tx, get_together
from chalicelib.tables.catalog import Product
from chalicelib.tables.optout import PersonLinks
from chalicelib.tables.requests import Request, RequestState
from chalicelib.tables.restocks import Restock, RestockState, WalkMark
from chalicelib.tables.store import Tables
from chalicelib.walk import Candidate, SkipReason, Walk, rewalk_from, skip_reason

log = logging.getLogger(__name__)


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

# When a top-up comes back for the notices the provider kept throttling (SQS DelaySeconds).
THROTTLED_RETRY_S = 60

# Offers committed per transaction: one restock update plus two items per offer, within DynamoDB's 100 items.
OFFER_BATCH = 25
MAX_OFFER_BATCH = 49


class UnknownRestock(NotFound):
    """A job names a restock that does not exist (or another restock's id): it goes to the DLQ for a person."""

    code = "unknown_restock"


class LookUnread(RuntimeError):
    """The last look before the send failed, so the notice was not sent."""


class SendFailed(RuntimeError):
    """Some notices could not be sent; their offers were rolled back and the job must be retried."""


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


@dataclass
class _Offering:
    """What one job's offers and their notices are made of: the restock and product, the copy (by language, fetched
    once per job, with the product's facts), and the last looks at the suppression list of the pass under way."""

    restock: Restock
    product: Product
    copy: dict[str, Copy] | None = None
    facts: dict[str, Facts] = field(default_factory=dict)
    looks: LastLooks | None = None


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
        walk = Walk(job, restock, FactBuffer(self.tables.audit, job.sku), metrics, self.clock)
        dispatch = Dispatch(walk, self.moves, self.tables.audit, self.clock, self.faults)
        offering = _Offering(restock, product)
        # Keep back enough time to let the sends in flight finish and to queue the continuation.
        reserve_ms = min(self.deadline_margin_ms, max(0, remaining_ms()) // 4)
        stopped = self._walk(walk, dispatch, offering, remaining_ms, reserve_ms)
        if (
            stopped == StopReason.QUEUE_END
            and walk.left > 0
            and not dispatch.failures + dispatch.throttled
            and self._mark_idle(walk)
        ):
            # Units are left and nobody eligible waits: say so on the product, where every new place looks
            # (capture sends a job when it sees it), then read the end of the queue once more, so a place
            # that joined before the mark was visible is walked here instead (one of the two always sees the
            # other). Join stamps come from the joining Lambda's clock, so look a little before the cursor.
            walk.restart(after=rewalk_from(walk.cursor))
            stopped = self._walk(walk, dispatch, offering, remaining_ms, reserve_ms)
        if stopped == StopReason.UNITS_EXHAUSTED:
            self._clear_idle(job, product)
        if dispatch.withdrawn + dispatch.undeliverable and stopped != StopReason.DEADLINE and not dispatch.failures:
            # Units came back from offers withdrawn at the last moment: the next walk hands them on. The refused
            # recipients' roll-backs recorded that job as owed, so a crash before here leaves it to the sweep;
            # sending it through OwedJobs clears the record (one job walks for every unit that came back).
            if dispatch.owes_topup:
                self.owed.send(job.sku, job.restock_ts, self.clock.now())
            else:
                self.jobs.send(Job(job.sku, job.restock_id, job.restock_ts, kind="topup"))
        if dispatch.throttled and not dispatch.failures:
            # Back-pressure, not a failure: the people rolled back wait untold, and a later walk tells them first.
            self.jobs.send(Job(job.sku, job.restock_id, job.restock_ts, kind="topup"), delay_s=THROTTLED_RETRY_S)
        if dispatch.failures:
            raise SendFailed(f"{dispatch.failures} notice(s) for restock {job.restock_id} could not be sent; retrying")
        outcome = Outcome(job.restock_id, job.kind, stopped, notices=dispatch.notices, skipped=walk.skipped)
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

    def _mark_idle(self, walk: Walk) -> bool:
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

    def _walk(
        self, walk: Walk, dispatch: Dispatch, offering: _Offering, remaining_ms: Callable[[], int], reserve_ms: int
    ) -> StopReason:
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
            offering.looks = LastLooks(
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
                    batch: list[Candidate] = []
                    for request in page:
                        dispatch.collect(block=len(dispatch.pending) >= max_in_flight)
                        if dispatch.failures:
                            return StopReason.SEND_FAILED
                        if dispatch.throttled:
                            return StopReason.THROTTLED
                        if walk.examined and remaining_ms() < reserve_ms:
                            # Everyone examined is offered or skipped before the continuation resumes after them.
                            return (
                                StopReason.DEADLINE
                                if self._commit_batch(walk, dispatch, offering, batch, pool)
                                else StopReason.UNITS_EXHAUSTED
                            )
                        if not batch and walk.left <= 0 and not self._units_left(walk):
                            return StopReason.UNITS_EXHAUSTED
                        walk.examined += 1
                        if from_parked:
                            walk.look_again(request, suppressed, batch)
                        else:
                            walk.examine(request, suppressed, batch)
                        full = bool(batch) and len(batch) >= min(self.offer_batch, walk.left)
                        if full and not self._commit_batch(walk, dispatch, offering, batch, pool):
                            return StopReason.UNITS_EXHAUSTED
                    if not self._commit_batch(walk, dispatch, offering, batch, pool):
                        return StopReason.UNITS_EXHAUSTED
                return StopReason.QUEUE_END
            finally:
                # Whatever ended the walk, the notices already committed go out and are accounted for.
                dispatch.finish()
                self._write_mark(walk)

    def _pages(self, walk: Walk) -> Iterator[tuple[bool, list[Request]]]:
        """The pages to walk: the places parked before the cursor (read once a job, by key), then the list."""
        parked = walk.take_parked()
        if parked:
            found = self.tables.requests.get_many(walk.job.sku, list(parked))
            page = walk.parked_found(parked, found)
            if page:
                yield True, page
        pages = self.tables.requests.queue_pages(
            walk.job.sku, after=walk.start, page_size=lambda: walk.page_size(self.page_size)
        )
        yield from zip(itertools.repeat(False), pages, strict=False)

    def _write_mark(self, walk: Walk) -> None:
        """Write where the walk left off, once it is done: whatever no offer transaction carried already. Parked
        places first, then those now settled come off (never the other way round, so none is ever lost)."""
        walk.facts.flush_skips()
        job = walk.job
        mark = walk.mark(walk.mark_cursor, walk.mark_passed)
        if mark is not None:
            self.tables.restocks.mark_walk(job.sku, job.restock_ts, mark)
            walk.marked(mark)
        if walk.unpark and not walk.park:
            self.tables.restocks.mark_walk(job.sku, job.restock_ts, WalkMark(unpark=tuple(walk.unpark)))
            walk.unpark = []

    def _units_left(self, walk: Walk, *, after_last_offers: bool = False) -> bool:
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

    def _commit_batch(
        self, walk: Walk, dispatch: Dispatch, offering: _Offering, batch: list[Candidate], pool: ThreadPoolExecutor
    ) -> bool:
        """Offer the batch, oldest first, then send its notices; False when the units ran out before its end.

        Empties `batch`: each candidate is offered, skipped (told meanwhile elsewhere), or left for lack of units.
        """
        while batch:
            if walk.left <= 0 and not self._units_left(walk):
                batch.clear()
                return False
            if offering.copy is None:
                # Fetched before the first offer commits, so a slow model never sits between an offer and its notice.
                offering.copy = self.copywriter.copy_for(offering.restock, offering.product, walk.metrics)
                offering.facts = self.copywriter.facts(offering.product)
            # Fair order: always the oldest candidates, as many as the units last read allow.
            chosen = batch[: min(len(batch), walk.left)]
            # Each offer row's id is its reserve link's random id (128 bits): the link is the id, looked up.
            tokens = [new_link_id() for _ in chosen]
            # Once these offers are made, the walk has settled further: the cursor moves there in the same transaction.
            cursor, passed = walk.settled_by(chosen, whole=len(chosen) == len(batch))
            mark = walk.mark(cursor, passed)
            try:
                self.tables.run(self._offers(walk, offering, chosen, tokens, mark))
            except TransactionCancelled as cancelled:
                self._after_cancel(walk, batch, chosen, cancelled)
                continue
            walk.offered(chosen, mark, cursor, passed)
            del batch[: len(chosen)]
            # A crash here leaves offers nobody was told about; they lapse at their due time and the sweep passes
            # the units on. The retry of this job must not send them either: the requests are marked told already.
            self.faults(AFTER_OFFER_COMMITTED)
            self._send(walk, dispatch, offering, chosen, tokens, pool)
            if walk.left <= 0:
                self._units_left(walk, after_last_offers=True)
        return True

    def _send(
        self,
        walk: Walk,
        dispatch: Dispatch,
        offering: _Offering,
        chosen: list[Candidate],
        tokens: list[str],
        pool: ThreadPoolExecutor,
    ) -> None:
        """Hand the notices of offers just committed to the send threads, each behind its last look."""
        assert offering.looks is not None and offering.copy is not None
        check = offering.looks.batch(
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
            lang = candidate.request.lang if candidate.request.lang in offering.copy else DEFAULT_LANGUAGE
            notice = self._notice(offering.copy[lang], offering.facts[lang], candidate.request, token_id, person)
            addressee = Addressee(candidate.request.contact_key, candidate.request.joined_ts, token_id)
            future = pool.submit(self._deliver, notice, addressee, check, offering.looks, turn)
            dispatch.track(future, Pending(token_id, candidate.request, candidate.position, notice.channel))

    def _offers(
        self, walk: Walk, offering: _Offering, chosen: list[Candidate], tokens: list[str], mark: WalkMark | None
    ) -> Tx:
        """One transaction: k units from units_offerable (and the walk's mark), each offer row, its request told."""
        job = walk.job
        window_s = offering.product.offer_window_s or DEFAULT_OFFER_WINDOW_S
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
                    remind_before_s=self.reminders.remind_before_s(candidate.request.channel, window_s),
                )
                for candidate, token_id in zip(chosen, tokens, strict=True)
            ],
            now=self.clock.now(),
            offer_window_s=window_s,
            lapse_limit=self.settings.reoffer_lapse_limit,
            mark=mark,
        )

    def _after_cancel(
        self, walk: Walk, batch: list[Candidate], chosen: list[Candidate], cancelled: TransactionCancelled
    ) -> None:
        """Learn from a cancelled batch which requests to drop and how many units are really left, or re-raise."""
        job = walk.job
        understood = False
        dropped: list[Candidate] = []
        for i, candidate in enumerate(chosen):
            if cancelled.failed(f"told {i}"):
                # Another invocation told them first, or their state moved: say which, from a fresh read.
                joined_ts = candidate.request.joined_ts
                fresh = self.tables.requests.get(job.sku, joined_ts)
                reason = skip_reason(fresh, job.restock_id, set()) or SkipReason.ALREADY_NOTIFIED
                walk.skip(candidate.request, reason, candidate.position)
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
        to = request.contact
        if request.channel == SMS:
            manage_url = self.links.manage_in_sms(contact_key, person.version, person.link_id)
            text = compose_sms(copy.sms, facts, reserve_url, manage_url, two_way=self.settings.sms_two_way)
            return Notice(channel=SMS, to=to, text=text)
        return compose_email(
            copy,
            to=to,
            name=request.name,
            facts=facts,
            reserve_url=reserve_url,
            manage_url=self.links.manage(contact_key, person.version),
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
