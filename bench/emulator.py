"""A transaction's rollback on the emulator as an undo log of the items it names, for runs of 10,000s of items.

moto backs up every table a transaction names before its first write, and devstack's fidelity patch cuts that
backup to a shallow copy of the table's item map plus the named items. The shallow copy still costs one entry per
item in the table, per transaction: with 170,000 catalogue items (10,000 products and their waiting shards) each
transaction copied a map of 170,000 entries, and those copies lived on in reference cycles until a full garbage
collection, which a heap that size rarely triggers. Catalogue sync of 10,000 products grew to about 23 GB that way,
and took time quadratic in the catalogue's size.

Here the backup is the table itself, and the items the transaction names are saved aside (deep copies, as
before); when the transaction is cancelled they are put back. The same rollback, at a cost of the items named.
"""

from __future__ import annotations

import copy
import functools
import threading
from typing import Any

_MISSING = object()
_UNDO = threading.local()


def _save(table: Any, keys: list[tuple[Any, Any]]) -> Any:
    """Note what the named items are now (once per table per transaction); the table serves as its own backup."""
    saved: dict[str, list[tuple[Any, Any, Any, bool]]] = _UNDO.saved
    if table.name in saved:
        return table
    entries = []
    for hash_value, range_value in keys:
        if table.range_key_attr is None:
            before = table.items.get(hash_value, _MISSING)
            entries.append((hash_value, None, _copy(before), True))
            continue
        partition = table.items.get(hash_value)
        had_partition = partition is not None
        before = partition[range_value] if had_partition and range_value in partition else _MISSING
        entries.append((hash_value, range_value, _copy(before), had_partition))
    saved[table.name] = entries
    return table


def _copy(value: Any) -> Any:
    return value if value is _MISSING else copy.deepcopy(value)


def _restore(backend: Any, saved: dict[str, list[tuple[Any, Any, Any, bool]]]) -> None:
    """Put every named item back as it was before the transaction (newest note last, so replay in reverse)."""
    for name, entries in saved.items():
        table = backend.tables.get(name)
        if table is None:
            continue
        for hash_value, range_value, before, had_partition in reversed(entries):
            if table.range_key_attr is None:
                if before is _MISSING:
                    table.items.pop(hash_value, None)
                else:
                    table.items[hash_value] = before
                continue
            partition = table.items.get(hash_value)
            if before is _MISSING:
                if partition is not None:
                    partition.pop(range_value, None)
                    if not partition and not had_partition:
                        del table.items[hash_value]
            else:
                table.items.setdefault(hash_value, {})[range_value] = before


def install() -> None:
    """Replace the fidelity patch's table copy with the undo log (idempotent; needs the fidelity patches in)."""
    from moto.dynamodb.models import DynamoDBBackend

    from devstack.moto_patches import fidelity

    fidelity.install()
    inner = DynamoDBBackend.transact_write_items
    if getattr(inner, "_bench_undo", False):
        return

    @functools.wraps(inner)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> Any:
        with fidelity._LOCK:
            _UNDO.saved = {}
            try:
                result = inner(self, transact_items)
            except BaseException:
                # moto puts its backups back in place (here, the very tables): the named items go back too.
                _restore(self, _UNDO.saved)
                raise
            finally:
                _UNDO.saved = None
            return result

    transact_write_items._bench_undo = True  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    fidelity._snapshot = _save
