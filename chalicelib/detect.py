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
from chalicelib.counters import UnitMoves
from chalicelib.errors import BadRequest, Busy
from chalicelib.faults import FaultHook, no_faults
from chalicelib.platforms.base import LevelReport
from chalicelib.queue.owed import OwedJobs
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.catalog import Product
from chalicelib.tables.restocks import Restock, RestockState, unseen_sales
from chalicelib.tables.store import Tables
from chalicelib.web import json_object
from chalicelib.webhooks import verify

logger = logging.getLogger(__name__)

STUCK_AFTER_S = 60  # the sweep re-enqueues restocks owed a job for longer than this
# How long a webhook id is remembered, so a platform's retry is recognised however late it comes: longer than
# any platform retries (Standard Webhooks senders about a day, Shopify 48 hours, WooCommerce five attempts).
WEBHOOK_MEMORY_S = 7 * 86400
MAX_AVAILABLE = 1_000_000
MAX_WEBHOOK_ID_LEN = 200
FUTURE_TOLERANCE_S = 300  # as the signature's: an occurred_at later than this would block newer events
WRITE_ATTEMPTS = 10

NONE = "none"
CROSSING = "crossing"
RISE = "rise"
FALL = "fall"
CLOSE = "close"


def check_delivery_id(delivery_id: str) -> None:
    """BadRequest for a store delivery id longer than detection remembers (MAX_WEBHOOK_ID_LEN): a key no real
    delivery makes, refused before anything is written."""
    if len(delivery_id) > MAX_WEBHOOK_ID_LEN:
        raise BadRequest(f"The delivery id must be at most {MAX_WEBHOOK_ID_LEN} characters.", code="invalid_header")


@dataclass(frozen=True)
class InventoryEvent:
    """A validated inventory webhook body."""

    sku: str
    available: int
    occurred_at: float | None
    location: str | None = None  # one store location's level; the SKU's level is the sum over its locations
    # A reconciliation's read (chalicelib/reconcile.py): applied only while the level it was compared with (this
    # location's, with a location) is still the one recorded, so any event recorded since the read began wins.
    if_seen: tuple[int | None, Decimal | None] | None = None


@dataclass(frozen=True)
class LevelChange:
    """What a new level means for a SKU: kind is none, crossing, rise, fall or close; amount in units."""

    kind: str
    amount: int = 0


@dataclass(frozen=True)
class DetectOutcome:
    """The answer to the platform: restock, no_restock or ignored (app.py picks the HTTP status)."""

    status: str
    reason: str | None = None
    restock_id: str | None = None
    adjusted: str | None = None

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


def decide(
    level_before: int | None, level_after: int, threshold: int, *, restock_open: bool, own_sales: int = 0
) -> LevelChange:
    """What a newer level means (pure). The rules:

    - No restock open: a crossing is `level_before < threshold <= level_after`, for `level_after` units.
      A SKU whose level was never seen counts as sold out (it is in the catalogue to be waited for).
    - A restock open (at most one per SKU; a crossing while one is open, possible only after the threshold
      was raised, is a rise):
      - `level_after < threshold`: close it (the fall, if any, lowers its counters first);
      - a rise: add the rise to its units and owe a top-up job;
      - a fall: lower its counters by the fall (see `lowered` in chalicelib/counters.py for the exact rule).
    - "Every unit held or sold" closes a restock through the first rule: once every unit is sold the
      platform's level falls below the threshold. A restock whose remaining units are all *held* stays
      open, so that a hold that expires hands its unit to the next person in line.
    - `own_sales` are sales through our own holds made since the last level was reported, which this level
      includes: the hold already took their units off the counters, so the level is compared with the one
      before less those sales, and only what is left is a rise or a fall (a sale is never counted twice:
      invariant 4). The platform reports an order before the level that reflects it (docs/WEBHOOKS.md).

    A close's amount is the fall that comes with it (negative when the level rose yet stays below the threshold).
    """
    before = 0 if level_before is None else level_before
    if not restock_open:
        if before < threshold <= level_after:
            return LevelChange(CROSSING, level_after)
        return LevelChange(NONE)
    before -= own_sales
    if level_after < threshold:
        return LevelChange(CLOSE, before - level_after)
    if level_after > before:
        return LevelChange(RISE, level_after - before)
    if level_after < before:
        return LevelChange(FALL, before - level_after)
    return LevelChange(NONE)


