"""Shared DynamoDB plumbing: transactions, and translating ClientError codes into domain signals."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, Self, TypedDict, TypeVar, Unpack, overload

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

TxItem = dict[str, Any]
_deserializer = TypeDeserializer()

CONDITION_FAILED = "ConditionalCheckFailed"


class Row(Protocol):
    """A typed row: parsed from a stored item at the boundary (`Request`, `Offer`, `UniqueItem`, `WaitingShard`...)."""

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self: ...


R = TypeVar("R", bound=Row)


class TableRole:
    """One role a table's items play, over the table's boto3 resource: several roles may share one table, each
    under keys of its own, so a caller names what it uses the table for."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)


TRANSACTION_CONFLICT = "TransactionConflict"


@dataclass(frozen=True)
class Reason:
    """Why one item of a cancelled transaction failed, with its old image when asked for."""

    code: str
    item: dict[str, Any] | None


class TransactionCancelled(Exception):
    """A TransactWriteItems was cancelled; `reasons` lines up with the items sent.

    A transaction built with `Tx` is read back by the names its items were added under (`failed("catalog")`,
    `old("unique")`), never by position, so adding an item never changes what another one means.
    """

    def __init__(self, reasons: Sequence[Reason], names: Mapping[str, Sequence[int]] | None = None) -> None:
        super().__init__(", ".join(r.code for r in reasons))
        self.reasons = list(reasons)
        self._names = {name: list(slots) for name, slots in (names or {}).items()}

    def _slots(self, which: str) -> list[int]:
        if which not in self._names:
            raise KeyError(f"no item named {which!r} in this transaction ({', '.join(self._names)})")
        return self._names[which]

    def has(self, which: str) -> bool:
        """Whether the transaction held an item named `which` (a part some transactions leave out)."""
        return which in self._names

    def failed(self, which: str) -> bool:
        """True when the item (or any item of the group) named `which` failed its condition."""
        return any(i < len(self.reasons) and self.reasons[i].code == CONDITION_FAILED for i in self._slots(which))

    def failed_other_than(self, *names: str) -> bool:
        """True when any item outside the named ones failed its condition."""
        skip = {i for name in names for i in self._slots(name)}
        return any(r.code == CONDITION_FAILED for i, r in enumerate(self.reasons) if i not in skip)

    @overload
    def old(self, which: str) -> dict[str, Any] | None: ...

    @overload
    def old(self, which: str, row: type[R]) -> R | None: ...

    def old(self, which: str, row: type[R] | None = None) -> R | dict[str, Any] | None:
        """The old image of the item named `which`, when it failed and one was returned: as the typed `row` it is
        stored as (`cancelled.old("unique", UniqueItem)`), or as stored for an item no row type describes."""
        for i in self._slots(which):
            if i < len(self.reasons) and self.reasons[i].item is not None:
                item = self.reasons[i].item
                return row.from_item(item) if row is not None and item is not None else item
        return None

    @property
    def conflicted(self) -> bool:
        """True when another transaction touched the same items at the same moment."""
        return any(r.code == TRANSACTION_CONFLICT for r in self.reasons)


class Tx:
    """One TransactWriteItems, built item by item under names the caller reads a cancellation back by.

    A name may stand for a group of items (a place and its uniqueness item are both "place"). `without`
    gives the same transaction less some names, for the retry that leaves out what was refused.
    """

    def __init__(self) -> None:
        self.items: list[TxItem] = []
        self._names: dict[str, list[int]] = {}

    def add(self, name: str, *items: TxItem) -> Tx:
        """Add `items` under `name` (a name is used once per transaction)."""
        if name in self._names:
            raise ValueError(f"{name!r} is already in this transaction")
        start = len(self.items)
        self.items.extend(items)
        self._names[name] = list(range(start, len(self.items)))
        return self

    def join(self, other: Tx) -> Tx:
        """Add every named item of `other` (a part another module builds, like the items that take a place off)."""
        for name, slots in other._names.items():
            self.add(name, *(other.items[i] for i in slots))
        return self

    def has(self, name: str) -> bool:
        """Whether an item was added under `name`."""
        return name in self._names

    def without(self, *names: str) -> Tx:
        """A copy of this transaction with the named items left out."""
        copy = Tx()
        for name, slots in self._names.items():
            if name not in names:
                copy.add(name, *(self.items[i] for i in slots))
        return copy

    def run(self, client: Any, *, attempts: int = 6) -> None:
        """Run it (see `transact`); a cancellation is raised with this transaction's names."""
        try:
            transact(client, self.items, attempts=attempts)
        except TransactionCancelled as cancelled:
            raise TransactionCancelled(cancelled.reasons, self._names) from cancelled


