"""bisn-throttle: small items that expire by TTL, each role under its own keys and its own class.

A deployed table holds them all under its one key attribute (`key`), a key's prefix saying what it holds; `Tables`
(chalicelib/tables/store.py) hands each role out over the same boto3 table, so a caller takes only the role it uses:

- `RateCounters`: windowed counters (rate limits, sending caps, unknown-SKU attempts, proof-message caps);
- `SeenEvents`: the ids of webhooks, SES events and SMS failures already acted on;
- `Digests`: the unknown-SKU digest, one item per window;
- `PendingSteps`: a pending channel switch's code, a pending opt-in's link;
- `SavedStates`: a small state kept between runs (where a sync stopped, what a platform's order named);
- `LineTickets`: each SKU's line tickets (chalicelib/line.py);
- `UndoRecords`: what taking back an unsubscribe needs, for its short window (chalicelib/shopper/undo.py).
"""

from __future__ import annotations

from typing import Any

from chalicelib.tables.base import Conditional, TableRole, TxItem, tx_put, tx_update, update_alone


class RateCounters(TableRole):
    """Counters per key and time window, shared by every Lambda instance."""

    def charge_item(self, key: str, limit: int, expires_at: int) -> TxItem:
        """Transaction item: count one request against `key`, refusing once `limit` is reached."""
        return {
            "Update": tx_update(
                self.name,
                {"key": key},
                "ADD n :one SET #ttl = if_not_exists(#ttl, :ttl)",
                # The rate limit holds across Lambda instances because the count lives here.
                "attribute_not_exists(n) OR n < :limit",
                names={"#ttl": "ttl"},
                values={":one": 1, ":limit": limit, ":ttl": expires_at},
            )
        }

    def proof_cap_item(self, key: str, now: float, *, every_s: int, window_s: int) -> TxItem:
        """Transaction item: count one proof message (chalicelib/shopper/resubscribe.py) against a person's cap, refused
        when one went under `every_s` ago or three went within the last `window_s` (sliding, not fixed windows)."""
        return {
            "Update": tx_update(
                self.name,
                {"key": key},
                # The three latest sends, newest first (all SETs read the item as it was before this update).
                (
                    "SET #third = if_not_exists(#second, :never), #second = if_not_exists(#last, :never), "
                    "#last = :now, #ttl = :ttl"
                ),
                # Invariant 3's one exception stays narrow: a suppressed contact gets at most one proof message a
                # day and three a window, however often anyone taps for it.
                "attribute_not_exists(#last) OR (#last <= :day_ago AND #third <= :window_ago)",
                names={"#last": "last", "#second": "second", "#third": "third", "#ttl": "ttl"},
                values={
                    ":now": int(now),
                    ":never": 0,
                    ":day_ago": int(now) - every_s,
                    ":window_ago": int(now) - window_s,
                    ":ttl": int(now) + window_s,
                },
            )
        }

    def charge_many(self, key: str, count: int, limit: int, expires_at: int) -> bool:
        """Count `count` at once against `key`; False (nothing counted) when that would pass `limit`."""
        if count <= 0:
            return True
        if count > limit:
            return False
        update = tx_update(
            self.name,
            {"key": key},
            "ADD n :count SET #ttl = if_not_exists(#ttl, :ttl)",
            "attribute_not_exists(n) OR n <= :room",
            names={"#ttl": "ttl"},
            values={":count": count, ":room": limit - count, ":ttl": expires_at},
        )
        return update_alone(self.table, {"Update": update})

    def charge(self, key: str, limit: int, expires_at: int) -> bool:
        """Count one request on its own; False when the limit was already reached."""
        return update_alone(self.table, self.charge_item(key, limit, expires_at))

    def count(self, key: str) -> int:
        """What a counter stands at (0 when nothing was counted), read strongly consistent."""
        item = self.table.get_item(Key={"key": key}, ConsistentRead=True).get("Item") or {}
        return int(item.get("n", 0))

    def bump(self, key: str, expires_at: int) -> int:
        """Add one to a counter and return its new value."""
        result = self.table.update_item(
            Key={"key": key},
            UpdateExpression="ADD n :one SET #ttl = if_not_exists(#ttl, :ttl)",
            ExpressionAttributeNames={"#ttl": "ttl"},
            ExpressionAttributeValues={":one": 1, ":ttl": expires_at},
            ReturnValues="UPDATED_NEW",
        )
        return int(result["Attributes"]["n"])


