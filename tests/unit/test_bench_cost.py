"""The benchmark's arithmetic: DynamoDB units from requests, and a month's bill from calls per activity."""

from __future__ import annotations

import json
import re
from typing import Any

from bench.__main__ import scale_fields, sms_fields, sync_fields, table
from bench.calls import CallLog
from bench.cost import MINUTES_A_MONTH, Shop, monthly_cost
from bench.prices import USD
from bench.sms import composed_reminder_sms, composed_sms, demo_products, measured_settings, sms_segments_per_notice
from chalicelib.messages.sms import sms_segments


def activity(total: float, writes: float = 0.0, reads: float = 0.0, **calls: float) -> dict[str, Any]:
    return {"total": total, "write_units": writes, "read_units": reads, "calls": calls}


MEASURED = {
    "tap": activity(2, writes=10, reads=1),
    "detection": activity(5, writes=8, reads=2, **{"sqs.SendMessage": 1}),
    "notifier": {"per_notice": activity(3, writes=6), "per_job": activity(5, reads=3)},
    "hold_order": {"per_hold": activity(2, writes=8), "per_order": activity(2, writes=8)},
    "sweep": {"idle": activity(8, reads=8), "per_lapse": activity(2, writes=6), "per_expiry": activity(3, writes=8)},
    "sms_segments": 3,
}


def test_a_transaction_bills_two_units_per_item_plus_index_writes() -> None:
    log = CallLog("bisn")
    put = {"Put": {"TableName": "bisn-requests", "Item": {"sku": {"S": "A"}, "joined_ts": {"S": "t"}}}}
    indexed = {"Put": {"TableName": "bisn-requests", "Item": {"sku": {"S": "A"}, "contact_key": {"S": "k"}}}}
    check = {"ConditionCheck": {"TableName": "bisn-optout", "Key": {"contact": {"S": "k"}}}}
    units = log._write_units("TransactWriteItems", {"TransactItems": [put, indexed, check]})
    assert units == 2 + (2 + 1) + 2  # the second item also lands in the by-contact index


def test_the_month_is_priced_from_calls_per_activity_with_sms_apart() -> None:
    shop = Shop()
    cost = monthly_cost(MEASURED, shop)
    assert cost["sms"] == shop.sms * 3 * USD["sms_uk_segment"]
    assert cost["total"] == cost["without_sms"] + cost["sms"]
    writes = shop.taps * 10 + shop.restocks * 8 + shop.notices * 6 + (shop.holds + shop.orders) * 8
    writes += shop.lapses * 6 + shop.expiries * 8
    assert cost["quantities"]["dynamodb_write_units"] == writes
    reads = shop.taps + shop.restocks * 2 + shop.jobs * 3 + MINUTES_A_MONTH * 8
    assert cost["quantities"]["dynamodb_read_units"] == reads
    assert cost["lines"]["ses"] == shop.emails * USD["email"]


