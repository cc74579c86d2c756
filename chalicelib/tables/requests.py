"""bisn-requests: each SKU's waiting list, ordered by join time, plus one uniqueness item per person."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from boto3.dynamodb.conditions import Attr, Key

from chalicelib.clock import iso
from chalicelib.tables.base import (
    BatchRead,
    Conditional,
    TxItem,
    count_all,
    get_all,
    int_or_none,
    present,
    query_all,
    str_or_none,
    tx_check,
    tx_delete,
    tx_put,
    tx_update,
)
from chalicelib.tables.catalog import shard_for


class RequestState(StrEnum):
    """Where a place stands (stored as these strings)."""

    WAITING = "waiting"
    OFFERED = "offered"
    RESERVED = "reserved"
    CONVERTED = "converted"


ACTIVE_STATES = (RequestState.WAITING, RequestState.OFFERED, RequestState.RESERVED)
UNIQUE_PREFIX = "U#"
# Join stamps start with a year ("2026-…"); uniqueness items start with "U#", which sorts after every
# digit, so "joined_ts < U" reads the queue alone.
QUEUE_UPPER_BOUND = "U"


@dataclass(frozen=True)
class PlaceOffer:
    """The offer a place holds (if any), and for whom: what the notifier checks just before a send."""

    state: str
    offer_token: str | None
    contact_key: str


@dataclass(frozen=True)
class Request:
    """One place in a SKU's waiting list (never a `U#` uniqueness item), as stored."""

    sku: str
    joined_ts: str
    channel: str
    contact: str
    contact_key: str
    state: RequestState
    name: str = ""
    created_at: int | None = None
    updated_at: int | None = None
    ttl: int | None = None
    expiry_day: str | None = None
    last_notified_restock: str | None = None  # the restock this place was last told about
    offer_token: str | None = None  # the live offer or hold of this place
    leave_requested: str | None = None  # why the holder asked to leave once their hold ends
    undeliverable_restock: str | None = None  # the restock whose notice the provider refused for this contact
    # Email double opt-in: set while the address has not confirmed this place (nothing is sent for a restock
    # until it does); cleared by the confirmation link.
    unconfirmed: bool = False
    confirm_sends: int = 0  # confirmation emails sent for this place
    confirm_sent_at: int | None = None  # when the last one was sent
    confirm_owed_at: int | None = None  # a confirmation email is owed since then (sparse index "by-confirm")
    ticket: int | None = None  # the SKU line's ticket this place took (chalicelib/line.py); None before tickets
    burnt_before: int = 0  # tickets of that line burnt before this one was handed out
    waiting_shard: int | None = None  # the catalogue shard this place is counted on (chalicelib/tables/catalog.py)
    lang: str = "en"  # the language the shopper tapped in (chalicelib/i18n.py); places from before it are English
    # Places an import put in line without a ticket, counted on the line before this place took its ticket: any of
    # them may stand ahead of it (chalicelib/line.py, docs/IMPORT.md).
    inserted_before: int = 0
    # Where an imported place's consent came from, as the file named it (docs/IMPORT.md); None for a tap's place.
    consent_source: str | None = None

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        """The typed place from a stored item (numbers come back as Decimal; unknown attributes are ignored)."""
        return cls(
            sku=str(item["sku"]),
            joined_ts=str(item["joined_ts"]),
            channel=str(item.get("channel") or ""),
            contact=str(item.get("contact") or ""),
            contact_key=str(item.get("contact_key") or ""),
            state=RequestState(item["state"]),
            name=str(item.get("name") or ""),
            lang=str(item.get("lang") or "en"),
            created_at=int_or_none(item.get("created_at")),
            updated_at=int_or_none(item.get("updated_at")),
            ttl=int_or_none(item.get("ttl")),
            expiry_day=str_or_none(item.get("expiry_day")),
            last_notified_restock=str_or_none(item.get("last_notified_restock")),
            offer_token=str_or_none(item.get("offer_token")),
            leave_requested=str_or_none(item.get("leave_requested")),
            undeliverable_restock=str_or_none(item.get("undeliverable_restock")),
            unconfirmed=bool(item.get("unconfirmed")),
            confirm_sends=int(item.get("confirm_sends") or 0),
            confirm_sent_at=int_or_none(item.get("confirm_sent_at")),
            confirm_owed_at=int_or_none(item.get("confirm_owed_at")),
            ticket=int_or_none(item.get("ticket")),
            burnt_before=int(item.get("burnt_before") or 0),
            waiting_shard=int_or_none(item.get("waiting_shard")),
            inserted_before=int(item.get("inserted_before") or 0),
            consent_source=str_or_none(item.get("consent_source")),
        )

    @classmethod
    def waiting(
        cls,
        *,
        sku: str,
        joined_ts: str,
        channel: str,
        contact: str,
        contact_key: str,
        ttl: int,
        now: float,
        name: str = "",
        lang: str = "en",
        told: str | None = None,
        unconfirmed: bool = False,
        owes: bool = True,
        ticket: int | None = None,
        burnt_before: int = 0,
        waiting_shard: int | None = None,
        inserted_before: int = 0,
        consent_source: str | None = None,
    ) -> Self:
        """A new place, waiting from `now`, as `RequestsTable.join_items` writes it.

        `told` is the restock this person was already told about at an earlier place for this SKU (one they
        bought from or left): the new place is never told about it again (invariant 6 is per person).
        `unconfirmed`: an email place under double opt-in; it owes one confirmation email from this moment (the
        sweep sends any still owed after a minute), and `ttl` is its deadline; with `owes` False (its address is past
        an email cap, chalicelib/messages/email_caps.py) it owes none until a later tap. `ticket` and `burnt_before`: the
        line's ticket this place took, so its place is read without counting the list (chalicelib/line.py).
        `waiting_shard`: the catalogue shard the same transaction counts the place on, so leaving takes it off the
        same one. `inserted_before`: the places imports put in that line without a ticket before this ticket was
        taken. `consent_source`: an imported place's consent, as its file named it.
        """
        return cls(
            sku=sku,
            joined_ts=joined_ts,
            channel=channel,
            contact=contact,
            contact_key=contact_key,
            state=RequestState.WAITING,
            name=name,
            lang=lang,
            created_at=int(now),
            updated_at=int(now),
            ttl=ttl,
            expiry_day=expiry_day(ttl),
            last_notified_restock=told or None,
            unconfirmed=unconfirmed,
            confirm_owed_at=int(now) if unconfirmed and owes else None,
            ticket=ticket,
            burnt_before=burnt_before if ticket is not None else 0,
            waiting_shard=waiting_shard,
            inserted_before=inserted_before if ticket is not None else 0,
            consent_source=consent_source or None,
        )

    def to_item(self) -> dict[str, Any]:
        """The stored item (absent attributes left out; an owed confirmation with its "by-confirm" day)."""
        item = present({**self.__dict__, "state": str(self.state)})
        for flag in ("unconfirmed", "confirm_sends", "burnt_before", "inserted_before"):
            if not item.get(flag):
                item.pop(flag, None)
        if self.confirm_owed_at is not None:
            item["confirm_day"] = confirm_day(self.confirm_owed_at)
        return item

    @property
    def shard(self) -> int:
        """The catalogue shard counting this place (a place from before shards: its contact key's)."""
        return self.waiting_shard if self.waiting_shard is not None else shard_for(self.contact_key)

    @property
    def live(self) -> bool:
        """Still in line: waiting, offered or holding."""
        return self.state in ACTIVE_STATES


