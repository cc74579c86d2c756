"""A month of the reference shop, priced from the measured AWS calls per activity and bench/prices.py.

The reference shop: 5,000 taps, 40 restocks and 1,500 notices a month, half by SMS and half by email.
What the issue does not fix is assumed here, in one place: half the links are tapped (750 holds), half
the holds are bought (375 orders), the rest lapse or expire, and each lapse or expiry is followed by its
own top-up job (an upper bound: one sweep often frees several units at once). SMS are billed per segment:
each SMS notice costs the segments measured on the composed messages (bench/sms.py), not one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.prices import USD

MINUTES_A_MONTH = 30 * 24 * 60
# Not measurable in-process, so assumed (and named as such in the table): the SQS trigger's long polling
# of the job queue, the functions' Secrets Manager reads (a 5-minute cache per warm function), the
# Bedrock prompt and answer sizes, how long an invocation runs per AWS call it makes, and the memory.
SQS_TRIGGER_POLLS = 650_000
SECRET_READS = 40_000
SECRETS = 4
BEDROCK_TOKENS = (1_000, 2_000)  # one call per restock: the copy in five languages (chalicelib/messages/copywriter.py)
MS_PER_CALL, MS_BASE, MEMORY_GB = 15, 10, 0.5


@dataclass(frozen=True)
class Shop:
    """What happens in the reference shop in a month."""

    taps: int = 5_000
    restocks: int = 40
    sms: int = 750
    emails: int = 750
    holds: int = 750
    orders: int = 375

    @property
    def notices(self) -> int:
        return self.sms + self.emails

    @property
    def lapses(self) -> int:
        return self.notices - self.holds

    @property
    def expiries(self) -> int:
        return self.holds - self.orders

    @property
    def jobs(self) -> int:
        return self.restocks + self.lapses + self.expiries


def monthly_cost(measured: dict[str, Any], shop: Shop = Shop()) -> dict[str, Any]:
    """Lines of the month's bill in USD (SMS apart), with the quantities behind them.

    `measured["sms_segments"]` is the segments billed per SMS notice, as measured on composed messages."""
    segments = measured["sms_segments"]
    tap, detect = measured["tap"], measured["detection"]
    notice, job = measured["notifier"]["per_notice"], measured["notifier"]["per_job"]
    hold, order = measured["hold_order"]["per_hold"], measured["hold_order"]["per_order"]
    sweep = measured["sweep"]
    # (activity, how many a month, its measured calls and units)
    activities = [
        ("taps", shop.taps, tap),
        ("restock detections", shop.restocks, detect),
        ("notices", shop.notices, notice),
        ("notifier jobs", shop.jobs, job),
        ("holds", shop.holds, hold),
        ("orders", shop.orders, order),
        ("sweep minutes", MINUTES_A_MONTH, sweep["idle"]),
        ("lapses", shop.lapses, sweep["per_lapse"]),
        ("expiries", shop.expiries, sweep["per_expiry"]),
    ]
    write_units = sum(n * a["write_units"] for _, n, a in activities)
    read_units = sum(n * a["read_units"] for _, n, a in activities)
    calls = sum(n * a["total"] for _, n, a in activities)
    sqs_calls = sum(n * _service_calls(a, "sqs") for _, n, a in activities) + 2 * shop.jobs + SQS_TRIGGER_POLLS
    sns_other = sum(n * _service_calls(a, "sns") for _, n, a in activities) - shop.sms
    api_requests = shop.taps + shop.restocks + shop.holds + shop.orders
    invocations = api_requests + shop.jobs + MINUTES_A_MONTH
    gb_seconds = (invocations * MS_BASE + calls * MS_PER_CALL) / 1000 * MEMORY_GB
    lines = {
        "dynamodb": write_units * USD["dynamodb_write_unit"] + read_units * USD["dynamodb_read_unit"],
        "lambda": invocations * USD["lambda_request"] + gb_seconds * USD["lambda_gb_second"],
        "api_gateway": api_requests * USD["api_gateway_request"],
        "sqs": sqs_calls * USD["sqs_request"],
        "sns_api": max(0.0, sns_other) * USD["sns_request"],
        "ses": shop.emails * USD["email"],
        "bedrock": shop.restocks
        * (BEDROCK_TOKENS[0] * USD["bedrock_input_token"] + BEDROCK_TOKENS[1] * USD["bedrock_output_token"]),
        "secrets": SECRETS * USD["secret_month"] + SECRET_READS * USD["secret_request"],
    }
    sms = shop.sms * segments * USD["sms_uk_segment"]
    without_sms = sum(lines.values())
    return {
        "lines": lines,
        "sms": sms,
        "without_sms": without_sms,
        "total": without_sms + sms,
        "quantities": {
            "dynamodb_write_units": write_units,
            "dynamodb_read_units": read_units,
            "aws_calls": calls,
            "sqs_requests": sqs_calls,
            "lambda_invocations": invocations,
            "lambda_gb_seconds": gb_seconds,
            "api_requests": api_requests,
            "sms_segments": shop.sms * segments,
        },
        "shop": {
            "taps": shop.taps,
            "restocks": shop.restocks,
            "notices": shop.notices,
            "sms": shop.sms,
            "sms_segments_per_notice": segments,
            "emails": shop.emails,
            "holds": shop.holds,
            "orders": shop.orders,
            "notifier_jobs": shop.jobs,
        },
    }


def _service_calls(activity: dict[str, Any], service: str) -> float:
    calls = activity.get("calls", {})
    return float(sum(v for k, v in calls.items() if k.startswith(service + ".")))
