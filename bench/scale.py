"""Capture and the shopper's page at 10 / 1,000 / 10,000 / 50,000 waiting: calls, items read and read units.

Read units are billed as DynamoDB bills them, not by what a call returns: a read costs one unit per started 4 KB
of the items it reads (a Query by the items it evaluates, so a Select=COUNT Query that returns no item still
pays for every item it counted), and an eventually consistent read half of that (DynamoDB developer guide,
"Read/write capacity mode": read request units). Setup builds each list fast, with batch writes of items built by
the table classes themselves (`RequestsTable.join_items`, with their tickets; the catalogue's count and the line's
figures set to match); the measured operations are the real ones.

"before" is the place as `/me` and support read it until now: one COUNT Query over everyone earlier
(`RequestsTable.position`, kept as the tests' oracle).
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.stack import PRODUCT, Stack, stack

SKU = "CHAIR-WALNUT"
SIZES = (10, 1_000, 10_000, 50_000)


@dataclass
class Billed:
    """DynamoDB reads as billed: calls, items read and read units (see the module's docstring)."""

    item_bytes: float  # the mean stored size of one place, for items a COUNT Query reads but does not return
    calls: int = 0
    operations: list[str] = field(default_factory=list)
    items_read: int = 0
    read_units: float = 0.0
    _request: threading.local = field(default_factory=threading.local)

    def register(self, client_meta: Any) -> None:
        client_meta.events.register("before-call.dynamodb", self._before)
        client_meta.events.register("after-call.dynamodb", self._after)

    def reset(self) -> None:
        self.calls, self.items_read, self.read_units = 0, 0, 0.0
        self.operations = []

    def _before(self, model: Any, params: Any, **_: Any) -> None:
        body = params.get("body") if isinstance(params, dict) else None
        self._request.body = json.loads(body) if body else {}
        self.calls += 1
        self.operations.append(f"{model.name} {self._request.body.get('TableName', '').rsplit('-', 1)[-1]}")

    def _after(self, model: Any, parsed: Any, **_: Any) -> None:
        request: dict[str, Any] = getattr(self._request, "body", {})
        half = 1.0 if request.get("ConsistentRead") else 0.5
        if model.name == "GetItem":
            found = parsed.get("Item")
            self.items_read += 1 if found else 0
            self.read_units += half * max(1, math.ceil(len(json.dumps(found or {}, default=str)) / 4096))
        elif model.name == "BatchGetItem":
            # Billed item by item, each rounded up to 4 KB, as a GetItem of it would be.
            for table, items in (parsed.get("Responses") or {}).items():
                half = 1.0 if request.get("RequestItems", {}).get(table, {}).get("ConsistentRead") else 0.5
                self.items_read += len(items)
                self.read_units += sum(half * max(1, math.ceil(len(json.dumps(i, default=str)) / 4096)) for i in items)
        elif model.name == "Query":
            scanned = int(parsed.get("ScannedCount", 0))
            returned = parsed.get("Items")
            size = len(json.dumps(returned, default=str)) if returned else scanned * self.item_bytes
            self.items_read += scanned
            # A Query reads at least one unit, and rounds the whole page up to 4 KB.
            self.read_units += half * max(1, math.ceil(size / 4096))


def build(s: Stack, people: int) -> tuple[str, float, int]:
    """`people` waiting places written fast; (the middle place's contact, the mean stored place's size, the most
    places any one waiting shard counts)."""
    from collections import Counter

    from chalicelib.contacts import contact_key
    from chalicelib.tables.catalog import shard_for, shard_key
    from chalicelib.tables.requests import Request, new_joined_ts
    from chalicelib.tables.throttle import line_key

    services, now = s.services, s.clock.now() - people
    services.tables.catalog.upsert(SKU, dict(PRODUCT))
    sizes = 0
    shards: Counter[int] = Counter()
    with services.tables.requests.table.batch_writer() as batch:
        for i in range(1, people + 1):
            contact = f"+4474{i % 100:02d}0{i:05d}"
            key = contact_key(f"sms:{contact}", services.hash_key)
            shards[shard_for(key)] += 1
            items = services.tables.requests.join_items(
                Request.waiting(
                    sku=SKU,
                    joined_ts=new_joined_ts(now + i * 0.001, i),
                    channel="sms",
                    contact=contact,
                    contact_key=key,
                    waiting_shard=shard_for(key),
                    name="",
                    ttl=int(now) + 90 * 86400,
                    now=now,
                    ticket=i,
                )
            )
            for item in items:
                batch.put_item(Item=item["Put"]["Item"])
            sizes += len(json.dumps(items[1]["Put"]["Item"], default=str))
    # The figures every one of those joins would have moved: the waiting shards' counts and the line's tickets.
    for shard, count in shards.items():
        services.tables.catalog.table.update_item(
            Key={"sku": shard_key(SKU, shard)},
            UpdateExpression="SET waiting_count = :n",
            ExpressionAttributeValues={":n": count},
        )
    services.tables.line_tickets.table.put_item(
        Item={"key": line_key(SKU), "issued": people, "ttl": int(now) + 91 * 86400}
    )
    middle = people // 2 + 1
    return f"+4474{middle % 100:02d}0{middle:05d}", sizes / people, max(shards.values())


def _measure(billed: Billed, action: Callable[[], Any]) -> dict[str, Any]:
    billed.reset()
    action()
    return {
        "calls": billed.calls,
        "operations": list(billed.operations),
        "items_read": billed.items_read,
        "read_units": billed.read_units,
    }


def at_size(people: int) -> dict[str, Any]:
    """A new tap, a `/me` view of the middle place, and the count `/me` made before, on a list of `people`."""
    from chalicelib.contacts import contact_key
    from chalicelib.tables.catalog import WAITING_SHARDS

    with stack() as s:
        started = time.perf_counter()
        contact, item_bytes, fullest = build(s, people)
        built_s = time.perf_counter() - started
        # The list is built as a hash spreads people over the shards, so they are uneven. The shop's cap
        # (MAX_WAITING_PER_SKU) is each shard's share times the shards (chalicelib/tables/catalog.py, shard_share):
        # with every share above the fullest shard, the measured tap is the steady-state one whichever shard it
        # lands on (one transaction, no look for a shard with room).
        cap = WAITING_SHARDS * (fullest + 1)
        capture = dataclasses.replace(
            s.services.capture, settings=dataclasses.replace(s.services.settings, max_waiting_per_sku=cap)
        )
        billed = Billed(item_bytes)
        # Every table of this thread shares one client (chalicelib/aws.py), already built: watch it.
        billed.register(s.services.tables.requests.table.meta.client.meta)
        key = contact_key(f"sms:{contact}", s.services.hash_key)
        [place] = [p for p in s.services.exits.places(key) if p.sku == SKU]
        body = {"sku": SKU, "channel": "sms", "contact": "+447499099999"}
        tap = _measure(billed, lambda: capture.capture("198.51.100.1", body))
        me = _measure(billed, lambda: s.services.manage.view(key))
        before = _measure(billed, lambda: s.services.tables.requests.position(SKU, place.joined_ts))
        view = s.services.manage.view(key)
        shown = view.places[0].place
        return {
            "waiting": people,
            "max_waiting_per_sku": cap,
            "build_s": round(built_s, 1),
            "tap": tap,
            "me": me,
            "me_before_count": before,
            "place_shown": [shown.lowest, shown.highest],
            "place_counted": s.services.tables.requests.position(SKU, place.joined_ts),
        }


def run(sizes: tuple[int, ...] = SIZES) -> list[dict[str, Any]]:
    """Every size, each on its own fresh emulator."""
    return [at_size(n) for n in sizes]


if __name__ == "__main__":
    from devstack import moto_patches

    moto_patches.install(fidelity=True, speed=True)
    print(json.dumps(run(), indent=1))
