"""The last look at the suppression list, as a batch's notices near the provider (invariant 3).

The notifier reads suppression once per queue page, but a notice may wait seconds behind other sends and for its
channel's rate limit after that: someone who unsubscribes meanwhile must not be messaged. Each batch of offers
committed together gets one `BatchOptoutCheck`, and every send of the batch is checked against its one read.

When the read is made matters twice over:

- It is made after the batch's offers are committed, never before. An opt-out writes the suppression first and then
  takes the place off the list: an offer transaction after that is cancelled (the place no longer waits), and for
  one before it, the read after the commit is what sees the opt-out (tests/reliability try invariant 3 that way).
- It is made close to the send: no earlier than when at most `lead` of the notices committed before the
  batch have yet to reach the provider (or to finish without reaching it). The walk commits offers several rounds
  of sends ahead of them, so a read at the commit could come seconds before the notice goes; with `lead` one round
  of sends, the read is made about one round before the batch's first send, on a reader thread of its own, and
  the sends of the batch wait for it only when it is not done yet. When the batch's first send comes before that,
  the send starts the read and waits for it.

One `BatchGetItem` per batch, and the same number on every run: a read is started once, by whichever comes first.
A read that fails is not kept: the next send of the batch reads again (the failed sends go nowhere).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Executor, Future
from typing import Protocol


class SuppressionReader(Protocol):
    """What the check reads: which of some contacts are suppressed (bisn-optout)."""

    def suppressed_among(self, contact_keys: list[str]) -> set[str]: ...


class BatchOptoutCheck:
    """Is this contact of the batch suppressed? Read once for the batch, started by `start` or the first ask."""

    def __init__(
        self,
        optout: SuppressionReader,
        contact_keys: Sequence[str],
        *,
        reader: Executor | None = None,
        first_turn: int = 0,
    ) -> None:
        self.optout = optout
        self.contact_keys = sorted(set(contact_keys))
        self.first_turn = first_turn  # the place of the batch's first notice among the walk's notices
        self._reader = reader
        self._lock = threading.Lock()
        self._read: Future[set[str]] | None = None

    def start(self) -> None:
        """Begin the read (on the reader, else here), unless it has begun already."""
        self._begin()

    def _begin(self) -> Future[set[str]]:
        with self._lock:
            if self._read is not None:
                return self._read
            read: Future[set[str]] = Future()
            self._read = read
        if self._reader is not None:
            try:
                self._reader.submit(self._fill, read)
                return read
            except RuntimeError:
                pass  # the reader has shut down: read on this thread instead
        self._fill(read)
        return read

    def _fill(self, read: Future[set[str]]) -> None:
        try:
            read.set_result(self.optout.suppressed_among(self.contact_keys))
        except BaseException as error:  # handed to the sends, which fail without sending
            read.set_exception(error)

    def suppressed(self, contact_key: str) -> bool:
        """True when the contact was on the suppression list when the batch's read was made."""
        read = self._begin()
        try:
            return contact_key in read.result()
        except Exception:
            with self._lock:
                if self._read is read:
                    self._read = None  # not kept: the next ask reads again
            raise


class LastLooks:
    """Starts each batch's read when the sends ahead of the batch are down to `lead` (see the module docstring).

    Notices are numbered in the order they are committed (the order the senders take them up). `reached` is told
    of each notice as it goes to the provider or finishes; the count of notices ahead of a batch that have not is
    what decides when the batch's read starts.
    """

    def __init__(self, optout: SuppressionReader, *, lead: int, reader: Executor | None = None) -> None:
        if lead < 0:
            raise ValueError(f"lead must be at least 0, got {lead}")
        self.optout = optout
        self.lead = lead
        self._reader = reader
        self._lock = threading.Lock()
        self._turns = 0  # notices numbered so far
        self._below = 0  # every notice numbered below this has reached the provider or finished
        self._reached: set[int] = set()  # those at or above `_below` that have
        self._unread: list[BatchOptoutCheck] = []  # batches whose read is not started, in commit order

    def batch(self, contact_keys: Sequence[str]) -> BatchOptoutCheck:
        """The check for a batch just committed, whose notices take the next `len(contact_keys)` turns."""
        with self._lock:
            check = BatchOptoutCheck(self.optout, contact_keys, reader=self._reader, first_turn=self._turns)
            self._turns += len(contact_keys)
            self._unread.append(check)
            due = self._due()
        for ready in due:
            ready.start()
        return check

    def reached(self, turn: int) -> None:
        """The notice numbered `turn` is going to the provider, or finished without (idempotent)."""
        with self._lock:
            if turn < self._below or turn in self._reached:
                return
            self._reached.add(turn)
            while self._below in self._reached:
                self._reached.discard(self._below)
                self._below += 1
            due = self._due()
        for ready in due:
            ready.start()

    def _due(self) -> list[BatchOptoutCheck]:
        """Take the batches whose read may start now off the unread list (the caller holds the lock)."""
        due: list[BatchOptoutCheck] = []
        while self._unread and self._unread[0].first_turn - self._below <= self.lead:
            due.append(self._unread.pop(0))
        return due
