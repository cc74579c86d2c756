"""The reconciliation: the store's own level of every SKU somebody is waiting for, read in bulk on a schedule and fed
to restock detection as a webhook's level is, so a lost webhook costs one period, never a restock.

Which SKUs: the out-of-stock products whose rolled-up waiting count is above 0 (GSI by-demand, keys only), so the
cost grows with the SKUs waited for and never with the catalogue. Their recorded levels are read strongly consistent
*before* the store is read, and a read that equals the recorded level is dropped without a write.

Idempotent with the webhooks, and never undoing a newer one (chalicelib/detect.py):
  * the read is applied only if the level it was compared with is still the one recorded (`if_seen`, checked inside
    detection's read-decide-write round, whose write is conditional on the level's version): a webhook recorded
    after the read began always wins over it;
  * it is stamped with the time the read began less CLOCK_ALLOWANCE_S (never before the recorded level's own time),
    so a webhook for a later change, stamped by the platform's clock, still orders after it unless that clock runs
    more than the allowance behind ours;
  * its delivery id comes from the SKU, the location, the level it corrects and the level read: a second run, or a
    retried one, is a duplicate, and the webhook that was late rather than lost finds the level already there and
    opens nothing (its own time, older than the read's, makes it `stale` or an unchanged level).
A restock the read opens is detection's: one restock, one job, exactly as from a webhook.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from chalicelib.clock import Clock, Deadline
from chalicelib.detect import MAX_AVAILABLE, DetectService, level_mark
from chalicelib.errors import Busy
from chalicelib.metrics import STORE_CREDENTIALS_REFUSED, MetricsFactory
from chalicelib.platforms.base import LevelReport, StoreCredentialsRefused, StoreUnavailable
from chalicelib.platforms.levels import LevelReader, StockQuery
from chalicelib.tables.catalog import Product
from chalicelib.tables.store import Tables

logger = logging.getLogger(__name__)

RECONCILE_EVERY_MIN = 5  # app.py's schedule; docs/PLATFORMS.md derives the bound from it and the roll-up's
# How far behind ours a platform's clock may run before a webhook for a change made just after a read could be
# taken for older than that read. The read's own level then stands until the next webhook or the next run.
CLOCK_ALLOWANCE_S = 60.0
BATCH = 100  # SKUs per store read and per BatchGetItem of their recorded levels
BUDGET_S = 40.0
MARGIN_S = 10.0  # the longest store call (chalicelib/platforms/http.py's timeout) must fit after the deadline
CURSOR = "cursor#reconcile"
CURSOR_KEEP_S = 3600
# Counted when a read opens a restock, i.e. the store's level crossed the threshold and no webhook told us: the
# shop's webhooks are being lost.
RESTOCKS_FOUND_BY_RECONCILE = "RestocksFoundByReconcile"


@dataclass
class ReconcileReport:
    """What one run did: SKUs read, levels found unchanged, corrections fed to detection, restocks they opened
    (each one a webhook never reported), stale reads (a newer event won), SKUs the store did not report, and
    whether the store could not be read or the run stopped at its deadline (the next run carries on)."""

    skus: int = 0
    unchanged: int = 0
    corrected: int = 0
    restocks: int = 0
    stale: int = 0
    unreported: int = 0
    busy: int = 0
    store_unavailable: int = 0
    out_of_time: int = 0
    restock_ids: list[str] = field(default_factory=list)
    reason: str | None = None

    def as_dict(self) -> dict[str, object]:
        """The run's summary, as the schedule returns it."""
        return {k: v for k, v in self.__dict__.items() if v not in (None, [])}


def delivery_id_for(report: LevelReport, mark: tuple[int | None, Decimal | None], available: int) -> str:
    """A read's delivery id: the same correction of the same recorded level is the same delivery (pure)."""
    level, ts = mark
    return f"reconcile:{report.location_id or '-'}:{level if level is not None else '-'}@{ts or '-'}:{available}"


def read_stamp(read_at: float, mark_ts: Decimal | None) -> float:
    """The event time a read is applied with (pure): the read's start less CLOCK_ALLOWANCE_S, but never older than
    the level it corrects (a microsecond newer), which detection would take as stale."""
    stamp = read_at - CLOCK_ALLOWANCE_S
    if mark_ts is not None and float(mark_ts) >= stamp:
        return float(mark_ts) + 0.000001
    return stamp