class SeenEvents(TableRole):
    """What already happened (a webhook, an SES event, an SMS failure, a person an import placed on a list),
    remembered by id for a while."""

    def remember_item(self, key: str, expires_at: int) -> TxItem:
        """Transaction item: remember that `key` happened (until `expires_at`); refused if it already had."""
        return {
            "Put": tx_put(
                self.name,
                {"key": key, "ttl": expires_at},
                # Exactly once (invariant 6): a second delivery of the same webhook or SES event, or a second import of
                # the same person to the same list, finds the first one's record.
                "attribute_not_exists(#key)",
                names={"#key": "key"},
            )
        }

    def remember(self, key: str, expires_at: int) -> None:
        """Remember that `key` happened (until `expires_at`), whether or not it was remembered already."""
        self.table.put_item(Item={"key": key, "ttl": expires_at})

    def seen(self, key: str) -> bool:
        """Whether `key` is remembered (read strongly consistent: a retry may follow the first delivery at once)."""
        return "Item" in self.table.get_item(
            Key={"key": key}, ConsistentRead=True, ProjectionExpression="#key", ExpressionAttributeNames={"#key": "key"}
        )


class Digests(TableRole):
    """The unknown-SKU digest: one item per window naming the SKUs that crossed the alert threshold."""

    _counters: RateCounters

    def __init__(self, table: Any) -> None:
        super().__init__(table)
        # Past its cap a digest only counts the others, on the same item, as a counter does.
        self._counters = RateCounters(table)

    def add_to_digest(self, key: str, sku: str, *, cap: int, expires_at: int) -> None:
        """Name `sku` in a window's digest; past `cap` names only the count of the others grows."""
        named = Conditional(self.table).update_item(
            Key={"key": key},
            UpdateExpression="ADD skus :sku SET #ttl = if_not_exists(#ttl, :ttl)",
            # Bounded: taps on made-up SKUs must not grow one item without limit (400 KB per item).
            ConditionExpression="attribute_not_exists(skus) OR size(skus) < :cap",
            ExpressionAttributeNames={"#ttl": "ttl"},
            ExpressionAttributeValues={":sku": {sku}, ":cap": cap, ":ttl": expires_at},
        )
        if named is None:
            self._counters.bump(key, expires_at)

    def digest(self, key: str) -> tuple[list[str], int, bool]:
        """A window's digest: the SKUs named, how many more crossed the threshold, and whether it was sent."""
        item = self.table.get_item(Key={"key": key}, ConsistentRead=True).get("Item") or {}
        return sorted(str(s) for s in item.get("skus", ())), int(item.get("n", 0)), "sent_at" in item

    def mark_digest_sent(self, key: str, now: float) -> bool:
        """Mark a window's digest sent; False when another sweep marked it first."""
        marked = Conditional(self.table).update_item(
            Key={"key": key},
            UpdateExpression="SET sent_at = :now",
            # One digest per window: whichever sweep marks it first is the one that sent it.
            ConditionExpression="attribute_exists(skus) AND attribute_not_exists(sent_at)",
            ExpressionAttributeValues={":now": int(now)},
        )
        return marked is not None


