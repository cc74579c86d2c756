"""Each measurement on its own fresh emulator: AWS calls per activity, and the notifier's throughput."""

from __future__ import annotations

import functools
import gc
import json
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.stack import PRODUCT, Stack, stack, waiting_list
from infra.stages import stage_env

SKU = "CHAIR-WALNUT"


def _per(total: dict[str, Any], n: int) -> dict[str, Any]:
    """Counts divided by n (calls by operation, total calls, DynamoDB units)."""
    return {
        "calls": {k: v / n for k, v in sorted(total["calls"].items())},
        "total": total["total"] / n,
        "write_units": total["write_units"] / n,
        "read_units": total["read_units"] / n,
    }


def _tap(s: Stack, i: int) -> Any:
    # Numbers in a hundred blocks, as different shoppers' numbers are: the SMS caps count per number block.
    body = {"sku": SKU, "channel": "sms", "contact": f"+4474{i % 100:02d}0{i:05d}"}
    # A different address per tap, as for different shoppers: the rate limit is per address.
    return s.services.capture.capture(f"198.51.{i // 250}.{i % 250}", body)


def calls_per_tap(taps: int = 200, warm: int = 20) -> dict[str, Any]:
    """A new tap at steady state: the product exists, the list already has people, clients are warm."""
    with stack() as s:
        s.services.tables.catalog.upsert(SKU, dict(PRODUCT))
        for i in range(warm):
            _tap(s, i)
        _, counted = s.measure(lambda: [_tap(s, warm + i) for i in range(taps)])
    return _per(counted, taps)


def calls_per_detection(restocks: int = 10) -> dict[str, Any]:
    """An inventory webhook that crosses the threshold: level, restock, audit, enqueue, job."""
    total: dict[str, Any] = {"calls": {}, "total": 0, "write_units": 0.0, "read_units": 0.0}
    with stack() as s:
        for i in range(restocks + 1):
            sku = f"SKU-{i}"
            s.services.tables.catalog.upsert(sku, dict(PRODUCT))
            if i == 0:
                s.inventory(sku, 3)  # warms the clients and the secrets cache
                continue
            _, counted = s.measure(functools.partial(s.inventory, sku, 3))
            _add(total, counted)
    return _per(total, restocks)


def _add(total: dict[str, Any], counted: dict[str, Any]) -> None:
    for k, v in counted["calls"].items():
        total["calls"][k] = total["calls"].get(k, 0) + v
    for k in ("total", "write_units", "read_units"):
        total[k] += counted[k]


def _notifier_run(people: int) -> dict[str, Any]:
    with stack() as s:
        s.services.tables.catalog.upsert(SKU, dict(PRODUCT))
        waiting_list(s, SKU, people)
        s.inventory(SKU, people)
        _, counted = s.measure(s.deliver_jobs)
    return counted


def calls_per_notice(small: int = 5, large: int = 25) -> dict[str, Any]:
    """A notifier job: its fixed part, and what each notice adds (two runs, the difference per notice)."""
    a, b = _notifier_run(small), _notifier_run(large)
    n = large - small
    per_notice = {
        "calls": {
            k: (b["calls"].get(k, 0) - a["calls"].get(k, 0)) / n for k in sorted(set(a["calls"]) | set(b["calls"]))
        },
        "total": (b["total"] - a["total"]) / n,
        "write_units": (b["write_units"] - a["write_units"]) / n,
        "read_units": (b["read_units"] - a["read_units"]) / n,
    }
    per_job = {
        "total": a["total"] - small * per_notice["total"],
        "write_units": a["write_units"] - small * per_notice["write_units"],
        "read_units": a["read_units"] - small * per_notice["read_units"],
        "calls": {k: a["calls"].get(k, 0) - small * v for k, v in per_notice["calls"].items()},
    }
    return {"per_notice": per_notice, "per_job": per_job}


def _offers(s: Stack, people: int) -> list[str]:
    s.services.tables.catalog.upsert(SKU, dict(PRODUCT))
    waiting_list(s, SKU, people)
    s.inventory(SKU, people)
    s.deliver_jobs()
    from boto3.dynamodb.conditions import Attr

    rows = s.services.tables.reservations.table.scan(FilterExpression=Attr("state").eq("offered"))["Items"]
    return [str(r["token_id"]) for r in rows]


