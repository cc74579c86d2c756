"""What one view of the shop's dashboard costs in AWS calls and DynamoDB reads, at 10,000 people waiting and
1,000 restocks in the period (docs/BENCHMARKS.md, "The dashboard").

A view loads one tab: Demand, Restocks, a Waiting list's first page, or Operations. Each is measured on its own,
through the dashboard's own service (the id token's check makes no AWS call once the pool's keys are read, once
per container); `admin_calls_per_page_view` is the dearest tab.

    .venv/bin/python -m bench.admin
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bench.stack import PRODUCT, Stack, stack, waiting_list

WAITING = 10_000
SKUS = 100  # out of stock, 100 people waiting on each: the Demand tab lists the 50 most wanted
RESTOCKS = 1_000
RESTOCKED_SKUS = 200
PERIOD_DAYS = 30


def _shop(s: Stack) -> None:
    """The shop: SKUS out-of-stock products with their lists, and RESTOCKS restocks over the last 30 days, their
    funnel tallies as the counter moves leave them."""
    services, now = s.services, s.clock.now()
    catalog, restocks = services.tables.catalog, services.tables.restocks
    per_sku = WAITING // SKUS
    for i in range(SKUS):
        sku = f"OUT-{i:03d}"
        catalog.upsert(sku, dict(PRODUCT))
        catalog.sync_product(sku, {"name": f"Product {i}"}, now=now, created=False, out_of_stock=True)
        waiting_list(s, sku, per_sku)
        catalog.table.update_item(
            Key={"sku": sku}, UpdateExpression="SET waiting_count = :n", ExpressionAttributeValues={":n": per_sku}
        )
    for i in range(RESTOCKED_SKUS):
        catalog.upsert(f"BACK-{i:03d}", {**PRODUCT, "name": f"Restocked {i}"})
    # Inside the default period (the last 30 days, today included, from midnight UTC).
    spread = (PERIOD_DAYS - 2) * 86400
    step = spread // RESTOCKS
    with restocks.table.batch_writer() as batch:
        for i in range(RESTOCKS):
            at = now - spread + i * step
            item = restocks.open_item(
                sku=f"BACK-{i % RESTOCKED_SKUS:03d}",
                restock_ts=f"2026-01-01T00:00:00.{i:06d}Z#bench{i}",
                restock_id=f"rs_bench_{i}",
                webhook_id=f"wh_bench_{i}",
                units=10,
                level_before=0,
                level_after=10,
                threshold=1,
                now=at,
            )["Put"]["Item"]
            item.update({"notified_sms": 6, "notified_email": 4, "held": 7, "bought_sms": 3, "bought_email": 2})
            item.update({"lapsed": 3, "expired": 2, "last_sale_at": int(at) + 1800})
            del item["pending_key"]
            batch.put_item(Item=item)


def measure() -> dict[str, Any]:
    """Calls and read units of each tab's view."""
    with stack() as s:
        _shop(s)
        admin = s.services.admin
        admin.operations_view()  # warm: clients built, the stage's secrets read once
        views = {
            "demand": lambda: admin.demand({}),
            "restocks": lambda: admin.restocks({}),
            "waiting": lambda: admin.waiting("OUT-000", {}),
            "operations": lambda: admin.operations_view(),
        }
        found: dict[str, Any] = {}
        for name, view in views.items():
            answer, counted = s.measure(view)
            found[name] = {
                "calls": dict(sorted(counted["calls"].items())),
                "total": counted["total"],
                "read_units": round(counted["read_units"], 1),
            }
            if name == "restocks":
                assert len(answer["restocks"]) == RESTOCKS, len(answer["restocks"])
            if name == "demand":
                assert sum(row["new_in_period"] for row in answer["skus"]) == min(50, SKUS) * (WAITING // SKUS)
    dearest = max(found, key=lambda name: found[name]["total"])
    return {
        "waiting": WAITING,
        "restocks": RESTOCKS,
        "admin_calls_per_page_view": found[dearest]["total"],
        "admin_dearest_view": dearest,
        "admin_views": found,
    }


def main() -> int:
    result = measure()
    for name, view in result["admin_views"].items():
        print(
            f"{name:<11} {view['total']:>4} calls  {view['read_units']:>7} read units  {view['calls']}", file=sys.stderr
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
