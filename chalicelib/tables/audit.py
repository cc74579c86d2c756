"""bisn-audit: append-only facts per SKU, so every decision can be explained afterwards."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from boto3.dynamodb.conditions import Key

from chalicelib.clock import iso
from chalicelib.tables.base import Conditional, Tx, TxItem, query_all, tx_put

# Facts written per transaction when many are recorded at once (DynamoDB allows up to 100 items).
FACTS_PER_TRANSACTION = 25
# Append-only: a fact is written once and never overwritten.
APPEND_ONLY = "attribute_not_exists(ts)"
# The attributes of a fact that name a person (keyed hashes): erasure removes them.
PERSON_FIELDS = ("contact_key", "previous_key")
# Facts read per page while a person's facts are anonymised.
ERASE_PAGE = 100


class AuditTable:
    """Facts about restocks, notices, holds and refusals. Contacts appear only as keyed hashes.

    Each fact carries a `ttl` (`retention_s` after it was written: AUDIT_RETENTION_DAYS), and DynamoDB's TTL deletes
    it past that, so the table keeps a bounded history.
    """

    def __init__(self, table: Any, retention_s: int) -> None:
        self.table = table
        self.retention_s = retention_s

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def fact(self, sku: str, kind: str, now: float, **facts: Any) -> dict[str, Any]:
        """One fact as its row, not yet written (for `record_many`)."""
        clean = {k: v for k, v in facts.items() if v is not None and v != ""}
        # 48 random bits after the microsecond: a thousand facts stamped in one instant still never share a key.
        return {
            "sku": sku,
            "ts": f"{iso(now)}#{secrets.token_hex(6)}",
            "kind": kind,
            "at": int(now),
            **clean,
            "ttl": int(now) + self.retention_s,
        }

    def record(self, sku: str, kind: str, now: float, **facts: Any) -> dict[str, Any]:
        """Append one fact."""
        item = self.fact(sku, kind, now, **facts)
        self.table.put_item(Item=item, ConditionExpression=APPEND_ONLY)
        return item

    def record_many(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append many facts (rows from `fact`), up to 25 to a transaction of conditional puts."""
        client = self.table.meta.client
        for start in range(0, len(rows), FACTS_PER_TRANSACTION):
            # A transaction rather than BatchWriteItem: each put keeps its condition, and the functions' roles
            # keep PutItem as their only write to this table (BatchWriteItem could delete as well).
            Tx().add("facts", *(self._put(row) for row in rows[start : start + FACTS_PER_TRANSACTION])).run(client)

    def _put(self, row: dict[str, Any]) -> TxItem:
        return {"Put": tx_put(self.name, row, APPEND_ONLY)}

    def record_item(self, sku: str, kind: str, now: float, **facts: Any) -> TxItem:
        """Transaction item appending one fact together with the change it describes."""
        return self._put(self.fact(sku, kind, now, **facts))

    def for_sku(self, sku: str, *, newest_first: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        """The facts about one SKU, in time order."""
        kwargs: dict[str, Any] = {"KeyConditionExpression": Key("sku").eq(sku), "ScanIndexForward": not newest_first}
        items = []
        for item in query_all(self.table, **kwargs):
            items.append(item)
            if limit is not None and len(items) >= limit:
                break
        return items

    def for_contact(self, contact_key: str) -> list[dict[str, Any]]:
        """The facts that mention one person (by keyed hash), in time order."""
        return list(
            query_all(self.table, IndexName="by-contact", KeyConditionExpression=Key("contact_key").eq(contact_key))
        )

    def for_sku_since(self, sku: str, since_ts: str) -> list[dict[str, Any]]:
        """The facts about one SKU from `since_ts` (an ISO-8601 prefix of `ts`) on, in time order."""
        return list(query_all(self.table, KeyConditionExpression=Key("sku").eq(sku) & Key("ts").gte(since_ts)))

    def anonymise_contact(self, contact_key: str) -> int:
        """Take one person's keyed hash off every fact that names them; how many facts were changed.

        The facts stay (restock counts and other people's explanations are built from them) but no longer say
        whose they were, so they also leave the "by-contact" index. Found through that index a page at a time,
        never a scan; each change is conditional on the fact still naming this person. Staff only (`bisn forget`,
        chalicelib/support_desk.py): the functions' roles may only append to this table, so none of them could run it.
        """
        changed = 0
        kwargs: dict[str, Any] = {
            "IndexName": "by-contact",
            "KeyConditionExpression": Key("contact_key").eq(contact_key),
            "ProjectionExpression": "sku, ts",
            "Limit": ERASE_PAGE,
        }
        while True:
            page = self.table.query(**kwargs)
            for item in page.get("Items", []):
                anonymised = Conditional(self.table).update_item(
                    Key={"sku": item["sku"], "ts": item["ts"]},
                    UpdateExpression="REMOVE " + ", ".join(PERSON_FIELDS),
                    ConditionExpression="contact_key = :k",
                    ExpressionAttributeValues={":k": contact_key},
                )
                # Refused when the index was behind: the fact was already anonymised.
                if anonymised is not None:
                    changed += 1
            if "LastEvaluatedKey" not in page:
                return changed
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
