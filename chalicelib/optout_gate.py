"""The last look at the suppression list, right before a batch's notices go to the provider (invariant 3).

The notifier reads suppression once per queue page, but a notice may wait seconds for its channel's rate
limit after that: someone who unsubscribes meanwhile must not be messaged. Each batch of offers committed
together gets one `BatchOptoutCheck`; the first of its sends to reach the provider (after its rate-limit
wait) reads the suppression list for the whole batch, and every send of the batch is checked against that
read. One `BatchGetItem` per batch, made when its sending starts, and the same number on every run.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol


class SuppressionReader(Protocol):
    """What the check reads: which of some contacts are suppressed (bisn-optout)."""

    def suppressed_among(self, contact_keys: list[str]) -> set[str]: ...


class BatchOptoutCheck:
    """Is this contact of the batch suppressed? Read once for the batch, when its first send is due."""

    def __init__(self, optout: SuppressionReader, contact_keys: Sequence[str]) -> None:
        self.optout = optout
        self.contact_keys = sorted(set(contact_keys))
        self._lock = threading.Lock()
        self._suppressed: set[str] | None = None

    def suppressed(self, contact_key: str) -> bool:
        """True when the contact was on the suppression list as the batch's sending began."""
        with self._lock:
            if self._suppressed is None:
                self._suppressed = self.optout.suppressed_among(self.contact_keys)
            return contact_key in self._suppressed
