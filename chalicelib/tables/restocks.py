"""bisn-restocks: one item per detected restock, carrying the two unit counters of DESIGN §4."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self

from boto3.dynamodb.conditions import Key

from chalicelib.clock import iso
from chalicelib.tables.base import (
    Conditional,
    int_or_none,
    present,
    query_all,
    str_or_none,
    tx_check,
    tx_put,
    tx_update,
)


class RestockState(StrEnum):
    """Where a restock stands (stored as these strings)."""

    PENDING = "pending"  # written, job not yet on the queue
    QUEUED = "queued"  # job on the queue; offers being made
    CLOSED = "closed"  # level fell below threshold, or every unit is held or sold


PENDING_KEY = "pending"  # value of pending_key on every restock that is owed a notifier job (GSI by-pending)
UNSEEN_SALES = "unseen_sales"  # sales through our holds that no stock level reported since has included yet
LAPSES_UNSOLD = "lapses_unsold"  # offers lapsed unused since the restock's last sale (REOFFER_LAPSE_LIMIT)
# The dashboard's funnel, tallied on the restock in the same transactions that move its counters (plain ADDs beside
# them, never conditions): notices that went per channel, holds, offers that lapsed, holds that expired, sales per
# channel, and when the last sale came. Nothing reads them to decide anything.
NOTIFIED = "notified_"  # + channel
BOUGHT = "bought_"  # + channel
HELD, LAPSED, EXPIRED, LAST_SALE_AT = "held", "lapsed", "expired", "last_sale_at"
CHANNEL = re.compile(r"^[a-z]{1,16}$")

# Where the notifier's walk of the waiting list left off (docs/SCALE.md, "Top-ups"): the join stamp of the last
# place it settled, the live places counted up to it, and the places before it to look at again (a string set).
WALK_CURSOR = "walk_cursor"
WALK_PASSED = "walk_passed"
WALK_PARKED = "walk_parked"
# The reason of a place parked because its offer was rolled back (its notice did not go): it waits untold.
ROLLED_BACK = "rolled_back"


def copies_of(stored: Any) -> dict[str, dict[str, str]] | None:
    """A restock's cached copy by language. A restock cached before copy came in languages holds one flat map
    (its fields at the top): that is the English copy."""
    if not isinstance(stored, dict) or not stored:
        return None
    if isinstance(stored.get("sms"), str):
        return {"en": {str(k): str(v) for k, v in stored.items()}}
    return {
        str(lang): {str(k): str(v) for k, v in fields.items()}
        for lang, fields in stored.items()
        if isinstance(fields, dict)
    } or None


@dataclass(frozen=True)
class Parked:
    """A place before the walk's cursor that a later walk must look at again: passed over for a reason that can
    change (held elsewhere, unconfirmed, opted out...), or told and then rolled back. Stored as one set element,
    unique per event (a rolled-back offer carries its token), so concurrent walks add and remove without losing one.
    """

    joined_ts: str
    reason: str
    position: int | None = None
    tag: str = ""

    @property
    def element(self) -> str:
        """The set element that stands for it."""
        return f"{self.joined_ts}|{self.reason}|{'' if self.position is None else self.position}|{self.tag}"

    @classmethod
    def parse(cls, element: str) -> Parked | None:
        """The parked place an element names; None for anything unreadable (it is dropped)."""
        parts = element.split("|")
        if len(parts) != 4 or not parts[0] or not parts[1]:
            return None
        joined_ts, reason, position, tag = parts
        return cls(joined_ts, reason, int(position) if position.isdigit() else None, tag)


@dataclass(frozen=True)
class WalkMark:
    """What a walk writes on its restock: the cursor moved to `cursor` with `passed` live places before it (None:
    left where it is), places parked (`park`) and parked places now settled (`unpark`), as set elements."""

    cursor: str | None = None
    passed: int = 0
    park: tuple[str, ...] = ()
    unpark: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.cursor is not None or bool(self.park) or bool(self.unpark)


@dataclass(frozen=True)
class Restock:
    """One detected restock with its unit counters (DESIGN §4), as stored."""

    sku: str
    restock_ts: str
    restock_id: str
    state: RestockState
    units_total: int = 0
    units_available: int = 0  # neither held nor sold; below zero while a fall is owed to holders
    units_offerable: int = 0  # neither held, sold nor promised to a live offer
    unseen_sales: int = 0  # sales through our holds that no level reported since has included yet
    webhook_id: str | None = None
    created_at: int | None = None
    level_before: int | None = None
    level_after: int | None = None
    threshold: int | None = None
    # The message text every notice of this restock uses, by language ({"en": {...}, "de": {...}}).
    copy: dict[str, dict[str, str]] | None = None
    pending_key: str | None = None  # present while a job is owed (sparse index by-pending)
    pending_since: int | None = None
    pending_kind: str | None = None
    pending_token: str | None = None
    enqueue_lease_until: int | None = None
    queued_at: int | None = None
    closed_at: int | None = None
    orders_on_expired_holds: int | None = None
    # Offers that lapsed unused since the restock's last sale, and when re-offering stopped because of them.
    lapses_unsold: int = 0
    reoffers_stopped_at: int | None = None
    walk_cursor: str | None = None  # the last place the notifier's walk settled (WALK_CURSOR)
    walk_passed: int = 0  # live places counted up to the cursor
    walk_parked: frozenset[str] = frozenset()  # places before the cursor to look at again (Parked elements)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        """The typed restock from a stored item (numbers come back as Decimal; unknown attributes are ignored)."""
        copy = item.get("copy")
        return cls(
            sku=str(item["sku"]),
            restock_ts=str(item["restock_ts"]),
            restock_id=str(item["restock_id"]),
            state=RestockState(item["state"]),
            units_total=int(item.get("units_total") or 0),
            units_available=int(item.get("units_available") or 0),
            units_offerable=int(item.get("units_offerable") or 0),
            unseen_sales=int(item.get(UNSEEN_SALES) or 0),
            webhook_id=str_or_none(item.get("webhook_id")),
            created_at=int_or_none(item.get("created_at")),
            level_before=int_or_none(item.get("level_before")),
            level_after=int_or_none(item.get("level_after")),
            threshold=int_or_none(item.get("threshold")),
            copy=copies_of(copy),
            pending_key=str_or_none(item.get("pending_key")),
            pending_since=int_or_none(item.get("pending_since")),
            pending_kind=str_or_none(item.get("pending_kind")),
            pending_token=str_or_none(item.get("pending_token")),
            enqueue_lease_until=int_or_none(item.get("enqueue_lease_until")),
            queued_at=int_or_none(item.get("queued_at")),
            closed_at=int_or_none(item.get("closed_at")),
            orders_on_expired_holds=int_or_none(item.get("orders_on_expired_holds")),
            lapses_unsold=int(item.get(LAPSES_UNSOLD) or 0),
            reoffers_stopped_at=int_or_none(item.get("reoffers_stopped_at")),
            walk_cursor=str_or_none(item.get(WALK_CURSOR)),
            walk_passed=int(item.get(WALK_PASSED) or 0),
            walk_parked=frozenset(str(e) for e in item.get(WALK_PARKED) or ()),
        )

    def parked(self) -> list[Parked]:
        """The places parked before the cursor, oldest first."""
        found = (Parked.parse(e) for e in self.walk_parked)
        return sorted((p for p in found if p is not None), key=lambda p: (p.joined_ts, p.tag))

    def to_item(self) -> dict[str, Any]:
        """The stored item (absent attributes left out; no sales unseen is stored as no attribute)."""
        item = present({**self.__dict__, "state": str(self.state)})
        if not self.unseen_sales:
            del item[UNSEEN_SALES]
        if not self.lapses_unsold:
            del item[LAPSES_UNSOLD]
        if not self.walk_passed:
            del item[WALK_PASSED]
        if self.walk_parked:
            item[WALK_PARKED] = set(self.walk_parked)
        else:
            del item[WALK_PARKED]
        return item

    def reoffers_capped(self, lapse_limit: int) -> bool:
        """Whether this restock's units are no longer re-offered: `lapse_limit` offers lapsed unused since its
        last sale (SMS pumping: numbers that never buy must not drain notices one after another)."""
        return self.reoffers_stopped_at is not None or self.lapses_unsold >= lapse_limit


@dataclass(frozen=True)
class RestockTally:
    """The dashboard's funnel figures of one restock (what it was tallied since the tallies exist)."""

    notified: dict[str, int] = field(default_factory=dict)  # channel -> notices that went
    held: int = 0
    lapsed: int = 0
    expired: int = 0
    bought: dict[str, int] = field(default_factory=dict)  # channel -> sales
    last_sale_at: int | None = None

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Self:
        """The tallies of a stored restock item (absent ones are zero)."""

        def by_channel(prefix: str) -> dict[str, int]:
            return {k[len(prefix) :]: int(v) for k, v in item.items() if k.startswith(prefix) and int(v)}

        return cls(
            notified=by_channel(NOTIFIED),
            held=int(item.get(HELD) or 0),
            lapsed=int(item.get(LAPSED) or 0),
            expired=int(item.get(EXPIRED) or 0),
            bought=by_channel(BOUGHT),
            last_sale_at=int_or_none(item.get(LAST_SALE_AT)),
        )


