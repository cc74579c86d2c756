"""Restock detection: a signed inventory webhook becomes at most one restock and exactly one notifier job.

Verify the Standard Webhooks signature → validate the body → compare the event with the last level seen
for the SKU (newer events only; optimistic concurrency on the catalogue item) → on a crossing, one
transaction writes the level, the restock (attribute_not_exists) and its audit fact → claim the enqueue
with a short lease → send the job → mark the restock queued. A crash anywhere after the transaction is
finished by the platform's retry of the same webhook or by the sweep (`requeue_pending`).
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from chalicelib.capture import parse_sku
from chalicelib.clock import Clock, iso, parse_iso
from chalicelib.errors import BadRequest, Busy
from chalicelib.faults import FaultHook, no_faults
from chalicelib.jobs import Job, JobQueue
from chalicelib.tables.audit import AuditTable
from chalicelib.tables.base import TransactionCancelled, transact
from chalicelib.tables.catalog import CatalogTable
from chalicelib.tables.restocks import CLOSED, RestocksTable
from chalicelib.web import json_object
from chalicelib.webhooks import verify

logger = logging.getLogger(__name__)

# Longest an enqueuer may hold the right to send a job. It equals the Lambda timeout, so a holder still
# silent after it is dead and anyone (a retry, the sweep) may take over; a double job is harmless anyway.
ENQUEUE_LEASE_S = 30
STUCK_AFTER_S = 60  # the sweep re-enqueues restocks owed a job for longer than this
RECENT_WEBHOOKS = 32  # webhook ids remembered per SKU to recognise redeliveries
MAX_AVAILABLE = 1_000_000
MAX_WEBHOOK_ID_LEN = 200
FUTURE_TOLERANCE_S = 300  # as the signature's: an occurred_at later than this would block newer events
WRITE_ATTEMPTS = 10

NONE = "none"
CROSSING = "crossing"
RISE = "rise"
FALL = "fall"
CLOSE = "close"


@dataclass(frozen=True)
class InventoryEvent:
    """A validated inventory webhook body."""

    sku: str
    available: int
    occurred_at: float | None


@dataclass(frozen=True)
class LevelChange:
    """What a new level means for a SKU: kind is none, crossing, rise, fall or close; amount in units."""

    kind: str
    amount: int = 0


@dataclass(frozen=True)
class DetectOutcome:
    """The answer to the platform: restock (202), no_restock or ignored (200)."""

    status: str
    reason: str | None = None
    restock_id: str | None = None
    adjusted: str | None = None

    @property
    def http_status(self) -> int:
        """202 when a restock was recorded, 200 otherwise (the platform must not retry either)."""
        return 202 if self.status == "restock" else 200

    def body(self) -> dict[str, Any]:
        """The JSON body."""
        body: dict[str, Any] = {"status": self.status}
        for key in ("reason", "restock_id", "adjusted"):
            value = getattr(self, key)
            if value:
                body[key] = value
        return body


def parse_inventory_body(text: str, now: float) -> InventoryEvent:
    """Validate `{"sku", "available", "occurred_at"?}` (pure); BadRequest names the first problem."""
    data = json_object(text)
    sku = parse_sku(data.get("sku"))
    available = data.get("available")
    if available is None:
        raise BadRequest("available is required.", code="missing_field")
    # bool is an int in Python, and 2.5 units is not a stock level.
    if isinstance(available, bool) or not isinstance(available, int | float):
        raise BadRequest("available must be a whole number.", code="invalid_field")
    if isinstance(available, float):
        if not available.is_integer():
            raise BadRequest("available must be a whole number.", code="invalid_field")
        available = int(available)
    if available < 0:
        raise BadRequest("available must be 0 or more.", code="invalid_field")
    if available > MAX_AVAILABLE:
        raise BadRequest(f"available must be at most {MAX_AVAILABLE}.", code="invalid_field")
    return InventoryEvent(sku=sku, available=available, occurred_at=_occurred_at(data.get("occurred_at"), now))


def _occurred_at(value: Any, now: float) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 64:
        raise BadRequest("occurred_at must be an ISO-8601 date and time.", code="invalid_field")
    try:
        at = parse_iso(value)
    except ValueError as exc:
        raise BadRequest("occurred_at must be an ISO-8601 date and time.", code="invalid_field") from exc
    if at > now + FUTURE_TOLERANCE_S:
        # Accepting it would make every genuine later event look older, and so be ignored.
        raise BadRequest("occurred_at is in the future; check the platform's clock.", code="invalid_field")
    return at


def decide(level_before: int | None, level_after: int, threshold: int, *, restock_open: bool) -> LevelChange:
    """What a newer level means (pure). The rules:

    - No restock open: a crossing is `level_before < threshold <= level_after`, for `level_after` units.
      A SKU whose level was never seen counts as sold out (it is in the catalogue to be waited for).
    - A restock open (at most one per SKU; a crossing while one is open, possible only after the threshold
      was raised, is a rise):
      - `level_after < threshold`: close it (the fall, if any, lowers its counters first);
      - a rise: add the rise to its units and owe a top-up job;
      - a fall: lower its counters by the fall (see `lowered` for the exact rule).
    - "Every unit held or sold" closes a restock through the first rule: once every unit is sold the
      platform's level falls below the threshold. A restock whose remaining units are all *held* stays
      open, so that a hold that expires hands its unit to the next person in line.
    """
    before = 0 if level_before is None else level_before
    if not restock_open:
        if before < threshold <= level_after:
            return LevelChange(CROSSING, level_after)
        return LevelChange(NONE)
    if level_after < threshold:
        return LevelChange(CLOSE, max(0, before - level_after))
    if level_after > before:
        return LevelChange(RISE, level_after - before)
    if level_after < before:
        return LevelChange(FALL, before - level_after)
    return LevelChange(NONE)


def lowered(available: int, offerable: int, fall: int) -> tuple[int, int]:
    """Counters after a fall of `fall` units (pure).

    units_available drops by the fall and never below zero: holds already granted stand (they are not in
    units_available, so nothing here takes them back). units_offerable keeps its meaning, units_available
    minus the offers still live: it drops to the new units_available less those offers, which is below
    zero when the fall stranded offers already sent. A notice cannot be recalled, but a stranded offer that
    lapses then only pays back its debt instead of promising a unit that is gone (invariant 5); the
    notifier's conditional decrement (`units_offerable >= 1`) offers nothing while it is zero or less.

    A sale made through one of our own holds lowers the counters twice (at the hold, and again when the
    platform reports the sale); that errs towards telling one person fewer, never towards overselling.
    """
    live_offers = max(0, available - offerable)
    new_available = max(0, available - fall)
    return new_available, new_available - live_offers


def is_newer(event_ts: Decimal, level_ts: Decimal | None) -> bool:
    """Whether an event may update the last level seen. Equal times count as newer (ties go to the later
    arrival), so two changes stamped in the same second are both applied rather than one lost."""
    return level_ts is None or event_ts >= level_ts


def restock_id_for(sku: str, webhook_id: str) -> str:
    """The restock id a webhook maps to; a redelivery maps to the same id."""
    return "rs_" + hashlib.sha256(f"{sku}|{webhook_id}".encode()).hexdigest()[:24]


def restock_ts_for(event_ts: float, restock_id: str) -> str:
    """The restock's sort key: the event's time, then the id's tail to keep equal times apart."""
    return f"{iso(event_ts)}#{restock_id[-8:]}"


