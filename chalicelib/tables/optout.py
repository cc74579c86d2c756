"""bisn-optout: the suppression list, keyed by a keyed hash of the contact (never the contact itself).

The same table keeps each person's manage-link version under `v#<contact key>` (an item that suppresses
nobody: suppression is the item keyed by the contact key itself). Signing out everywhere raises it, and every
manage link signed at a lower version is refused.

The short manage links an SMS carries (`/m/{id}`, chalicelib/link_ids.py) live here too: `m#<id>` names the
person and the version the id was issued at (one GetItem per opened link), and the person's `v#` item holds
their current id (`link`, issued at `link_at`), so every SMS reuses it rather than writing one per message.
Signing out everywhere raises the version and forgets the current id: every older id is refused by its version,
and the next SMS carries a new one. An id item expires (`ttl`) when a link of its age would be refused anyway.

Opting back in from a tap (chalicelib/shopper/resubscribe.py) keeps its pending proofs here too: `rs#<random id>` for a
re-subscribe email's link, `rc#<contact key>` for an SMS code. While its message is owed, a pending proof carries
`owed_day`/`owed_at` (the sparse index "by-owed"), so the sweep finds a message a crash left unsent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.conditions import Key

from chalicelib.clock import iso
from chalicelib.tables.base import (
    BatchRead,
    Conditional,
    TransactionCancelled,
    Tx,
    TxItem,
    get_all,
    query_all,
    tx_check,
    tx_delete,
    tx_put,
    tx_update,
)

# Why a contact is suppressed: an SMS STOP, the unsubscribe link, staff, or SES feedback (a hard bounce or a
# complaint, chalicelib/feedback.py).
SOURCES = ("stop", "unsubscribe", "admin", "bounce", "complaint", "invalid_number")
VERSION_PREFIX = "v#"
MANAGE_ID_PREFIX = "m#"
RESUBSCRIBE_LINK_PREFIX = "rs#"
RESUBSCRIBE_CODE_PREFIX = "rc#"


def resubscribe_link_key(link_id: str) -> str:
    """The key of a pending re-subscribe email's link."""
    return f"{RESUBSCRIBE_LINK_PREFIX}{link_id}"


def resubscribe_code_key(contact_key: str) -> str:
    """The key of a number's pending re-subscribe code (one at a time per number)."""
    return f"{RESUBSCRIBE_CODE_PREFIX}{contact_key}"


def owed_day(at: float) -> str:
    """The UTC day a proof's message became owed: the partition of the sparse "by-owed" index."""
    return iso(at)[:10]


def version_key(contact_key: str) -> str:
    """The key of a person's manage-link version item."""
    return f"{VERSION_PREFIX}{contact_key}"


def manage_id_key(link_id: str) -> str:
    """The key of a short manage id's item."""
    return f"{MANAGE_ID_PREFIX}{link_id}"


@dataclass(frozen=True)
class PersonLinks:
    """A person's manage-link state: their version, and their current short manage id (None until issued)."""

    version: int = 0
    link_id: str | None = None
    link_at: int = 0

    @classmethod
    def from_item(cls, item: dict[str, Any] | None) -> PersonLinks:
        """The state a `v#` item holds (absent: version 0, no id)."""
        if not item:
            return cls()
        link = item.get("link")
        return cls(int(item.get("version") or 0), str(link) if link else None, int(item.get("link_at") or 0))


@dataclass(frozen=True)
class ManageIssue:
    """A new manage id for a person, over the link state `seen` when it was read."""

    contact_key: str
    seen: PersonLinks
    link_id: str
    expires_at: int


@dataclass(frozen=True)
class ManageId:
    """What a short manage id names: the person, the version it was issued at, and when."""

    contact_key: str
    version: int
    issued_at: int


