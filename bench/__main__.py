"""`make bench`: how fast and how cheap, against each floor, in one run on this machine (docs/BENCHMARKS.md).

In-process on the emulator, no network. Prints a table, then (as its last line) one JSON object.
Targets are reported, never asserted: machines are noisy, so ratios are measured side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.cost import monthly_cost
from bench.imports import PACKAGE
from bench.prices import PRICES_AS_OF, REGION
from bench.sections import SECTIONS, SIZES, Outcome, child_main, run_section

Row = tuple[str, str, str, str]


def run(size: str = "full") -> dict[str, Any]:
    """Every section, one after another, each in its own process; then the figures derived from them."""
    started = time.perf_counter()
    outcomes: dict[str, Outcome] = {}
    for section in SECTIONS:
        print(f"measuring: {section.says} ...", file=sys.stderr)
        outcome = run_section(section.name, size)
        outcomes[section.name] = outcome
        status = outcome.error or "done"
        print(f"  {section.name}: {status}, {outcome.seconds:g} s, peak {outcome.peak_rss_mb:g} MB", file=sys.stderr)
    return fields(outcomes, size, time.perf_counter() - started)


def fields(outcomes: dict[str, Outcome], size: str, seconds: float) -> dict[str, Any]:
    """The JSON object: every section's fields (a section that did not finish has none), and each one's peak
    memory, wall time and, where it did not finish, why."""
    got = {name: o.result for name, o in outcomes.items() if o.error is None}
    r: dict[str, Any] = {}
    if "capture" in got:
        tap = got["capture"]
        r["capture_calls_per_tap"] = round(tap["total"], 2)
        r["capture_calls_by_operation"] = {k: round(v, 2) for k, v in tap["calls"].items()}
    if "calls" in got:
        calls = got["calls"]
        r.update(
            {
                "detection_calls": round(calls["detection"]["total"], 2),
                "notifier_calls_per_notice": round(calls["notifier"]["per_notice"]["total"], 2),
                "notifier_calls_per_job": round(calls["notifier"]["per_job"]["total"], 2),
                "hold_calls": round(calls["hold_order"]["per_hold"]["total"], 2),
                "order_calls": round(calls["hold_order"]["per_order"]["total"], 2),
                "sweep_calls_idle_minute": round(calls["sweep"]["idle"]["total"], 2),
                "sweep_calls_per_lapse": round(calls["sweep"]["per_lapse"]["total"], 2),
                "sweep_calls_per_expiry": round(calls["sweep"]["per_expiry"]["total"], 2),
            }
        )
    if "throughput" in got:
        r.update(throughput_fields(got["throughput"]))
    if "fleet" in got:
        r.update(fleet_fields(got["fleet"]))
    if "admin" in got:
        admin = got["admin"]
        r.update({k: admin[k] for k in ("admin_calls_per_page_view", "admin_dearest_view", "admin_views")})
    if "topup" in got:
        topup = got["topup"]
        r.update(
            {
                "topup_calls_after_10k": topup["total"],
                "topup_write_units_after_10k": round(topup["write_units"], 1),
                "topup_read_units_after_10k": round(topup["read_units"], 1),
                "topup_calls_by_operation_after_10k": dict(sorted(topup["calls"].items())),
                "topup_told_after_10k": topup["topup_told"],
            }
        )
    if "imports" in got:
        imports, widget = got["imports"]["imports"], got["imports"]["widget"]
        r.update(
            {
                "import_ms_app": round(imports["app"], 1),
                "import_ms_boto3": round(imports["boto3"], 1),
                "import_ratio": round(imports["app"] / imports["boto3"], 2),
                "import_ms_app_source": round(imports["app_source"], 1),
                "import_ratio_source": round(imports["app_source"] / imports["boto3"], 2),
                "import_ms_app_package": imports["app_package"] and round(imports["app_package"], 1),
                "import_ratio_package": imports["app_package"] and round(imports["app_package"] / imports["boto3"], 2),
                "import_ms_app_bytecode": round(imports["app_bytecode"], 1),
                "import_ms_boto3_bytecode": round(imports["boto3_bytecode"], 1),
                "import_ratio_bytecode": round(imports["app_bytecode"] / imports["boto3_bytecode"], 2),
                "widget_bytes": widget["raw"],
                "widget_gzip9_bytes": widget["gzip9"],
                "widget_gzip6_bytes": widget["gzip6"],
            }
        )
    r["package_zip_bytes"] = PACKAGE.stat().st_size if PACKAGE.exists() else None
    if "sms" in got:
        r.update(sms_fields(got["sms"]))
    if {"catalog_sync", "sweep_offers", "stop_sync"} <= set(got):
        r.update(sync_fields(got["catalog_sync"], got["sweep_offers"], got["stop_sync"]))
    if {"capture", "calls", "sms"} <= set(got):
        cost = monthly_cost({"tap": got["capture"], **got["calls"], "sms_segments": got["sms"]["segments"]})
        r.update(
            {
                "monthly_cost_usd": round(cost["total"], 2),
                "monthly_sms_usd": round(cost["sms"], 2),
                "monthly_cost_usd_without_sms": round(cost["without_sms"], 2),
                "monthly_cost_lines_usd": {k: round(v, 4) for k, v in cost["lines"].items()},
                "monthly_quantities": {k: round(v, 1) for k, v in cost["quantities"].items()},
                "reference_shop": cost["shop"],
            }
        )
    r["prices"] = f"{REGION} on demand, list prices as of {PRICES_AS_OF} (bench/prices.py)"
    if "scale" in got:
        r.update(scale_fields(got["scale"]))
    if "waitlist_import" in got:
        imported = got["waitlist_import"]
        r.update(
            {
                "import_rows": imported["rows"],
                "import_first_s": imported["first"]["seconds"],
                "import_first_rows_per_s": imported["first"]["rows_per_s"],
                "import_first_calls": imported["first"]["calls"],
                "import_again_s": imported["again"]["seconds"],
                "import_again_written": imported["again"]["imported"],
                "import_again_calls": imported["again"]["calls"],
            }
        )
    r.update(
        {
            "bench_size": size,
            "peak_rss_mb": max(o.peak_rss_mb for o in outcomes.values()),
            "peak_rss_mb_by_section": {name: o.peak_rss_mb for name, o in outcomes.items()},
            "seconds_by_section": {name: o.seconds for name, o in outcomes.items()},
            "sections_not_finished": {name: o.error for name, o in outcomes.items() if o.error},
            "seconds": round(seconds, 1),
        }
    )
    return r


def throughput_fields(throughput: dict[str, Any]) -> dict[str, Any]:
    """The JSON fields of the notifier's throughput (bench/measure.py), and its ratio to the bound by name."""
    return {
        "notices_per_s": round(throughput["notices_per_s"], 1),
        "notices_bound_per_s": round(throughput["notices_bound_per_s"], 1),
        "notices_ratio": round(throughput["ratio"], 3),
        "notifier_throughput_ratio": round(throughput["ratio"], 3),
        "notices_ratio_runs": throughput["ratios"],
        "notifier_concurrency": throughput["concurrency"],
        "notifier_send_latency_ms": throughput["latency_ms"],
        "notifier_notices_sent": throughput["sent"],
        "notifier_calls_per_notice_in_walk": round(throughput["calls_per_notice"], 2),
        "notifier_call_ms_per_notice": round(throughput["call_ms_per_notice"], 2),
        "notifier_serial_ceiling_per_s": round(throughput["serial_ceiling_per_s"], 1),
    }