@dataclass(frozen=True)
class UniqueItem:
    """One person's uniqueness item for one SKU (`U#<contact key>`, invariant 2), as stored: the place it names
    (`ref`, absent once that place left), the restock a told place left behind as its memory (`told_restock`, so a
    later place is never told about it again), and its `ttl`."""

    sku: str
    contact_key: str
    ref: str | None = None
    told_restock: str | None = None
    ttl: int | None = None

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        """The typed item from a stored one (or a cancellation's old image, which carries the keys too)."""
        return cls(
            sku=str(item["sku"]),
            contact_key=str(item["joined_ts"]).removeprefix(UNIQUE_PREFIX),
            ref=str_or_none(item.get("ref")),
            told_restock=str_or_none(item.get("told_restock")),
            ttl=int_or_none(item.get("ttl")),
        )

    def to_item(self) -> dict[str, Any]:
        """The stored item (absent attributes left out)."""
        return present(
            {
                "sku": self.sku,
                "joined_ts": unique_sk(self.contact_key),
                "ref": self.ref,
                "told_restock": self.told_restock,
                "ttl": self.ttl,
            }
        )


def new_joined_ts(now: float, ticket: int | None = None) -> str:
    """A join stamp: ISO-8601 time plus a suffix that breaks ties between equal instants: the line's ticket
    (chalicelib/line.py), so places of one instant stand in the order their tickets were handed out, then a short
    random part."""
    order = f"{ticket:012d}" if ticket is not None else ""
    return f"{iso(now)}#{order}{secrets.token_hex(3)}"