def test_the_table_names_every_target() -> None:
    row = {
        "capture_calls_per_tap": 2,
        "capture_calls_by_operation": {"dynamodb.TransactWriteItems": 1, "dynamodb.Query": 1},
        "detection_calls": 5,
        "notifier_calls_per_notice": 3,
        "notifier_calls_per_job": 5,
        "hold_calls": 2,
        "order_calls": 2,
        "sweep_calls_idle_minute": 8,
        "sweep_calls_per_lapse": 2,
        "sweep_calls_per_expiry": 3,
        "notices_per_s": 100,
        "notices_bound_per_s": 320,
        "notices_ratio": 0.31,
        "notices_ratio_runs": [0.3, 0.31, 0.33],
        "notifier_concurrency": 16,
        "notifier_send_latency_ms": 50,
        "notifier_calls_per_notice_in_walk": 2,
        "notifier_call_ms_per_notice": 8,
        "notifier_serial_ceiling_per_s": 125,
        "fleet_two_restocks_sent": 600,
        "fleet_two_restocks_people": 600,
        "fleet_two_restocks_seconds": 43.7,
        "fleet_two_restocks_throttle_errors": 0,
        "fleet_two_restocks_job_failures": 0,
        "fleet_two_restocks_floor_seconds": 42.9,
        "fleet_invocations": 2,
        "fleet_per_invocation_email_rate": 7,
        "import_ms_app": 200,
        "import_ms_boto3": 120,
        "import_ratio": 1.67,
        "import_ms_app_bytecode": 150,
        "import_ms_boto3_bytecode": 120,
        "import_ratio_bytecode": 1.25,
        "package_zip_bytes": None,
        "widget_bytes": 28_127,
        "widget_gzip9_bytes": 9_826,
        "widget_gzip6_bytes": 9_832,
        "sms_segments_per_notice": 3,
        "sms_segments_by_lang": {"en": 3, "de": 3},
        "sms_two_way": False,
        "sms_characters": [417, 423],
        "sms_encodings": ["GSM-7"],
        "sms_link_base": "https://notify.your-shop.example",
        "monthly_cost_usd": 32.5,
        "monthly_sms_usd": 30.0,
        "monthly_cost_usd_without_sms": 2.5,
        "monthly_cost_lines_usd": {"dynamodb": 0.2},
        "prices": "eu-west-2",
        # Every run reports each section's own process: its peak memory, its time, and why it stopped if it did.
        "peak_rss_mb_by_section": {"capture": 120.0, "catalogue sync": 619.0},
        "seconds_by_section": {"capture": 3.5, "catalogue sync": 650.0},
        "sections_not_finished": {"catalogue sync": "stopped past 3,500 MB"},
    }
    runs = {"runs": 2, "seconds": 40.0, "longest_run_s": 21.0, "calls": 10_204, "calls_by_operation": {}}
    row.update(
        sync_fields(
            {"first": runs, "unchanged": {**runs, "runs": 1, "calls": 103}},
            {"live": {**runs, "runs": 1, "calls": 2}, "lapsing": runs},
            {"usd_per_day": 0.001, "usd_per_day_full_pass_every_minute": 1.2, "full_pass": runs, "quiet_minute": runs},
        )
    )
    at_50k = {
        "waiting": 50_000,
        "tap": {"calls": 2, "read_units": 0},
        "me": {"calls": 6, "read_units": 5},
        "me_before_count": {"items_read": 25_001, "read_units": 2_072},
        "build_s": 339,
    }
    row.update(scale_fields([at_50k]))
    row.update(
        {
            "topup_calls_after_10k": 10,
            "topup_write_units_after_10k": 10,
            "topup_read_units_after_10k": 19,
            "topup_told_after_10k": 1,
        }
    )
    text = table(row)
    assert row["capture_rcu_per_tap_at_50k"] == 0 and "tap / /me at 50,000 waiting" in text
    targets = ("<= 2 (goal 1)", ">= 0.8 of bound (goal 0.9)", "<= 1.5x (goal 1.3x)", "<= 3 MB")
    for target in (*targets, "every run ends before its 30 s"):
        assert target in text
    assert re.search(r"SMS segments per notice +\S+ +<= 2 ", text)  # the product's target: 2 segments
    assert row["catalog_sync_10k_s"] == 40.0 and row["catalog_sync_10k_runs"] == 2
    assert "no build/ (make package)" in text
    assert re.search(r"widget\.js gzipped, level 9 / 6 +9,826 / 9,832 bytes +< 10,240 bytes", text)
    assert re.search(r"section catalogue sync +619 MB peak, 650 s +< 4,096 MB +stopped past 3,500 MB", text)
    json.dumps(row)


def test_sms_are_priced_per_measured_segment_not_per_message() -> None:
    one, three = (monthly_cost({**MEASURED, "sms_segments": n}) for n in (1, 3))
    assert three["sms"] == 3 * one["sms"] == Shop().sms * 3 * USD["sms_uk_segment"]
    assert three["quantities"]["sms_segments"] == Shop().sms * 3
    assert three["without_sms"] == one["without_sms"]


def test_the_reported_segments_are_those_of_a_composed_demo_message() -> None:
    measured = sms_segments_per_notice()
    settings = measured_settings()
    for product in demo_products().values():
        for model in (False, True):
            text = composed_sms(settings, product, model=model)
            assert text.startswith("Walnut & Wool (demo shop): ") and "Link valid for " in text
            assert sms_segments(text) <= measured["segments"]
    longest = composed_sms(settings, demo_products()["longest"], model=False)
    assert sms_segments(longest) == measured["segments"]
    fields = sms_fields(measured)
    assert fields["sms_segments_per_notice"] == measured["segments"]
    # A deployed stage's longest links: an API Gateway default endpoint outlasts the prod stage's custom domain.
    assert fields["sms_link_base"] == "https://abcdefghij.execute-api.eu-west-2.amazonaws.com/api"
    assert fields["sms_segments_per_notice"] == 2
    # The reminder before an offer lapses, for a shop that turns it on for SMS: no more than a notice.
    reminder = composed_reminder_sms(settings, demo_products()["longest"])
    assert reminder.startswith("Walnut & Wool (demo shop): ") and "10 minutes" in reminder
    assert fields["sms_segments_per_reminder"] == measured["reminder_segments"] == 2
    json.dumps(fields)