def fleet_fields(fleet: dict[str, Any]) -> dict[str, Any]:
    """The JSON fields of two restocks at once under one SES quota (bench/fleet.py)."""
    return {
        "fleet_two_restocks_people": fleet["people"],
        "fleet_two_restocks_sent": fleet["sent"],
        "fleet_two_restocks_throttle_errors": fleet["throttle_errors"],
        "fleet_two_restocks_job_failures": fleet["job_failures"],
        "fleet_two_restocks_seconds": round(fleet["seconds"], 1),
        "fleet_two_restocks_floor_seconds": round(fleet["floor_seconds"], 1),
        "fleet_ses_max_send_rate": fleet["account_max_send_rate"],
        "fleet_per_invocation_email_rate": fleet["per_invocation_rate"],
        "fleet_invocations": fleet["invocations"],
    }


def scale_fields(sizes: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON fields of the list-length measurement (bench/scale.py), keyed by list length."""
    fields: dict[str, Any] = {"scale": sizes}
    for size in sizes:
        at = f"{size['waiting'] // 1000}k" if size["waiting"] >= 1000 else str(size["waiting"])
        fields[f"capture_calls_per_tap_at_{at}"] = size["tap"]["calls"]
        fields[f"capture_rcu_per_tap_at_{at}"] = size["tap"]["read_units"]
        fields[f"me_calls_at_{at}"] = size["me"]["calls"]
        fields[f"me_rcu_at_{at}"] = size["me"]["read_units"]
        fields[f"me_rcu_before_at_{at}"] = size["me_before_count"]["read_units"]
    return fields


def sms_fields(sms: dict[str, Any]) -> dict[str, Any]:
    """The JSON fields of the SMS measurement (bench/sms.py)."""
    used = [x for x in sms["samples"] if x["two_way"] == sms["two_way"]]
    return {
        "sms_segments_per_notice": sms["segments"],
        "sms_segments_per_reminder": sms["reminder_segments"],
        "sms_segments_by_lang": sms["by_lang"],
        "sms_two_way": sms["two_way"],
        "sms_characters": [min(x["characters"] for x in used), max(x["characters"] for x in used)],
        "sms_encodings": sorted({x["encoding"] for x in used}),
        "sms_link_base": sms["link_base"],
        "sms_samples": sms["samples"],
    }


def sync_fields(catalog: dict[str, Any], sweep: dict[str, Any], stop: dict[str, Any]) -> dict[str, Any]:
    """The JSON fields of the scheduled jobs at scale (bench/syncs.py)."""
    first, again = catalog["first"], catalog["unchanged"]
    live, lapsing = sweep["live"], sweep["lapsing"]
    return {
        "catalog_sync_10k_s": round(first["seconds"], 1),
        "catalog_sync_10k_runs": first["runs"],
        "catalog_sync_10k_calls": first["calls"],
        "catalog_sync_10k_longest_run_s": round(first["longest_run_s"], 1),
        "catalog_sync_10k_unchanged_s": round(again["seconds"], 1),
        "catalog_sync_10k_unchanged_runs": again["runs"],
        "catalog_sync_10k_unchanged_calls": again["calls"],
        "catalog_sync_10k_unchanged_by_operation": again["calls_by_operation"],
        "sweep_10k_live_calls": live["calls"],
        "sweep_10k_live_s": round(live["seconds"], 2),
        "sweep_10k_lapse_s": round(lapsing["seconds"], 1),
        "sweep_10k_lapse_runs": lapsing["runs"],
        "sweep_10k_lapse_calls": lapsing["calls"],
        "sweep_10k_lapse_longest_run_s": round(lapsing["longest_run_s"], 1),
        "stop_sync_10k_usd_per_day": round(stop["usd_per_day"], 5),
        "stop_sync_10k_usd_per_day_full_pass_every_minute": round(stop["usd_per_day_full_pass_every_minute"], 4),
        "stop_sync_10k_pass_runs": stop["full_pass"]["runs"],
        "stop_sync_10k_pass_calls": stop["full_pass"]["calls"],
        "stop_sync_quiet_minute_calls": stop["quiet_minute"]["calls"],
    }


def table(r: dict[str, Any]) -> str:
    """The figures as a readable table: measured, target, and what the floor is."""
    package = r["package_zip_bytes"]
    # Each row is built only when its fields are there: a section that did not finish leaves its rows out.
    makers: list[Callable[[], list[Row]]] = [
        lambda: [
            (
                "AWS calls per new tap",
                f"{r['capture_calls_per_tap']:g}",
                "<= 2 (goal 1)",
                "floor: the line's ticket and one conditional transaction",
            ),
        ],
        lambda: [
            ("  by operation", ", ".join(f"{k} {v:g}" for k, v in r["capture_calls_by_operation"].items()), "", "")
        ],
        lambda: [
            ("AWS calls per restock detected", f"{r['detection_calls']:g}", "", "one signed webhook that crosses")
        ],
        lambda: [
            (
                "AWS calls per notice",
                f"{r['notifier_calls_per_notice']:g}",
                "",
                "plus per job: " + f"{r['notifier_calls_per_job']:g}",
            ),
        ],
        lambda: [("AWS calls per hold / order", f"{r['hold_calls']:g} / {r['order_calls']:g}", "", "")],
        lambda: [("AWS calls per idle sweep minute", f"{r['sweep_calls_idle_minute']:g}", "", "")],
        lambda: [
            (
                "  per lapse / per expiry",
                f"{r['sweep_calls_per_lapse']:g} / {r['sweep_calls_per_expiry']:g}",
                "",
                "top-up job included",
            ),
        ],
        lambda: [
            (
                "notices per second (1,000 units)",
                f"{r['notices_per_s']:g} of {r['notices_bound_per_s']:g}",
                ">= 0.8 of bound (goal 0.9)",
                f"ratio {r['notices_ratio']:g}, the median of {', '.join(f'{x:g}' for x in r['notices_ratio_runs'])}; "
                f"bound = {r['notifier_concurrency']} sends / {r['notifier_send_latency_ms']:g} ms",
            ),
        ],
        lambda: [
            (
                "  the walk's serial ceiling",
                f"{r['notifier_serial_ceiling_per_s']:g} per s",
                "",
                f"{r['notifier_calls_per_notice_in_walk']:g} emulator calls per notice, {r['notifier_call_ms_per_notice']:g} ms in all",
            ),
        ],
        lambda: [
            (
                f"tap / /me at {x['waiting']:,} waiting",
                f"{x['tap']['calls']} calls {x['tap']['read_units']:g} RCU / "
                f"{x['me']['calls']} calls {x['me']['read_units']:g} RCU",
                "tap <= 2 calls, <= 2 RCU",
                f"/me's place before: a COUNT of {x['me_before_count']['items_read']:,} items, "
                f"{x['me_before_count']['read_units']:g} RCU; list built in {x['build_s']:g} s",
            )
            for x in r["scale"]
        ],
        lambda: [
            (
                "two restocks at once, SES 14/s",
                f"{r['fleet_two_restocks_sent']} of {r['fleet_two_restocks_people']} sent in {r['fleet_two_restocks_seconds']:g} s",
                "all sent, 0 throttles",
                f"{r['fleet_two_restocks_throttle_errors']} throttle errors, {r['fleet_two_restocks_job_failures']} failed jobs; "
                f"{r['fleet_invocations']} invocations at {r['fleet_per_invocation_email_rate']:g}/s each; "
                f"floor {r['fleet_two_restocks_floor_seconds']:g} s; real time",
            ),
        ],
        lambda: [
            (
                "AWS calls per top-up after 10,000 told",
                f"{r['topup_calls_after_10k']:g}",
                "<= 20",
                f"{r['topup_write_units_after_10k']:g} write / {r['topup_read_units_after_10k']:g} read units; "
                f"{r['topup_told_after_10k']} told; resumes at the restock's cursor",
            ),
        ],
        lambda: [
            (
                "cold import: app / boto3 (ms)",
                f"{r['import_ms_app']:g} / {r['import_ms_boto3']:g}",
                "<= 1.5x (goal 1.3x)",
                f"ratio {r['import_ratio']:g}; the app as packaged, bytecode of what a cold start loads included",
            ),
        ],
        lambda: [
            (
                "  its own modules from source (ms)",
                f"{r['import_ms_app_source']:g}",
                "",
                f"ratio {r['import_ratio_source']:g}; the package before it carried bytecode",
            ),
        ],
        lambda: [
            (
                "  from build/deployment.zip (ms)",
                "no build/ (make package)" if r["import_ms_app_package"] is None else f"{r['import_ms_app_package']:g}",
                "",
                "" if r["import_ratio_package"] is None else f"ratio {r['import_ratio_package']:g}; its own libraries",
            ),
        ],
        lambda: [
            (
                "  with bytecode cached (ms)",
                f"{r['import_ms_app_bytecode']:g} / {r['import_ms_boto3_bytecode']:g}",
                "",
                f"ratio {r['import_ratio_bytecode']:g}",
            ),
        ],
        lambda: [
            (
                "deployment.zip",
                f"{package / 1e6:.2f} MB" if package else "no build/ (make package)",
                "<= 3 MB",
                "",
            ),
        ],
        lambda: [
            (
                "widget.js gzipped, level 9 / 6",
                f"{r['widget_gzip9_bytes']:,} / {r['widget_gzip6_bytes']:,} bytes",
                "< 10,240 bytes",
                f"{r['widget_bytes']:,} bytes as served: styles and five languages' strings included",
            ),
        ],
        lambda: [
            (
                "SMS segments per notice",
                f"{r['sms_segments_per_notice']:g}",
                "<= 2",
                f"{'/'.join(r['sms_encodings'])}, {r['sms_characters'][0]}-{r['sms_characters'][1]} characters "
                f"with {r['sms_link_base']} links, in {'/'.join(r['sms_segments_by_lang'])}; "
                f"two-way {'on' if r['sms_two_way'] else 'off'}",
            ),
        ],
        lambda: [
            (
                "catalogue sync, 10,000 new products",
                f"{r['catalog_sync_10k_s']:g} s in {r['catalog_sync_10k_runs']} runs",
                "every run ends before its 30 s",
                f"{r['catalog_sync_10k_calls']} calls; longest run {r['catalog_sync_10k_longest_run_s']:g} s",
            ),
        ],
        lambda: [
            (
                "  the same feed again",
                f"{r['catalog_sync_10k_unchanged_s']:g} s in {r['catalog_sync_10k_unchanged_runs']} runs",
                "",
                f"{r['catalog_sync_10k_unchanged_calls']} calls, nothing written",
            ),
        ],
        lambda: [
            (
                "sweep, 10,000 live offers",
                f"{r['sweep_10k_live_calls']} calls, {r['sweep_10k_live_s']:g} s",
                "",
                "none due: only the index pages read",
            ),
        ],
        lambda: [
            (
                "  the 10,000 lapsing",
                f"{r['sweep_10k_lapse_s']:g} s in {r['sweep_10k_lapse_runs']} runs",
                "every run ends before its 30 s",
                f"{r['sweep_10k_lapse_calls']} calls; longest run {r['sweep_10k_lapse_longest_run_s']:g} s",
            ),
        ],
        lambda: [
            (
                "STOP sync, 10,000 opted out",
                f"${r['stop_sync_10k_usd_per_day']:.5f} a day",
                "",
                f"one pass a day ({r['stop_sync_10k_pass_calls']} calls); a full pass every minute "
                f"would be ${r['stop_sync_10k_usd_per_day_full_pass_every_minute']:.4f}",
            ),
        ],
        lambda: [
            (
                f"waiting-list import, {r['import_rows']:,} rows",
                f"{r['import_first_s']:g} s ({r['import_first_rows_per_s']:g} rows/s)",
                "minutes",
                f"{r['import_first_calls']} calls; the re-run {r['import_again_s']:g} s, "
                f"{r['import_again_written']} written, {r['import_again_calls']} calls",
            ),
        ],
        lambda: [
            (
                "monthly cost, reference shop",
                f"${r['monthly_cost_usd_without_sms']:.2f} + SMS ${r['monthly_sms_usd']:.2f}",
                "",
                f"total ${r['monthly_cost_usd']:.2f}; {r['prices']}",
            ),
        ],
    ]
    rows: list[Row] = []
    for make in makers:
        with contextlib.suppress(KeyError, TypeError):
            rows += make()
    rows += [(f"  {name}", f"${usd:.4f}", "", "") for name, usd in r.get("monthly_cost_lines_usd", {}).items()]
    # Each section ran in its own process: its peak resident memory, its wall time, and why it stopped if it did.
    for name, mb in r["peak_rss_mb_by_section"].items():
        note = r["sections_not_finished"].get(name, "")
        rows.append((f"section {name}", f"{mb:,.0f} MB peak, {r['seconds_by_section'][name]:g} s", "< 4,096 MB", note))
    widths = [max(len(str(row[i])) for row in rows) for i in range(3)]
    head = ("measure", "this machine", "target", "note")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=False)) + "  " + head[3]]
    lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 4)
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row[:3], widths, strict=False)) + "  " + row[3])
    return "\n".join(lines)


def main() -> None:
    """Measure, print the table, then the JSON object as the last line.

    `python -m bench --size quick` runs every section at small sizes (`make bench QUICK=1`); `python -m bench sms`
    measures only the SMS segments (a second, no emulator) and prints them as JSON; `--section NAME` is how the
    bench runs one section in a process of its own."""
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("only", nargs="?", choices=["sms"])
    parser.add_argument("--size", choices=sorted(SIZES), default=os.environ.get("BENCH_SIZE") or "full")
    parser.add_argument("--section", choices=[s.name for s in SECTIONS])
    args = parser.parse_args()
    if args.only == "sms":
        from bench.sms import sms_segments_per_notice

        print(json.dumps(sms_fields(sms_segments_per_notice()), sort_keys=True))
        return
    if args.section:
        child_main(args.section, args.size)
        return
    result = run(args.size)
    print(table(result))
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
