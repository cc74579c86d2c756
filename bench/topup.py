"""A top-up after a big restock: what one top-up job costs once 10,000 people were told (docs/SCALE.md, "Top-ups").

The waiting list is written in batches (items built by the table code, as capture writes them); the restock's
own walk then runs through the real notifier (a sender double with no latency stands in for SNS and SES, as in
the throughput run), and the stock level rises by one unit through a signed webhook, as a shop's would. The one
top-up job that rise owes is what is counted: its AWS calls and DynamoDB units.
"""

from __future__ import annotations

import time
from typing import Any

from bench.measure import SKU, SlowSender
from bench.stack import PRODUCT, stack, waiting_list

UNITS = 10_000
WAITING = 10_200  # more waiting than units: the top-up has someone left to tell


def topup_after_restock(units: int = UNITS, waiting: int = WAITING) -> dict[str, Any]:
    """One top-up job after a `units`-unit restock with `waiting` people in line, counted."""
    sender = SlowSender(0.0)
    with stack(senders=sender) as s:
        s.services.tables.catalog.upsert(SKU, dict(PRODUCT))
        waiting_list(s, SKU, waiting)
        s.inventory(SKU, units)
        started = time.perf_counter()
        restock_jobs = s.deliver_jobs()
        walk_s = time.perf_counter() - started
        told_before = sender.sent
        s.clock.advance(60)
        s.inventory(SKU, units + 1)  # one more unit on the shelf: the restock owes a top-up
        jobs, counted = s.measure(s.deliver_jobs)
        told = sender.sent - told_before
    return {
        "units": units,
        "waiting": waiting,
        "restock_jobs": restock_jobs,
        "restock_told": told_before,
        "restock_walk_s": walk_s,
        "topup_jobs": jobs,
        "topup_told": told,
        **counted,
    }


if __name__ == "__main__":
    import json

    from devstack import moto_patches

    moto_patches.install(fidelity=True, speed=True)
    print(json.dumps(topup_after_restock(), sort_keys=True, default=str))
