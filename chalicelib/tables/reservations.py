"""bisn-reservations: offers and holds, one row per signed link."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from chalicelib.tables.base import Conditional, int_or_none, present, str_or_none, tx_delete, tx_put, tx_update


class OfferState(StrEnum):
    """Where an offer or hold stands (stored as these strings)."""

    OFFERED = "offered"
    HELD = "held"
    LAPSED = "lapsed"
    EXPIRED = "expired"
    CONVERTED = "converted"


class StoreState(StrEnum):
    """Where a hold stands on the store itself (chalicelib/store_holds.py), for platforms that hold units there.

    The intent is written in the same transaction as our own move, so a crash between the move and the store
    call leaves the row saying what is still owed: the sweep finishes it.
    """

    PLACING = "placing"  # held by us; the store's hold is being placed (or must be placed again)
    PLACED = "placed"  # the store holds the unit too (store_ref, store_checkout_url)
    RELEASING = "releasing"  # the hold ended; the store's hold must be given back before the unit is offered again
    RELEASED = "released"  # the store has the unit back (or never had a hold to give back)


DUE_KEY = "due"  # every row that the sweep must look at carries due_key/due_at (a sparse index)


@dataclass(frozen=True)
class Offer:
    """One offer or hold (a row of bisn-reservations), as stored."""

    token_id: str
    sku: str
    restock_ts: str
    restock_id: str
    request_joined_ts: str
    contact_key: str
    channel: str
    state: OfferState
    offered_at: int | None = None
    offer_expires_at: int | None = None
    ttl: int | None = None
    due_key: str | None = None  # present while the sweep must look at the row (sparse index by-due)
    due_at: int | None = None
    held_at: int | None = None
    hold_expires_at: int | None = None
    lapsed_at: int | None = None
    lapse_reason: str | None = None
    expired_at: int | None = None
    order_id: str | None = None
    converted_at: int | None = None
    late_order_id: str | None = None  # an order that arrived after the hold ended
    late_order_at: int | None = None
    store_state: StoreState | None = None  # only where the platform holds units on the store itself
    store_ref: str | None = None  # the store's own id of its hold (a draft order, a pending order)
    store_checkout_url: str | None = None  # the store's checkout for that hold
    # The store could not confirm store_ref is the hold's only one: the sweep looks for others each run until it can.
    store_unsettled: bool = False
    lang: str = "en"  # the shopper's language (chalicelib/i18n.py); rows from before it are English
    # The reminder before the offer lapses (chalicelib/reminders.py): when the sweep queued it (the row is then due
    # at its end again), and when the notifier took it to send (at most once: a lost answer is never resent).
    reminder_queued_at: int | None = None
    reminder_sent_at: int | None = None

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        """The typed row from a stored item (numbers come back as Decimal; unknown attributes are ignored)."""
        return cls(
            token_id=str(item["token_id"]),
            sku=str(item["sku"]),
            restock_ts=str(item["restock_ts"]),
            restock_id=str(item["restock_id"]),
            request_joined_ts=str(item["request_joined_ts"]),
            contact_key=str(item.get("contact_key") or ""),
            channel=str(item.get("channel") or ""),
            state=OfferState(item["state"]),
            offered_at=int_or_none(item.get("offered_at")),
            offer_expires_at=int_or_none(item.get("offer_expires_at")),
            ttl=int_or_none(item.get("ttl")),
            due_key=str_or_none(item.get("due_key")),
            due_at=int_or_none(item.get("due_at")),
            held_at=int_or_none(item.get("held_at")),
            hold_expires_at=int_or_none(item.get("hold_expires_at")),
            lapsed_at=int_or_none(item.get("lapsed_at")),
            lapse_reason=str_or_none(item.get("lapse_reason")),
            expired_at=int_or_none(item.get("expired_at")),
            order_id=str_or_none(item.get("order_id")),
            converted_at=int_or_none(item.get("converted_at")),
            late_order_id=str_or_none(item.get("late_order_id")),
            late_order_at=int_or_none(item.get("late_order_at")),
            store_state=StoreState(item["store_state"]) if item.get("store_state") else None,
            store_ref=str_or_none(item.get("store_ref")),
            store_checkout_url=str_or_none(item.get("store_checkout_url")),
            store_unsettled=bool(item.get("store_unsettled")),
            lang=str(item.get("lang") or "en"),
            reminder_queued_at=int_or_none(item.get("reminder_queued_at")),
            reminder_sent_at=int_or_none(item.get("reminder_sent_at")),
        )

    def to_item(self) -> dict[str, Any]:
        """The stored item (absent attributes left out)."""
        item = present({**self.__dict__, "state": str(self.state), "store_unsettled": self.store_unsettled or None})
        if self.store_state is not None:
            item["store_state"] = str(self.store_state)
        return item


class ReservationsTable:
    """Offer/hold rows keyed by token_id. Fields: sku, restock_ts, restock_id, request_joined_ts,
    contact_key, channel, state, offer_expires_at, hold_expires_at, due_key/due_at, ttl.
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def get(self, token_id: str) -> Offer | None:
        """One offer or hold, read strongly consistent."""
        item = self.table.get_item(Key={"token_id": token_id}, ConsistentRead=True).get("Item")
        return Offer.from_item(item) if item else None

    def offer_put_item(
        self,
        *,
        token_id: str,
        sku: str,
        restock_ts: str,
        restock_id: str,
        request_joined_ts: str,
        contact_key: str,
        channel: str,
        now: float,
        offer_window_s: int,
        lang: str = "en",
        remind_before_s: int = 0,
    ) -> dict[str, Any]:
        """Transaction item: a new offer row, due for the sweep when the offer window ends, or `remind_before_s`
        earlier, when its lapse reminder is owed then (chalicelib/reminders.py)."""
        expires = int(now) + int(offer_window_s)
        item = {
            "token_id": token_id,
            "sku": sku,
            "restock_ts": restock_ts,
            "restock_id": restock_id,
            "request_joined_ts": request_joined_ts,
            "contact_key": contact_key,
            "channel": channel,
            "lang": lang,
            "state": OfferState.OFFERED,
            "offered_at": int(now),
            "offer_expires_at": expires,
            "due_key": DUE_KEY,
            "due_at": expires - max(0, int(remind_before_s)),
            # Rows are kept a month for explanations, then tidied by TTL.
            "ttl": expires + 30 * 86400,
        }
        # A token is used once (invariant 6): an id is never written twice.
        return {"Put": tx_put(self.name, item, "attribute_not_exists(token_id)")}

    def transition_item(
        self, token_id: str, from_state: str, to_state: str, *, due_at: int | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Transaction item: move a row from one state to the next, setting fields and the sweep's due time.

        With due_at None the row leaves the sweep's index (a final state).
        """
        names = {"#state": "state"}
        values: dict[str, Any] = {":from": from_state, ":to": to_state}
        sets = ["#state = :to"]
        for i, (key, value) in enumerate(fields.items()):
            names[f"#f{i}"] = key
            values[f":f{i}"] = value
            sets.append(f"#f{i} = :f{i}")
        expression = "SET " + ", ".join(sets)
        if due_at is None:
            expression += " REMOVE due_key, due_at"
        else:
            values[":due"] = int(due_at)
            values[":duekey"] = DUE_KEY
            expression = expression.replace("SET ", "SET due_key = :duekey, due_at = :due, ", 1)
        return {
            "Update": tx_update(
                self.name,
                {"token_id": token_id},
                expression,
                # Every row change is conditional on the row's current state, so it happens once (invariant 6).
                "#state = :from",
                names=names,
                values=values,
                old_on_failure=True,
            )
        }

    def delete_offer_item(self, token_id: str) -> dict[str, Any]:
        """Transaction item: remove an offer whose notice could not be sent (it never existed for the shopper)."""
        return {
            "Delete": tx_delete(
                self.name,
                {"token_id": token_id},
                # Only an untouched offer is rolled back; one already clicked stands.
                "#state = :offered",
                names={"#state": "state"},
                values={":offered": OfferState.OFFERED},
            )
        }

    def due(self, now: float, *, limit: int = 100) -> list[Offer]:
        """Rows whose offer or hold window has ended, oldest first, from the sparse due-time index."""
        from boto3.dynamodb.conditions import Key

        page = self.table.query(
            IndexName="by-due",
            KeyConditionExpression=Key("due_key").eq(DUE_KEY) & Key("due_at").lte(int(now)),
            Limit=limit,
        )
        return [Offer.from_item(item) for item in page.get("Items", [])]

    def due_pages(self, now: float, *, page_size: int = 100) -> Iterator[list[Offer]]:
        """Every row due at `now`, oldest first, page by page from the sparse due-time index (never a scan)."""
        from boto3.dynamodb.conditions import Key

        kwargs: dict[str, Any] = {
            "IndexName": "by-due",
            "KeyConditionExpression": Key("due_key").eq(DUE_KEY) & Key("due_at").lte(int(now)),
            "Limit": page_size,
        }
        while True:
            page = self.table.query(**kwargs)
            yield [Offer.from_item(item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _update_if(self, token_id: str, update: str, condition: str, values: dict[str, Any]) -> bool:
        """One conditional write to a row's sweep fields, `#state` naming the row's state; False when the condition
        refuses it (the row had moved on), which each caller treats as nothing left to do."""
        answer = Conditional(self.table).update_item(
            Key={"token_id": token_id},
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=values,
        )
        return answer is not None

    def clear_due(self, token_id: str, state: str) -> bool:
        """Take a settled row out of the sweep's index once the top-up for its freed unit is queued."""
        return self._update_if(
            token_id,
            "REMOVE due_key, due_at",
            # Only a row still in the settled state it was seen in; a missing row is not recreated.
            "#state = :state",
            {":state": state},
        )

    def reminder_queued(self, token_id: str, *, due_at: int, now: float) -> bool:
        """The lapse reminder's message is on the queue (or is not owed after all): note it, and make the row due at
        the offer's end (`due_at`) again. False when the offer had moved on or its reminder was queued already."""
        return self._update_if(
            token_id,
            "SET reminder_queued_at = :now, due_at = :due",
            # Only a live offer, once: a held row's due time is its hold's end, and a second sweep adds nothing.
            "#state = :offered AND attribute_not_exists(reminder_queued_at)",
            {":now": int(now), ":due": int(due_at), ":offered": OfferState.OFFERED},
        )

    def claim_reminder(self, token_id: str, now: float) -> Offer | None:
        """Take the offer's one lapse reminder to send: the row, or None when no reminder may go (already taken by
        this or another delivery, the offer held, lapsed or past its end, or no such row)."""
        answer = Conditional(self.table).update_item(
            Key={"token_id": token_id},
            UpdateExpression="SET reminder_sent_at = :now",
            # Exactly once (invariant 6), and never after a hold or the offer's end.
            ConditionExpression=(
                "#state = :offered AND offer_expires_at > :now AND attribute_not_exists(reminder_sent_at)"
            ),
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":now": int(now), ":offered": OfferState.OFFERED},
            ReturnValues="ALL_NEW",
        )
        return Offer.from_item(answer["Attributes"]) if answer is not None else None

    def release_reminder(self, token_id: str, sent_at: int) -> bool:
        """Give a taken reminder back when the provider provably did not take it, so a redelivery may send it."""
        answer = Conditional(self.table).update_item(
            Key={"token_id": token_id},
            UpdateExpression="REMOVE reminder_sent_at",
            # Only this claim's own mark: one a later delivery took is not undone.
            ConditionExpression="reminder_sent_at = :sent",
            ExpressionAttributeValues={":sent": int(sent_at)},
        )
        return answer is not None

    def store_placed_item(
        self, token_id: str, *, ref: str, checkout_url: str, due_at: int, unsettled: bool = False
    ) -> dict[str, Any]:
        """Transaction item: the store now holds the unit; keep its reference and checkout, and be due again at the
        hold's end (or, `unsettled`, sooner: the store may hold a second unit for it, which the sweep looks for)."""
        flag = ", store_unsettled = :unsettled" if unsettled else ""
        values = {
            ":placed": StoreState.PLACED,
            ":ref": ref,
            ":url": checkout_url,
            ":due": int(due_at),
            ":held": OfferState.HELD,
            ":placing": StoreState.PLACING,
        } | ({":unsettled": True} if unsettled else {})
        return {
            "Update": tx_update(
                self.name,
                {"token_id": token_id},
                "SET store_state = :placed, store_ref = :ref, store_checkout_url = :url, due_at = :due" + flag,
                # Only a hold still live and still placing: recorded once, and an ended hold's store hold is the
                # release's to undo.
                "#state = :held AND store_state = :placing",
                names={"#state": "state"},
                values=values,
            )
        }

    def store_retry_at(self, token_id: str, due_at: int) -> bool:
        """Placing failed for now: the sweep tries again at `due_at` (never later than the hold's own end)."""
        # Only while still placing.
        return self._retry_at(token_id, due_at, "store_state = :placing", {":placing": StoreState.PLACING})

    def store_settled(self, token_id: str, due_at: int) -> bool:
        """The store shows the hold's own hold and nothing else: the flag goes, and the row is due at the hold's end
        (`due_at`) again. False when the hold had moved on or was settled already."""
        return self._update_if(
            token_id,
            "REMOVE store_unsettled SET due_at = :due",
            # Only a live placed hold: an ended one is due for its release and must stay so.
            "#state = :held AND store_state = :placed AND attribute_exists(store_unsettled)",
            {":due": int(due_at), ":held": OfferState.HELD, ":placed": StoreState.PLACED},
        )

    def store_unsettle(self, token_id: str, due_at: int) -> bool:
        """A placed hold the store may hold a second unit for (a simultaneous call made another hold than the one
        recorded): flag it, due for the sweep at `due_at`. False when the hold had moved on."""
        return self._update_if(
            token_id,
            "SET store_unsettled = :unsettled, due_at = :due",
            # Only a live placed hold, never past its end: an ended hold's release takes every store hold back.
            "#state = :held AND store_state = :placed AND hold_expires_at >= :due",
            {":unsettled": True, ":due": int(due_at), ":held": OfferState.HELD, ":placed": StoreState.PLACED},
        )

    def store_unsettled_retry_at(self, token_id: str, due_at: int) -> bool:
        """The store could not show yet that the hold's is its only one: the sweep looks again at `due_at`."""
        # Only while still unsettled.
        return self._retry_at(token_id, due_at, "attribute_exists(store_unsettled)", {})

    def _retry_at(self, token_id: str, due_at: int, still: str, values: dict[str, Any]) -> bool:
        """A live hold's store step that did not finish is looked at again by the sweep at `due_at`, while `still`
        holds; placing and settling retry alike."""
        return self._update_if(
            token_id,
            "SET due_at = :due",
            # Never past the hold's end: its expiry must be found on time.
            f"#state = :held AND {still} AND hold_expires_at >= :due",
            {":due": int(due_at), ":held": OfferState.HELD, **values},
        )

    def store_released_item(self, token_id: str) -> dict[str, Any]:
        """Transaction item: the store has the unit back; the row may go on to its top-up."""
        return {
            "Update": tx_update(
                self.name,
                {"token_id": token_id},
                "SET store_state = :released",
                # Released once, from the intent the ending move wrote.
                "store_state = :releasing",
                values={":released": StoreState.RELEASED, ":releasing": StoreState.RELEASING},
            )
        }

    def late_order_item(self, token_id: str, order_id: str, now: float) -> dict[str, Any]:
        """Transaction item: note an order that arrived after the hold ended, once per order id."""
        return {
            "Update": tx_update(
                self.name,
                {"token_id": token_id},
                "SET late_order_id = :oid, late_order_at = :now",
                # Counted once per order (invariant 6): a redelivered webhook finds its own order id here.
                "#state IN (:lapsed, :expired) AND (attribute_not_exists(late_order_id) OR late_order_id <> :oid)",
                names={"#state": "state"},
                values={
                    ":oid": order_id,
                    ":now": int(now),
                    ":lapsed": OfferState.LAPSED,
                    ":expired": OfferState.EXPIRED,
                },
                old_on_failure=True,
            )
        }
