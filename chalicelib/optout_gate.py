"""The last look at the suppression list, right before a provider is asked to send (invariant 3).

The notifier reads suppression once per queue page, but a notice may wait seconds for its channel's rate
limit after that: someone who unsubscribes meanwhile must not be messaged. Each send thread asks the gate
just before calling the provider. Threads that ask while a read is under way wait for the next one, which
covers all of them, so a busy notifier pays about one BatchGetItem per round of sends, not one per notice.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol


class SuppressionReader(Protocol):
    """What the gate reads: which of some contacts are suppressed (bisn-optout)."""

    def suppressed_among(self, contact_keys: list[str]) -> set[str]: ...


@dataclass
class _Round:
    """One read shared by every sender that asked before it started."""

    keys: set[str] = field(default_factory=set)
    suppressed: set[str] = field(default_factory=set)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class OptoutGate:
    """Answers "is this contact suppressed now?" for many concurrent senders with few reads."""

    def __init__(self, optout: SuppressionReader) -> None:
        self.optout = optout
        self._lock = threading.Lock()
        self._reading = threading.Lock()  # one read at a time; the next round gathers askers meanwhile
        self._forming: _Round | None = None

    def suppressed(self, contact_key: str) -> bool:
        """True when the contact is on the suppression list at the moment of asking (or just after)."""
        with self._lock:
            leader = self._forming is None
            if leader:
                self._forming = _Round()
            current = self._forming
            assert current is not None
            current.keys.add(contact_key)
        if leader:
            with self._reading:
                with self._lock:
                    # Closed: whoever asks from now on is read in the next round, after this read began.
                    self._forming = None
                try:
                    current.suppressed = self.optout.suppressed_among(sorted(current.keys))
                except BaseException as error:  # every sender of the round must see it, not only the leader
                    current.error = error
                finally:
                    current.done.set()
        else:
            current.done.wait()
        if current.error is not None:
            raise current.error
        return contact_key in current.suppressed