def _channel(channel: str) -> str:
    """A channel as a tally's attribute suffix ('sms', 'email'); anything else is tallied as 'other'."""
    return channel if CHANNEL.match(channel) else "other"


def opened_month(created_at: float) -> str:
    """The month a restock was opened in, 'YYYY-MM' (partition of the sparse index by-opened)."""
    return iso(created_at)[:7]


def _add_mark(update: dict[str, Any], mark: WalkMark) -> None:
    """Add a walk's mark to an Update (its expression holds at most an ADD clause so far). Elements are added and
    removed as a set, so walks running at once each keep their own; the cursor is the last writer's, and any
    cursor a walk writes is one it examined everything up to (a cursor moved back only costs a re-read)."""
    if mark.park and mark.unpark:
        raise ValueError("a place is parked and unparked in separate writes (DynamoDB: one action per attribute)")
    expression = str(update["UpdateExpression"])
    values = update["ExpressionAttributeValues"]
    adds = [expression.removeprefix("ADD ")] if expression else []
    sets: list[str] = []
    clauses: list[str] = []
    if mark.cursor is not None:
        sets.append(f"{WALK_CURSOR} = :walk_cursor, {WALK_PASSED} = :walk_passed")
        values[":walk_cursor"] = mark.cursor
        values[":walk_passed"] = int(mark.passed)
    if mark.park:
        adds.append(f"{WALK_PARKED} :walk_park")
        values[":walk_park"] = set(mark.park)
    if adds:
        clauses.append("ADD " + ", ".join(adds))
    if sets:
        clauses.append("SET " + ", ".join(sets))
    if mark.unpark:
        clauses.append(f"DELETE {WALK_PARKED} :walk_unpark")
        values[":walk_unpark"] = set(mark.unpark)
    update["UpdateExpression"] = " ".join(clauses)


