"""bisn-optout: the suppression list, keyed by a keyed hash of the contact (never the contact itself)."""

from __future__ import annotations

from typing import Any

from chalicelib.tables.base import TxItem

# Why a contact is suppressed: an SMS STOP, the unsubscribe link, staff, or SES feedback (a hard bounce or a
# complaint, chalicelib/feedback.py).
SOURCES = ("stop", "unsubscribe", "admin", "bounce", "complaint")


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

    def add(self, contact_key: str, source: str, now: float) -> bool:
        """Suppress a contact; False when it already was (the first reason is kept)."""
        try:
            self.table.put_item(
                Item={"contact": contact_key, "source": source, "at": int(now)},
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
