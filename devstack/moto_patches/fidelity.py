"""Fidelity patches: make the embedded emulator behave like DynamoDB under concurrency.

moto evaluates a condition and then writes without holding a lock, so two threads can both pass
`attribute_not_exists`. Real DynamoDB serialises writes to an item and runs transactions atomically.
Holding one lock around every table operation gives the emulator that guarantee, which the
concurrency tests (and the local stack, which serves requests on threads) depend on.

moto also deep-copies every table a transaction names, so that it can roll back; with a waiting list of
thousands that costs a quarter of a second per transaction. A transaction can only change the items it
names, so the snapshot here copies just those (and the partitions holding them): same rollback, far less work.
"""

from __future__ import annotations

import copy
import functools
import threading
from typing import Any

_LOCK = threading.RLock()
_OPERATIONS = (
    "put_item",
    "update_item",
    "delete_item",
    "get_item",
    "query",
    "scan",
    "batch_get_item",
    "batch_write_item",
    "transact_write_items",
    "transact_get_items",
)


def _replace(owner: Any, name: str, value: Any) -> None:
    """Put `value` in place of a moto class's attribute (a method, or a hook the class lacks): what a patch does,
    and what a type checker rightly refuses when it is written as an assignment."""
    setattr(owner, name, value)


def _locked(fn: Any) -> Any:
    @functools.wraps(fn)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return fn(self, *args, **kwargs)

    locked._bisn_serialised = True  # type: ignore[attr-defined]
    return locked


def install() -> None:
    """Wrap the emulator's DynamoDB operations in one lock, and copy only named items for rollback (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    for name in _OPERATIONS:
        original = getattr(DynamoDBBackend, name)
        if not getattr(original, "_bisn_serialised", False):
            setattr(DynamoDBBackend, name, _locked(original))
    # The request handler reads items outside the backend (copies one before an update, writes the answer from
    # the stored item): a whole request holds the lock too, so it never reads an item another thread is changing.
    if not getattr(DynamoHandler.call_action, "_bisn_serialised", False):
        _replace(DynamoHandler, "call_action", _locked(DynamoHandler.call_action))
    _snapshot_only_named_items()


_TRANSACTION = threading.local()


def _named_keys(backend: Any, transact_items: list[dict[str, Any]]) -> dict[str, list[tuple[Any, Any]]]:
    """(hash, range) keys of every item a transaction names, by table."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    keys: dict[str, list[tuple[Any, Any]]] = {}
    for entry in transact_items:
        op = next(iter(entry.values()), None)
        if not isinstance(op, dict):
            continue
        table = backend.tables.get(op.get("TableName"))
        key = op.get("Key") or op.get("Item") or {}
        if table is None or table.hash_key_attr not in key:
            continue
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr in key else None
        keys.setdefault(table.name, []).append((DynamoType(key[table.hash_key_attr]), range_value))
    return keys


def _snapshot(table: Any, keys: list[tuple[Any, Any]]) -> Any:
    """A copy of `table` as it is now, for rollback: shared structure, private copies of the named items."""
    clone = copy.copy(table)
    clone.items = copy.copy(table.items)
    for hash_value, range_value in keys:
        if table.range_key_attr is None:
            if hash_value in table.items:
                clone.items[hash_value] = copy.deepcopy(table.items[hash_value])
            continue
        partition = table.items.get(hash_value)
        if partition is None:
            continue
        if clone.items[hash_value] is partition:
            clone.items[hash_value] = dict(partition)
        if range_value in partition:
            clone.items[hash_value][range_value] = copy.deepcopy(partition[range_value])
    return clone


def _snapshot_only_named_items() -> None:
    """Make moto's transaction rollback copy only what the transaction can change (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    original = DynamoDBBackend.transact_write_items
    if getattr(original, "_bisn_snapshots", False):
        return

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> Any:
        _TRANSACTION.keys = _named_keys(self, transact_items)
        # moto takes its rollback copy of a table once per item named, all before the first write: one
        # snapshot per table serves them all, so a transaction of many items is not quadratic in its size.
        _TRANSACTION.snapshots = {}
        try:
            return original(self, transact_items)
        finally:
            _TRANSACTION.keys = None
            _TRANSACTION.snapshots = None

    def deepcopy_table(table: Any, memo: dict[int, Any]) -> Any:
        keys = getattr(_TRANSACTION, "keys", None)
        if keys is not None and table.name in keys:
            snapshots = _TRANSACTION.snapshots
            if table.name not in snapshots:
                snapshots[table.name] = _snapshot(table, keys[table.name])
            return snapshots[table.name]
        # Anywhere else (a backup, say) a table is copied in full, exactly as before.
        clone = table.__class__.__new__(table.__class__)
        memo[id(table)] = clone
        for name, value in table.__dict__.items():
            setattr(clone, name, copy.deepcopy(value, memo))
        return clone

    transact_write_items._bisn_snapshots = True  # type: ignore[attr-defined]
    _replace(DynamoDBBackend, "transact_write_items", transact_write_items)
    _replace(Table, "__deepcopy__", deepcopy_table)
