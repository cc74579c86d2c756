"""bisn-optout: the suppression list, keyed by a keyed hash of the contact (never the contact itself).

The same table keeps each person's manage-link version under `v#<contact key>` (an item that suppresses
nobody: suppression is the item keyed by the contact key itself). Signing out everywhere raises it, and every
manage link signed at a lower version is refused.
"""

from __future__ import annotations

from typing import Any

from chalicelib.tables.base import TxItem

# Why a contact is suppressed: an SMS STOP, the unsubscribe link, staff, or SES feedback (a hard bounce or a
# complaint, chalicelib/feedback.py).
SOURCES = ("stop", "unsubscribe", "admin", "bounce", "complaint")
VERSION_PREFIX = "v#"


def version_key(contact_key: str) -> str:
    """The key of a person's manage-link version item."""
    return f"{VERSION_PREFIX}{contact_key}"


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
            "ConditionCheck": {
                "TableName": self.name,
                "Key": {"contact": contact_key},
                # Opt-out at capture: a suppressed contact is never queued (invariant 3).
                "ConditionExpression": "attribute_not_exists(contact)",
            }
        }

    def add(self, contact_key: str, source: str, now: float, *, leaving: bool = False) -> bool:
        """Suppress a contact; False when it already was (the first reason is kept). With `leaving`, the record also
        says that the contact's places are still to leave their lists, until `left` clears it."""
        item: dict[str, Any] = {"contact": contact_key, "source": source, "at": int(now)}
        if leaving:
            item["leaving"] = True
        try:
            self.table.put_item(
                Item=item,
                # The first opt-out is the fact worth keeping; later ones change nothing.
                ConditionExpression="attribute_not_exists(contact)",
            )
        except self.table.meta.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def remove(self, contact_key: str) -> bool:
        """Lift a suppression (staff only, on the shopper's request); False when there was none."""
        result = self.table.delete_item(Key={"contact": contact_key}, ReturnValues="ALL_OLD")
        return "Attributes" in result

    def get(self, contact_key: str) -> dict[str, Any] | None:
        """The opt-out record, or None."""
        return self.table.get_item(Key={"contact": contact_key}, ConsistentRead=True).get("Item")

    def suppressed_among(self, contact_keys: list[str]) -> set[str]:
        """Which of these contacts are suppressed, read strongly consistent in batches of 100."""
        found: set[str] = set()
        unique = list(dict.fromkeys(contact_keys))
        resource = self.table.meta.client
        for start in range(0, len(unique), 100):
            request: dict[str, Any] = {
                self.name: {
                    "Keys": [{"contact": k} for k in unique[start : start + 100]],
                    "ProjectionExpression": "contact",
                    # Strongly consistent: an opt-out written a moment ago must be seen (invariant 3); the last
                    # look before a batch's sends exists for exactly that moment.
                    "ConsistentRead": True,
                }
            }
            while request:
                page = resource.batch_get_item(RequestItems=request)
                found.update(str(i["contact"]) for i in page.get("Responses", {}).get(self.name, []))
                request = page.get("UnprocessedKeys") or {}
        return found

    def left(self, contact_key: str) -> None:
        """The contact's places have all left their lists: the record no longer says they are still to."""
        try:
            self.table.update_item(
                Key={"contact": contact_key},
                UpdateExpression="REMOVE leaving",
                # Never recreate a suppression staff lifted meanwhile (an update would create the item).
                ConditionExpression="attribute_exists(leaving)",
            )
        except self.table.meta.client.exceptions.ConditionalCheckFailedException:
            return

    def leaving_among(self, contact_keys: list[str]) -> dict[str, bool]:
        """Which of these contacts are suppressed (eventually consistent, in batches of 100), each with whether its
        places are still to leave their lists (an opt-out a crash cut short)."""
        found: dict[str, bool] = {}
        unique = list(dict.fromkeys(contact_keys))
        resource = self.table.meta.client
        for start in range(0, len(unique), 100):
            request: dict[str, Any] = {
                self.name: {
                    "Keys": [{"contact": k} for k in unique[start : start + 100]],
                    "ProjectionExpression": "contact, leaving",
                }
            }
            while request:
                page = resource.batch_get_item(RequestItems=request)
                for item in page.get("Responses", {}).get(self.name, []):
                    found[str(item["contact"])] = bool(item.get("leaving"))
                request = page.get("UnprocessedKeys") or {}
        return found

    # --- Manage-link versions (revocation of a person's links).

    def manage_version(self, contact_key: str) -> int:
        """The person's current manage-link version (0 until they first sign out everywhere)."""
        item = self.table.get_item(Key={"contact": version_key(contact_key)}, ConsistentRead=True).get("Item")
        return int(item.get("version") or 0) if item else 0

    def manage_versions(self, contact_keys: list[str]) -> dict[str, int]:
        """The manage-link versions of these people (absent ones are 0), read in batches of 100."""
        found: dict[str, int] = {}
        unique = list(dict.fromkeys(contact_keys))
        resource = self.table.meta.client
        for start in range(0, len(unique), 100):
            request: dict[str, Any] = {
                self.name: {
                    "Keys": [{"contact": version_key(k)} for k in unique[start : start + 100]],
                    "ConsistentRead": True,
                }
            }
            while request:
                page = resource.batch_get_item(RequestItems=request)
                for item in page.get("Responses", {}).get(self.name, []):
                    found[str(item["contact"])[len(VERSION_PREFIX) :]] = int(item.get("version") or 0)
                request = page.get("UnprocessedKeys") or {}
        return found

    def bump_manage_version(self, contact_key: str, now: float) -> int:
        """Sign the person out everywhere: raise their manage-link version; returns the new one."""
        result = self.table.update_item(
            Key={"contact": version_key(contact_key)},
            UpdateExpression="ADD version :one SET #at = :now",
            ExpressionAttributeNames={"#at": "at"},
            ExpressionAttributeValues={":one": 1, ":now": int(now)},
            ReturnValues="UPDATED_NEW",
        )
        return int(result["Attributes"]["version"])
