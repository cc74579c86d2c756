"""A hot drop on the emulator: many simultaneous taps on one product, and which items their transactions share.

DynamoDB cancels a transaction with TransactionConflict when another transaction holds one of its items at the same
moment (developer guide, "Transaction conflict handling"). The emulator serialises every request under one lock
(devstack/moto_patches/fidelity.py), so it never conflicts: instead `Overlaps` watches each invocation's client and
counts, item by item, the transactions that were in flight together, i.e. where DynamoDB could have cancelled one.
docs/SCALE.md turns these counts into writes per key per second at a real drop's rate.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from chalicelib.line import read_place
from chalicelib.tables.catalog import WAITING_SHARDS, shard_key
from chalicelib.tables.throttle import line_key
from chalicelib.wiring import Services
from tests.reliability.invariants import assert_invariants
from tests.reliability.test_concurrency import at_once, tap
from tests.reliability.world import World

KEY_NAMES = ("sku", "joined_ts", "key", "contact", "token_id", "restock_ts", "ts")


class Overlaps:
    """Transactions in flight together, counted per item key they shared, and conflicts DynamoDB reported."""

    def __init__(self) -> None:
        self.in_flight: Counter[str] = Counter()
        self.shared: Counter[str] = Counter()
        self.keys_written: Counter[str] = Counter()
        self.conflicts_reported = 0
        self._lock = threading.Lock()
        self._mine = threading.local()

    def watch(self, services: Services) -> None:
        events = services.tables.client.meta.events
        events.register("provide-client-params.dynamodb.TransactWriteItems", self._start)
        events.register("after-call.dynamodb.TransactWriteItems", self._end)

    @staticmethod
    def _key(entry: dict[str, Any]) -> str:
        [(_, body)] = entry.items()
        key = body.get("Key") or {k: v for k, v in body["Item"].items() if k in KEY_NAMES}
        table = str(body["TableName"]).rsplit("-", 1)[-1]
        return f"{table}:" + ",".join(f"{k}={key[k]}" for k in sorted(key))

    def _start(self, params: dict[str, Any], **_: Any) -> None:
        keys = [self._key(entry) for entry in params["TransactItems"]]
        self._mine.keys = keys
        with self._lock:
            for key in keys:
                self.keys_written[key] += 1
                if self.in_flight[key]:
                    self.shared[key] += 1
                self.in_flight[key] += 1

    def _end(self, parsed: dict[str, Any], **_: Any) -> None:
        reasons = parsed.get("CancellationReasons") or []
        with self._lock:
            self.conflicts_reported += sum(1 for r in reasons if r.get("Code") == "TransactionConflict")
            for key in getattr(self._mine, "keys", []):
                self.in_flight[key] -= 1


def test_a_drop_shares_no_item_beyond_a_shard_and_never_the_product_or_the_line(world: World) -> None:
    world.product()
    overlaps = Overlaps()
    people = 24

    def one(i: int) -> Any:
        def run(services: Services) -> Any:
            overlaps.watch(services)
            # Different shoppers: own address, own number in its own block (the SMS caps count per block).
            return tap(services, world.sku, f"+4474{i:02d}0{i:05d}", f"203.0.113.{i}")

        return run

    results = at_once(world, [one(i) for i in range(people)])
    assert [r.status for r in results] == ["queued"] * people, results
    # No tap's transaction holds the product item: each holds one of its waiting shards, the one its contact
    # hashes to, so on DynamoDB only taps on the same shard may cancel each other (docs/SCALE.md).
    assert overlaps.keys_written[f"catalog:sku={world.sku}"] == 0
    shards = {f"catalog:sku={shard_key(world.sku, k)}" for k in range(WAITING_SHARDS)}
    on_shards = {key: n for key, n in overlaps.keys_written.items() if key in shards}
    assert sum(on_shards.values()) == people
    assert max(on_shards.values()) < people / 3, on_shards  # 24 people over 16 shards: a few each at most
    assert not [key for key, n in overlaps.keys_written.items() if n == people], overlaps.keys_written
    # Items in flight together are shards only, and never more often than their taps.
    assert set(overlaps.shared) <= shards, overlaps.shared
    assert all(overlaps.shared[key] < on_shards[key] for key in overlaps.shared)
    print(
        f"hot drop: {people} taps over {len(on_shards)} shards, most on one {max(on_shards.values())}, "
        f"overlaps on shards {sum(overlaps.shared.values())}, conflicts {overlaps.conflicts_reported}"
    )
    # The line's ticket is a plain write: no transaction ever holds it, so it never conflicts.
    assert not [k for k in overlaps.keys_written if line_key(world.sku) in k]
    assert overlaps.conflicts_reported == 0  # the emulator serialises: it cannot show a conflict
    # Each place reads its place from the line's figures, and they agree with counting the list.
    tables = world.services.tables
    for r in results:
        request = tables.requests.get(world.sku, str(r.joined_ts))
        assert request is not None
        assert read_place(tables, request).exact == tables.requests.position(world.sku, request.joined_ts)
    assert_invariants(world.services)
