"""The notices of one notifier walk on their way: the sends in flight, their answers accounted for as they come, and
the offers of those that did not go rolled back (or, for a recipient the provider refuses, undone for this restock).
"""

from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any

from chalicelib.clock import Clock
from chalicelib.counters import UnitMoves
from chalicelib.faults import FaultHook
from chalicelib.logs import offer_ref
from chalicelib.messages.senders import error_code, maybe_sent, refused_recipient, throttled
from chalicelib.metrics import (
    NOTICES_SENT,
    NOTICES_UNCONFIRMED,
    NOTICES_UNDELIVERABLE,
    SEND_FAILURES,
    SENDS_THROTTLED,
)
from chalicelib.tables.audit import AuditTable
from chalicelib.tables.requests import Request
from chalicelib.walk import SkipReason, Walk

log = logging.getLogger(__name__)

# A refused recipient's offer undone and its top-up owed, the top-up not yet sent.
AFTER_UNDELIVERABLE = "notifier.after_undeliverable"

# Recipient refusals in a row on one channel, with no notice of it sent between, after which the next is taken
# for a problem of ours (an unverified sender, a paused account) and fails the job instead of marking the
# person undeliverable: a misconfiguration never costs more than this many people their notice of a restock.
MAX_REFUSALS_IN_A_ROW = 5


class Withheld(Exception):
    """At the moment of sending, the contact is on the suppression list or the place no longer holds this offer
    (left, switched, lapsed): the notice must not go."""

    def __init__(self, reason: SkipReason) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Pending:
    """An offer committed whose notice is on its way."""

    token_id: str
    request: Request
    position: int
    channel: str