class OptoutTable:
    """Who must never be queued or messaged."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def not_suppressed_item(self, contact_key: str) -> TxItem:
        """Transaction item: go on only if this person has not opted out."""
        return {
            "ConditionCheck": tx_check(
                self.name,
                {"contact": contact_key},
                # Opt-out at capture: a suppressed contact is never queued (invariant 3).
                "attribute_not_exists(contact)",
                # The record's source decides whether the tap may be answered with a proof message.
                old_on_failure=True,
            )
        }

    def lift_item(self, contact_key: str, sources: tuple[str, ...]) -> TxItem:
        """Transaction item: lift a suppression the person chose (one of `sources`), with a proof they gave."""
        chosen = {f":s{i}": source for i, source in enumerate(sources)}
        return {
            "Delete": tx_delete(
                self.name,
                {"contact": contact_key},
                # Invariant 3's one exception: only an opt-out of the person's own choice is lifted (never a bounce,
                # a complaint or an invalid number), and only once its places have all left their lists.
                f"attribute_exists(contact) AND #source IN ({', '.join(chosen)}) AND attribute_not_exists(leaving)",
                names={"#source": "source"},
                values=chosen,
                old_on_failure=True,
            )
        }

    def undo_item(self, contact_key: str, at: int) -> TxItem:
        """Transaction item: lift the unsubscribe written at `at` (chalicelib/shopper/undo.py), and no other opt-out."""
        return {
            "Delete": tx_delete(
                self.name,
                {"contact": contact_key},
                # Opt-out (invariant 3): only that very unsubscribe by link, never a later or another source's.
                "#source = :unsubscribe AND #at = :at AND attribute_not_exists(leaving)",
                names={"#source": "source", "#at": "at"},
                values={":unsubscribe": "unsubscribe", ":at": int(at)},
                old_on_failure=True,
            )
        }

    # --- Pending proofs of opting back in (chalicelib/shopper/resubscribe.py).

    def pending_proof_item(self, key: str, fields: dict[str, Any], *, now: float, ttl_s: int) -> TxItem:
        """Transaction item: a pending proof (`key` from resubscribe_link_key or resubscribe_code_key) whose message
        is owed from `now`."""
        expires = int(now) + ttl_s
        item = {
            **fields,
            "contact": key,
            "at": int(now),
            "expires_at": expires,
            "ttl": expires,
            "attempts": 0,
            "owed_day": owed_day(now),
            "owed_at": int(now),
        }
        return {
            "Put": tx_put(
                self.name,
                item,
                # One live proof per key: a random link id never reuses another's, and a number's code is replaced
                # only once the last one has expired.
                "attribute_not_exists(contact) OR expires_at <= :now",
                values={":now": int(now)},
            )
        }

    def claim_proof(self, key: str, now: float) -> dict[str, Any] | None:
        """Take a pending proof's owed message for sending (once); the proof as it now stands, or None when its
        message is not owed (sent already, used, or expired)."""
        result = Conditional(self.table).update_item(
            Key={"contact": key},
            UpdateExpression="SET sent_at = :now REMOVE owed_day, owed_at",
            # Exactly once (invariant 6): a redelivered message or the sweep's re-send finds it taken.
            ConditionExpression="attribute_exists(owed_at) AND expires_at > :now AND attribute_not_exists(used_at)",
            ExpressionAttributeValues={":now": int(now)},
            ReturnValues="ALL_NEW",
        )
        return dict(result["Attributes"]) if result is not None else None

    def release_proof(self, key: str, owed_since: float) -> None:
        """A claimed message that provably did not go: owed again, for the retry or the sweep."""
        Conditional(self.table).update_item(
            Key={"contact": key},
            UpdateExpression="SET owed_day = :day, owed_at = :at REMOVE sent_at",
            # Only a proof still waiting for its message (never recreate one that was used or has gone).
            ConditionExpression=(
                "attribute_exists(contact) AND attribute_not_exists(owed_at) AND attribute_not_exists(used_at)"
            ),
            ExpressionAttributeValues={":day": owed_day(owed_since), ":at": int(owed_since)},
        )

    def proof(self, key: str) -> dict[str, Any] | None:
        """A pending proof as stored (used or expired ones too, until their ttl), read strongly consistent."""
        item = self.table.get_item(Key={"contact": key}, ConsistentRead=True).get("Item")
        return dict(item) if item else None

    def try_code(self, key: str, now: float, max_attempts: int) -> dict[str, Any] | None:
        """Count one try at a number's pending code; the proof as it now stands, or None when none is live (none
        sent, expired, used, or out of tries)."""
        result = Conditional(self.table).update_item(
            Key={"contact": key},
            UpdateExpression="ADD attempts :one",
            # A six-digit code gets `max_attempts` guesses, however many addresses guess.
            ConditionExpression=(
                "attribute_exists(nonce) AND attempts < :max AND expires_at > :now AND attribute_not_exists(used_at)"
            ),
            ExpressionAttributeValues={":one": 1, ":max": max_attempts, ":now": int(now)},
            ReturnValues="ALL_NEW",
        )
        return dict(result["Attributes"]) if result is not None else None

    def use_proof_item(self, key: str, now: float, *, nonce: str | None = None) -> TxItem:
        """Transaction item: a pending proof is used (with the change it proves)."""
        values: dict[str, Any] = {":now": int(now)}
        condition = "attribute_exists(contact) AND attribute_not_exists(used_at) AND expires_at > :now"
        if nonce is not None:
            condition += " AND nonce = :nonce"
            values[":nonce"] = nonce
        return {
            "Update": tx_update(
                self.name,
                {"contact": key},
                "SET used_at = :now REMOVE owed_day, owed_at",
                # Single use, before it expires, and for a code only the one that was checked.
                condition,
                values=values,
            )
        }

    def owed_proofs(self, before: float, *, lookback_days: int, page_size: int = 100) -> Iterator[str]:
        """Keys of pending proofs whose message has been owed since at or before `before` (index "by-owed")."""
        last = int(before)
        for back in range(lookback_days, -1, -1):
            for item in query_all(
                self.table,
                IndexName="by-owed",
                KeyConditionExpression=Key("owed_day").eq(owed_day(last - back * 86400)) & Key("owed_at").lte(last),
                Limit=page_size,
            ):
                yield str(item["contact"])

    def add(self, contact_key: str, source: str, now: float, *, leaving: bool = False) -> bool:
        """Suppress a contact; False when it already was (the first reason is kept). With `leaving`, the record also
        says that the contact's places are still to leave their lists, until `left` clears it."""
        item: dict[str, Any] = {"contact": contact_key, "source": source, "at": int(now)}
        if leaving:
            item["leaving"] = True
        written = Conditional(self.table).put_item(
            Item=item,
            # The first opt-out is the fact worth keeping; later ones change nothing.
            ConditionExpression="attribute_not_exists(contact)",
        )
        return written is not None

    def remove(self, contact_key: str) -> bool:
        """Lift a suppression (staff only, on the shopper's request); False when there was none."""
        result = self.table.delete_item(Key={"contact": contact_key}, ReturnValues="ALL_OLD")
        return "Attributes" in result

    def get(self, contact_key: str) -> dict[str, Any] | None:
        """The opt-out record, or None."""
        return self.table.get_item(Key={"contact": contact_key}, ConsistentRead=True).get("Item")

    def suppressed_among(self, contact_keys: list[str]) -> set[str]:
        """Which of these contacts are suppressed, read strongly consistent in batches of 100."""
        read = self.suppression_read(contact_keys)
        # Strongly consistent: an opt-out written a moment ago must be seen (invariant 3); the last look before a
        # batch's sends exists for exactly that moment.
        return self.suppressed_in(get_all(self.table, read.keys, consistent=True, projection=read.projection))

    def suppression_read(self, contact_keys: list[str]) -> BatchRead:
        """The read of these contacts' suppression rows, to make alone or with other tables' (`get_together`)."""
        return BatchRead(self.table, [{"contact": k} for k in dict.fromkeys(contact_keys)], projection="contact")

    @staticmethod
    def suppressed_in(items: Iterable[dict[str, Any]]) -> set[str]:
        """The contacts a suppression read found."""
        return {str(i["contact"]) for i in items}

    def left(self, contact_key: str) -> None:
        """The contact's places have all left their lists: the record no longer says they are still to."""
        Conditional(self.table).update_item(
            Key={"contact": contact_key},
            UpdateExpression="REMOVE leaving",
            # Never recreate a suppression staff lifted meanwhile (an update would create the item).
            ConditionExpression="attribute_exists(leaving)",
        )

    def leaving_among(self, contact_keys: list[str]) -> dict[str, bool]:
        """Which of these contacts are suppressed (eventually consistent, in batches of 100), each with whether its
        places are still to leave their lists (an opt-out a crash cut short)."""
        keys = [{"contact": k} for k in dict.fromkeys(contact_keys)]
        items = get_all(self.table, keys, projection="contact, leaving")
        return {str(i["contact"]): bool(i.get("leaving")) for i in items}

    # --- Manage-link versions (revocation of a person's links).

    def manage_version(self, contact_key: str) -> int:
        """The person's current manage-link version (0 until they first sign out everywhere)."""
        item = self.table.get_item(Key={"contact": version_key(contact_key)}, ConsistentRead=True).get("Item")
        return int(item.get("version") or 0) if item else 0

    def bump_manage_version(self, contact_key: str, now: float) -> int:
        """Sign the person out everywhere: raise their manage-link version and forget their short manage id (the
        ids already sent name a lower version, so they are refused); returns the new version."""
        result = self.table.update_item(
            Key={"contact": version_key(contact_key)},
            UpdateExpression="ADD version :one SET #at = :now REMOVE link, link_at",
            ExpressionAttributeNames={"#at": "at"},
            ExpressionAttributeValues={":one": 1, ":now": int(now)},
            ReturnValues="UPDATED_NEW",
        )
        return int(result["Attributes"]["version"])

    # --- Short manage ids (the SMS's `/m/{id}` links).

    def people_links(self, contact_keys: list[str]) -> dict[str, PersonLinks]:
        """The manage-link state of these people (absent ones: version 0, no id), read in batches of 100."""
        unique = list(dict.fromkeys(contact_keys))
        # Strongly consistent: a sign-out a moment ago must not see its old id handed out again.
        items = get_all(self.table, [{"contact": version_key(k)} for k in unique], consistent=True)
        found = {str(i["contact"])[len(VERSION_PREFIX) :]: PersonLinks.from_item(i) for i in items}
        return {k: found.get(k, PersonLinks()) for k in unique}

    def person_links(self, contact_key: str) -> PersonLinks:
        """One person's manage-link state, read strongly consistent."""
        item = self.table.get_item(Key={"contact": version_key(contact_key)}, ConsistentRead=True).get("Item")
        return PersonLinks.from_item(item)

    def issue_manage_ids(self, issues: list[ManageIssue], now: float) -> set[str]:
        """Make each issue's id its person's current manage id, in place of the one it saw, all in one transaction
        (a batch of notices is at most 49 people: 98 items of the 100 a transaction holds). Returns the contact
        keys whose person's state moved since it was read (another message issued an id, or they signed out):
        those are left out and the rest issued; read them again."""
        pending = Tx()
        for issue in issues:
            pending.add(issue.contact_key, *self._issue_items(issue, now))
        refused: set[str] = set()
        while pending.items:
            try:
                pending.run(self.table.meta.client)
                return refused
            except TransactionCancelled as cancelled:
                moved = {
                    i.contact_key for i in issues if pending.has(i.contact_key) and cancelled.failed(i.contact_key)
                }
                if not moved:
                    raise
                refused |= moved
                pending = pending.without(*moved)
        return refused

    def _issue_items(self, issue: ManageIssue, now: float) -> tuple[TxItem, TxItem]:
        seen = issue.seen
        # Only over the id that was read (none, or the old one being renewed), at the version read: a concurrent
        # message's id wins, and a sign-out in between (a new version, no id) must not get an id at the old one.
        values: dict[str, Any] = {":id": issue.link_id, ":now": int(now), ":v": seen.version}
        if seen.link_id is None:
            current = "attribute_not_exists(link)"
        else:
            current = "link = :old"
            values[":old"] = seen.link_id
        current += " AND (attribute_not_exists(version) OR version = :v)"
        named = {
            "contact": manage_id_key(issue.link_id),
            "k": issue.contact_key,
            "version": seen.version,
            "at": int(now),
            "ttl": int(issue.expires_at),
        }
        # An id names one person for good: a (never expected) collision must not take over another's.
        put: TxItem = {"Put": tx_put(self.name, named, "attribute_not_exists(contact)")}
        key = {"contact": version_key(issue.contact_key)}
        update: TxItem = {"Update": tx_update(self.name, key, "SET link = :id, link_at = :now", current, values=values)}
        return put, update

    def manage_id(self, link_id: str) -> ManageId | None:
        """What a short manage id names, or None for an id never issued (one GetItem, whatever the id)."""
        item = self.table.get_item(Key={"contact": manage_id_key(link_id)}, ConsistentRead=True).get("Item")
        if not item or not isinstance(item.get("k"), str):
            return None
        return ManageId(str(item["k"]), int(item.get("version") or 0), int(item.get("at") or 0))