def is_newer(event_ts: Decimal, level_ts: Decimal | None) -> bool:
    """Whether an event may update the last level seen. Equal times count as newer (ties go to the later
    arrival), so two changes stamped in the same second are both applied rather than one lost."""
    return level_ts is None or event_ts >= level_ts


def level_mark(product: Product, location: str | None) -> tuple[int | None, Decimal | None]:
    """The level recorded for a SKU and the time of the event it came from (one location's, with a location):
    what a reconciliation compares its read with, and what must still stand when the read is applied."""
    if location is None:
        return product.level, product.level_ts
    mine = product.locations.get(location)
    if mine is None:
        return None, None
    return int(mine["n"]), Decimal(str(mine["ts"]))


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
    open_restock_ts: str | None
    open_restock_id: str | None

    @classmethod
    def of(cls, product: Product) -> _Seen:
        return cls(
            level=product.level,
            level_ts=product.level_ts,
            version=product.level_version or 0,
            open_restock_ts=product.open_restock_ts,
            open_restock_id=product.open_restock_id,
        )


@dataclass(frozen=True, kw_only=True, eq=False)
class DetectService:
    """Turns verified inventory webhooks into restocks and notifier jobs, exactly once each."""

    tables: Tables
    moves: UnitMoves
    owed: OwedJobs
    clock: Clock
    secrets: Callable[[], Sequence[str]]  # the webhook secrets accepted now (two during a rotation)
    faults: FaultHook = no_faults

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

    def apply_report(
        self,
        delivery_id: str,
        sent_at: float,
        report: LevelReport,
        *,
        if_seen: tuple[int | None, Decimal | None] | None = None,
    ) -> DetectOutcome:
        """A store platform's level (chalicelib/platforms): find its SKU, then apply it like any other event.

        A platform that names only its own inventory item is mapped to the SKU through the catalogue's index; an
        item no catalogued SKU claims is recorded and ignored (the platform must not retry it). `if_seen` is a
        reconciliation's guard (`InventoryEvent.if_seen`): the read is `stale` unless that level still stands.
        """
        check_delivery_id(delivery_id)
        now = self.clock.now()
        sku = report.sku
        if sku is None and report.store_item_id is not None:
            sku = self.tables.catalog.sku_for_store_item(report.store_item_id)
            if sku is None:
                self.tables.audit.record(
                    "-", "unknown_store_item", now, store_item=report.store_item_id, webhook_id=delivery_id
                )
                return DetectOutcome("ignored", "unknown_item")
        if sku is None:
            raise BadRequest("The delivery names no SKU and no inventory item.", code="invalid_body")
        occurred_at = report.occurred_at
        if occurred_at is not None and occurred_at > now + FUTURE_TOLERANCE_S:
            # A platform clock ahead of ours would make every later event look older; its delivery time is safer.
            occurred_at = None
        available = min(max(report.available, 0), MAX_AVAILABLE)
        event = InventoryEvent(
            sku=parse_sku(sku),
            available=available,
            occurred_at=occurred_at,
            location=report.location_id,
            if_seen=if_seen,
        )
        return self.apply(delivery_id, sent_at, event)

    def requeue_pending(self, now: float | None = None) -> int:
        """The sweep's step: send the job of every restock owed one for over a minute; how many were sent."""
        at = self.clock.now() if now is None else now
        sent = 0
        for restock in self.tables.restocks.owed_since(int(at) - STUCK_AFTER_S):
            if self.owed.send(restock.sku, restock.restock_ts, at):
                logger.warning("re-enqueued restock %s stuck before its job was sent", restock.restock_id)
                sent += 1
        return sent

    # --- one read-decide-write round; None when another writer came first.

    def reconsider(self, sku: str) -> DetectOutcome:
        """A product's threshold changed: a level already at or above it, with no restock open, is a restock now.

        Catalogue sync and staff edits call this after writing new settings. Only the threshold moved, so the
        last level seen is kept; the restock's id comes from the level's version, so two calls for the same
        change (or a retry) open it once.
        """
        for attempt in range(WRITE_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0.005, 0.03) * attempt)
            now = self.clock.now()
            product = self.tables.catalog.get(sku, consistent=True)
            if product is None:
                return DetectOutcome("ignored", "unknown_sku")
            seen = _Seen.of(product)
            threshold = product.threshold
            if seen.level is None or seen.level < threshold:
                return DetectOutcome("no_restock", "below_threshold")
            if seen.open_restock_ts:
                restock = self.tables.restocks.get(sku, seen.open_restock_ts)
                if restock is not None and restock.state != RestockState.CLOSED:
                    return DetectOutcome("no_restock", "restock_open")
            webhook_id = f"threshold@{seen.version}"
            level: dict[str, Any] = {
                "seen_version": seen.version,
                "level": seen.level,
                "level_ts": seen.level_ts if seen.level_ts is not None else _stamp(now),
                "webhook_id": webhook_id,
                "out_of_stock": False,
                "now": now,
            }
            facts = {"webhook_id": webhook_id, "level_before": seen.level, "level_after": seen.level}
            change = LevelChange(CROSSING, seen.level)
            try:
                return self._open(sku, now, change, threshold, level, {**facts, "reason": "threshold_lowered"}, now)
            except TransactionCancelled:
                continue
        raise Busy(f"Too many simultaneous updates for {sku}; retry shortly.")

    # --- one read-decide-write round; None when another writer came first.

    def _attempt(self, webhook_id: str, event: InventoryEvent, event_ts: float) -> DetectOutcome | None:
        now = self.clock.now()
        sku = event.sku
        product = self.tables.catalog.get(sku, consistent=True)
        if product is None:
            self.tables.audit.record(sku, "unknown_sku_webhook", now, webhook_id=webhook_id, available=event.available)
            return DetectOutcome("ignored", "unknown_sku")
        seen = _Seen.of(product)
        if self.tables.seen_events.seen(self._memory_key(sku, webhook_id)):
            return self._duplicate(sku, seen, now)
        if event.if_seen is not None and level_mark(product, event.location) != event.if_seen:
            # A webhook (or another read) was recorded after this read began: it is at least as new as the read.
            # The write below is conditional on the level's version, so nothing can slip in between either.
            return DetectOutcome("no_restock", "stale")
        stamp = _stamp(event_ts)
        # The shelf level: what the store reports, plus our holds it holds (its own level no longer shows them).
        held = product.store_held
        level_ts, available, locations = stamp, event.available + held, None
        if event.location is None:
            if not is_newer(stamp, seen.level_ts):
                return DetectOutcome("no_restock", "stale")
        else:
            # Each location is ordered on its own: a late delivery for one never undoes another's newer level.
            mine = product.locations.get(event.location)
            if mine is not None and not is_newer(stamp, Decimal(str(mine["ts"]))):
                return DetectOutcome("no_restock", "stale")
            locations = {**product.locations, event.location: {"n": event.available, "ts": stamp}}
            available = sum(int(entry["n"]) for entry in locations.values()) + held
            level_ts = max(stamp, seen.level_ts) if seen.level_ts is not None else stamp
        restock = self.tables.restocks.get(sku, seen.open_restock_ts) if seen.open_restock_ts else None
        if restock is not None and restock.state == RestockState.CLOSED:
            restock = None
        included = unseen_sales(restock)
        threshold = product.threshold
        change = decide(seen.level, available, threshold, restock_open=restock is not None, own_sales=included)
        level: dict[str, Any] = {
            "seen_version": seen.version,
            "level": available,
            "level_ts": level_ts,
            "webhook_id": webhook_id,
            "out_of_stock": available < threshold,
            "now": now,
        }
        if locations is not None:
            level["locations"] = locations
        facts = {"webhook_id": webhook_id, "level_before": seen.level, "level_after": available}
        try:
            if change.kind == CROSSING:
                return self._open(sku, event_ts, change, threshold, level, facts, now)
            if restock is None or (change.kind == NONE and not included):
                self._write(Tx().add("product", self.tables.catalog.level_item(sku, **level)), sku, webhook_id, now)
                return DetectOutcome("no_restock", "no_crossing")
            return self._adjust(sku, restock, change, level, {**facts, "own_sales": included}, now)
        except TransactionCancelled as cancelled:
            if cancelled.failed("memory"):
                # Another delivery of this very webhook was recorded between our look and our write.
                return self._duplicate(sku, seen, now)
            return None

    @staticmethod
    def _memory_key(sku: str, webhook_id: str) -> str:
        return f"webhook#{sku}#{webhook_id}"

    def _write(self, tx: Tx, sku: str, webhook_id: str, now: float) -> None:
        """Run `tx` with the webhook remembered in it (refused as "memory" when it was already)."""
        memory = self.tables.seen_events.remember_item(self._memory_key(sku, webhook_id), int(now) + WEBHOOK_MEMORY_S)
        self.tables.run(tx.add("memory", memory))

    def _duplicate(self, sku: str, seen: _Seen, now: float) -> DetectOutcome:
        # A redelivery: finish whatever job the open restock is still owed (a crash may have left it).
        if seen.open_restock_ts:
            self.owed.send(sku, seen.open_restock_ts, now)
        return DetectOutcome("no_restock", "duplicate")

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
        tx = Tx().add("product", self.tables.catalog.level_item(sku, **level, open_restock=(restock_ts, restock_id)))
        tx.add(
            "restock",
            self.tables.restocks.open_item(
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
        )
        tx.add(
            "fact",
            self.tables.audit.record_item(
                sku, "restock_detected", now, restock_id=restock_id, units=change.amount, threshold=threshold, **facts
            ),
        )
        self._write(tx, sku, level["webhook_id"], now)
        logger.info("restock %s of %s: %s units", restock_id, sku, change.amount)
        self.faults("detect.after_restock_written")
        self.owed.send(sku, restock_ts, now)
        return DetectOutcome("restock", restock_id=restock_id)

    def _adjust(
        self,
        sku: str,
        restock: Restock,
        change: LevelChange,
        level: dict[str, Any],
        facts: dict[str, Any],
        now: float,
    ) -> DetectOutcome:
        """The open restock follows the level: a rise, a fall or a close (each net of our own sales it includes)."""
        restock_ts = restock.restock_ts
        restock_id = restock.restock_id
        facts = {**facts, "restock_id": restock_id}
        catalog_item = self.tables.catalog.level_item(sku, **level, close_restock=change.kind == CLOSE)
        move = self.moves.follow_level(restock, change.kind, change.amount, webhook_id=level["webhook_id"], now=now)
        facts.update(move.facts)
        tx = (
            Tx()
            .add("product", catalog_item)
            .add("restock", move.item)
            .add("fact", self.tables.audit.record_item(sku, move.kind, now, **facts))
        )
        if change.kind == CLOSE:
            # The idle mark goes from every shard with the restock (a tap reads its shard's mark, invariant 7).
            tx.add("shards", *self.tables.catalog.close_marks_items(sku))
        self._write(tx, sku, level["webhook_id"], now)
        if change.kind == RISE:
            self.faults("detect.after_topup_written")
            self.owed.send(sku, restock_ts, now)
        return DetectOutcome("no_restock", "no_crossing", restock_id=restock_id, adjusted=move.adjusted)
