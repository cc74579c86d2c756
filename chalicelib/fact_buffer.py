"""The audit facts one notifier walk keeps to write a transaction's worth at a time, so it pays one call per batch of
them instead of one per recipient."""

from __future__ import annotations

from typing import Any

from chalicelib.tables.audit import FACTS_PER_TRANSACTION, AuditTable


class FactBuffer:
    """A walk's facts not yet written: of notices that went (or may have), and of places passed over. Each kind is
    written once a full transaction of it is kept, and whatever is left when the walk says so."""

    def __init__(self, audit: AuditTable, sku: str) -> None:
        self.audit = audit
        self.sku = sku
        self.notices: list[dict[str, Any]] = []
        # Always written before the walk's cursor passes their places (chalicelib/walk.py, `Walk.mark`).
        self.skips: list[dict[str, Any]] = []

    def keep_notice(self, kind: str, now: float, **facts: Any) -> None:
        """Keep the fact of a notice that went (or may have)."""
        self.notices.append(self.audit.fact(self.sku, kind, now, **facts))
        self._write(self.notices, at_least=FACTS_PER_TRANSACTION)

    def keep_skip(self, now: float, **facts: Any) -> None:
        """Keep the fact of a place passed over."""
        self.skips.append(self.audit.fact(self.sku, "notice_skipped", now, **facts))
        self._write(self.skips, at_least=FACTS_PER_TRANSACTION)

    def flush_notices(self) -> None:
        """Write every notice fact kept."""
        self._write(self.notices)

    def flush_skips(self) -> None:
        """Write every fact of a place passed over kept."""
        self._write(self.skips)

    def _write(self, facts: list[dict[str, Any]], *, at_least: int = 1) -> None:
        """Write one kind's kept facts once there are `at_least` of them, and start its list again."""
        if len(facts) >= at_least:
            self.audit.record_many(facts)
            facts.clear()
