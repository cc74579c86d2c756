"""Importing a 10,000-row waiting-list export (`bisn import`, docs/IMPORT.md): the first run, timed, and the re-run,
which finds every row on the list already and writes nothing."""

from __future__ import annotations

import time
from typing import Any

from bench.stack import PRODUCT, stack
from chalicelib.clock import iso

SKUS = 10  # a shop's export names several products; each SKU's rows are read and written together
AUGUST = 1_785_542_400  # 2026-08-01T00:00:00Z


def export(rows: int) -> str:
    """A generic-format export of `rows` people (half email, confirmed; half SMS) over SKUS products, in the order
    another app might write it (not by join time)."""
    lines = ["sku,channel,contact,joined_at,consent_source,confirmed"]
    for i in range(rows):
        sku = f"BENCH-IMPORT-{i % SKUS}"
        # Join times spread over August 2026, out of order.
        joined = iso(AUGUST + (i * 7919) % (28 * 86400))[:19] + "Z"
        if i % 2:
            lines.append(f"{sku},sms,+4474008{i:05d},{joined},SMS keyword JOIN,")
        else:
            lines.append(f"{sku},email,imported{i}@example.com,{joined},storefront form,yes")
    return "\n".join(lines) + "\n"


def import_rows(rows: int) -> dict[str, Any]:
    """Seconds, calls and rows per second of the first import and of the re-run of the same file."""
    text = export(rows)
    with stack() as s:
        for k in range(SKUS):
            s.services.tables.catalog.upsert(f"BENCH-IMPORT-{k}", dict(PRODUCT))
        runs = []
        for _ in range(2):
            s.log.reset()
            started = time.perf_counter()
            report = s.services.imports.run(text, "generic")
            seconds = time.perf_counter() - started
            calls = s.log.snapshot()
            runs.append(
                {
                    "seconds": round(seconds, 1),
                    "rows_per_s": round(rows / seconds, 1),
                    "imported": report.imported,
                    "already": len(report.already),
                    "refused": len(report.refused),
                    "calls": calls["total"],
                    "write_units": round(calls["write_units"], 1),
                }
            )
    first, again = runs
    return {"rows": rows, "first": first, "again": again}