def calls_per_hold_and_order(people: int = 10) -> dict[str, Any]:
    """A tap on a reserve link (a hold), and the orders webhook that converts it."""
    with stack() as s:
        tokens = _offers(s, people)
        signed = [s.services.tokens.reserve(t) for t in tokens]
        s.services.holds.reserve(signed[0])  # warm
        _, holds = s.measure(lambda: [s.services.holds.reserve(t) for t in signed[1:]])

        def order(token_id: str) -> Any:
            text = json.dumps({"reservation_id": token_id, "order_id": f"order-{token_id[:6]}"})
            return s.services.orders.receive(text.encode(), s.signed(text))

        order(tokens[0])
        _, orders = s.measure(lambda: [order(t) for t in tokens[1:]])
    return {"per_hold": _per(holds, people - 1), "per_order": _per(orders, people - 1)}


def calls_per_sweep(people: int = 10) -> dict[str, Any]:
    """The minute's sweep with nothing to do, and what each lapsed offer and each expired hold adds."""
    with stack() as s:
        s.services.sweep.run()  # warm
        _, idle = s.measure(s.services.sweep.run)
        tokens = _offers(s, people)
        half = people // 2
        for token_id in tokens[:half]:
            s.services.holds.reserve(s.services.tokens.reserve(token_id))
        s.clock.advance(901)  # holds expired, offers still live
        _, expiries = s.measure(s.services.sweep.run)
        s.clock.advance(3600)  # offers lapsed
        _, lapses = s.measure(s.services.sweep.run)
    return {
        "idle": _per(idle, 1),
        "per_expiry": _beyond(expiries, idle, half),
        "per_lapse": _beyond(lapses, idle, people - half),
    }


def _beyond(run: dict[str, Any], idle: dict[str, Any], n: int) -> dict[str, Any]:
    """What a sweep run did beyond an idle sweep, per item it settled."""
    ops = set(run["calls"]) | set(idle["calls"])
    return {
        "calls": {k: (run["calls"].get(k, 0) - idle["calls"].get(k, 0)) / n for k in sorted(ops)},
        **{k: (run[k] - idle[k]) / n for k in ("total", "write_units", "read_units")},
    }


class SlowSender:
    """A sender double: every notice takes `latency_s` to send, as a provider's round trip would."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.sent = 0

    def send(self, notice: Any, *, just_before: Callable[[], None] | None = None) -> str:
        """Take the notifier's last look at the suppression list, as the real senders do; wait out the latency."""
        if just_before is not None:
            just_before()
        time.sleep(self.latency_s)
        self.sent += 1
        return uuid.uuid4().hex


def notifier_throughput(units: int = 1000, latency_s: float = 0.05, runs: int = 3) -> dict[str, Any]:
    """The median of `runs` runs (each on a fresh emulator) of `one_restock`: one noisy run says little."""
    results = sorted((one_restock(units, latency_s) for _ in range(runs)), key=lambda r: r["ratio"])
    middle = dict(results[len(results) // 2])
    middle["ratios"] = [round(r["ratio"], 3) for r in results]
    return middle


def one_restock(units: int = 1000, latency_s: float = 0.05) -> dict[str, Any]:
    """Notices per second on a `units`-unit restock with `units` people waiting, against concurrency/latency."""
    concurrency = stage_env("prod")["SENDS_CONCURRENCY"]
    sender = SlowSender(latency_s)
    with stack({"SENDS_CONCURRENCY": concurrency}, senders=sender) as s:
        s.services.tables.catalog.upsert(SKU, dict(PRODUCT))
        waiting_list(s, SKU, units)
        s.inventory(SKU, units)
        s.log.reset()
        # The emulator keeps every table's data in this process, where in Lambda it lives in DynamoDB: the heap
        # as it stands is frozen, so the collector does not walk the tables again and again during the run.
        gc.collect()
        gc.freeze()
        try:
            started = time.perf_counter()
            jobs = s.deliver_jobs()
            elapsed = time.perf_counter() - started
        finally:
            gc.unfreeze()
        counted = s.log.snapshot()
    bound = int(concurrency) / latency_s
    return {
        "units": units,
        "latency_ms": latency_s * 1000,
        "concurrency": int(concurrency),
        "sent": sender.sent,
        "jobs": jobs,
        "seconds": elapsed,
        "notices_per_s": sender.sent / elapsed,
        "notices_bound_per_s": bound,
        "ratio": sender.sent / elapsed / bound,
        # The walk commits offers a batch per transaction and records each notice on one thread: the time
        # those calls take on this emulator caps the rate too, whatever the send concurrency.
        "calls_per_notice": counted["total"] / max(1, sender.sent),
        "call_ms_per_notice": counted["call_seconds"] * 1000 / max(1, sender.sent),
        "serial_ceiling_per_s": sender.sent / max(1e-9, counted["call_seconds"]),
    }


def median(values: list[float]) -> float:
    """The middle value."""
    return float(statistics.median(values))