def unseen_sales(restock: Restock | None) -> int:
    """How many of a restock's sales through our own holds no stock level has been reported since."""
    return restock.unseen_sales if restock else 0


class RestocksTable:
    """Restocks keyed by (sku, restock_ts). Fields: restock_id, webhook_id, units_total,
    units_available (not held or sold), units_offerable (not held, sold or promised to a live offer),
    state, copy (cached message text), pending_key/pending_since (sparse index of restocks not yet queued),
    unseen_sales (sales through our holds that no level the platform reported since has included yet).
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def get(self, sku: str, restock_ts: str) -> Restock | None:
        """One restock, read strongly consistent (its counters decide who is told)."""
        item = self.table.get_item(Key={"sku": sku, "restock_ts": restock_ts}, ConsistentRead=True).get("Item")
        return Restock.from_item(item) if item else None

    def cache_copy(self, sku: str, restock_ts: str, copy: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        """Store a restock's message copy (every language's) once; returns the copies every notice of this restock
        must use."""
        written = Conditional(self.table).update_item(
            Key={"sku": sku, "restock_ts": restock_ts},
            UpdateExpression="SET #copy = :copy",
            # One text per restock and language, written once: every notice in a language says the same, and
            # the model is asked once (a redelivery or top-up reads it back). attribute_exists keeps a stray job
            # from creating a restock.
            ConditionExpression="attribute_exists(restock_id) AND attribute_not_exists(#copy)",
            ExpressionAttributeNames={"#copy": "copy"},
            ExpressionAttributeValues={":copy": copy},
        )
        if written is not None:
            return copy
        current = self.get(sku, restock_ts)
        stored = current.copy if current else None
        return stored or copy

    # --- Counter moves of DESIGN §4. Each returns a transaction item, so the row change that causes it
    # --- commits in the same transaction, conditional on the row's state.

    def _counter_item(
        self,
        sku: str,
        restock_ts: str,
        expression: str,
        condition: str | None,
        values: dict,
        names: dict[str, str] | None = None,
    ) -> dict:
        key = {"sku": sku, "restock_ts": restock_ts}
        return {"Update": tx_update(self.name, key, expression, condition, names=names, values=values)}

    def take_offers_item(
        self,
        sku: str,
        restock_ts: str,
        count: int,
        lapse_limit: int | None = None,
        channels: Mapping[str, int] | None = None,
        *,
        mark: WalkMark | None = None,
    ) -> dict:
        """Notices sent in one batch: units_offerable - count, only while that many are neither held nor promised
        (and, with `lapse_limit`, while fewer offers than that lapsed unused since the last sale). With `mark`, the
        walk's cursor moves past the batch in the same write, so it never passes a place whose offer is not made."""
        condition = "units_offerable >= :count AND #state <> :closed"
        values: dict[str, Any] = {":minus": -int(count), ":count": int(count), ":closed": RestockState.CLOSED}
        if lapse_limit is not None:
            condition += " AND attribute_not_exists(reoffers_stopped_at)"
            condition += f" AND (attribute_not_exists({LAPSES_UNSOLD}) OR {LAPSES_UNSOLD} < :lapses)"
            values[":lapses"] = int(lapse_limit)
        # Never over-promise (invariant 5): a batch of offers takes all its units or none, and a closed
        # restock (the level fell below the threshold while the walk was under way) offers nothing more.
        tallies = "".join(f", {NOTIFIED}{_channel(c)} :n_{_channel(c)}" for c in sorted(channels or {}))
        values.update({f":n_{_channel(c)}": int(n) for c, n in (channels or {}).items()})
        names = {"#state": "state"}
        item = self._counter_item(sku, restock_ts, f"ADD units_offerable :minus{tallies}", condition, values, names)
        if mark:
            _add_mark(item["Update"], mark)
        return item

    def release_offer_item(
        self, sku: str, restock_ts: str, *, unsent: str | None = None, lapsed: bool = False, park: Parked | None = None
    ) -> dict:
        """Offer lapsed (`lapsed`: its unit just gone, or its owner left), or a notice on `unsent`'s channel did not
        go after all and was withdrawn: units_offerable + 1, and the funnel's tally moves with it. A rolled-back
        place is `park`ed in the same write: it waits untold, maybe before the walk's cursor, and the next walk
        tells it."""
        values = {":one": 1}
        tally = f", {LAPSED} :one" if lapsed else ""
        if unsent is not None:
            tally += f", {NOTIFIED}{_channel(unsent)} :minus"
            values[":minus"] = -1
        item = self._counter_item(sku, restock_ts, f"ADD units_offerable :one{tally}", None, values)
        if park is not None:
            _add_mark(item["Update"], WalkMark(park=(park.element,)))
        return item

    def mark_walk(self, sku: str, restock_ts: str, mark: WalkMark) -> bool:
        """Write where a walk left off, when no offer was left to carry it; False when the restock is gone."""
        update: dict[str, Any] = {"UpdateExpression": "", "ExpressionAttributeValues": {}}
        _add_mark(update, mark)
        answer = Conditional(self.table).update_item(
            Key={"sku": sku, "restock_ts": restock_ts},
            UpdateExpression=update["UpdateExpression"],
            # Only an existing restock: a stray job never creates one.
            ConditionExpression="attribute_exists(restock_id)",
            ExpressionAttributeValues=update["ExpressionAttributeValues"],
        )
        return answer is not None

    def lapse_unused_item(self, sku: str, restock_ts: str) -> dict:
        """Offer lapsed unused: units_offerable + 1, and one more lapse since the last sale."""
        expression = f"ADD units_offerable :one, {LAPSES_UNSOLD} :one, {LAPSED} :one"
        return self._counter_item(sku, restock_ts, expression, None, {":one": 1})

    def stop_reoffers_item(self, sku: str, restock_ts: str, *, lapse_limit: int, now: float) -> dict:
        """Re-offering stops: `lapse_limit` offers lapsed unused since the last sale (once: refused if stopped)."""
        item = self._counter_item(
            sku,
            restock_ts,
            "SET reoffers_stopped_at = :now",
            f"attribute_not_exists(reoffers_stopped_at) AND {LAPSES_UNSOLD} >= :lapses",
            {":now": int(now), ":lapses": int(lapse_limit)},
        )
        return item

    def hold_item(self, sku: str, restock_ts: str) -> dict:
        """Link clicked: units_available - 1, only while a unit is left."""
        return self._counter_item(
            sku,
            restock_ts,
            f"ADD units_available :minus, {HELD} :one",
            # Never oversell (invariant 4): a unit is held only by a conditional decrement.
            "units_available >= :one",
            {":minus": -1, ":one": 1},
        )

    def return_hold_item(self, sku: str, restock_ts: str) -> dict:
        """Hold expired unbought: the unit is available and offerable again."""
        expression = f"ADD units_available :one, units_offerable :one, {EXPIRED} :one"
        return self._counter_item(sku, restock_ts, expression, None, {":one": 1})

    def sale_item(self, sku: str, restock_ts: str, *, channel: str | None = None, at: float | None = None) -> dict:
        """A hold was bought: count the sale until a reported level includes it (then it is not a fall)."""
        # No condition: the unit left units_available at the hold already; this only tells detection that the
        # platform's next level is lower by this sale, not by stock lost elsewhere (invariant 4).
        # A sale also ends a run of unused offers (REOFFER_LAPSE_LIMIT counts lapses since the last sale).
        values: dict[str, Any] = {":one": 1}
        tally = f", {BOUGHT}{_channel(channel)} :one" if channel is not None else ""
        stamp = ""
        if at is not None:
            stamp = f" SET {LAST_SALE_AT} = :at"
            values[":at"] = int(at)
        expression = f"ADD unseen_sales :one{tally}{stamp} REMOVE {LAPSES_UNSOLD}"
        return self._counter_item(sku, restock_ts, expression, None, values)

    def count_late_order_item(self, sku: str, restock_ts: str) -> dict:
        """An order arrived for a hold that had already ended: count it, so staff can see the shop sold past a hold."""
        # No condition: a plain tally beside the unit counters, which it never touches.
        return self._counter_item(sku, restock_ts, "ADD orders_on_expired_holds :one", None, {":one": 1})

    # --- Detection: opening a restock, changes of level while it is open, and the owed notifier job.
    # --- A restock owes a job while it carries pending_key/pending_since/pending_kind/pending_token
    # --- (the sparse GSI "by-pending"); enqueue_lease_until lets one enqueuer at a time send it.

    def open_item(
        self,
        *,
        sku: str,
        restock_ts: str,
        restock_id: str,
        webhook_id: str,
        units: int,
        level_before: int | None,
        level_after: int,
        threshold: int,
        now: float,
    ) -> dict:
        """Transaction item: a new restock of `units`, pending until its first job is on the queue."""
        item: dict[str, Any] = {
            "sku": sku,
            "restock_ts": restock_ts,
            "restock_id": restock_id,
            "webhook_id": webhook_id,
            "units_total": units,
            "units_available": units,
            "units_offerable": units,
            "state": RestockState.PENDING,
            "created_at": int(now),
            "opened_month": opened_month(now),
            "level_after": level_after,
            "threshold": threshold,
            "pending_key": PENDING_KEY,
            "pending_since": int(now),
            "pending_kind": "restock",
            "pending_token": webhook_id,
        }
        if level_before is not None:
            item["level_before"] = level_before
        # Exactly once (invariant 6): a redelivered webhook maps to the same key and writes nothing.
        return {"Put": tx_put(self.name, item, "attribute_not_exists(restock_ts)")}

    def rise_item(
        self,
        sku: str,
        restock_ts: str,
        *,
        rise: int,
        seen: Restock,
        token: str,
        now: float,
    ) -> dict:
        """Transaction item: the level rose while the restock is open; add the rise and owe a job for it."""
        # A restock whose first job is still owed keeps owing that first job; a queued one owes a top-up.
        kind = "restock" if seen.state == RestockState.PENDING else "topup"
        names = {"#state": "state"}
        values: dict[str, Any] = {
            ":rise": rise,
            ":pk": PENDING_KEY,
            ":now": int(now),
            ":kind": kind,
            ":tok": token,
            ":seen": seen.state,
        }
        sets, condition = self._sales_update(seen, names, values)
        return {
            "Update": tx_update(
                self.name,
                {"sku": sku, "restock_ts": restock_ts},
                (
                    "ADD units_total :rise, units_available :rise, units_offerable :rise "
                    "SET pending_key = :pk, pending_since = if_not_exists(pending_since, :now), "
                    f"pending_kind = :kind, pending_token = :tok{sets} "
                    # New units start afresh: re-offering resumes after a rise (REOFFER_LAPSE_LIMIT).
                    f"REMOVE enqueue_lease_until, {LAPSES_UNSOLD}, reoffers_stopped_at"
                ),
                # Only the open restock we read grows: a closed one never gains units.
                "#state = :seen" + condition,
                names=names,
                values=values,
            )
        }

    def owe_topup_item(self, sku: str, restock_ts: str, *, token: str, now: float) -> dict:
        """Transaction item: the restock owes a top-up job (a place joined while its units waited for nobody)."""
        return {
            "Update": tx_update(
                self.name,
                {"sku": sku, "restock_ts": restock_ts},
                # A first job still owed stays the first job (it walks the whole queue anyway).
                (
                    "SET pending_key = :pk, pending_since = if_not_exists(pending_since, :now), "
                    "pending_kind = if_not_exists(pending_kind, :topup), pending_token = :tok "
                    "REMOVE enqueue_lease_until"
                ),
                # Nothing lost (invariant 7): owed with the place, so the sweep sends it if we stop here.
                # attribute_exists keeps a stray key from creating a restock.
                "attribute_exists(restock_id)",
                values={":pk": PENDING_KEY, ":now": int(now), ":topup": "topup", ":tok": token},
            )
        }

    def release_offer_owing_topup_item(
        self, sku: str, restock_ts: str, *, token: str, now: float, unsent: str | None = None
    ) -> dict:
        """Transaction item: a notice refused for its recipient: units_offerable + 1 (and the funnel's tally of
        notices on `unsent`'s channel - 1), and the restock owes the top-up job that offers the unit onward (one
        update: a transaction touches the row once)."""
        tally = f", {NOTIFIED}{_channel(unsent)} :minus" if unsent is not None else ""
        values: dict[str, Any] = {":minus": -1} if unsent is not None else {}
        return {
            "Update": tx_update(
                self.name,
                {"sku": sku, "restock_ts": restock_ts},
                (
                    f"ADD units_offerable :one{tally} "
                    "SET pending_key = :pk, pending_since = if_not_exists(pending_since, :now), "
                    "pending_kind = if_not_exists(pending_kind, :topup), pending_token = :tok "
                    "REMOVE enqueue_lease_until"
                ),
                # Nothing lost (invariant 7): the job is owed with the unit, so the sweep sends it if we stop here.
                # A closed restock owes no job (sending one would mark it queued again): the caller leaves it out.
                "attribute_exists(restock_id) AND #state <> :closed",
                names={"#state": "state"},
                values={
                    ":one": 1,
                    ":pk": PENDING_KEY,
                    ":now": int(now),
                    ":topup": "topup",
                    ":tok": token,
                    ":closed": RestockState.CLOSED,
                    **values,
                },
            )
        }

    def _sales_update(self, seen: Restock, names: dict[str, str], values: dict[str, Any]) -> tuple[str, str]:
        """The `, unseen_sales = 0` to append to a SET clause and the ` AND …` to append to a condition: the level
        being recorded includes the sales we read. Empty when there were none."""
        seen_count = seen.unseen_sales
        if not seen_count:
            # Nothing to mark as seen, so the count is left alone and a sale recorded meanwhile is kept.
            return "", ""
        names["#sales"] = UNSEEN_SALES
        values[":nosales"] = 0
        values[":nsales"] = seen_count
        # Exactly the sales we read: one recorded meanwhile is left for the next level (invariant 4).
        return ", #sales = :nosales", " AND #sales = :nsales"

    def _seen_condition(self, seen: Restock, values: dict[str, Any]) -> str:
        values.update(
            {
                ":seen": seen.state,
                ":seen_a": seen.units_available,
                ":seen_o": seen.units_offerable,
            }
        )
        return "#state = :seen AND units_available = :seen_a AND units_offerable = :seen_o"

    def fall_item(self, sku: str, restock_ts: str, *, seen: Restock, available: int, offerable: int) -> dict:
        """Transaction item: the level fell while the restock is open; set the lowered counters."""
        return self._over_seen_counters(
            sku,
            restock_ts,
            seen,
            "SET units_available = :a, units_offerable = :o",
            {":a": available, ":o": offerable},
        )

    def close_item(
        self, sku: str, restock_ts: str, *, seen: Restock, available: int, offerable: int, now: float
    ) -> dict:
        """Transaction item: close the restock: nothing more is offered and no job is owed any more."""
        return self._over_seen_counters(
            sku,
            restock_ts,
            seen,
            "SET #state = :closed, closed_at = :now, units_available = :a, units_offerable = :o",
            {":closed": RestockState.CLOSED, ":now": int(now), ":a": available, ":o": offerable},
            then=" REMOVE pending_key, pending_since, pending_kind, pending_token, enqueue_lease_until",
        )

    def _over_seen_counters(
        self, sku: str, restock_ts: str, seen: Restock, sets: str, values: dict[str, Any], *, then: str = ""
    ) -> dict:
        """The update a fall and a close share: `sets` (a SET clause; the sales we read are marked seen after it)
        and `then`, made only over the counters we read."""
        names = {"#state": "state"}
        values = dict(values)
        # Counters unchanged since we read them: no hold or offer slipped in, so the level is taken from exactly
        # the units we saw (those left for live offers are exact), and a hold granted meanwhile is never taken
        # back (invariant 4).
        condition = self._seen_condition(seen, values)
        sales_sets, sales_condition = self._sales_update(seen, names, values)
        key = {"sku": sku, "restock_ts": restock_ts}
        update = sets + sales_sets + then
        return {"Update": tx_update(self.name, key, update, condition + sales_condition, names=names, values=values)}

    def sales_seen_item(self, sku: str, restock_ts: str, *, seen: Restock) -> dict:
        """Transaction item: a level included our own sales and nothing else moved; they are seen now."""
        names = {"#state": "state"}
        values: dict[str, Any] = {":seen": seen.state}
        sets, condition = self._sales_update(seen, names, values)
        return {
            "Update": tx_update(
                self.name,
                {"sku": sku, "restock_ts": restock_ts},
                "SET " + sets.removeprefix(", "),
                # The restock we read, still in its state: its sales are ours to mark as seen.
                "#state = :seen" + condition,
                names=names,
                values=values,
            )
        }

    def has_units_check(self, sku: str, restock_ts: str) -> dict:
        """Transaction item: go on only while the restock is open with a unit to offer."""
        # Idle units are marked only while they exist, so a new place is sent a job only for them.
        return self._units_check(sku, restock_ts, "#state <> :closed AND units_offerable >= :one")

    def no_units_check(self, sku: str, restock_ts: str) -> dict:
        """Transaction item: go on only while the restock has no unit to offer (or is closed)."""
        # Nothing lost (invariant 7): a unit freed after the walk keeps the idle mark standing.
        return self._units_check(sku, restock_ts, "#state = :closed OR units_offerable < :one")

    def _units_check(self, sku: str, restock_ts: str, condition: str) -> dict:
        key = {"sku": sku, "restock_ts": restock_ts}
        values = {":closed": RestockState.CLOSED, ":one": 1}
        return {"ConditionCheck": tx_check(self.name, key, condition, names={"#state": "state"}, values=values)}

    def claim_enqueue(self, sku: str, restock_ts: str, *, now: float, lease_s: int) -> Restock | None:
        """Take the right to send the owed job for `lease_s` seconds; the restock as claimed, or None."""
        result = Conditional(self.table).update_item(
            Key={"sku": sku, "restock_ts": restock_ts},
            UpdateExpression="SET enqueue_lease_until = :until",
            # One enqueuer at a time: simultaneous deliveries and the sweep make one job, and the lease
            # of an enqueuer that died runs out, so the job is still sent (invariant 7).
            ConditionExpression=(
                "attribute_exists(pending_key) AND "
                "(attribute_not_exists(enqueue_lease_until) OR enqueue_lease_until <= :now)"
            ),
            ExpressionAttributeValues={":until": int(now) + lease_s, ":now": int(now)},
            ReturnValues="ALL_NEW",
        )
        return Restock.from_item(result["Attributes"]) if result is not None else None

    def release_enqueue(self, sku: str, restock_ts: str, *, token: str) -> None:
        """Give the lease back after a failed send, so the platform's retry can send the job at once."""
        Conditional(self.table).update_item(
            Key={"sku": sku, "restock_ts": restock_ts},
            UpdateExpression="REMOVE enqueue_lease_until",
            # Only the lease over the job we tried to send; a newer owed job manages its own.
            ConditionExpression="pending_token = :tok",
            ExpressionAttributeValues={":tok": token},
        )

    def mark_enqueued(self, sku: str, restock_ts: str, *, token: str, now: float) -> bool:
        """The owed job is on the queue: the restock is queued and leaves the by-pending index."""
        answer = Conditional(self.table).update_item(
            Key={"sku": sku, "restock_ts": restock_ts},
            UpdateExpression=(
                "SET #state = :queued, queued_at = if_not_exists(queued_at, :now) "
                "REMOVE pending_key, pending_since, pending_kind, pending_token, enqueue_lease_until"
            ),
            # Only the job we sent is marked done: a rise that owes a newer job keeps it owed.
            ConditionExpression="pending_token = :tok",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":queued": RestockState.QUEUED, ":now": int(now), ":tok": token},
        )
        return answer is not None

    def owed_since(self, cutoff: int, *, page_size: int = 100) -> Iterator[Restock]:
        """Restocks owed a job since `cutoff` (Unix seconds) or earlier, from the sparse by-pending index."""
        items = query_all(
            self.table,
            IndexName="by-pending",
            KeyConditionExpression=Key("pending_key").eq(PENDING_KEY) & Key("pending_since").lte(int(cutoff)),
            Limit=page_size,
        )
        return (Restock.from_item(item) for item in items)

    def opened_between(self, start: float, end: float) -> Iterator[tuple[Restock, RestockTally]]:
        """Restocks opened in [start, end] (Unix seconds), newest first, with their tallies: one Query per month
        of the sparse index by-opened, never a scan."""
        months = sorted({opened_month(start), opened_month(end)} | _months_between(start, end), reverse=True)
        for month in months:
            condition = Key("opened_month").eq(month) & Key("created_at").between(int(start), int(end))
            for item in query_all(
                self.table, IndexName="by-opened", KeyConditionExpression=condition, ScanIndexForward=False
            ):
                yield Restock.from_item(item), RestockTally.from_item(item)

    def for_sku(self, sku: str, *, since_ts: str = "") -> list[Restock]:
        """A SKU's restocks from `since_ts` (a restock_ts prefix, ISO-8601) on, oldest first (support tools)."""
        condition = Key("sku").eq(sku) & Key("restock_ts").gte(since_ts) if since_ts else Key("sku").eq(sku)
        return [
            Restock.from_item(i) for i in query_all(self.table, KeyConditionExpression=condition, ScanIndexForward=True)
        ]


def _months_between(start: float, end: float) -> set[str]:
    """Every 'YYYY-MM' from start's month to end's."""
    year, month = int(iso(start)[:4]), int(iso(start)[5:7])
    last = opened_month(end)
    found = set()
    while f"{year:04d}-{month:02d}" <= last:
        found.add(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return found
