"""The last look before a notice goes: is its person still to be told (invariant 3)?

The notifier reads suppression once per queue page, but a notice may wait seconds behind other sends and for its
channel's rate limit (and throttle back-offs) after that: someone who unsubscribes, leaves or switches channel
meanwhile must not be messaged. Each batch of offers committed together gets one `BatchLook`, and every send of the
batch is checked against it right before the provider is called. A look answers two things for each notice:

- is the contact on the suppression list (an opt-out writes that first, before anything else), and
- does the place still hold this very offer, for this contact (an opt-out or a leave removes the place and lapses
  the offer; a switch moves the place to another contact; the sweep lapses an offer whose window ran out).

When the look is made matters three times over:

- It is made after the batch's offers are committed, never before. An opt-out writes the suppression first and then
  takes the place off the list: an offer transaction after that is cancelled (the place no longer waits), and for
  one before it, the look after the commit is what sees the opt-out (tests/reliability try invariant 3 that way).
- It is made close to the send: no earlier than when at most `lead` of the notices committed before the
  batch have yet to reach the provider (or to finish without reaching it). The walk commits offers several rounds
  of sends ahead of them, so a look at the commit could come seconds before the notice goes; with `lead` one round
  of sends, the look is made about one round before the batch's first send, on a reader thread of its own, and
  the sends of the batch wait for it only when it is not done yet. When the batch's first send comes before that,
  the send starts the look and waits for it.
- It is never older than `MAX_LOOK_AGE_S` when a send uses it. Rate limits and back-offs can hold the last sends
  of a batch for seconds after the batch's look; a send whose batch look began longer ago than that looks again,
  for its own notice alone, after its rate-limit wait and right before the provider call. So an opt-out, leave or
  switch that committed more than `MAX_LOOK_AGE_S` before a notice's provider call always stops it.

One batch look is started once, by whichever comes first. A look that fails is not kept: the next send of the batch
reads again (the failed sends go nowhere).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass

# How old, at most, the look that lets a notice go may be when the provider is called (seconds, from the moment
# the look's reads began). A quarter of a second: well under one round of sends at any rate the stages allow,
# so a batch sent quickly is looked at once, and a send held back by its rate limit looks again for itself.
MAX_LOOK_AGE_S = 0.25

# Why a notice is withheld: the values of the notifier's skip reasons of the same names.
OPTED_OUT = "opted_out"
NOT_WAITING = "not_waiting"


@dataclass(frozen=True)
class Addressee:
    """One notice's recipient as its offer left them: the notice may go only while all of this still holds."""

    contact_key: str
    joined_ts: str  # their place in the list
    token_id: str  # the offer the notice carries


# Reads the suppression list and the places of some addressees (strongly consistent): the offers whose notice must
# not go, each with why (OPTED_OUT or NOT_WAITING). Those absent may go.
LookReader = Callable[[Sequence[Addressee]], dict[str, str]]


class BatchLook:
    """May this notice of the batch go? One look for the batch, started by `start` or the first ask, and a look of
    the notice's own when the batch's is older than `max_age_s` at the moment of asking."""

    def __init__(
        self,
        read: LookReader,
        addressees: Sequence[Addressee],
        *,
        reader: Executor | None = None,
        first_turn: int = 0,
        max_age_s: float = MAX_LOOK_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read = read
        self.addressees = sorted(set(addressees), key=lambda a: a.token_id)
        self.first_turn = first_turn  # the place of the batch's first notice among the walk's notices
        self.max_age_s = max_age_s
        self._clock = clock
        self._reader = reader
        self._lock = threading.Lock()
        self._look: Future[dict[str, str]] | None = None
        self._began = 0.0  # when the batch look's reads began (on `clock`)

    def start(self) -> None:
        """Begin the batch look (on the reader, else here), unless it has begun already."""
        self._begin()

    def _begin(self) -> tuple[Future[dict[str, str]], float]:
        with self._lock:
            if self._look is not None:
                return self._look, self._began
            look: Future[dict[str, str]] = Future()
            self._look, self._began = look, self._clock()
            began = self._began
        if self._reader is not None:
            try:
                self._reader.submit(self._fill, look)
                return look, began
            except RuntimeError:
                pass  # the reader has shut down: read on this thread instead
        self._fill(look)
        return look, began

    def _fill(self, look: Future[dict[str, str]]) -> None:
        try:
            look.set_result(self.read(self.addressees))
        except BaseException as error:  # handed to the sends, which fail without sending
            look.set_exception(error)

    def withheld(self, addressee: Addressee) -> str | None:
        """Why this notice must not go (OPTED_OUT, NOT_WAITING), or None: from a look no older than `max_age_s`."""
        asked = self._clock()
        look, began = self._begin()
        if asked - began > self.max_age_s:
            # The batch's look is too old for this send (rate limits, back-offs held it): look for this one alone.
            return self.read([addressee]).get(addressee.token_id)
        try:
            return look.result().get(addressee.token_id)
        except Exception:
            with self._lock:
                if self._look is look:
                    self._look = None  # not kept: the next ask reads again
            raise


class LastLooks:
    """Starts each batch's look when the sends ahead of the batch are down to `lead` (see the module docstring).

    Notices are numbered in the order they are committed (the order the senders take them up). `reached` is told
    of each notice as it goes to the provider or finishes; the count of notices ahead of a batch that have not is
    what decides when the batch's look starts.
    """

    def __init__(
        self,
        read: LookReader,
        *,
        lead: int,
        reader: Executor | None = None,
        max_age_s: float = MAX_LOOK_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lead < 0:
            raise ValueError(f"lead must be at least 0, got {lead}")
        self.read = read
        self.lead = lead
        self.max_age_s = max_age_s
        self._clock = clock
        self._reader = reader
        self._lock = threading.Lock()
        self._turns = 0  # notices numbered so far
        self._below = 0  # every notice numbered below this has reached the provider or finished
        self._reached: set[int] = set()  # those at or above `_below` that have
        self._unread: list[BatchLook] = []  # batches whose look is not started, in commit order

    def batch(self, addressees: Sequence[Addressee]) -> BatchLook:
        """The look for a batch just committed, whose notices take the next `len(addressees)` turns."""
        with self._lock:
            look = BatchLook(
                self.read,
                addressees,
                reader=self._reader,
                first_turn=self._turns,
                max_age_s=self.max_age_s,
                clock=self._clock,
            )
            self._turns += len(addressees)
            self._unread.append(look)
            due = self._due()
        for ready in due:
            ready.start()
        return look

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

    def _due(self) -> list[BatchLook]:
        """Take the batches whose look may start now off the unread list (the caller holds the lock)."""
        due: list[BatchLook] = []
        while self._unread and self._unread[0].first_turn - self._below <= self.lead:
            due.append(self._unread.pop(0))
        return due
