"""Counting AWS calls with botocore's event hooks, and what DynamoDB would bill for them.

Every client the services build comes from one boto3 session; a `before-call` handler registered on
that session sees every call they make (and `after-call` sees what each returned). A `CallLog` keeps
them by service and operation, and estimates DynamoDB request units from the requests themselves:

- a write is 1 unit per started KB of the item (2 inside a transaction, condition checks included),
  plus 1 for each global secondary index it lands in: a new item in each index whose key attributes
  it has, an update in each index whose key attributes it sets or removes (an update to other
  attributes of an item already in an index also costs an index write; that is not counted);
- a read is 1 unit per started 4 KB returned, at least 1 per call, as for a strongly consistent read
  (most of the app's reads are; an eventually consistent one costs half, so this is an upper bound).

These are estimates from request and response sizes, not DynamoDB's own consumed-capacity figures.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WRITES = ("PutItem", "UpdateItem", "DeleteItem")


def index_keys(template: Path = ROOT / "infra" / "template.json") -> dict[str, list[set[str]]]:
    """Each table's global secondary indexes as sets of key attributes, by the table's short name."""
    resources = json.loads(template.read_text())["Resources"]
    found: dict[str, list[set[str]]] = {}
    for resource in resources.values():
        if resource.get("Type") != "AWS::DynamoDB::Table":
            continue
        props = resource["Properties"]
        short = str(props["TableName"]["Fn::Sub"]).split("}-", 1)[1]
        found[short] = [{k["AttributeName"] for k in g["KeySchema"]} for g in props.get("GlobalSecondaryIndexes", [])]
    return found


def _size_kb(value: Any) -> int:
    return max(1, math.ceil(len(json.dumps(value, default=str)) / 1024))


@dataclass
class CallLog:
    """AWS calls seen since the last reset, with estimated DynamoDB request units."""

    name_prefix: str
    indexes: dict[str, list[set[str]]] = field(default_factory=index_keys)
    calls: Counter[str] = field(default_factory=Counter)
    write_units: float = 0.0
    read_units: float = 0.0
    call_seconds: float = 0.0  # time spent inside calls, summed over threads
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _started: threading.local = field(default_factory=threading.local)

    def register(self, session: Any) -> None:
        """Watch every client that `session` builds from now on."""
        session.events.register("before-call", self._before)
        session.events.register("after-call", self._timed)
        session.events.register("after-call.dynamodb", self._after)

    def reset(self) -> None:
        """Start counting afresh."""
        with self._lock:
            self.calls.clear()
            self.write_units = self.read_units = self.call_seconds = 0.0

    def snapshot(self) -> dict[str, Any]:
        """What was counted: calls by service.operation, total calls, and DynamoDB units."""
        with self._lock:
            return {
                "calls": dict(self.calls),
                "total": sum(self.calls.values()),
                "write_units": self.write_units,
                "read_units": self.read_units,
                "call_seconds": self.call_seconds,
            }

    # --- hooks

    def _before(self, model: Any, params: Any, **_: Any) -> None:
        service = model.service_model.service_name
        body = params.get("body") if isinstance(params, dict) else None
        request = json.loads(body) if service == "dynamodb" and body else {}
        self._started.at = time.perf_counter()
        with self._lock:
            self.calls[f"{service}.{model.name}"] += 1
            if service == "dynamodb":
                self.write_units += self._write_units(model.name, request)

    def _timed(self, **_: Any) -> None:
        started = getattr(self._started, "at", None)
        if started is not None:
            with self._lock:
                self.call_seconds += time.perf_counter() - started

    def _after(self, model: Any, parsed: Any, **_: Any) -> None:
        with self._lock:
            self.read_units += self._read_units(model.name, parsed or {})

    # --- DynamoDB units

    def _short(self, table: str) -> str:
        return table.removeprefix(self.name_prefix + "-")

    def _index_writes(self, table: str, touched: set[str], *, whole_item: bool = False) -> int:
        """Index writes: a new item lands in each index whose keys it all has; an update, in each whose keys it sets."""
        indexes = self.indexes.get(self._short(table), [])
        if whole_item:
            return sum(1 for keys in indexes if keys <= touched)
        return sum(1 for keys in indexes if keys & touched)

    def _item_units(self, op: str, item: dict[str, Any], factor: int) -> float:
        table = str(item.get("TableName", ""))
        if op in ("Put", "PutItem"):
            data = item.get("Item", {})
            return factor * _size_kb(data) + self._index_writes(table, set(data), whole_item=True)
        if op in ("Update", "UpdateItem"):
            expression = str(item.get("UpdateExpression", ""))
            names = item.get("ExpressionAttributeNames", {})
            touched = {names.get(token, token) for token in re.findall(r"#?\w+", expression)}
            return factor + self._index_writes(table, touched)
        if op in ("Delete", "DeleteItem"):
            # Deleting an item removes it from every index that holds it.
            return factor + len(self.indexes.get(self._short(table), []))
        return float(factor)  # ConditionCheck

    def _write_units(self, operation: str, request: dict[str, Any]) -> float:
        if operation in WRITES:
            return self._item_units(operation, request, 1)
        if operation == "TransactWriteItems":
            return sum(
                self._item_units(op, item, 2)
                for entry in request.get("TransactItems", [])
                for op, item in entry.items()
            )
        if operation == "BatchWriteItem":
            units = 0.0
            for table, entries in request.get("RequestItems", {}).items():
                for entry in entries:
                    put = entry.get("PutRequest")
                    units += self._item_units("Put", {"TableName": table, **put}, 1) if put else 1
            return units
        return 0.0

    def _read_units(self, operation: str, parsed: dict[str, Any]) -> float:
        if operation == "GetItem":
            return 1.0
        if operation in ("Query", "Scan"):
            items = parsed.get("Items", [])
            return max(1, math.ceil(len(json.dumps(items, default=str)) / 4096))
        if operation == "BatchGetItem":
            return float(sum(len(v) for v in parsed.get("Responses", {}).values()) or 1)
        return 0.0