def unique_sk(contact_key: str) -> str:
    """Sort key of the uniqueness item that holds one person's one place for one SKU."""
    return f"{UNIQUE_PREFIX}{contact_key}"


def confirm_day(at: float) -> str:
    """The UTC day a confirmation email became owed: the partition of the sparse "by-confirm" index."""
    return iso(at)[:10]


def expiry_day(ttl: int) -> str:
    """The UTC day a request's ttl falls on: the partition of the sparse "by-expiry" index the sweep reads."""
    return iso(ttl)[:10]


class RequestsTable:
    """The waiting lists."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def join_items(self, place: Request) -> tuple[TxItem, TxItem]:
        """Transaction items for a new place (`Request.waiting`): (the uniqueness item naming it, the place itself).
        Only places, never uniqueness items, carry an `expiry_day`, so the sweep finds stale places by day."""
        return (
            # One place per person per item, even when two taps land in the same millisecond.
            self._unique_put(place, "attribute_not_exists(joined_ts)"),
            self._place_put(place),
        )

    def _place_put(self, place: Request) -> TxItem:
        """The place itself, new: for a first join as for a re-join."""
        # A join stamp is never reused, so an existing one means a bug, not a retry.
        return {"Put": tx_put(self.name, place.to_item(), "attribute_not_exists(joined_ts)")}

    def _unique_put(
        self,
        place: Request,
        condition: str,
        *,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> TxItem:
        """The uniqueness item naming `place`, written under `condition`; a refusal hands back the item as stored."""
        unique = UniqueItem(place.sku, place.contact_key, ref=place.joined_ts, ttl=place.ttl)
        return {"Put": tx_put(self.name, unique.to_item(), condition, names=names, values=values, old_on_failure=True)}

    def no_place_item(self, sku: str, contact_key: str) -> TxItem:
        """Transaction item: go on only if this person's uniqueness item for `sku` names no place (none, or only the
        memory of a place left); the item as stored when it does."""
        key = {"sku": sku, "joined_ts": unique_sk(contact_key)}
        return {
            "ConditionCheck": tx_check(
                self.name, key, "attribute_not_exists(#ref)", names={"#ref": "ref"}, old_on_failure=True
            )
        }

    def rejoin_items(self, place: Request, *, old_ref: str) -> tuple[TxItem, TxItem]:
        """Transaction items that replace a finished place (bought, or left: `old_ref` "") with a new one at the back."""
        # Only the place (or the memory of a place left) we saw is replaced, so two simultaneous re-joins
        # still make one place (invariant 2).
        if old_ref:
            unique = self._unique_put(place, "#ref = :old", names={"#ref": "ref"}, values={":old": old_ref})
        else:
            unique = self._unique_put(
                place, "attribute_exists(joined_ts) AND attribute_not_exists(#ref)", names={"#ref": "ref"}
            )
        return unique, self._place_put(place)

    def get(self, sku: str, joined_ts: str, *, consistent: bool = True) -> Request | None:
        """One request, or None."""
        item = self._item(sku, joined_ts, consistent=consistent)
        return Request.from_item(item) if item else None

    def get_many(self, sku: str, joined_ts: list[str]) -> dict[str, Request]:
        """Places of one list by join stamp, read strongly consistent in batches of 100; a place gone is absent."""
        keys = [{"sku": sku, "joined_ts": ts} for ts in dict.fromkeys(joined_ts)]
        return {str(i["joined_ts"]): Request.from_item(i) for i in get_all(self.table, keys, consistent=True)}

    def offers_read(self, sku: str, joined_ts: list[str]) -> BatchRead:
        """The read of which offer some places of one list hold, and for whom, to make with other tables' reads
        (`get_together`): only those three attributes, so the notifier's last look before a send stays light."""
        keys = [{"sku": sku, "joined_ts": ts} for ts in dict.fromkeys(joined_ts)]
        return BatchRead(self.table, keys, "joined_ts, contact_key, offer_token, #state", {"#state": "state"})

    @staticmethod
    def offers_in(items: Iterable[dict[str, Any]]) -> dict[str, PlaceOffer]:
        """What an `offers_read` found, by join stamp; a place gone is absent."""
        return {
            str(i["joined_ts"]): PlaceOffer(
                state=str(i.get("state") or ""),
                offer_token=str_or_none(i.get("offer_token")),
                contact_key=str(i.get("contact_key") or ""),
            )
            for i in items
        }

    def _item(self, sku: str, joined_ts: str, *, consistent: bool = True) -> dict[str, Any] | None:
        return self.table.get_item(Key={"sku": sku, "joined_ts": joined_ts}, ConsistentRead=consistent).get("Item")

    def unique(self, sku: str, contact_key: str) -> UniqueItem | None:
        """The uniqueness item of one person for one SKU, or None."""
        item = self._item(sku, unique_sk(contact_key))
        return UniqueItem.from_item(item) if item else None

    def uniques(self, sku: str, contact_keys: Iterable[str]) -> dict[str, UniqueItem]:
        """The uniqueness items of some people for one SKU, by contact key, read strongly consistent in batches of
        100 (an import's look before it writes); a person with none is absent."""
        keys = [{"sku": sku, "joined_ts": unique_sk(k)} for k in dict.fromkeys(contact_keys)]
        found = (UniqueItem.from_item(i) for i in get_all(self.table, keys, consistent=True))
        return {u.contact_key: u for u in found}

    def place_named(self, unique: UniqueItem | None) -> Request | None:
        """The place a uniqueness item names (in any state), while that place is still its person's; None when it
        names none (the place left) or the place is gone."""
        if unique is None or not unique.ref:
            return None
        place = self.get(unique.sku, unique.ref)
        return place if place is not None and place.contact_key == unique.contact_key else None

    def place_of(self, sku: str, contact_key: str) -> Request | None:
        """One person's place for one SKU (in any state), found through their uniqueness item: two reads, whatever
        the list's length."""
        return self.place_named(self.unique(sku, contact_key))

    def refresh(self, sku: str, joined_ts: str, *, ttl: int, now: float) -> Request | None:
        """A repeat tap: extend the request's life; never touch joined_ts or the name.

        Anyone who knows a contact can tap for it, so a repeat tap changes nothing a stranger could use: the
        name given at the first tap stays."""
        result = Conditional(self.table).update_item(
            Key={"sku": sku, "joined_ts": joined_ts},
            # Asking again while a leave waits for a hold to end means staying: the leave is called off.
            UpdateExpression="SET #ttl = :ttl, expiry_day = :day, updated_at = :now REMOVE leave_requested",
            # Only a live place is refreshed; a finished one is replaced by a new join instead.
            ConditionExpression="attribute_exists(joined_ts) AND #state IN (:w, :o, :r)",
            ExpressionAttributeNames={"#ttl": "ttl", "#state": "state"},
            ExpressionAttributeValues={
                ":ttl": ttl,
                ":day": expiry_day(ttl),
                ":now": int(now),
                ":w": RequestState.WAITING,
                ":o": RequestState.OFFERED,
                ":r": RequestState.RESERVED,
            },
            ReturnValues="ALL_NEW",
        )
        if result is None:
            return None
        self.table.update_item(
            Key={"sku": sku, "joined_ts": unique_sk(result["Attributes"]["contact_key"])},
            UpdateExpression="SET #ttl = :ttl",
            ExpressionAttributeNames={"#ttl": "ttl"},
            ExpressionAttributeValues={":ttl": ttl},
        )
        return Request.from_item(result["Attributes"])

    # --- Email double opt-in: the confirmation a place owes, its send, and the confirmation itself.

    def owe_confirmation_item(self, sku: str, joined_ts: str, *, now: float, resend_after_s: int, cap: int) -> TxItem:
        """Transaction item: a repeat tap on an unconfirmed place owes one more confirmation email, only when none is
        owed, the last went over `resend_after_s` ago and fewer than `cap` were sent (refused otherwise)."""
        return {
            "Update": tx_update(
                self.name,
                {"sku": sku, "joined_ts": joined_ts},
                "SET confirm_owed_at = :now, confirm_day = :day",
                (
                    "unconfirmed = :yes AND #state = :w AND attribute_not_exists(confirm_owed_at) "
                    "AND (attribute_not_exists(confirm_sends) OR confirm_sends < :cap) "
                    "AND (attribute_not_exists(confirm_sent_at) OR confirm_sent_at <= :before)"
                ),
                names={"#state": "state"},
                values={
                    ":now": int(now),
                    ":day": confirm_day(now),
                    ":yes": True,
                    ":w": RequestState.WAITING,
                    ":cap": cap,
                    ":before": int(now) - resend_after_s,
                },
            )
        }

    def claim_confirmation(self, sku: str, joined_ts: str, *, now: float) -> Request | None:
        """Take the owed confirmation email for sending (exactly one sender wins); None when none is owed."""
        result = Conditional(self.table).update_item(
            Key={"sku": sku, "joined_ts": joined_ts},
            UpdateExpression="SET confirm_sent_at = :now ADD confirm_sends :one REMOVE confirm_owed_at, confirm_day",
            ConditionExpression="attribute_exists(confirm_owed_at) AND unconfirmed = :yes",
            ExpressionAttributeValues={":now": int(now), ":one": 1, ":yes": True},
            ReturnValues="ALL_NEW",
        )
        return Request.from_item(result["Attributes"]) if result is not None else None

    def release_confirmation(self, sku: str, joined_ts: str, *, sent_at: int, now: float) -> None:
        """A claimed confirmation that provably did not go: owed again, so the retry (or the sweep) sends it."""
        Conditional(self.table).update_item(
            Key={"sku": sku, "joined_ts": joined_ts},
            UpdateExpression="SET confirm_owed_at = :now, confirm_day = :day ADD confirm_sends :minus",
            ConditionExpression="confirm_sent_at = :sent AND attribute_not_exists(confirm_owed_at)",
            ExpressionAttributeValues={":now": int(now), ":day": confirm_day(now), ":minus": -1, ":sent": sent_at},
        )

    def confirm_items(self, sku: str, joined_ts: str, contact_key: str, *, ttl: int, now: float) -> list[TxItem]:
        """Transaction items: the address confirmed this place; it may now be told, and it (and its uniqueness
        item, which must live as long, invariant 2) lives a full ttl."""
        return [
            {
                "Update": tx_update(
                    self.name,
                    {"sku": sku, "joined_ts": joined_ts},
                    (
                        "SET #ttl = :ttl, expiry_day = :day, updated_at = :now "
                        "REMOVE unconfirmed, confirm_owed_at, confirm_day"
                    ),
                    "unconfirmed = :yes AND #state = :w AND contact_key = :key",
                    names={"#ttl": "ttl", "#state": "state"},
                    values={
                        ":ttl": ttl,
                        ":day": expiry_day(ttl),
                        ":now": int(now),
                        ":yes": True,
                        ":w": RequestState.WAITING,
                        ":key": contact_key,
                    },
                )
            },
            {
                "Update": tx_update(
                    self.name,
                    {"sku": sku, "joined_ts": unique_sk(contact_key)},
                    "SET #ttl = :ttl",
                    "#ref = :joined",
                    names={"#ttl": "ttl", "#ref": "ref"},
                    values={":ttl": ttl, ":joined": joined_ts},
                )
            },
        ]

    def owed_confirmations(
        self, before: float, *, lookback_days: int, page_size: int = 100
    ) -> Iterator[tuple[str, str]]:
        """(sku, joined_ts) of places owing a confirmation email since at or before `before` (index "by-confirm")."""
        last = int(before)
        for back in range(lookback_days, -1, -1):
            for item in query_all(
                self.table,
                IndexName="by-confirm",
                KeyConditionExpression=Key("confirm_day").eq(confirm_day(last - back * 86400))
                & Key("confirm_owed_at").lte(last),
                Limit=page_size,
            ):
                yield str(item["sku"]), str(item["joined_ts"])

    def position(self, sku: str, joined_ts: str) -> int:
        """1-based place in line by counting live requests that joined at or before this one: its cost grows with
        the list, so no shopper or support path calls it (they read chalicelib/line.py's figures); tests use it as
        the oracle those figures are checked against."""
        return count_all(
            self.table,
            KeyConditionExpression=Key("sku").eq(sku) & Key("joined_ts").lte(joined_ts),
            FilterExpression=Attr("state").is_in(list(ACTIVE_STATES)),
            ConsistentRead=True,
        )

    def _queue_query(self, sku: str, page_size: int) -> dict[str, Any]:
        """The Query that reads a waiting list oldest first (the join stamp is the order)."""
        return {
            "KeyConditionExpression": Key("sku").eq(sku) & Key("joined_ts").lt(QUEUE_UPPER_BOUND),
            "ScanIndexForward": True,
            "Limit": page_size,
            "ConsistentRead": True,
        }

    def queue(self, sku: str, *, page_size: int = 100, active_only: bool = True) -> Iterator[Request]:
        """The waiting list oldest first (the join stamp is the order)."""
        kwargs = self._queue_query(sku, page_size)
        if active_only:
            kwargs["FilterExpression"] = Attr("state").is_in(list(ACTIVE_STATES))
        return (Request.from_item(item) for item in query_all(self.table, **kwargs))

    def queue_pages(
        self, sku: str, *, after: str = "", page_size: int | Callable[[], int] = 100
    ) -> Iterator[list[Request]]:
        """Every request of the waiting list in any state, oldest first, page by page, resuming after `after`.

        `page_size` may be a function, asked before each page, so a reader can size pages to what it still needs.
        """
        size = page_size if callable(page_size) else (lambda: page_size)
        kwargs = self._queue_query(sku, 0)  # Limit is set per page below
        if after:
            kwargs["ExclusiveStartKey"] = {"sku": sku, "joined_ts": after}
        while True:
            kwargs["Limit"] = size()
            page = self.table.query(**kwargs)
            items = [Request.from_item(item) for item in page.get("Items", [])]
            if items:
                yield items
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def by_contact(self, contact_key: str) -> list[Request]:
        """Every request one person has, across SKUs (eventually consistent index)."""
        items = query_all(self.table, IndexName="by-contact", KeyConditionExpression=Key("contact_key").eq(contact_key))
        return [Request.from_item(item) for item in items]

    def joined_between(self, sku: str, start_ts: str, end_ts: str) -> list[tuple[str, bool]]:
        """The places on a SKU's list that joined in [start_ts, end_ts] and are still kept (any state), each as its
        join stamp and whether it is a live place its email address has not confirmed yet: one Query over that range
        of the sort key, projecting only those (the dashboard's demand)."""
        condition = Key("sku").eq(sku) & Key("joined_ts").between(start_ts, end_ts)
        items = query_all(
            self.table,
            KeyConditionExpression=condition,
            ProjectionExpression="joined_ts, unconfirmed, #state",
            ExpressionAttributeNames={"#state": "state"},
        )
        return [
            (str(item["joined_ts"]), bool(item.get("unconfirmed")) and item.get("state") in ACTIVE_STATES)
            for item in items
        ]

    # --- Request state moves that ride in the same transaction as an offer/hold row change.

    def _state_item(self, sku: str, joined_ts: str, expression: str, condition: str, values: dict[str, Any]) -> TxItem:
        key = {"sku": sku, "joined_ts": joined_ts}
        return {"Update": tx_update(self.name, key, expression, condition, names={"#state": "state"}, values=values)}

    def mark_offered_item(self, sku: str, joined_ts: str, *, restock_id: str, token_id: str) -> TxItem:
        """Transaction item: this request was told about `restock_id` and holds offer `token_id`."""
        return self._state_item(
            sku,
            joined_ts,
            # `updated_at` stays the shopper's last change; when the offer was made is on the offer row.
            "SET #state = :offered, last_notified_restock = :rid, offer_token = :tok",
            # Told at most once per restock (invariant 6), and only while waiting (one live offer per person).
            "#state = :waiting AND (attribute_not_exists(last_notified_restock) OR last_notified_restock <> :rid)",
            {":offered": RequestState.OFFERED, ":waiting": RequestState.WAITING, ":rid": restock_id, ":tok": token_id},
        )

    def unmark_offered_item(self, sku: str, joined_ts: str, *, token_id: str, previous_restock: str | None) -> TxItem:
        """Transaction item: undo mark_offered (the notice could not be sent), so a retry tells them."""
        expression = "SET #state = :waiting REMOVE offer_token"
        values: dict[str, Any] = {":waiting": RequestState.WAITING, ":offered": RequestState.OFFERED, ":tok": token_id}
        if previous_restock:
            expression = "SET #state = :waiting, last_notified_restock = :prev REMOVE offer_token"
            values[":prev"] = previous_restock
        else:
            expression += ", last_notified_restock"
        return self._state_item(
            sku,
            joined_ts,
            expression,
            # Only the offer being rolled back is undone, never a later one.
            "#state = :offered AND offer_token = :tok",
            values,
        )

    def mark_undeliverable_item(self, sku: str, joined_ts: str, *, token_id: str, restock_id: str) -> TxItem:
        """Transaction item: the provider refused this contact's notice of `restock_id` for good. The place is kept
        for later restocks, waiting; it stays told about this one, so no retry offers or sends it again."""
        return self._state_item(
            sku,
            joined_ts,
            "SET #state = :waiting, undeliverable_restock = :rid REMOVE offer_token",
            # Only the request that owns this very offer (exactly once, invariant 6: last_notified_restock stays).
            "#state = :offered AND offer_token = :tok",
            {":waiting": RequestState.WAITING, ":offered": RequestState.OFFERED, ":tok": token_id, ":rid": restock_id},
        )

    def back_to_waiting_item(self, sku: str, joined_ts: str, *, token_id: str, from_state: str) -> TxItem:
        """Transaction item: an offer lapsed or a hold expired; keep the place, not re-offered this restock."""
        return self._state_item(
            sku,
            joined_ts,
            "SET #state = :waiting REMOVE offer_token",
            # Only the request that owns this very offer goes back; last_notified_restock stays set.
            "#state = :from AND offer_token = :tok",
            {":waiting": RequestState.WAITING, ":from": from_state, ":tok": token_id},
        )

    def mark_reserved_item(self, sku: str, joined_ts: str, *, token_id: str) -> TxItem:
        """Transaction item: the shopper clicked their link and holds a unit."""
        return self._state_item(
            sku,
            joined_ts,
            "SET #state = :reserved",
            # Only the owner of this offer moves to holding.
            "#state = :offered AND offer_token = :tok",
            {":reserved": RequestState.RESERVED, ":offered": RequestState.OFFERED, ":tok": token_id},
        )

    def mark_converted_item(self, sku: str, joined_ts: str, *, token_id: str) -> TxItem:
        """Transaction item: the shopper bought; they leave the queue."""
        return self._state_item(
            sku,
            joined_ts,
            "SET #state = :converted REMOVE offer_token",
            # Only the holder of this very hold converts.
            "#state = :reserved AND offer_token = :tok",
            {":converted": RequestState.CONVERTED, ":reserved": RequestState.RESERVED, ":tok": token_id},
        )

    # --- Stale places: requests whose ttl passed, found through the sparse "by-expiry" index, never a scan.

    def stale(self, cutoff: float, *, lookback_days: int, page_size: int = 100) -> Iterator[Request]:
        """Requests whose ttl is at or before `cutoff`, from the day buckets of the last `lookback_days` days.

        Partial rows: the "by-expiry" index projects only `state` and `contact_key` beyond the keys, so each
        carries sku, joined_ts, expiry_day, ttl, state and contact_key, and every other field as absent
        (channel, contact and name "", the rest None), whatever the table item holds.
        """
        last = int(cutoff)
        for back in range(lookback_days, -1, -1):
            for item in query_all(
                self.table,
                IndexName="by-expiry",
                KeyConditionExpression=Key("expiry_day").eq(expiry_day(last - back * 86400)) & Key("ttl").lte(last),
                Limit=page_size,
            ):
                yield Request.from_item(item)

    def expire_items(
        self, sku: str, joined_ts: str, *, state: str, contact_key: str, cutoff: float, told: Any = None
    ) -> list[TxItem]:
        """Transaction items removing a stale place: the request, then the uniqueness item that names it
        (kept as the memory of the restock the place was told about, if any, for a while longer)."""
        return [
            {
                "Delete": tx_delete(
                    self.name,
                    {"sku": sku, "joined_ts": joined_ts},
                    # Only a place still stale and in the state seen: a repeat tap that extended it, or an
                    # offer made meanwhile (whose unit must come back through it), wins.
                    "#state = :state AND #ttl <= :cutoff",
                    names={"#state": "state", "#ttl": "ttl"},
                    values={":state": state, ":cutoff": int(cutoff)},
                )
            },
            # One place per person (invariant 2): a newer place after a re-join keeps its item.
            self._release_unique(sku, contact_key, joined_ts, "#ref = :joined", told, int(cutoff) + 30 * 86400),
        ]

    # --- Leaving and erasure (the unsubscribe link, STOP, the manage page, staff tools).

    def drop_unique(self, sku: str, contact_key: str, *, only_ref: str | None) -> bool:
        """Delete one person's uniqueness item for a SKU; with only_ref, only if it still names that place."""
        kwargs: dict[str, Any] = {"Key": {"sku": sku, "joined_ts": unique_sk(contact_key)}}
        if only_ref is not None:
            # One place per person (invariant 2): a newer place after a re-join keeps its item.
            kwargs["ConditionExpression"] = "#ref = :ref"
            kwargs["ExpressionAttributeNames"] = {"#ref": "ref"}
            kwargs["ExpressionAttributeValues"] = {":ref": only_ref}
        kwargs["ReturnValues"] = "ALL_OLD"
        result = Conditional(self.table).delete_item(**kwargs)
        return result is not None and "Attributes" in result

    def remove_item(
        self, sku: str, joined_ts: str, *, contact_key: str, state: str, token_id: str | None = None
    ) -> TxItem:
        """Transaction item: delete one request, only in the state (and with the offer) it was seen in."""
        condition = "#state = :state AND contact_key = :key"
        values: dict[str, Any] = {":state": state, ":key": contact_key}
        if token_id is not None:
            condition += " AND offer_token = :tok"
            values[":tok"] = token_id
        return {
            "Delete": tx_delete(
                self.name,
                {"sku": sku, "joined_ts": joined_ts},
                # An offer made or a link clicked meanwhile wins: the caller looks again and acts on that.
                condition,
                names={"#state": "state"},
                values=values,
            )
        }

    def remove_unique_item(
        self, sku: str, contact_key: str, joined_ts: str, *, told: Any = None, ttl: Any = None
    ) -> TxItem:
        """Transaction item: release the uniqueness item that names this place (a missing one is fine)."""
        # One place per person (invariant 2): only the item naming this very place goes.
        condition = "attribute_not_exists(#ref) OR #ref = :joined"
        return self._release_unique(sku, contact_key, joined_ts, condition, told, ttl)

    def _release_unique(
        self, sku: str, contact_key: str, joined_ts: str, condition: str, told: Any, ttl: Any
    ) -> TxItem:
        """Delete a uniqueness item, or, when its place was told about a restock (`told`), keep it naming no
        place as the memory of that until `ttl`: a later re-join by the same person is then never told about
        that restock again (exactly once per person, invariant 6)."""
        key = {"sku": sku, "joined_ts": unique_sk(contact_key)}
        names, values = {"#ref": "ref"}, {":joined": joined_ts}
        if told:
            memory = {**key, "told_restock": str(told), "ttl": int(ttl or 0)}
            return {"Put": tx_put(self.name, memory, condition, names=names, values=values)}
        return {"Delete": tx_delete(self.name, key, condition, names=names, values=values)}

    def claim_unique_item(
        self, sku: str, contact_key: str, joined_ts: str, ttl: int, *, replacing: UniqueItem | None
    ) -> TxItem:
        """Transaction item: make `joined_ts` this contact's one place for the SKU (a channel switch).

        `replacing` is the contact's uniqueness item as read (None when there was none): a finished place's,
        or the memory of a place that left (no `ref`).
        """
        item = {"sku": sku, "joined_ts": unique_sk(contact_key), "ref": joined_ts, "ttl": ttl}
        if replacing is None:
            # One place per person (invariant 2): nobody else's place for this contact is overwritten.
            return {"Put": tx_put(self.name, item, "attribute_not_exists(joined_ts)")}
        if replacing.ref:
            # Only the place we saw (and chose to replace) is replaced, never one made meanwhile.
            return {
                "Put": tx_put(self.name, item, "#ref = :old", names={"#ref": "ref"}, values={":old": replacing.ref})
            }
        # The memory of a place that left: replaced only while it still names no place.
        condition = "attribute_exists(joined_ts) AND attribute_not_exists(#ref)"
        return {"Put": tx_put(self.name, item, condition, names={"#ref": "ref"})}

    def request_leave(self, sku: str, joined_ts: str, *, token_id: str, reason: str) -> bool:
        """The holder of a unit asked to leave: their place goes when the hold ends unbought. False if it moved."""
        answer = Conditional(self.table).update_item(
            Key={"sku": sku, "joined_ts": joined_ts},
            UpdateExpression="SET leave_requested = :reason",
            # Only while they still hold this very unit; otherwise the caller looks again and leaves now.
            ConditionExpression="#state = :reserved AND offer_token = :tok",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":reason": reason, ":reserved": RequestState.RESERVED, ":tok": token_id},
        )
        return answer is not None

    def switch_contact_item(
        self,
        sku: str,
        joined_ts: str,
        *,
        old_key: str,
        contact: str,
        contact_key: str,
        channel: str,
        now: float,
        told: Any = None,
    ) -> TxItem:
        """Transaction item: send this place's notices to a new contact; its place in line is unchanged.

        `told`: a restock the new contact was already told about at a place it left; a place told about
        none takes that on, so the new contact is not told about it twice.
        """
        told_clause = ", last_notified_restock = if_not_exists(last_notified_restock, :told)" if told else ""
        return {
            "Update": tx_update(
                self.name,
                {"sku": sku, "joined_ts": joined_ts},
                (
                    f"SET contact = :contact, contact_key = :key, channel = :channel, updated_at = :now{told_clause} "
                    # The new contact proved itself with a code: nothing is left to confirm.
                    "REMOVE unconfirmed, confirm_owed_at, confirm_day"
                ),
                # Only a live place of the person asking (never someone else's, never a finished one).
                "contact_key = :old AND #state IN (:w, :o, :r)",
                names={"#state": "state"},
                values={
                    ":contact": contact,
                    ":key": contact_key,
                    ":channel": channel,
                    ":now": int(now),
                    ":old": old_key,
                    ":w": RequestState.WAITING,
                    ":o": RequestState.OFFERED,
                    ":r": RequestState.RESERVED,
                    **({":told": str(told)} if told else {}),
                },
            )
        }
