"""The bench's sections, each measured in a process of its own on its own emulator.

Nothing a section builds (tables of 10,000s of items, clients, threads) outlives it, so one section's heap never
weighs on the next, and each reports its own peak resident memory (getrusage's ru_maxrss of that process). A
section that outgrows MAX_RSS_MB or SECTION_TIMEOUT_S is stopped and its row says so; the rest still run.

Three sizes: "full" (`make bench`), "quick" (`make bench QUICK=1`, every section at small sizes, a couple of
minutes) and "tiny" (the test that keeps the bench running, tests/integration/test_bench_quick.py).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MAX_RSS_MB = int(os.environ.get("BENCH_MAX_RSS_MB", "3500"))  # under the 4 GB a run may take
SECTION_TIMEOUT_S = float(os.environ.get("BENCH_SECTION_TIMEOUT_S", "900"))
RESULT = "bench-section-result "  # the prefix of the line a section's process answers with

SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "taps": 200,
        "throughput_units": 1000,
        "throughput_runs": 3,
        "fleet_people": 300,
        "scale": (10, 1_000, 10_000, 50_000),
        "admin": None,  # bench/admin.py's own shop
        "topup": (10_000, 10_200),
        "import_runs": 11,
        "catalog": 10_000,
        "offers": 10_000,
        "optouts": 10_000,
        "import_rows": 10_000,
    },
    "quick": {
        "taps": 50,
        "throughput_units": 300,
        "throughput_runs": 3,
        "fleet_people": 40,
        "scale": (10, 1_000),
        "admin": {"WAITING": 1_000, "SKUS": 20, "RESTOCKS": 100, "RESTOCKED_SKUS": 20},
        "topup": (500, 520),
        "import_runs": 3,
        "catalog": 500,
        "offers": 500,
        "optouts": 1_000,
        "import_rows": 1_000,
    },
    "tiny": {
        "taps": 5,
        "throughput_units": 20,
        "throughput_runs": 1,
        "fleet_people": 5,
        "scale": (10,),
        "admin": {"WAITING": 50, "SKUS": 5, "RESTOCKS": 10, "RESTOCKED_SKUS": 5},
        "topup": (20, 22),
        "import_runs": 1,
        "catalog": 20,
        "offers": 20,
        "optouts": 200,
        "import_rows": 20,
    },
}


def _capture(size: dict[str, Any]) -> Any:
    from bench import measure

    return measure.calls_per_tap(taps=size["taps"])


def _calls(size: dict[str, Any]) -> Any:
    from bench import measure

    return {
        "detection": measure.calls_per_detection(),
        "notifier": measure.calls_per_notice(),
        "hold_order": measure.calls_per_hold_and_order(),
        "sweep": measure.calls_per_sweep(),
    }


def _throughput(size: dict[str, Any]) -> Any:
    from bench import measure

    return measure.notifier_throughput(units=size["throughput_units"], runs=size["throughput_runs"])


def _fleet(size: dict[str, Any]) -> Any:
    from bench.fleet import two_restocks_at_once

    return two_restocks_at_once(size["fleet_people"])


def _scale(size: dict[str, Any]) -> Any:
    from bench import scale

    return scale.run(tuple(size["scale"]))


def _admin(size: dict[str, Any]) -> Any:
    from bench import admin

    for name, value in (size["admin"] or {}).items():
        setattr(admin, name, value)
    return admin.measure()


def _topup(size: dict[str, Any]) -> Any:
    from bench.topup import topup_after_restock

    units, waiting = size["topup"]
    return topup_after_restock(units, waiting)


def _imports(size: dict[str, Any]) -> Any:
    from bench.imports import import_times
    from bench.widget import widget_size

    return {"imports": import_times(runs=size["import_runs"]), "widget": widget_size()}


def _sms(size: dict[str, Any]) -> Any:
    from bench.sms import sms_segments_per_notice

    return sms_segments_per_notice()


def _catalog_sync(size: dict[str, Any]) -> Any:
    from bench import syncs

    return syncs.catalog_sync(size["catalog"])


def _sweep_offers(size: dict[str, Any]) -> Any:
    from bench import syncs

    return syncs.sweep_with_offers(size["offers"])


def _stop_sync(size: dict[str, Any]) -> Any:
    from bench import syncs

    return syncs.stop_sync_day(size["optouts"])


def _waitlist_import(size: dict[str, Any]) -> Any:
    from bench.waitlist_import import import_rows

    return import_rows(size["import_rows"])


@dataclass(frozen=True)
class Section:
    name: str
    says: str  # what the progress line on stderr says it measures
    measure: Callable[[dict[str, Any]], Any]


SECTIONS = (
    Section("capture", "capture", _capture),
    Section("calls", "detection, notifier, holds, orders, sweep", _calls),
    # Alone in its process and with nothing else of the bench running: the ratio is of the notifier's own rate.
    Section("throughput", "notifier throughput on a restock, three times", _throughput),
    Section("fleet", "two restocks at once under a 14/s SES quota (real time)", _fleet),
    Section("scale", "a tap and /me at each list length (building the lists takes minutes)", _scale),
    Section("admin", "a dashboard view at 10,000 waiting and 1,000 restocks", _admin),
    Section("topup", "a top-up after a large restock", _topup),
    Section("imports", "cold imports and the widget's size", _imports),
    Section("sms", "SMS segments of composed notices", _sms),
    Section("catalog_sync", "catalogue sync of the whole feed, then the same feed again", _catalog_sync),
    Section("sweep_offers", "the sweep with every offer live, then lapsing", _sweep_offers),
    Section("stop_sync", "the STOP sync's day", _stop_sync),
    Section("waitlist_import", "a 10,000-row waiting-list export imported, then imported again", _waitlist_import),
)
BY_NAME = {s.name: s for s in SECTIONS}


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (ru_maxrss is in KB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def child_main(name: str, size_name: str) -> None:
    """Run one section in this process and print its result on one line (`python -m bench --section NAME`)."""
    from bench import emulator
    from devstack import moto_patches

    # The emulator as `make dev` runs it: faithful, and without the bookkeeping DynamoDB does not do.
    moto_patches.install(fidelity=True, speed=True)
    emulator.install()
    result = BY_NAME[name].measure(SIZES[size_name])
    print(RESULT + json.dumps({"result": result, "peak_rss_mb": peak_rss_mb()}, default=str), flush=True)


@dataclass
class Outcome:
    """One section's run: its result, or why there is none; its peak memory and wall time."""

    name: str
    result: Any = None
    error: str | None = None
    peak_rss_mb: float = 0.0
    seconds: float = 0.0


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_section(name: str, size_name: str) -> Outcome:
    """Run one section in a fresh process, watching its memory; stop it past MAX_RSS_MB or SECTION_TIMEOUT_S."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "--section", name, "--size", size_name],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    watched: dict[str, Any] = {"peak": 0.0, "stopped": ""}

    def watch() -> None:
        while proc.poll() is None:
            rss = _rss_mb(proc.pid)
            watched["peak"] = max(watched["peak"], rss)
            if rss > MAX_RSS_MB:
                watched["stopped"] = f"did not fit: stopped at {rss:,.0f} MB resident (limit {MAX_RSS_MB:,} MB)"
            elif time.perf_counter() - started > SECTION_TIMEOUT_S:
                watched["stopped"] = f"did not finish: stopped after {SECTION_TIMEOUT_S:g} s"
            if watched["stopped"]:
                proc.kill()
                return
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, _ = proc.communicate()
    watcher.join()
    outcome = Outcome(name, seconds=round(time.perf_counter() - started, 1), peak_rss_mb=round(watched["peak"], 1))
    answer = next((line for line in reversed(out.splitlines()) if line.startswith(RESULT)), None)
    if watched["stopped"]:
        outcome.error = watched["stopped"]
    elif proc.returncode != 0 or answer is None:
        outcome.error = f"failed (exit status {proc.returncode}); its traceback is above"
    else:
        parsed = json.loads(answer[len(RESULT) :])
        outcome.result = parsed["result"]
        outcome.peak_rss_mb = max(outcome.peak_rss_mb, float(parsed["peak_rss_mb"]))
    return outcome
