"""Makes the embedded emulator behave like DynamoDB under concurrency.

moto evaluates a condition and then writes without holding a lock, so two threads can both pass
`attribute_not_exists`. Real DynamoDB serialises writes to an item and runs transactions atomically.
Holding one lock around every table operation gives the emulator that guarantee, which the
concurrency tests (and the local stack, which serves requests on threads) depend on.
"""

from __future__ import annotations

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


def serialise_dynamodb() -> None:
    """Wrap the emulator's DynamoDB operations in one lock (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend

    for name in _OPERATIONS:
        original = getattr(DynamoDBBackend, name)
        if getattr(original, "_bisn_serialised", False):
            continue

        def make(fn: Any) -> Any:
            @functools.wraps(fn)
            def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
                with _LOCK:
                    return fn(self, *args, **kwargs)

            locked._bisn_serialised = True  # type: ignore[attr-defined]
            return locked

        setattr(DynamoDBBackend, name, make(original))