def _stamp(ts: float) -> Decimal:
    # Microseconds, as ISO-8601 from the platform carries at most; Decimal because DynamoDB takes no float.
    return Decimal(f"{ts:.6f}")


@dataclass(frozen=True)
class _Seen:
    level: int | None
    level_ts: Decimal | None
    version: int
    recent: list[str]
    open_restock_ts: str | None
    open_restock_id: str | None

    @classmethod
    def of(cls, product: Mapping[str, Any]) -> _Seen:
        level = product.get("level")
        level_ts = product.get("level_ts")
        return cls(
            level=int(level) if level is not None else None,
            level_ts=Decimal(str(level_ts)) if level_ts is not None else None,
            version=int(product.get("level_version", 0)),
            recent=[str(w) for w in product.get("recent_webhook_ids") or []],
            open_restock_ts=product.get("open_restock_ts"),
            open_restock_id=product.get("open_restock_id"),
        )


class DetectService:
    """Turns verified inventory webhooks into restocks and notifier jobs, exactly once each."""

    def __init__(
        self,
        *,
        catalog: CatalogTable,
        restocks: RestocksTable,
        audit: AuditTable,
        jobs: JobQueue,
        clock: Clock,
        secrets: Callable[[], Sequence[str]],
        faults: FaultHook = no_faults,
    ) -> None:
        self.catalog = catalog
        self.restocks = restocks
        self.audit = audit
        self.jobs = jobs
        self.clock = clock
        self.secrets = secrets
        self.faults = faults

    def handle(self, raw: bytes | None, headers: Mapping[str, str]) -> DetectOutcome:
        """One delivery end to end: InvalidSignature (401) before anything is read, BadRequest (400) after."""
        delivery = verify(raw, headers, self.secrets())
        if len(delivery.webhook_id) > MAX_WEBHOOK_ID_LEN:
            raise BadRequest(f"webhook-id must be at most {MAX_WEBHOOK_ID_LEN} characters.", code="invalid_header")
        event = parse_inventory_body(delivery.body, self.clock.now())
        return self.apply(delivery.webhook_id, delivery.timestamp, event)

    def apply(self, webhook_id: str, webhook_ts: float, event: InventoryEvent) -> DetectOutcome:
        """Apply a verified, validated event; the event time is occurred_at, else the webhook's timestamp."""
        event_ts = event.occurred_at if event.occurred_at is not None else webhook_ts
        for attempt in range(WRITE_ATTEMPTS):
            if attempt:
                # Another delivery for this SKU wrote first; read again after a short, spread-out pause.
                time.sleep(random.uniform(0.005, 0.03) * attempt)
            outcome = self._attempt(webhook_id, event, event_ts)
            if outcome is not None:
                return outcome
        raise Busy(f"Too many simultaneous updates for {event.sku}; retry shortly.")

    def requeue_pending(self, now: float | None = None) -> int:
        """The sweep's step: send the job of every restock owed one for over a minute; how many were sent."""
        at = self.clock.now() if now is None else now
        sent = 0
        for restock in self.restocks.owed_since(int(at) - STUCK_AFTER_S):
            if self._send_owed(str(restock["sku"]), str(restock["restock_ts"]), at):
                logger.warning("re-enqueued restock %s stuck before its job was sent", restock.get("restock_id"))
                sent += 1
        return sent

    # --- one read-decide-write round; None when another writer came first.

    def _attempt(self, webhook_id: str, event: InventoryEvent, event_ts: float) -> DetectOutcome | None:
        now = self.clock.now()
        sku = event.sku
        product = self.catalog.get(sku, consistent=True)
        if product is None:
            self.audit.record(sku, "unknown_sku_webhook", now, webhook_id=webhook_id, available=event.available)
            return DetectOutcome("ignored", "unknown_sku")
        seen = _Seen.of(product)
        if webhook_id in seen.recent or seen.open_restock_id == restock_id_for(sku, webhook_id):
            # A redelivery: finish whatever job the open restock is still owed (a crash may have left it).
            if seen.open_restock_ts:
                self._send_owed(sku, seen.open_restock_ts, now)
            return DetectOutcome("no_restock", "duplicate")
        stamp = _stamp(event_ts)
        if not is_newer(stamp, seen.level_ts):
            return DetectOutcome("no_restock", "stale")
        restock = self.restocks.get(sku, seen.open_restock_ts) if seen.open_restock_ts else None
        if restock is not None and restock.get("state") == CLOSED:
            restock = None
        threshold = int(product["threshold"])
        change = decide(seen.level, event.available, threshold, restock_open=restock is not None)
        level: dict[str, Any] = {
            "seen_version": seen.version,
            "level": event.available,
            "level_ts": stamp,
            "webhook_id": webhook_id,
            "recent_webhook_ids": [webhook_id, *seen.recent][:RECENT_WEBHOOKS],
            "out_of_stock": event.available < threshold,
            "now": now,
        }
        facts = {"webhook_id": webhook_id, "level_before": seen.level, "level_after": event.available}
        try:
            if change.kind == CROSSING:
                return self._open(sku, event_ts, change, threshold, level, facts, now)
            if restock is None or change.kind == NONE:
                if not self.catalog.record_level(sku, **level):
                    return None
                return DetectOutcome("no_restock", "no_crossing")
            return self._adjust(sku, restock, change, level, facts, now)
        except TransactionCancelled:
            return None

    def _open(
        self,
        sku: str,
        event_ts: float,
        change: LevelChange,
        threshold: int,
        level: dict[str, Any],
        facts: dict[str, Any],
        now: float,
    ) -> DetectOutcome:
        restock_id = restock_id_for(sku, level["webhook_id"])
        restock_ts = restock_ts_for(event_ts, restock_id)
        items = [
            self.catalog.level_item(sku, **level, open_restock=(restock_ts, restock_id)),
            self.restocks.open_item(
                sku=sku,
                restock_ts=restock_ts,
                restock_id=restock_id,
                webhook_id=level["webhook_id"],
                units=change.amount,
                level_before=facts["level_before"],
                level_after=facts["level_after"],
                threshold=threshold,
                now=now,
            ),
            self.audit.record_item(
                sku, "restock_detected", now, restock_id=restock_id, units=change.amount, threshold=threshold, **facts
            ),
        ]
        transact(self.catalog.table.meta.client, items)
        logger.info("restock %s of %s: %s units", restock_id, sku, change.amount)
        self.faults("detect.after_restock_written")
        self._send_owed(sku, restock_ts, now)
        return DetectOutcome("restock", restock_id=restock_id)

    def _adjust(
        self,
        sku: str,
        restock: dict[str, Any],
        change: LevelChange,
        level: dict[str, Any],
        facts: dict[str, Any],
        now: float,
    ) -> DetectOutcome:
        restock_ts = str(restock["restock_ts"])
        restock_id = str(restock["restock_id"])
        facts = {**facts, "restock_id": restock_id}
        available, offerable = int(restock["units_available"]), int(restock["units_offerable"])
        if change.kind == RISE:
            restock_item = self.restocks.rise_item(
                sku,
                restock_ts,
                rise=change.amount,
                seen_state=str(restock["state"]),
                token=level["webhook_id"],
                now=now,
            )
            catalog_item = self.catalog.level_item(sku, **level)
            kind, adjusted = "restock_topped_up", "topped_up"
            facts["units_added"] = change.amount
        elif change.kind == FALL:
            new_available, new_offerable = lowered(available, offerable, change.amount)
            restock_item = self.restocks.fall_item(
                sku, restock_ts, seen=restock, available=new_available, offerable=new_offerable
            )
            catalog_item = self.catalog.level_item(sku, **level)
            kind, adjusted = "restock_lowered", "lowered"
            facts.update(units_available=new_available, units_offerable=new_offerable)
        else:
            new_available, new_offerable = lowered(available, offerable, change.amount)
            # Nothing more is offered once closed: what is left to offer is only the debt of the live offers.
            restock_item = self.restocks.close_item(
                sku,
                restock_ts,
                seen=restock,
                available=new_available,
                offerable=new_offerable - new_available,
                now=now,
            )
            catalog_item = self.catalog.level_item(sku, **level, close_restock=True)
            kind, adjusted = "restock_closed", "closed"
            facts.update(reason="below_threshold", units_available=new_available)
        transact(
            self.catalog.table.meta.client,
            [catalog_item, restock_item, self.audit.record_item(sku, kind, now, **facts)],
        )
        if change.kind == RISE:
            self.faults("detect.after_topup_written")
            self._send_owed(sku, restock_ts, now)
        return DetectOutcome("no_restock", "no_crossing", restock_id=restock_id, adjusted=adjusted)

    def _send_owed(self, sku: str, restock_ts: str, now: float) -> bool:
        """Send the job a restock is owed, if nobody else is sending it; True when this call sent it."""
        claimed = self.restocks.claim_enqueue(sku, restock_ts, now=now, lease_s=ENQUEUE_LEASE_S)
        if claimed is None:
            return False
        token = str(claimed["pending_token"])
        self.faults("detect.after_enqueue_claimed")
        job = Job(sku, str(claimed["restock_id"]), restock_ts, kind=str(claimed.get("pending_kind", "restock")))
        try:
            self.jobs.send(job)
        except Exception:
            # Hand the lease back so the platform's retry can send it now rather than after the lease.
            self.restocks.release_enqueue(sku, restock_ts, token=token)
            raise
        self.faults("detect.after_job_sent")
        self.restocks.mark_enqueued(sku, restock_ts, token=token, now=now)
        return True
