"""Where one notifier job is in a SKU's queue and what it passed over: its cursor, the places it parks to look at
again, and how far it has settled (every place up to there told or passed over for good).

The walk reads and writes nothing itself but its facts (chalicelib/fact_buffer.py): the notifier reads the pages,
commits the offers and writes the mark this keeps.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from chalicelib.clock import Clock, iso, parse_iso
from chalicelib.fact_buffer import FactBuffer
from chalicelib.messages.senders import EMAIL, SMS
from chalicelib.metrics import Metrics, skip_metric
from chalicelib.queue.messages import Job
from chalicelib.tables.requests import Request, RequestState
from chalicelib.tables.restocks import Parked, Restock, WalkMark


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

# How far before the walk's last place a second look at the end of the queue starts: a join stamp is taken by
# the joining Lambda before its write commits, on its own clock, so a place may sort a little before places
# the walk has already read.
REWALK_MARGIN_S = 60
# Queue pages follow the units still to offer: one read covers a big restock, a small one reads little.
MAX_PAGE = 1000


def rewalk_from(cursor: str) -> str:
    """Where a second look at the end of the queue starts: REWALK_MARGIN_S before the join stamp `cursor`."""
    if not cursor:
        return ""
    return iso(parse_iso(cursor.split("#", 1)[0]) - REWALK_MARGIN_S)


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


@dataclass(frozen=True)
class Candidate:
    """An eligible request waiting for its batch to commit, with its place in line when examined (and, for a place
    parked before the cursor, the set elements that parked it: removed once its offer is made)."""

    request: Request
    position: int
    parked: tuple[str, ...] = ()


class Walk:
    """One job's pass over the queue (the Notifier itself holds none, so jobs can overlap): the places it examines
    and passes over, where it would resume, and the units it may still offer."""

    def __init__(self, job: Job, restock: Restock, facts: FactBuffer, metrics: Metrics, clock: Clock) -> None:
        self.job = job
        self.facts = facts
        self.metrics = metrics
        self.clock = clock
        self.left = restock.units_offerable  # units it may still offer, as last read less its own offers
        self.position = job.passed
        self.start = job.after
        self.cursor = job.after
        self.seen_up_to = ""  # join stamps up to here were looked at by this job already
        self.examined = 0
        self.pages = 0
        self.skipped: Counter[SkipReason] = Counter()
        # Where the walk left off, kept on the restock (docs/SCALE.md, "Top-ups"). A first job, a top-up or a
        # retried job resumes there: the places parked before it first, then a little before the cursor (join
        # stamps come from the joining Lambda's clock), then on. A continuation resumes after its own `after`.
        resumes = job.kind != "continue"
        stored = restock.walk_cursor or ""
        if resumes and stored:
            self.position = restock.walk_passed
            self.start = rewalk_from(stored)
            self.cursor = stored
            self.seen_up_to = stored
        self.mark_cursor = stored  # settled up to here: every place at or before it is told or passed for good
        self.mark_passed = restock.walk_passed
        self.written_cursor = stored
        self.parked: dict[str, list[Parked]] = {}  # to look at again, by join stamp (read by the first pass)
        self.parked_at: dict[str, list[Parked]] = {}  # those being looked at again
        for parked in restock.parked() if resumes else []:
            self.parked.setdefault(parked.joined_ts, []).append(parked)
        self.parked_count = len(restock.walk_parked)
        # Places passed over for a changeable reason that are parked already, or were met by this job.
        self.known_changeable = {p.joined_ts for p in restock.parked()}
        self.park: list[Parked] = []  # to add to the restock's parked places, with the cursor that passes them
        self.unpark: list[str] = []  # parked places now settled, removed once the walk is done
        self.frozen = False  # PARKED_MAX reached: the cursor moves no further in this job

    def restart(self, *, after: str) -> None:
        """Walk again from `after`: places up to the cursor were counted (and passed over with a reason) already."""
        self.seen_up_to = self.cursor
        self.start = after
        self.pages = 0

    def page_size(self, first: int) -> int:
        """How many requests to read next: a short first page (`first`) so the first notices go out at once, then
        enough for the units left in one read (up to MAX_PAGE), so a big restock is not read a hundred at a time."""
        self.pages += 1
        return first if self.pages == 1 else min(MAX_PAGE, max(first, self.left))

    def take_parked(self) -> dict[str, list[Parked]]:
        """The places parked before the cursor, by join stamp, to read again: once a job, so empty after the first."""
        parked, self.parked = self.parked, {}
        return parked

    def parked_found(self, parked: dict[str, list[Parked]], found: dict[str, Request]) -> list[Request]:
        """The parked places read again, oldest first; a place gone has nothing to tell and comes off."""
        for joined_ts, entries in parked.items():
            if joined_ts not in found:
                self.unpark.extend(p.element for p in entries)
        self.parked_at = parked
        return [found[ts] for ts in sorted(found)]

    def examine(self, request: Request, suppressed: set[str], batch: list[Candidate]) -> None:
        """A place after the cursor: a candidate for the batch, or passed over; the cursor moves to it."""
        # A second look passes places this job already counted and audited again: once each.
        again = request.joined_ts <= self.seen_up_to
        if request.live and not again:
            self.position += 1
        reason = skip_reason(request, self.job.restock_id, suppressed)
        if reason:
            # A place looked at again is passed over without a second fact, unless it is a late joiner sorting
            # before the cursor, met now for the first time for a reason that can change: it is parked like any
            # other, or the cursor would leave it behind.
            first_time = reason in CHANGEABLE and request.joined_ts not in self.known_changeable
            if not again or first_time:
                self.skip(request, reason, self.position)
        else:
            batch.append(Candidate(request, self.position))
        self.cursor = request.joined_ts
        if not batch:
            self._settled()

    def look_again(self, request: Request, suppressed: set[str], batch: list[Candidate]) -> None:
        """A place parked before the cursor, read again: a candidate now, parked still, or settled for good."""
        entries = self.parked_at[request.joined_ts]
        elements = tuple(p.element for p in entries)
        known = next((p.position for p in entries if p.position is not None), None)
        position = known if known is not None else self.position
        reason = skip_reason(request, self.job.restock_id, suppressed)
        if reason is None:
            batch.append(Candidate(request, position, parked=elements))
            return
        if all(p.reason == reason for p in entries):
            return  # passed over for the same reason as before: still parked, and its fact stands
        # A new reason: its fact, parked under it if it can still change, then the old entries go.
        self.skip(request, reason, position if request.live else None, park=False)
        if reason in CHANGEABLE:
            self.park.append(Parked(request.joined_ts, reason, position))
        self.unpark.extend(elements)

    def skip(self, request: Request, reason: SkipReason, position: int | None, *, park: bool = True) -> None:
        """Pass a place over: its fact (written with the next batch of them), and parked if the reason can change."""
        self.skipped[reason] += 1
        self.metrics.count(skip_metric(reason))
        live = request.live
        if park and reason in CHANGEABLE:
            self.known_changeable.add(request.joined_ts)
            self._park(request, reason, position if live else None)
        self.facts.keep_skip(
            self.clock.now(),
            restock_id=self.job.restock_id,
            reason=reason,
            position=position if live else None,
            contact_key=request.contact_key,
            request_joined_ts=request.joined_ts,
        )

    def _park(self, request: Request, reason: SkipReason, position: int | None) -> None:
        """Keep a place passed over for a changeable reason, so later walks look at it again; past PARKED_MAX,
        stop the cursor before it instead (later walks then read on from there)."""
        if self.frozen:
            return
        if self.parked_count >= PARKED_MAX:
            self.frozen = True
            return
        self.parked_count += 1
        self.park.append(Parked(request.joined_ts, reason, position))

    def _settled(self) -> None:
        """Every place examined so far is told or passed over: the cursor may move up to the last one."""
        if not self.frozen and self.cursor > self.mark_cursor:
            self.mark_cursor, self.mark_passed = self.cursor, self.position

    def settled_by(self, chosen: list[Candidate], whole: bool) -> tuple[str, int]:
        """Where the walk is settled once `chosen` are offered (`whole`: they are the whole batch): up to the last
        place examined, or, when units run short of the batch, up to the last one chosen. The cursor and the
        places passed up to it."""
        cursor, passed = self.mark_cursor, self.mark_passed
        if not self.frozen:
            last = self.cursor if whole else chosen[-1].request.joined_ts
            if last > cursor:
                cursor, passed = last, self.position if whole else chosen[-1].position
        return cursor, passed

    def mark(self, cursor: str, passed: int) -> WalkMark | None:
        """The mark to write with the cursor at `cursor`: the cursor if it moved, the places parked up to it.
        Skip facts are written first, so the cursor never passes a place whose fact is not kept."""
        moved = cursor > self.written_cursor
        park = tuple(p.element for p in self.park if p.joined_ts <= cursor)
        if not moved and not park:
            return None
        if moved:
            self.facts.flush_skips()
        return WalkMark(cursor=cursor if moved else None, passed=passed, park=park)

    def marked(self, mark: WalkMark | None) -> None:
        """A mark was written."""
        if mark is None:
            return
        if mark.cursor is not None:
            self.written_cursor = mark.cursor
        self.park = [p for p in self.park if p.element not in mark.park]

    def offered(self, chosen: list[Candidate], mark: WalkMark | None, cursor: str, passed: int) -> None:
        """`chosen` were offered, in one transaction with `mark`: settled up to `cursor`, their units gone, and the
        parked places among them come off once the walk is done."""
        self.marked(mark)
        self.mark_cursor, self.mark_passed = cursor, passed
        self.unpark.extend(e for c in chosen for e in c.parked)
        self.left -= len(chosen)
