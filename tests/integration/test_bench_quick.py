"""`make bench` end to end at tiny sizes: every section runs in its own process and the last line is the JSON
object docs/BENCHMARKS.md describes, so a change that breaks the bench fails here, not in the next full run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = (
    "capture_calls_per_tap",
    "capture_rcu_per_tap_at_10",
    "me_rcu_at_10",
    "topup_calls_after_10k",
    "sms_segments_per_notice",
    "notifier_throughput_ratio",
    "import_ratio",
    "catalog_sync_10k_runs",
    "sweep_10k_lapse_runs",
    "stop_sync_10k_usd_per_day",
    "admin_calls_per_page_view",
    "fleet_two_restocks_sent",
    "monthly_cost_usd",
    "peak_rss_mb",
)


def test_the_bench_runs_every_section_and_ends_with_its_json_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--size", "tiny"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["sections_not_finished"] == {}, done.stderr[-4000:]
    assert [k for k in KEYS if k not in result] == []
    assert set(result["peak_rss_mb_by_section"]) == set(result["seconds_by_section"])
    assert 0 < result["peak_rss_mb"] < 4096
    # The measured tap on a list joined it in the steady state: one ticket, one transaction.
    assert result["capture_calls_per_tap_at_10"] <= 2