def differs(product: Product, report: LevelReport) -> bool:
    """Whether a read says something detection has not recorded (pure). Detection compares the shelf level, the
    store's plus our holds the store holds, so a whole-SKU read is compared the same way; a location's read is
    compared with that location's recorded count."""
    recorded, _ = level_mark(product, report.location_id)
    if recorded is None:
        return True
    available = min(max(report.available, 0), MAX_AVAILABLE)
    if report.location_id is None:
        available += product.store_held
    return available != recorded


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


@dataclass(frozen=True, kw_only=True, eq=False)
class ReconcileService:
    """One reconciliation run over the SKUs waited for, resumable across runs."""

    tables: Tables
    detector: DetectService
    reader: LevelReader | None  # None: a generic stage without STOCK_FEED_URL has nothing to read
    clock: Clock
    metrics: MetricsFactory
    batch: int = BATCH
    budget_s: float = BUDGET_S

    def run(
        self, *, remaining_ms: Callable[[], int] | None = None, deadline: Deadline | None = None
    ) -> ReconcileReport:
        """Read and feed every waited-for SKU, BATCH at a time, until done or the deadline; a run cut short saves
        the last SKU done and the next run starts after it."""
        summary = ReconcileReport()
        if self.reader is None:
            summary.reason = "no_stock_source"
            return summary
        if deadline is None:
            deadline = Deadline.for_run(self.budget_s, remaining_ms=remaining_ms, margin_s=MARGIN_S)
        now = self.clock.now()
        after = (self.tables.saved_states.get(CURSOR) or {}).get("after")
        skus = sorted(sku for sku in self.tables.catalog.waited_skus() if after is None or sku > str(after))
        metrics = self.metrics.start()
        last: str | None = None
        try:
            for chunk in _chunks(skus, self.batch):
                if deadline.passed():
                    summary.out_of_time = 1
                    break
                self._reconcile(chunk, summary)
                last = chunk[-1]
        except StoreCredentialsRefused as exc:
            summary.store_unavailable = 1
            logger.error("reconciliation stopped: the store refused our credentials: %s", exc)
            metrics.count(STORE_CREDENTIALS_REFUSED)
        except StoreUnavailable as exc:
            summary.store_unavailable = 1
            logger.warning("reconciliation stopped: the store could not be read: %s", exc)
        finally:
            if summary.restocks:
                metrics.count(RESTOCKS_FOUND_BY_RECONCILE, summary.restocks)
            metrics.flush()
        # Carry on after the last SKU done only when cut short; an outage or a finished pass starts over next time.
        resume = last if summary.out_of_time and last is not None else None
        self.tables.saved_states.save(CURSOR, {"after": resume}, int(now) + CURSOR_KEEP_S)
        return summary

    def _reconcile(self, skus: list[str], summary: ReconcileReport) -> None:
        # Read what detection recorded first: whatever is recorded after this moment is newer than the store's read.
        products = self.tables.catalog.get_many(skus, consistent=True)
        read_at = self.clock.now()
        queries = [StockQuery(sku=p.sku, ids=p.store_ids) for p in products.values()]
        assert self.reader is not None
        reports = self.reader.read_levels(queries)
        summary.skus += len(products)
        summary.unreported += len(products.keys() - {r.sku for r in reports})
        for report in reports:
            product = products.get(report.sku or "")
            if product is None:
                continue
            if not differs(product, report):
                summary.unchanged += 1
                continue
            self._feed(product, report, read_at, summary)

    def _feed(self, product: Product, report: LevelReport, read_at: float, summary: ReconcileReport) -> None:
        mark = level_mark(product, report.location_id)
        stamp = read_stamp(read_at, mark[1])
        delivery_id = delivery_id_for(report, mark, report.available)
        try:
            outcome = self.detector.apply_report(delivery_id, stamp, replace(report, occurred_at=stamp), if_seen=mark)
        except Busy:
            summary.busy += 1  # webhooks for this SKU are arriving now: they carry its level
            return
        if outcome.reason in ("stale", "duplicate"):
            summary.stale += 1
            return
        summary.corrected += 1
        if outcome.status == "restock" and outcome.restock_id:
            summary.restocks += 1
            summary.restock_ids.append(outcome.restock_id)
            # The store's level crossed the threshold and no webhook said so: webhooks are being lost.
            logger.warning(
                "reconciliation found restock %s of %s that no webhook reported (%s units)",
                outcome.restock_id,
                product.sku,
                report.available,
            )