class PendingSteps(TableRole):
    """Steps a person must finish, each pending under one key with a nonce until it is done or expires: a channel
    switch's code (chalicelib/confirm.py) and an opt-in's link (chalicelib/shopper/optin.py)."""

    def _start_pending(self, item: dict[str, Any], *, now: float, ttl_s: int, every_s: int) -> bool:
        """Write a pending step (a channel switch's code, an opt-in link) with a fresh nonce, replacing an older one;
        False when one was started under `every_s` ago and is still live."""
        expires = int(now) + ttl_s
        written = Conditional(self.table).put_item(
            Item={**item, "at": int(now), "expires_at": expires, "ttl": expires},
            # At most one every `every_s`: the page (or staff) cannot be used to flood a contact with codes or
            # to mint a stream of links.
            ConditionExpression="attribute_not_exists(#key) OR #at <= :before OR expires_at <= :now",
            ExpressionAttributeNames={"#key": "key", "#at": "at"},
            ExpressionAttributeValues={":before": int(now) - every_s, ":now": int(now)},
        )
        return written is not None

    def start_switch(
        self, key: str, *, nonce: str, channel: str, contact: str, new_key: str, now: float, ttl_s: int, every_s: int
    ) -> bool:
        """Record a pending switch with a fresh code nonce; False when one was asked for under `every_s` ago."""
        item = {"key": key, "nonce": nonce, "channel": channel, "contact": contact, "new_key": new_key, "attempts": 0}
        return self._start_pending(item, now=now, ttl_s=ttl_s, every_s=every_s)

    def claim_switch_code(self, key: str, nonce: str, now: float) -> dict[str, Any] | None:
        """Take a pending switch's code for sending, once per nonce; None when it is not owed."""
        result = Conditional(self.table).update_item(
            Key={"key": key},
            UpdateExpression="SET sent = :yes",
            ConditionExpression="nonce = :nonce AND attribute_not_exists(sent) AND expires_at > :now",
            ExpressionAttributeValues={":yes": True, ":nonce": nonce, ":now": int(now)},
            ReturnValues="ALL_NEW",
        )
        return dict(result["Attributes"]) if result is not None else None

    def release_switch_code(self, key: str, nonce: str) -> None:
        """A claimed code that provably did not go: owed again for the retry."""
        Conditional(self.table).update_item(
            Key={"key": key},
            UpdateExpression="REMOVE sent",
            ConditionExpression="nonce = :nonce",
            ExpressionAttributeValues={":nonce": nonce},
        )

    def try_switch_code(self, key: str, now: float, max_attempts: int) -> dict[str, Any] | None:
        """Count one try at a pending switch's code; the pending switch as it now stands, or None when there is
        none live (expired, or out of tries)."""
        result = Conditional(self.table).update_item(
            Key={"key": key},
            UpdateExpression="ADD attempts :one",
            ConditionExpression="attribute_exists(nonce) AND attempts < :max AND expires_at > :now",
            ExpressionAttributeValues={":one": 1, ":max": max_attempts, ":now": int(now)},
            ReturnValues="ALL_NEW",
        )
        return dict(result["Attributes"]) if result is not None else None

    def pending_switch(self, key: str, now: float) -> dict[str, Any] | None:
        """The live pending switch of `key`, or None."""
        item = self.table.get_item(Key={"key": key}, ConsistentRead=True).get("Item")
        if not item or "nonce" not in item or int(item.get("expires_at") or 0) <= int(now):
            return None
        return dict(item)

    def end_switch(self, key: str, nonce: str) -> None:
        """The code was entered (or the switch was given up): the pending switch goes."""
        Conditional(self.table).delete_item(
            Key={"key": key}, ConditionExpression="nonce = :nonce", ExpressionAttributeValues={":nonce": nonce}
        )

    # --- Pending opt-ins (chalicelib/shopper/optin.py): a staff member started one; only the person's own button ends it.

    def start_optin(self, key: str, *, nonce: str, now: float, ttl_s: int, every_s: int, **fields: Any) -> bool:
        """Record a pending opt-in with a fresh nonce (older links stop working), keeping `fields` (where its link
        goes, who started it); False when one was started under `every_s` ago."""
        return self._start_pending({**fields, "key": key, "nonce": nonce}, now=now, ttl_s=ttl_s, every_s=every_s)

    # Its link's message is claimed for sending, and given back, as a switch's code is.
    claim_optin_message = claim_switch_code
    release_optin_message = release_switch_code

    def take_optin(self, key: str, nonce: str, now: float) -> dict[str, Any] | None:
        """Use a pending opt-in once: the pending opt-in when it was this nonce's and still live (now gone)."""
        result = Conditional(self.table).delete_item(
            Key={"key": key},
            # Single use, and only the newest link staff made, before it expires.
            ConditionExpression="nonce = :nonce AND expires_at > :now",
            ExpressionAttributeValues={":nonce": nonce, ":now": int(now)},
            ReturnValues="ALL_OLD",
        )
        return dict(result["Attributes"]) if result is not None else None

    def pending_optin(self, key: str, nonce: str, now: float) -> bool:
        """Whether this nonce's opt-in is still pending and live."""
        item = self.table.get_item(Key={"key": key}, ConsistentRead=True).get("Item") or {}
        return item.get("nonce") == nonce and int(item.get("expires_at") or 0) > int(now)


