"""The benchmark's call counting on the emulator: a new tap is one transaction and one count."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from bench.measure import calls_per_tap


def test_a_counted_tap_is_its_line_ticket_and_one_transaction() -> None:
    counted = calls_per_tap(taps=5, warm=2)
    # The ticket (chalicelib/line.py) is a plain write beside the transaction, so no transaction holds it.
    assert counted["calls"] == {"dynamodb.TransactWriteItems": 1.0, "dynamodb.UpdateItem": 1.0}
    assert counted["total"] == 2
    # rate limit, catalogue and request: 2 units each (+1 each index the request lands in); opt-out check; uniqueness
    assert counted["write_units"] >= 10


def test_the_throughput_bench_tells_every_waiting_shopper_through_the_real_notifier() -> None:
    from bench.measure import one_restock

    # Small and fast: this proves the bench's notifier run works end to end; `make bench` measures it.
    result = one_restock(units=30, latency_s=0.001)
    assert result["sent"] == 30
    assert result["jobs"] >= 1


class Outbox:
    """Stands in for SNS and SES: keeps every notice the notifier hands over."""

    def __init__(self) -> None:
        self.notices: list[Any] = []
        self.lock = threading.Lock()

    def send(self, notice: Any, *, just_before: Callable[[], None] | None = None) -> str:
        if just_before is not None:
            just_before()
        with self.lock:
            self.notices.append(notice)
            return f"msg-{len(self.notices)}"


def test_the_reported_sms_segments_are_those_the_notifier_sends_for_the_demo_catalogue() -> None:
    from bench.sms import DEMO_CATALOG, demo_products, measured_settings, sms_segments_per_notice
    from bench.stack import stack, waiting_list
    from chalicelib.messages.sms import sms_segments

    reported = sms_segments_per_notice()
    catalogue = {p["sku"]: p for p in json.loads(DEMO_CATALOG.read_text())["products"]}
    base_url = measured_settings().public_base_url
    for copy_mode in ("template", "fake"):
        outbox = Outbox()
        with stack({"PUBLIC_BASE_URL": base_url, "COPY_MODE": copy_mode}, senders=outbox) as s:
            for product in demo_products().values():
                item = {k: v for k, v in catalogue[product.sku].items() if k != "sku"}
                s.services.tables.catalog.upsert(product.sku, item)
                waiting_list(s, product.sku, 3, email_every=1_000)  # the first by email, the rest by SMS
                s.inventory(product.sku, 3)
            s.deliver_jobs()
        texts = [notice.text for notice in outbox.notices if notice.channel == "sms"]
        assert len(texts) == 4
        assert all(text.startswith("Walnut & Wool (demo shop): ") and "Link valid for " in text for text in texts)
        assert max(sms_segments(text) for text in texts) == reported["segments"]


def test_the_ses_gate_refuses_what_is_over_the_accounts_rate_as_ses_does() -> None:
    from bench.fleet import GatedSes, SesQuota
    from chalicelib.messages.senders import throttled

    class Recorder:
        def __init__(self) -> None:
            self.sent = 0

        def send_email(self, **_: Any) -> dict[str, Any]:
            self.sent += 1
            return {"MessageId": str(self.sent)}

    quota = SesQuota(14.0)
    ses = GatedSes(Recorder(), quota)
    answers = []
    for _ in range(20):  # at once: one second's worth passes, the rest is refused and nothing of it is sent
        try:
            answers.append(ses.send_email(Destination={}))
        except Exception as error:
            assert throttled(error), "the senders take the refusal for back-pressure"
            answers.append(None)
    assert sum(a is not None for a in answers) == 14 and (quota.accepted, quota.throttled) == (14, 6)
    assert ses.get_account()["SendQuota"]["MaxSendRate"] == 14.0


def test_the_fleet_bench_tells_both_lists_through_two_invocations_under_the_quota() -> None:
    from bench.fleet import two_restocks_at_once

    # Small: 10 people a product, under two seconds of sending at the quota; `make bench` runs 300 each.
    result = two_restocks_at_once(people_per_product=10)
    assert (result["sent"], result["notices_recorded"], result["people"]) == (20, 20, 20)
    assert result["invocations"] == 2 and result["per_invocation_rate"] == 7.0
    # A throttle is back-pressure, never a failed job. How many the gate answers depends on how evenly this machine
    # schedules the two senders (a stall then a catch-up bunches sends), so `make bench` reports it, unasserted.
    assert result["job_failures"] == 0


def test_a_topup_costs_the_same_after_a_big_restock_as_after_a_small_one() -> None:
    from bench.topup import topup_after_restock

    # Small and fast: `make bench` measures the 10,000-unit case. The top-up resumes at the restock's cursor, so
    # what it costs does not grow with how many were told before it.
    small = topup_after_restock(units=30, waiting=40)
    large = topup_after_restock(units=150, waiting=160)
    assert small["topup_told"] == large["topup_told"] == 1
    assert large["total"] == small["total"] <= 20
    assert large["write_units"] == small["write_units"]
