"""Shared DynamoDB plumbing: transactions, and translating ClientError codes into domain signals."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

TxItem = dict[str, Any]
_deserializer = TypeDeserializer()

CONDITION_FAILED = "ConditionalCheckFailed"
TRANSACTION_CONFLICT = "TransactionConflict"


@dataclass(frozen=True)
class Reason:
    """Why one item of a cancelled transaction failed, with its old image when asked for."""

    code: str
    item: dict[str, Any] | None


class TransactionCancelled(Exception):
    """A TransactWriteItems was cancelled; `reasons` lines up with the items sent."""

    def __init__(self, reasons: Sequence[Reason]) -> None:
        super().__init__(", ".join(r.code for r in reasons))
        self.reasons = list(reasons)

    def failed(self, index: int) -> bool:
        """True when the item at `index` failed its condition."""
        return index < len(self.reasons) and self.reasons[index].code == CONDITION_FAILED

    def old(self, index: int) -> dict[str, Any] | None:
        """The old image of the item at `index`, when it failed and one was returned."""
        return self.reasons[index].item if index < len(self.reasons) else None

    @property
    def conflicted(self) -> bool:
        """True when another transaction touched the same items at the same moment."""
        return any(r.code == TRANSACTION_CONFLICT for r in self.reasons)


def error_code(exc: ClientError) -> str:
    """The AWS error code of a ClientError (never its message text)."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def update_alone(table: Any, item: TxItem) -> bool:
    """Apply a transaction item's Update as a single write; False when its condition refuses it."""
    update = {k: v for k, v in item["Update"].items() if k != "TableName"}
    try:
        table.update_item(**update)
    except table.meta.client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def _reasons(exc: ClientError, count: int) -> list[Reason]:
    raw = exc.response.get("CancellationReasons") or []
    reasons = []
    for entry in raw:
        item = entry.get("Item")
        decoded = {k: _deserializer.deserialize(v) for k, v in item.items()} if item else None
        reasons.append(Reason(str(entry.get("Code", "None")), decoded))
    reasons.extend(Reason("None", None) for _ in range(count - len(reasons)))
    return reasons


def transact(client: Any, items: list[TxItem], *, attempts: int = 6) -> None:
    """Run TransactWriteItems, retrying only on conflicts with other transactions; raise TransactionCancelled."""
    for attempt in range(attempts):
        try:
            client.transact_write_items(TransactItems=items)
            return
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            cancelled = TransactionCancelled(_reasons(exc, len(items)))
            only_conflicts = cancelled.conflicted and not any(r.code == CONDITION_FAILED for r in cancelled.reasons)
            if only_conflicts and attempt + 1 < attempts:
                # Simultaneous taps on one product collide; a short random back-off lets them through in turn.
                time.sleep(random.uniform(0.005, 0.03) * (attempt + 1))
                continue
            raise cancelled from exc
    raise AssertionError("unreachable")


def query_all(table: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item of a Query, following pagination."""
    while True:
        page = table.query(**kwargs)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def count_all(table: Any, **kwargs: Any) -> int:
    """How many items a Query matches, following pagination."""
    total = 0
    kwargs["Select"] = "COUNT"
    while True:
        page = table.query(**kwargs)
        total += int(page.get("Count", 0))
        if "LastEvaluatedKey" not in page:
            return total
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def plain(value: Any) -> Any:
    """DynamoDB values made JSON-friendly: Decimals become int or float, recursively."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [plain(v) for v in value]
    return value