class SavedStates(TableRole):
    """A small state kept between runs under one key, expiring on its own once nothing renews it: where a scheduled
    sync stopped (the STOP sync's page token, the catalogue sync's place in its feed, the demand roll-up's), so the
    next run carries on from there, and what a platform's order webhook must find again (chalicelib/store_webhooks.py).
    """

    def get(self, key: str) -> dict[str, Any] | None:
        """A saved state, or None when there is none (read strongly consistent: the last run just wrote it)."""
        item = self.table.get_item(Key={"key": key}, ConsistentRead=True).get("Item")
        return dict(item["state"]) if item and isinstance(item.get("state"), dict) else None

    def save(self, key: str, state: dict[str, Any], expires_at: int) -> None:
        """Save a state (replacing the last one); absent values are left out."""
        self.table.update_item(
            Key={"key": key},
            UpdateExpression="SET #state = :state, #ttl = :ttl",
            ExpressionAttributeNames={"#state": "state", "#ttl": "ttl"},
            ExpressionAttributeValues={":state": {k: v for k, v in state.items() if v is not None}, ":ttl": expires_at},
        )


class LineTickets(TableRole):
    """Each SKU's line tickets (chalicelib/line.py): the order a new place was handed out in, kept off the tap's
    transaction so no transaction ever holds this item (one plain write a tap, see docs/SCALE.md)."""

    def take_ticket(self, sku: str, expires_at: int) -> tuple[int, int, int]:
        """Hand out the next ticket of a SKU's line: (its number, tickets burnt before it, places imports put in the
        line without a ticket before it)."""
        result = self.table.update_item(
            Key={"key": line_key(sku)},
            # The line lives while anybody taps for it (a place lives at most a ttl after its last tap).
            UpdateExpression="ADD issued :one SET #ttl = :ttl",
            ExpressionAttributeNames={"#ttl": "ttl"},
            ExpressionAttributeValues={":one": 1, ":ttl": expires_at},
            ReturnValues="ALL_NEW",
        )
        attributes = result["Attributes"]
        return int(attributes["issued"]), int(attributes.get("burnt") or 0), int(attributes.get("inserted") or 0)

    def note_inserted(self, sku: str, count: int, expires_at: int) -> None:
        """Count `count` places an import is about to put in a SKU's line without tickets (they may stand ahead of any
        ticket), before they are written: a count no place took only widens the bounds (chalicelib/line.py)."""
        self.table.update_item(
            Key={"key": line_key(sku)},
            # The line outlives the places counted (as a tap's ticket makes it, from now), so no later ticket is
            # read without them.
            UpdateExpression="ADD inserted :n SET #ttl = :ttl",
            ExpressionAttributeNames={"#ttl": "ttl"},
            ExpressionAttributeValues={":n": count, ":ttl": expires_at},
        )

    def return_ticket(self, sku: str, ticket: int) -> None:
        """A ticket no place took (a repeat tap, an opt-out, a refusal): hand it back while it is still the last one
        issued, or else count it burnt, so the line's figures stay an honest bound (chalicelib/line.py)."""
        returned = Conditional(self.table).update_item(
            Key={"key": line_key(sku)},
            UpdateExpression="ADD issued :minus",
            # Only the last ticket goes back: a later one issued meanwhile keeps its number.
            ConditionExpression="issued = :ticket",
            ExpressionAttributeValues={":minus": -1, ":ticket": ticket},
        )
        if returned is None:
            self.table.update_item(
                Key={"key": line_key(sku)},
                UpdateExpression="ADD burnt :one",
                ExpressionAttributeValues={":one": 1},
            )

    def line(self, sku: str) -> tuple[int, int]:
        """A SKU's line figures, read strongly consistent: (tickets issued, tickets burnt)."""
        issued, burnt, _ = self.figures(sku)
        return issued, burnt

    def figures(self, sku: str) -> tuple[int, int, int]:
        """A SKU's line figures, read strongly consistent: (tickets issued, tickets burnt, places inserted)."""
        item = self.table.get_item(Key={"key": line_key(sku)}, ConsistentRead=True).get("Item") or {}
        return int(item.get("issued") or 0), int(item.get("burnt") or 0), int(item.get("inserted") or 0)