class Dispatch:
    """One walk's sends: those in flight, and what became of the others (a send that did not go gives its unit back
    to the walk, and a withdrawn one is passed over on it)."""

    def __init__(self, walk: Walk, moves: UnitMoves, audit: AuditTable, clock: Clock, faults: FaultHook) -> None:
        self.walk = walk
        self.moves = moves
        self.audit = audit
        self.clock = clock
        self.faults = faults
        self.pending: dict[Future[str], Pending] = {}
        self.notices = 0
        self.failures = 0
        self.withdrawn = 0  # offers undone because the contact opted out just before the send
        self.unconfirmed = 0  # notices the provider may have taken, whose answer was lost
        self.undeliverable = 0  # offers undone because the provider refused the recipient for good
        self.owes_topup = False  # an undeliverable roll-back left the restock owing a top-up job (OwedJobs)
        self.throttled = 0  # offers undone because the provider kept throttling: a later job tells them
        self.refused_in_a_row: Counter[str] = Counter()  # per channel, since its last notice sent

    def track(self, future: Future[str], pending: Pending) -> None:
        """A send submitted: its answer is accounted for by a later `collect`."""
        self.pending[future] = pending

    def collect(self, *, block: bool) -> None:
        """Account for finished sends: audit the sent ones, roll back the failed ones (`block`: wait for one)."""
        if not self.pending:
            return
        done, _ = wait(list(self.pending), timeout=None if block else 0, return_when=FIRST_COMPLETED)
        for future in done:
            pending = self.pending.pop(future)
            error = future.exception()
            if error is None:
                self._sent(pending, future.result())
            elif isinstance(error, Withheld):
                self._withdraw(pending, error.reason)
            elif maybe_sent(error):
                self._unconfirmed(pending, error)
            elif refused_recipient(pending.channel, error) and self._refusal_believed(pending):
                self._undeliverable(pending, error)
            elif throttled(error):
                self._throttled(pending, error)
            else:
                self._send_failed(pending, error)

    def finish(self) -> None:
        """Wait for every send in flight and account for it, then write the facts of those that went."""
        while self.pending:
            self.collect(block=True)
        self.walk.facts.flush_notices()

    def _sent(self, pending: Pending, message_id: str) -> None:
        self.refused_in_a_row[pending.channel] = 0
        self.notices += 1
        self.walk.metrics.count(NOTICES_SENT)
        self._notice_fact(pending, "notice_sent", message_id=message_id)

    def _notice_fact(self, pending: Pending, kind: str, **extra: Any) -> None:
        """Keep the fact of a notice that went (or may have), written with the next batch of them."""
        job = self.walk.job
        self.walk.facts.keep_notice(
            kind,
            self.clock.now(),
            restock_id=job.restock_id,
            position=pending.position,
            channel=pending.channel,
            contact_key=pending.request.contact_key,
            token_id=pending.token_id,
            request_joined_ts=pending.request.joined_ts,
            job_kind=job.kind,
            **extra,
        )

    def _roll_back(self, pending: Pending) -> bool:
        """Undo the offer of a notice that did not go: unit back, row gone, request waiting and untold.

        False when it could not be undone (the shopper's opt-out lapsed it first, or a write failed): the offer
        then stays and lapses at its due time, and the sweep returns the unit.
        """
        job, request = self.walk.job, pending.request
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

    def _send_failed(self, pending: Pending, error: BaseException) -> None:
        """A provider refused or could not be reached: roll the offer back; the job fails, so its retry tells them."""
        self.failures += 1
        self.walk.metrics.count(SEND_FAILURES)
        log.warning("send failed for restock %s (%s): %s", self.walk.job.restock_id, pending.channel, error_code(error))
        self._roll_back_unsent(pending, "send_failed", error)

    def _roll_back_unsent(self, pending: Pending, kind: str, error: BaseException) -> None:
        """Roll back the offer of a notice that was not sent, and record why (`kind`) and whether it came back."""
        rolled_back = self._roll_back(pending)
        job = self.walk.job
        self.audit.record(
            job.sku,
            kind,
            self.clock.now(),
            restock_id=job.restock_id,
            channel=pending.channel,
            contact_key=pending.request.contact_key,
            token_id=pending.token_id,
            error=error_code(error),
            rolled_back=rolled_back,
        )

    def _refusal_believed(self, pending: Pending) -> bool:
        """Whether a refusal of the recipient is taken as theirs: not after MAX_REFUSALS_IN_A_ROW on the channel
        with nothing sent between, which look like our own problem (the job fails and a person must look)."""
        self.refused_in_a_row[pending.channel] += 1
        return self.refused_in_a_row[pending.channel] <= MAX_REFUSALS_IN_A_ROW

    def _undeliverable(self, pending: Pending, error: BaseException) -> None:
        """The provider refused this notice for its recipient alone (an address SES will not take, a number SNS
        will not send to). One transaction undoes the offer and marks the person undeliverable for this restock,
        with the fact: no retry offers or sends it again, the place stays for later restocks, and the unit goes
        to the next person while the walk goes on."""
        job, request = self.walk.job, pending.request
        code = error_code(error)
        self.undeliverable += 1
        self.walk.metrics.count(NOTICES_UNDELIVERABLE)
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
            self.audit.record(job.sku, "notice_undeliverable", self.clock.now(), **facts, rolled_back=False)
            return
        self.owes_topup = self.owes_topup or owed
        self.faults(AFTER_UNDELIVERABLE)
        self.walk.left += 1  # the unit is offerable again: the walk offers it onward

    def _throttled(self, pending: Pending, error: BaseException) -> None:
        """The provider still throttled after the sender's tries: nothing was sent. The offer is rolled back (the
        person waits, untold), the walk makes no more offers, and a delayed top-up tells them: back-pressure,
        never a failed job."""
        self.throttled += 1
        self.walk.metrics.count(SENDS_THROTTLED)
        log.warning("send throttled for restock %s (%s); told later", self.walk.job.restock_id, pending.channel)
        self._roll_back_unsent(pending, "send_throttled", error)

    def _withdraw(self, pending: Pending, reason: SkipReason) -> None:
        """The person opted out, left or switched after the page was read and before the send: nothing went; the
        unit comes back (by this roll-back, or by the opt-out or leave that lapsed the offer already)."""
        if self._roll_back(pending):
            self.withdrawn += 1
        # The roll-back parked the place already (it waits untold): a later walk looks at it again.
        self.walk.skip(pending.request, reason, pending.position, park=False)

    def _unconfirmed(self, pending: Pending, error: BaseException) -> None:
        """The provider may have accepted the notice and its answer was lost: the offer stands as if sent (its
        link works, or lapses unused), and nothing is sent again (invariant 6)."""
        self.unconfirmed += 1
        self.walk.metrics.count(NOTICES_UNCONFIRMED)
        log.warning(
            "send of offer %s unconfirmed (%s); kept, never resent", offer_ref(pending.token_id), error_code(error)
        )
        self._notice_fact(pending, "notice_unconfirmed", error=error_code(error))