def error_code(exc: ClientError) -> str:
    """The AWS error code of a ClientError (never its message text)."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def update_alone(table: Any, item: TxItem) -> bool:
    """Apply a transaction item's Update as a single write; False when its condition refuses it."""
    update = {k: v for k, v in item["Update"].items() if k != "TableName"}
    return Conditional(table).update_item(**update) is not None


class Conditional:
    """A single write to `table` that its condition may refuse: the answer DynamoDB gave, or None when the condition
    refused the write. Any other error is raised as it came.

    Its methods are the boto3 table's, under the same names, so a table method still names the write it makes (which
    is what the check of each function's IAM policy reads, tests/code_paths.py).
    """

    def __init__(self, table: Any) -> None:
        self.table = table

    def update_item(self, **kwargs: Any) -> dict[str, Any] | None:
        """UpdateItem, or None when refused."""
        return self._unless_refused(self.table.update_item, kwargs)

    def put_item(self, **kwargs: Any) -> dict[str, Any] | None:
        """PutItem, or None when refused."""
        return self._unless_refused(self.table.put_item, kwargs)

    def delete_item(self, **kwargs: Any) -> dict[str, Any] | None:
        """DeleteItem, or None when refused."""
        return self._unless_refused(self.table.delete_item, kwargs)

    def _unless_refused(self, write: Callable[..., dict[str, Any]], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return write(**kwargs)
        except self.table.meta.client.exceptions.ConditionalCheckFailedException:
            return None


# Transaction items. Each builder gives the body of one item and the table method wraps it under its kind
# (`{"Update": tx_update(...)}`): the kind stays written in the method that builds the item, where the check of each
# function's IAM policy reads what a method writes (tests/code_paths.py). A part left None is left out of the item.


class TxParts(TypedDict, total=False):
    """What an item of any kind may carry besides its target and condition."""

    names: dict[str, str] | None  # ExpressionAttributeNames
    values: dict[str, Any] | None  # ExpressionAttributeValues
    old_on_failure: bool  # a refusal hands back the item as stored, for the caller to read (`TransactionCancelled.old`)


def tx_put(table: str, item: dict[str, Any], condition: str | None = None, **parts: Unpack[TxParts]) -> dict[str, Any]:
    """The body of a Put of `item` into `table` (a full name)."""
    return _tx_body(table, {"Item": item}, condition, parts)


def tx_update(
    table: str, key: dict[str, Any], update: str, condition: str | None = None, **parts: Unpack[TxParts]
) -> dict[str, Any]:
    """The body of an Update of the item at `key` by the UpdateExpression `update`."""
    return _tx_body(table, {"Key": key, "UpdateExpression": update}, condition, parts)


def tx_delete(
    table: str, key: dict[str, Any], condition: str | None = None, **parts: Unpack[TxParts]
) -> dict[str, Any]:
    """The body of a Delete of the item at `key`."""
    return _tx_body(table, {"Key": key}, condition, parts)


def tx_check(table: str, key: dict[str, Any], condition: str, **parts: Unpack[TxParts]) -> dict[str, Any]:
    """The body of a ConditionCheck of the item at `key`, which writes nothing."""
    return _tx_body(table, {"Key": key}, condition, parts)


def _tx_body(table: str, target: dict[str, Any], condition: str | None, parts: TxParts) -> dict[str, Any]:
    body: dict[str, Any] = {"TableName": table, **target}
    if condition is not None:
        body["ConditionExpression"] = condition
    if parts.get("names") is not None:
        body["ExpressionAttributeNames"] = parts["names"]
    if parts.get("values") is not None:
        body["ExpressionAttributeValues"] = parts["values"]
    if parts.get("old_on_failure"):
        body["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return body


def _reasons(exc: ClientError, count: int) -> list[Reason]:
    raw = exc.response.get("CancellationReasons") or []
    reasons = []
    for entry in raw:
        # An attribute name -> AttributeValue map (botocore-stubs type it as one {key, value} pair).
        item: Mapping[str, Any] | None = entry.get("Item")
        decoded = {k: _deserializer.deserialize(v) for k, v in item.items()} if item else None
        reasons.append(Reason(str(entry.get("Code", "None")), decoded))
    reasons.extend(Reason("None", None) for _ in range(count - len(reasons)))
    return reasons


def transact(client: Any, items: Sequence[TxItem], *, attempts: int = 6) -> None:
    """Run TransactWriteItems, retrying only on conflicts with other transactions; raise TransactionCancelled."""
    for attempt in range(attempts):
        try:
            # A list: boto3 serialises plain values in place only inside lists, never tuples.
            client.transact_write_items(TransactItems=list(items))
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
    return _every_page(table.query, kwargs)


def scan_all(table: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item of a Scan, following pagination."""
    return _every_page(table.scan, kwargs)


def _every_page(read: Callable[..., dict[str, Any]], kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    # A Query and a Scan page alike: each page's last key starts the next, until a page has none.
    while True:
        page = read(**kwargs)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def get_all(
    table: Any, keys: Sequence[dict[str, Any]], *, consistent: bool = False, projection: str | None = None
) -> Iterator[dict[str, Any]]:
    """The items of `keys` that exist, read with BatchGetItem 100 keys at a time (its limit), unprocessed keys asked
    for again; in no particular order. Keys must be unique (BatchGetItem refuses a request naming one twice)."""
    client = table.meta.client
    name = str(table.name)
    for start in range(0, len(keys), 100):
        batch: dict[str, Any] = {"Keys": list(keys[start : start + 100]), "ConsistentRead": consistent}
        if projection:
            batch["ProjectionExpression"] = projection
        request: dict[str, Any] = {name: batch}
        while request:
            page = client.batch_get_item(RequestItems=request)
            yield from page.get("Responses", {}).get(name, [])
            request = page.get("UnprocessedKeys") or {}


@dataclass(frozen=True)
class BatchRead:
    """Some items of one table, to be read with others in one BatchGetItem (`get_together`)."""

    table: Any
    keys: Sequence[dict[str, Any]]  # unique, as BatchGetItem requires
    projection: str | None = None
    names: Mapping[str, str] | None = None  # the projection's attribute names that are reserved words


def get_together(reads: Sequence[BatchRead], *, consistent: bool = False) -> list[list[dict[str, Any]]]:
    """The items of several tables' reads that exist, each read's in a list of its own (in no particular order).

    One BatchGetItem call while the keys fit its limit of 100 (a look the notifier makes per batch of offers);
    more keys than that are read 100 at a time, table by table. Unprocessed keys are asked for again.
    """
    if sum(len(r.keys) for r in reads) > 100 or not reads:
        return [
            [
                item
                for start in range(0, len(r.keys), 100)
                for item in get_together([_part(r, start)], consistent=consistent)[0]
            ]
            for r in reads
        ]
    client = reads[0].table.meta.client
    request: dict[str, Any] = {}
    for read in reads:
        if not read.keys:
            continue
        batch: dict[str, Any] = {"Keys": list(read.keys), "ConsistentRead": consistent}
        if read.projection:
            batch["ProjectionExpression"] = read.projection
        if read.names:
            batch["ExpressionAttributeNames"] = dict(read.names)
        request[str(read.table.name)] = batch
    found: dict[str, list[dict[str, Any]]] = {str(r.table.name): [] for r in reads}
    while request:
        page = client.batch_get_item(RequestItems=request)
        for name, items in page.get("Responses", {}).items():
            found[name].extend(items)
        request = page.get("UnprocessedKeys") or {}
    return [found[str(r.table.name)] for r in reads]


def _part(read: BatchRead, start: int) -> BatchRead:
    return BatchRead(read.table, read.keys[start : start + 100], read.projection, read.names)


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


def int_or_none(value: Any) -> int | None:
    """A stored number (DynamoDB hands back Decimal) as int, or None when the attribute is absent."""
    return None if value is None else int(value)


def str_or_none(value: Any) -> str | None:
    """A stored string attribute, or None when it is absent."""
    return None if value is None else str(value)


def present(item: dict[str, Any]) -> dict[str, Any]:
    """An item without its absent (None) attributes: DynamoDB stores no nulls for what a row lacks."""
    return {k: v for k, v in item.items() if v is not None}