class UndoRecords(TableRole):
    """Taking back an unsubscribe (chalicelib/shopper/undo.py): for its short window, what putting the person back needs,
    under `undo#<contact key>`, one per person (the newest unsubscribe's), gone by TTL after the window."""

    def keep_undo(self, contact_key: str, record: dict[str, Any], expires_at: int) -> None:
        """Keep an unsubscribe's undo record until `expires_at`; a newer unsubscribe's replaces an older one, so an
        older undo token (its nonce) names nothing any more."""
        self.table.put_item(Item={**record, "key": undo_key(contact_key), "expires_at": expires_at, "ttl": expires_at})

    def undo_record(self, contact_key: str) -> dict[str, Any] | None:
        """A person's undo record as stored (an expired one too, until DynamoDB's TTL removes it)."""
        item = self.table.get_item(Key={"key": undo_key(contact_key)}, ConsistentRead=True).get("Item")
        return dict(item) if item else None

    def lift_undo_item(self, contact_key: str, nonce: str, now: float) -> TxItem:
        """Transaction item: an undo starts (with the opt-out's lifting), once, inside its window."""
        return {
            "Update": tx_update(
                self.name,
                {"key": undo_key(contact_key)},
                "SET lifted = :now",
                # Opt-out (invariant 3): only the very unsubscribe the token was issued for, inside its window, once.
                "nonce = :nonce AND expires_at > :now AND attribute_not_exists(lifted)",
                values={":nonce": nonce, ":now": int(now)},
            )
        }

    def take_undo_place_item(self, contact_key: str, nonce: str, sku: str) -> TxItem:
        """Transaction item: one list of an undo record is taken (with the place that puts the person back on it)."""
        return {
            "Update": tx_update(
                self.name,
                {"key": undo_key(contact_key)},
                "REMOVE places.#sku",
                # One place per person (invariant 2): each list left is joined again once, by this undo only.
                "nonce = :nonce AND attribute_exists(lifted) AND attribute_exists(places.#sku)",
                names={"#sku": sku},
                values={":nonce": nonce},
            )
        }

    def take_undo_place(self, contact_key: str, nonce: str, sku: str) -> bool:
        """Take one list off an undo record on its own (a list that refused the place); False when it was taken."""
        return update_alone(self.table, self.take_undo_place_item(contact_key, nonce, sku))

    def drop_undo(self, contact_key: str, nonce: str) -> None:
        """An undo is finished: its record goes (a newer unsubscribe's record is left alone)."""
        Conditional(self.table).delete_item(
            Key={"key": undo_key(contact_key)},
            # Opt-out (invariant 3): never the record of a newer unsubscribe, whose own undo must still work.
            ConditionExpression="nonce = :nonce",
            ExpressionAttributeValues={":nonce": nonce},
        )


def line_key(sku: str) -> str:
    """The throttle key of a SKU's line tickets (SKUs hold no '#', so it never meets another key)."""
    return f"line#{sku}"


def undo_key(contact_key: str) -> str:
    """The throttle key of a person's latest unsubscribe's undo record."""
    return f"undo#{contact_key}"
