"""The scheduled jobs at scale: catalogue sync of 10,000 products, the sweep with 10,000 offers, the STOP sync's day.

Each run is given the time a Lambda would have (LAMBDA_S, as .chalice/config.json sets it) and stops at its own
deadline, so "runs" is how many scheduled invocations the work takes on this machine's emulator.
"""

from __future__ import annotations

import gc
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.measure import SKU, SlowSender
from bench.prices import USD
from bench.stack import PRODUCT, Stack, stack, waiting_list

LAMBDA_S = 30.0  # the timeout of the sweep and catalogue sync functions
MAX_RUNS = 200  # a bound, so a broken sync cannot spin the bench forever


def _lambda_time(seconds: float = LAMBDA_S) -> Callable[[], int]:
    """A Lambda context's get_remaining_time_in_millis for an invocation that starts now."""
    started = time.monotonic()
    return lambda: int((started + seconds - time.monotonic()) * 1000)


@contextmanager
def _frozen_heap() -> Iterator[None]:
    # The emulator keeps every table in this process (in Lambda they live in DynamoDB): freeze the heap so the
    # collector does not walk 10,000 items again and again during the measured runs.
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _runs(s: Stack, run: Callable[[], bool]) -> dict[str, Any]:
    """Invoke `run` (one scheduled invocation; True once the work is done) until it is done."""
    s.log.reset()
    runs, seconds, longest = 0, 0.0, 0.0
    with _frozen_heap():
        while runs < MAX_RUNS:
            started = time.perf_counter()
            done = run()
            took = time.perf_counter() - started
            runs, seconds, longest = runs + 1, seconds + took, max(longest, took)
            if done:
                break
    counted = s.log.snapshot()
    return {
        "runs": runs,
        "seconds": seconds,
        "longest_run_s": longest,
        "calls": counted["total"],
        "calls_by_operation": dict(sorted(counted["calls"].items())),
        "write_units": counted["write_units"],
        "read_units": counted["read_units"],
    }


def catalog_sync(products: int = 10_000) -> dict[str, Any]:
    """A feed of `products` new products synced to the end, then the same feed again (nothing changed)."""
    from chalicelib.catalog_sync import CatalogSync, FeedReader

    with stack() as s, tempfile.TemporaryDirectory() as folder:
        feed = Path(folder) / "catalog.json"
        entries = [
            {**PRODUCT, "sku": f"BENCH-{i:05d}", "name": f"Walnut dining chair {i}", "description": "Solid walnut."}
            for i in range(products)
        ]
        feed.write_text(json.dumps({"products": entries}))
        sync = CatalogSync(
            catalog=s.services.tables.catalog,
            cursors=s.services.tables.saved_states,
            reader=FeedReader(feed.as_uri(), lambda: None),
            clock=s.clock,
            threshold_changed=s.services.detector.reconsider,
        )
        reports: list[Any] = []

        def one() -> bool:
            reports.append(sync.run(remaining_ms=_lambda_time()))
            return bool(reports[-1].complete or reports[-1].error)

        first = _runs(s, one)
        created = sum(len(r.created) for r in reports)
        reports.clear()
        s.clock.advance(900)
        again = _runs(s, one)
        unchanged = sum(r.unchanged for r in reports)
    return {
        "products": products,
        "feed_bytes": feed_size(entries),
        "first": {**first, "created": created},
        "unchanged": {**again, "unchanged": unchanged},
    }


def feed_size(entries: list[dict[str, Any]]) -> int:
    """The feed's length in bytes, as written."""
    return len(json.dumps({"products": entries}).encode())


def sweep_with_offers(offers: int = 10_000) -> dict[str, Any]:
    """`offers` live offers (one restock told to as many people): the sweep's minute while they are live, then
    once they have all lapsed, run after run until every one is settled."""
    with stack(senders=SlowSender(0.0)) as s:
        s.services.tables.catalog.upsert(SKU, dict(PRODUCT))
        waiting_list(s, SKU, offers)
        s.inventory(SKU, offers)
        with _frozen_heap():
            s.deliver_jobs()
        sweep = s.services.sweep
        sweep.run()  # warm; the STOP sync's first pass too
        summaries: list[dict[str, int]] = []

        def one() -> bool:
            summaries.append(sweep.run(remaining_ms=_lambda_time()))
            return not summaries[-1]["out_of_time"]

        live = _runs(s, one)
        s.clock.advance(int(PRODUCT["offer_window_s"]) + 1)
        summaries.clear()
        lapsing = _runs(s, one)
        lapsed = sum(x["lapsed"] for x in summaries)
    return {"offers": offers, "live": live, "lapsing": {**lapsing, "lapsed": lapsed}}


class PagedOptOuts:
    """SNS ListPhoneNumbersOptedOut as botocore's sns model (2010-03-31) describes it: up to 100 `phoneNumbers` a
    page and a `nextToken` while more remain (the emulator answers with every number at once)."""

    def __init__(self, numbers: list[str]) -> None:
        self.numbers = numbers

    def list_phone_numbers_opted_out(self, nextToken: str | None = None) -> dict[str, Any]:
        start = int(nextToken or 0)
        page: dict[str, Any] = {"phoneNumbers": self.numbers[start : start + 100]}
        if start + 100 < len(self.numbers):
            page["nextToken"] = str(start + 100)
        return page


def stop_sync_day(numbers: int = 10_000) -> dict[str, Any]:
    """The STOP sync's day with `numbers` opted-out numbers, all already suppressed: one full pass (over as many
    minutes as it takes) and a quiet minute for every other sweep of the day."""
    from chalicelib.contacts import contact_key
    from chalicelib.optout_service import OptoutService

    listed = [f"+4477{i // 1000:02d}9{i % 100_000:05d}" for i in range(numbers)]
    with stack() as s:
        services = s.services
        with services.tables.optout.table.batch_writer() as batch:
            for number in listed:
                key = contact_key(number, services.hash_key)
                batch.put_item(Item={"contact": key, "source": "stop", "at": int(s.clock.now())})
        sync = OptoutService(
            optout=services.tables.optout,
            cursors=services.tables.saved_states,
            undos=services.tables.undo_records,
            exits=services.exits,
            sns=PagedOptOuts(listed),
            clock=s.clock,
            hash_key=services.hash_key,
        )

        def one() -> bool:
            return sync.sync_sms_optouts().pass_done

        full = _runs(s, one)
        s.clock.advance(60)
        quiet = _runs(s, one)
    # Every page is one SNS API request (the double above stands in for SNS, so the call log does not see them).
    full_sns = -(-numbers // 100)
    minutes = 24 * 60
    per_day = {
        "read_units": full["read_units"] + quiet["read_units"] * (minutes - full["runs"]),
        "write_units": full["write_units"] + quiet["write_units"] * (minutes - full["runs"]),
        "sns_requests": full_sns,
    }
    usd = (
        per_day["read_units"] * USD["dynamodb_read_unit"]
        + per_day["write_units"] * USD["dynamodb_write_unit"]
        + per_day["sns_requests"] * USD["sns_request"]
    )
    # The same pass read every minute, as a sync without a saved place must.
    every_minute = minutes * (
        full["read_units"] * USD["dynamodb_read_unit"]
        + full["write_units"] * USD["dynamodb_write_unit"]
        + full_sns * USD["sns_request"]
    )
    return {
        "numbers": numbers,
        "full_pass": full,
        "quiet_minute": quiet,
        "per_day": per_day,
        "usd_per_day": usd,
        "usd_per_day_full_pass_every_minute": every_minute,
    }
