"""Restock detection on the emulator: signatures, the crossing table, exactly-once restocks and jobs, crashes."""

from __future__ import annotations

import threading
from dataclasses import replace
from decimal import Decimal
from typing import Any

import boto3
import pytest
from boto3.dynamodb.conditions import Key

from app import DETECT_STATUS
from chalicelib.aws import Aws
from chalicelib.clock import iso
from chalicelib.config import settings_from_env
from chalicelib.detect import DetectOutcome, restock_id_for
from chalicelib.errors import InvalidSignature
from chalicelib.queue.jobs import JobQueue
from chalicelib.queue.messages import Job
from chalicelib.queue.owed import ENQUEUE_LEASE_S, OwedJobs
from chalicelib.tables.base import TransactionCancelled, transact
from chalicelib.web.errors import error_status
from chalicelib.webhooks import sign
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from tests.inventory import body, deliver, queued, restocks, signed
from tests.support import CHAIR, REGION, CrashAt, InjectedCrash, rebuilt

OTHER_SECRET = "whsec_" + "b3RoZXItc2VjcmV0LW5vdC10aGUtc2hvcHMtc2VjcmV0"
NEW_SECRET = "whsec_" + "bmV3LXJvdGF0ZWQtd2ViaG9vay1zZWNyZXQtMzJieXRlcw=="


def ago(services: Services, seconds: float) -> str:
    """An ISO-8601 event time `seconds` before the services' clock."""
    return iso(services.clock.now() - seconds)


def audit(services: Services, sku: str, kind: str) -> list[dict[str, Any]]:
    return [fact for fact in services.tables.audit.for_sku(sku) if fact["kind"] == kind]


def only_restock(services: Services, sku: str) -> dict[str, Any]:
    [restock] = restocks(services, sku)
    return restock


class Calls:
    """Counts the AWS operations one client makes (a botocore event hook)."""

    def __init__(self, client: Any) -> None:
        self.names: list[str] = []
        client.meta.events.register("before-call", self._seen)

    def _seen(self, model: Any, **_: Any) -> None:
        self.names.append(model.name)


# --- Signatures: nothing is read or written for a delivery whose signature does not hold.


def tampered(services: Services, sku: str) -> tuple[bytes, dict[str, str]]:
    headers = signed(services, body(sku, 3))
    return body(sku, 30).encode(), headers


def wrong_secret(services: Services, sku: str) -> tuple[bytes, dict[str, str]]:
    text = body(sku, 3)
    return text.encode(), signed(services, text, secret=OTHER_SECRET)


def stale(services: Services, sku: str) -> tuple[bytes, dict[str, str]]:
    text = body(sku, 3)
    return text.encode(), signed(services, text, at=services.clock.now() - 6 * 60)


def future(services: Services, sku: str) -> tuple[bytes, dict[str, str]]:
    text = body(sku, 3)
    return text.encode(), signed(services, text, at=services.clock.now() + 6 * 60)


def without(header: str) -> Any:
    def build(services: Services, sku: str) -> tuple[bytes, dict[str, str]]:
        text = body(sku, 3)
        headers = signed(services, text)
        headers.pop(header)
        return text.encode(), headers

    return build


def signature_header(value: str) -> Any:
    def build(services: Services, sku: str) -> tuple[bytes, dict[str, str]]:
        text = body(sku, 3)
        return text.encode(), {**signed(services, text), "webhook-signature": value}

    return build


def not_a_timestamp(services: Services, sku: str) -> tuple[bytes, dict[str, str]]:
    text = body(sku, 3)
    return text.encode(), {**signed(services, text), "webhook-timestamp": "soon"}


BAD_DELIVERIES = {
    "wrong secret": wrong_secret,
    "tampered body": tampered,
    "stale": stale,
    "future": future,
    "no webhook-id": without("webhook-id"),
    "no webhook-timestamp": without("webhook-timestamp"),
    "no webhook-signature": without("webhook-signature"),
    "signature without version": signature_header("c2lnbmF0dXJl"),
    "signature not base64": signature_header("v1,***"),
    "unknown signature version only": signature_header("v2,c2lnbmF0dXJl"),
    "timestamp not a number": not_a_timestamp,
}


@pytest.mark.parametrize("build", BAD_DELIVERIES.values(), ids=BAD_DELIVERIES.keys())
def test_a_bad_signature_is_refused_before_anything_is_read(services: Services, chair: str, build: Any) -> None:
    raw, headers = build(services, chair)
    dynamodb, sqs = Calls(services.tables.catalog.table.meta.client), Calls(services.aws.sqs)
    with pytest.raises(InvalidSignature) as error:
        services.detector.handle(raw, headers)
    assert error_status(error.value) == 401
    assert error.value.code == "invalid_signature"
    assert dynamodb.names == [] and sqs.names == []
    assert restocks(services, chair) == []
    assert services.tables.catalog.get(chair).level is None


def test_a_valid_signature_is_accepted(services: Services, chair: str) -> None:
    assert deliver(services, chair, 3).status == "restock"


def test_several_signatures_in_one_header_are_accepted_if_one_holds(services: Services, chair: str) -> None:
    text = body(chair, 3)
    good = signed(services, text, webhook_id="msg_multi")
    other = sign(OTHER_SECRET, text, "msg_multi", services.clock.now())["webhook-signature"]
    headers = {**good, "webhook-signature": f"{other} {good['webhook-signature']}"}
    assert services.detector.handle(text.encode(), headers).status == "restock"


@pytest.fixture
def rotating(session: boto3.session.Session, clock: FixedClock, env: dict[str, str]) -> Services:
    """Services during a secret rotation: the old and the new webhook secret are both configured."""
    old = env["WEBHOOK_SECRET"]
    rotated = {**env, "WEBHOOK_SECRET": f"{old} {NEW_SECRET}"}
    services = Services(settings_from_env(rotated), aws=Aws(REGION, session=session), clock=clock, model=FakeBedrock())
    services.tables.catalog.upsert("CHAIR-WALNUT", dict(CHAIR))
    return services


@pytest.mark.parametrize("secret_index", [0, 1], ids=["old secret", "new secret"])
def test_both_secrets_are_accepted_during_a_rotation(rotating: Services, secret_index: int) -> None:
    secret = rotating.webhook_secrets()[secret_index]
    text = body("CHAIR-WALNUT", 2)
    outcome = rotating.detector.handle(text.encode(), signed(rotating, text, secret=secret))
    assert outcome.status == "restock"
    assert len(rotating.webhook_secrets()) == 2


def test_a_secret_outside_the_rotation_is_still_refused(rotating: Services) -> None:
    text = body("CHAIR-WALNUT", 2)
    with pytest.raises(InvalidSignature):
        rotating.detector.handle(text.encode(), signed(rotating, text, secret=OTHER_SECRET))


# --- The crossing table, end to end.


def test_below_to_above_records_one_restock_and_queues_its_job(services: Services, chair: str) -> None:
    deliver(services, chair, 0)
    outcome = deliver(services, chair, 4, webhook_id="msg_back")
    assert outcome == DetectOutcome("restock", restock_id=restock_id_for(chair, "msg_back"))
    restock = only_restock(services, chair)
    assert restock["restock_id"] == outcome.restock_id
    assert restock["webhook_id"] == "msg_back"
    assert (restock["units_total"], restock["units_available"], restock["units_offerable"]) == (4, 4, 4)
    assert (restock["level_before"], restock["level_after"]) == (0, 4)
    assert restock["state"] == "queued"
    assert "pending_key" not in restock and "enqueue_lease_until" not in restock
    assert queued(services) == [
        {"sku": chair, "restock_id": outcome.restock_id, "restock_ts": restock["restock_ts"], "kind": "restock"}
    ]
    product = services.tables.catalog.get(chair)
    assert (product.level, product.open_restock_id) == (4, outcome.restock_id)


def test_above_to_above_is_no_restock(services: Services) -> None:
    services.tables.catalog.upsert("MUG", {**CHAIR, "threshold": 3})
    deliver(services, "MUG", 2)  # below 3: nothing
    services.tables.catalog.upsert("MUG", {"threshold": 1})  # now 2 is above the threshold, with no restock open
    assert deliver(services, "MUG", 4) == DetectOutcome("no_restock", "no_crossing")
    assert restocks(services, "MUG") == []
    assert queued(services) == []


def test_a_level_that_never_reaches_the_threshold_is_no_restock(services: Services) -> None:
    services.tables.catalog.upsert("MUG", {**CHAIR, "threshold": 3})
    deliver(services, "MUG", 0)
    assert deliver(services, "MUG", 2) == DetectOutcome("no_restock", "no_crossing")
    assert restocks(services, "MUG") == []
    assert queued(services) == []


def test_exactly_at_the_threshold_is_a_restock(services: Services) -> None:
    services.tables.catalog.upsert("MUG", {**CHAIR, "threshold": 3})
    deliver(services, "MUG", 2)
    assert deliver(services, "MUG", 3).status == "restock"
    assert only_restock(services, "MUG")["units_total"] == 3


def test_falls_then_rises_is_a_second_restock(services: Services, chair: str, clock: FixedClock) -> None:
    first = deliver(services, chair, 3)
    clock.advance(1)
    closed = deliver(services, chair, 0)
    clock.advance(1)
    second = deliver(services, chair, 2)
    assert first.status == second.status == "restock"
    assert closed.adjusted == "closed"
    assert first.restock_id != second.restock_id
    states = [r["state"] for r in restocks(services, chair)]
    assert sorted(states) == ["closed", "queued"]
    assert [j["restock_id"] for j in queued(services)] == [first.restock_id, second.restock_id]


def test_an_out_of_order_delivery_never_makes_a_false_crossing(services: Services, chair: str) -> None:
    # The platform went 5 then 0 five minutes later; the later delivery arrives first.
    assert deliver(services, chair, 0, occurred_at=ago(services, 60)) == DetectOutcome("no_restock", "no_crossing")
    assert deliver(services, chair, 5, occurred_at=ago(services, 360)) == DetectOutcome("no_restock", "stale")
    assert restocks(services, chair) == []
    product = services.tables.catalog.get(chair)
    assert product.level == 0
    assert queued(services) == []


def test_without_occurred_at_the_webhook_timestamp_orders_events(services: Services, chair: str) -> None:
    now = services.clock.now()
    deliver(services, chair, 0, at=now + 10)
    assert deliver(services, chair, 5, at=now + 5).reason == "stale"
    assert restocks(services, chair) == []


def test_two_changes_in_the_same_second_are_both_applied(services: Services, chair: str) -> None:
    at = ago(services, 30)
    deliver(services, chair, 0, occurred_at=at)
    assert deliver(services, chair, 2, occurred_at=at).status == "restock"


# --- Exactly once: redeliveries and simultaneous deliveries.


def test_the_same_webhook_ten_times_makes_one_restock_and_one_job(services: Services, chair: str) -> None:
    text = body(chair, 5)
    headers = signed(services, text, webhook_id="msg_again")
    outcomes = [services.detector.handle(text.encode(), headers) for _ in range(10)]
    assert outcomes[0].status == "restock"
    assert outcomes[1:] == [DetectOutcome("no_restock", "duplicate")] * 9
    assert len(restocks(services, chair)) == 1
    assert len(queued(services)) == 1


def test_a_late_retry_after_the_restock_closed_makes_no_second_restock(
    services: Services, chair: str, clock: FixedClock
) -> None:
    deliver(services, chair, 5, webhook_id="msg_crossing")
    for n in range(40):  # many other events pass, then the stock runs out
        clock.advance(1)
        deliver(services, chair, 5 + n % 2)
    clock.advance(1)
    deliver(services, chair, 0)
    clock.advance(60)
    # The platform retries the first delivery (same id, fresh timestamp, no occurred_at).
    assert deliver(services, chair, 5, webhook_id="msg_crossing").reason == "duplicate"
    assert len(restocks(services, chair)) == 1
    assert services.tables.catalog.get(chair, consistent=True).open_restock_id is None


def test_a_redelivery_with_a_fresh_timestamp_is_still_a_duplicate(services: Services, chair: str) -> None:
    deliver(services, chair, 5, webhook_id="msg_retry")
    services.clock.advance(120)  # type: ignore[attr-defined]
    assert deliver(services, chair, 5, webhook_id="msg_retry").reason == "duplicate"
    assert len(restocks(services, chair)) == 1
    assert len(queued(services)) == 1


def test_identical_deliveries_from_eight_threads_make_one_restock_and_one_job(services: Services, chair: str) -> None:
    text = body(chair, 6)
    headers = signed(services, text, webhook_id="msg_burst")
    detector = services.detector
    outcomes: list[DetectOutcome] = []
    barrier = threading.Barrier(8)

    def one() -> None:
        barrier.wait()
        outcomes.append(detector.handle(text.encode(), headers))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(o.status for o in outcomes) == ["no_restock"] * 7 + ["restock"]
    assert {o.reason for o in outcomes if o.status == "no_restock"} == {"duplicate"}
    assert len(restocks(services, chair)) == 1
    assert len(queued(services)) == 1
    assert len(audit(services, chair, "restock_detected")) == 1


def test_different_webhooks_crossing_at_once_make_one_restock(services: Services, chair: str) -> None:
    detector = services.detector
    deliveries = []
    for n in range(8):
        text = body(chair, 3)
        deliveries.append((text.encode(), signed(services, text, webhook_id=f"msg_{n}")))
    outcomes: list[DetectOutcome] = []
    barrier = threading.Barrier(8)

    def one(raw: bytes, headers: dict[str, str]) -> None:
        barrier.wait()
        outcomes.append(detector.handle(raw, headers))

    threads = [threading.Thread(target=one, args=d) for d in deliveries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [o.status for o in outcomes].count("restock") == 1
    assert len(restocks(services, chair)) == 1
    assert len(queued(services)) == 1


# --- Nothing lost: a crash between writing the restock and enqueueing its job.


@pytest.fixture
def crashing(services: Services) -> Any:
    """Services whose detector crashes once at a named point."""

    def build(point: str) -> Services:
        return rebuilt(services, faults=CrashAt(point))

    return build


def crash_once(services: Services, sku: str, webhook_id: str) -> tuple[bytes, dict[str, str]]:
    text = body(sku, 4)
    headers = signed(services, text, webhook_id=webhook_id)
    with pytest.raises(InjectedCrash):
        services.detector.handle(text.encode(), headers)
    return text.encode(), headers


def test_a_crash_after_the_restock_is_written_is_finished_by_the_retry(crashing: Any, chair: str) -> None:
    services = crashing("detect.after_restock_written")
    raw, headers = crash_once(services, chair, "msg_crash")
    restock = only_restock(services, chair)
    assert restock["state"] == "pending" and restock["pending_key"] == "pending"
    assert queued(services) == []
    # The platform retries the same webhook (Standard Webhooks re-signs it with a new timestamp).
    services.clock.advance(5)  # type: ignore[attr-defined]
    text = raw.decode()
    retry = signed(services, text, webhook_id=headers["webhook-id"])
    assert services.detector.handle(raw, retry) == DetectOutcome("no_restock", "duplicate")
    assert [j["restock_id"] for j in queued(services)] == [restock["restock_id"]]
    restock = only_restock(services, chair)
    assert restock["state"] == "queued" and "pending_key" not in restock
    assert len(restocks(services, chair)) == 1


def test_a_crash_after_the_restock_is_written_is_finished_by_the_sweep(
    crashing: Any, chair: str, clock: FixedClock
) -> None:
    services = crashing("detect.after_restock_written")
    crash_once(services, chair, "msg_crash")
    clock.advance(30)
    assert services.detector.requeue_pending() == 0  # not yet stuck for a minute
    clock.advance(31)
    assert services.detector.requeue_pending() == 1
    assert len(queued(services)) == 1
    assert only_restock(services, chair)["state"] == "queued"
    assert services.detector.requeue_pending() == 0  # done once


def test_the_sweep_can_run_as_if_at_another_time(crashing: Any, chair: str, clock: FixedClock) -> None:
    services = crashing("detect.after_restock_written")
    crash_once(services, chair, "msg_crash")
    assert services.detector.requeue_pending(clock.now() + 61) == 1


def test_a_crash_holding_the_enqueue_lease_is_finished_after_the_lease(
    crashing: Any, chair: str, clock: FixedClock
) -> None:
    services = crashing("detect.after_enqueue_claimed")
    raw, _ = crash_once(services, chair, "msg_lease")
    # A retry inside the lease does not send (the holder might still be sending) ...
    assert services.detector.handle(raw, signed(services, raw.decode(), webhook_id="msg_lease")).reason == "duplicate"
    assert queued(services) == []
    # ... and once the lease and the minute have run out, the sweep sends it.
    clock.advance(max(ENQUEUE_LEASE_S, 60) + 1)
    assert services.detector.requeue_pending() == 1
    assert len(queued(services)) == 1


def test_a_crash_after_the_job_was_sent_may_send_it_again_but_loses_nothing(
    crashing: Any, chair: str, clock: FixedClock
) -> None:
    services = crashing("detect.after_job_sent")
    crash_once(services, chair, "msg_sent")
    assert len(queued(services)) == 1
    clock.advance(61)
    # The notifier is idempotent, so the second job is harmless; what matters is that the restock is queued.
    assert services.detector.requeue_pending() == 1
    assert len(queued(services)) == 1
    assert only_restock(services, chair)["state"] == "queued"


class FailingFirstSend(JobQueue):
    """The job queue with SQS refusing the first send."""

    def __init__(self, base: JobQueue) -> None:
        super().__init__(base.sqs, base.queue_name)
        self.failures = 1

    def send(self, job: Job, delay_s: int = 0) -> str:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("SQS unreachable")
        return super().send(job, delay_s)


def test_a_failed_send_gives_the_lease_back_so_the_retry_sends_at_once(services: Services, chair: str) -> None:
    detector = replace(
        services.detector, owed=OwedJobs(restocks=services.tables.restocks, jobs=FailingFirstSend(services.jobs))
    )
    text = body(chair, 2)
    with pytest.raises(ConnectionError):
        detector.handle(text.encode(), signed(services, text, webhook_id="msg_sqs"))
    assert "enqueue_lease_until" not in only_restock(services, chair)
    assert detector.handle(text.encode(), signed(services, text, webhook_id="msg_sqs")).reason == "duplicate"
    assert len(queued(services)) == 1


def test_the_sweep_reads_the_pending_index_never_a_scan(crashing: Any, chair: str, clock: FixedClock) -> None:
    services = crashing("detect.after_restock_written")
    crash_once(services, chair, "msg_crash")
    clock.advance(61)
    calls = Calls(services.tables.restocks.table.meta.client)
    services.detector.requeue_pending()
    assert "Scan" not in calls.names
    assert calls.names[0] == "Query"


# --- While a restock is open.


def counters(restock: dict[str, Any]) -> tuple[int, int, int]:
    return int(restock["units_total"]), int(restock["units_available"]), int(restock["units_offerable"])


def test_a_rise_adds_units_and_queues_a_top_up(services: Services, chair: str, clock: FixedClock) -> None:
    opened = deliver(services, chair, 3)
    clock.advance(1)
    outcome = deliver(services, chair, 5)
    assert outcome == DetectOutcome("no_restock", "no_crossing", restock_id=opened.restock_id, adjusted="topped_up")
    restock = only_restock(services, chair)
    assert counters(restock) == (5, 5, 5)
    assert restock["state"] == "queued" and "pending_key" not in restock
    assert [j["kind"] for j in queued(services)] == ["restock", "topup"]
    [fact] = audit(services, chair, "restock_topped_up")
    assert (fact["units_added"], fact["level_before"], fact["level_after"]) == (2, 3, 5)


def test_a_rise_while_the_first_job_is_still_owed_is_sent_with_it(crashing: Any, chair: str, clock: FixedClock) -> None:
    services = crashing("detect.after_restock_written")
    crash_once(services, chair, "msg_first")
    clock.advance(1)
    deliver(services, chair, 7)
    assert [j["kind"] for j in queued(services)] == ["restock"]
    restock = only_restock(services, chair)
    assert counters(restock) == (7, 7, 7)
    assert restock["state"] == "queued"


def test_a_rise_whose_top_up_was_lost_is_sent_by_the_sweep(crashing: Any, chair: str, clock: FixedClock) -> None:
    services = crashing("detect.after_topup_written")
    deliver(services, chair, 2)
    clock.advance(1)
    with pytest.raises(InjectedCrash):
        deliver(services, chair, 4)
    clock.advance(61)
    assert services.detector.requeue_pending() == 1
    assert [j["kind"] for j in queued(services)] == ["restock", "topup"]


def take_units(services: Services, restock: dict[str, Any], *, offers: int, holds: int) -> None:
    """Offers and holds as the notifier and reserve step move the counters (DESIGN §4)."""
    table = services.tables.restocks
    client = table.table.meta.client
    for _ in range(offers):
        transact(client, [table.take_offers_item(restock["sku"], restock["restock_ts"], 1)])
    for _ in range(holds):
        transact(client, [table.hold_item(restock["sku"], restock["restock_ts"])])


def test_a_fall_lowers_what_can_still_be_offered_and_holds_stand(
    services: Services, chair: str, clock: FixedClock
) -> None:
    deliver(services, chair, 5)
    take_units(services, only_restock(services, chair), offers=2, holds=1)  # available 4, offerable 3
    clock.advance(1)
    outcome = deliver(services, chair, 2)
    assert outcome.adjusted == "lowered"
    restock = only_restock(services, chair)
    assert counters(restock) == (5, 1, 0)
    assert restock["state"] == "queued"
    clock.advance(1)
    deliver(services, chair, 1)
    # The last unit is gone too: nothing available (never below zero), and the one live offer owes a unit.
    assert counters(only_restock(services, chair)) == (5, 0, -1)
    [first, _] = audit(services, chair, "restock_lowered")
    assert (first["units_available"], first["units_offerable"]) == (1, 0)


def test_a_fall_below_the_threshold_closes_the_restock(services: Services, clock: FixedClock) -> None:
    services.tables.catalog.upsert("MUG", {**CHAIR, "threshold": 3})
    opened = deliver(services, "MUG", 5)
    clock.advance(1)
    assert deliver(services, "MUG", 2).adjusted == "closed"
    restock = only_restock(services, "MUG")
    assert restock["state"] == "closed"
    assert restock["closed_at"] == int(clock.now())
    # No live offers: the two units left stay offerable on the books, but a closed restock offers nothing more.
    assert counters(restock) == (5, 2, 2)
    with pytest.raises(TransactionCancelled):
        transact(
            services.tables.restocks.table.meta.client,
            [services.tables.restocks.take_offers_item("MUG", restock["restock_ts"], 1)],
        )
    product = services.tables.catalog.get("MUG")
    assert product.open_restock_id is None and product.open_restock_ts is None
    [fact] = audit(services, "MUG", "restock_closed")
    assert (fact["restock_id"], fact["reason"]) == (opened.restock_id, "below_threshold")


def test_closing_with_live_offers_keeps_the_counters_exact_as_they_lapse(services: Services, clock: FixedClock) -> None:
    services.tables.catalog.upsert("MUG", {**CHAIR, "threshold": 3})
    deliver(services, "MUG", 5)
    restock = only_restock(services, "MUG")
    take_units(services, restock, offers=2, holds=0)
    clock.advance(1)
    deliver(services, "MUG", 2)
    # Two units on the shelf, both promised to live offers: units_offerable stays units_available less them.
    assert counters(only_restock(services, "MUG")) == (5, 2, 0)
    client = services.tables.restocks.table.meta.client
    for _ in range(2):  # both offers lapse unused, as the sweep would record it
        transact(client, [services.tables.restocks.release_offer_item("MUG", restock["restock_ts"])])
    assert counters(only_restock(services, "MUG")) == (5, 2, 2)


def test_a_fall_below_the_free_units_is_a_debt_that_a_small_rise_does_not_pay(
    services: Services, chair: str, clock: FixedClock
) -> None:
    deliver(services, chair, 6)
    restock = only_restock(services, chair)
    take_units(services, restock, offers=5, holds=5)  # five holders, one unit free
    clock.advance(1)
    deliver(services, chair, 3)  # walk-in sales: the shelf holds 3 for 5 holders
    assert counters(only_restock(services, chair)) == (6, -2, -2)
    clock.advance(1)
    deliver(services, chair, 4)
    assert counters(only_restock(services, chair))[1:] == (-1, -1)
    # Still a unit short of the holders already granted: nobody else may hold one (invariant 4).
    with pytest.raises(TransactionCancelled):
        transact(
            services.tables.restocks.table.meta.client,
            [services.tables.restocks.hold_item(chair, restock["restock_ts"])],
        )
    clock.advance(1)
    deliver(services, chair, 6)
    assert counters(only_restock(services, chair))[1:] == (1, 1)


def test_a_level_that_includes_our_own_sales_is_not_a_fall(services: Services, chair: str, clock: FixedClock) -> None:
    deliver(services, chair, 4)
    restock = only_restock(services, chair)
    take_units(services, restock, offers=2, holds=2)
    client = services.tables.restocks.table.meta.client
    for _ in range(2):  # both holders buy: the orders webhook is recorded before the platform's new level
        transact(client, [services.tables.restocks.sale_item(chair, restock["restock_ts"])])
    clock.advance(1)
    outcome = deliver(services, chair, 2)
    current = only_restock(services, chair)
    assert counters(current) == (4, 2, 2), "the two units still on the shelf are still ours to offer"
    assert int(current["unseen_sales"]) == 0
    assert outcome.adjusted is None
    [fact] = audit(services, chair, "own_sales_seen")
    assert fact["own_sales"] == 2
    clock.advance(1)
    deliver(services, chair, 1)  # a walk-in sale: now it is a fall
    assert counters(only_restock(services, chair)) == (4, 1, 1)


def test_a_level_that_includes_our_sale_and_a_walk_in_sale_lowers_by_the_walk_in_alone(
    services: Services, chair: str, clock: FixedClock
) -> None:
    deliver(services, chair, 4)
    restock = only_restock(services, chair)
    take_units(services, restock, offers=1, holds=1)
    transact(
        services.tables.restocks.table.meta.client, [services.tables.restocks.sale_item(chair, restock["restock_ts"])]
    )
    clock.advance(1)
    assert deliver(services, chair, 2).adjusted == "lowered"
    assert counters(only_restock(services, chair)) == (4, 2, 2)


def test_every_unit_held_keeps_the_restock_open_for_expiring_holds(
    services: Services, chair: str, clock: FixedClock
) -> None:
    deliver(services, chair, 2)
    take_units(services, only_restock(services, chair), offers=2, holds=2)
    clock.advance(1)
    deliver(services, chair, 2)
    restock = only_restock(services, chair)
    assert restock["state"] == "queued"
    assert counters(restock) == (2, 0, 0)


def test_a_closed_restock_never_grows(services: Services, chair: str, clock: FixedClock) -> None:
    deliver(services, chair, 2)
    clock.advance(1)
    deliver(services, chair, 0)
    clock.advance(1)
    reopened = deliver(services, chair, 3)
    assert reopened.status == "restock"
    closed, current = sorted(restocks(services, chair), key=lambda r: r["state"])
    assert counters(closed) == (2, 0, 0)
    assert counters(current) == (3, 3, 3)


# --- Catalogue facts: the level, the demand index, the audit.


def test_a_lowered_threshold_with_stock_on_hand_is_a_restock(services: Services, clock: FixedClock) -> None:
    services.tables.catalog.upsert("MUG", {**CHAIR, "threshold": 5})
    assert deliver(services, "MUG", 3).reason == "no_crossing"
    services.tables.catalog.upsert("MUG", {"threshold": 2})
    opened = services.detector.reconsider("MUG")
    assert opened.status == "restock"
    restock = only_restock(services, "MUG")
    assert counters(restock) == (3, 3, 3)
    assert [job["restock_id"] for job in queued(services)] == [opened.restock_id]
    [fact] = audit(services, "MUG", "restock_detected")
    assert fact["reason"] == "threshold_lowered"
    # Asking again (a retry, or the next sync) opens nothing more.
    assert services.detector.reconsider("MUG").reason == "restock_open"
    assert len(restocks(services, "MUG")) == 1


def test_a_threshold_still_above_the_level_opens_nothing(services: Services) -> None:
    services.tables.catalog.upsert("MUG", {**CHAIR, "threshold": 5})
    deliver(services, "MUG", 3)
    services.tables.catalog.upsert("MUG", {"threshold": 4})
    assert services.detector.reconsider("MUG").reason == "below_threshold"
    assert restocks(services, "MUG") == []


def test_the_level_and_its_event_time_are_kept(services: Services, chair: str) -> None:
    at = ago(services, 90)
    deliver(services, chair, 0, webhook_id="msg_level", occurred_at=at)
    product = services.tables.catalog.get(chair)
    assert product.level == 0
    assert product.level_webhook_id == "msg_level"
    assert iso(float(product.level_ts)) == at


def test_the_demand_index_lists_only_out_of_stock_skus_by_waiting_count(services: Services, clock: FixedClock) -> None:
    for sku, waiting in (("A", 3), ("B", 7), ("C", 1)):
        services.tables.catalog.upsert(sku, dict(CHAIR))
        services.tables.catalog.table.update_item(
            Key={"sku": sku}, UpdateExpression="SET waiting_count = :n", ExpressionAttributeValues={":n": waiting}
        )
        deliver(services, sku, 0)
    clock.advance(1)
    deliver(services, "C", 4)  # back in stock: leaves the index

    def ranked() -> list[str]:
        page = services.tables.catalog.table.query(
            IndexName="by-demand", KeyConditionExpression=Key("demand_key").eq("out"), ScanIndexForward=False
        )
        return [item["sku"] for item in page["Items"]]

    assert ranked() == ["B", "A"]
    clock.advance(1)
    deliver(services, "C", 0)
    assert ranked() == ["B", "A", "C"]


def test_a_restock_is_audited_with_levels_and_ids(services: Services, chair: str) -> None:
    deliver(services, chair, 0)
    outcome = deliver(services, chair, 6, webhook_id="msg_audit")
    [fact] = audit(services, chair, "restock_detected")
    assert fact["restock_id"] == outcome.restock_id
    assert fact["webhook_id"] == "msg_audit"
    assert (fact["level_before"], fact["level_after"], fact["units"]) == (0, 6, 6)


def test_an_unknown_sku_is_ignored_and_recorded(services: Services) -> None:
    outcome = deliver(services, "NOT-SOLD-HERE", 5, webhook_id="msg_unknown")
    assert outcome == DetectOutcome("ignored", "unknown_sku")
    assert DETECT_STATUS[outcome.status] == 200
    [fact] = audit(services, "NOT-SOLD-HERE", "unknown_sku_webhook")
    assert (fact["webhook_id"], fact["available"]) == ("msg_unknown", 5)
    assert services.tables.catalog.get("NOT-SOLD-HERE") is None
    assert queued(services) == []


def test_level_ts_is_stored_to_the_microsecond(services: Services, chair: str) -> None:
    at = int(services.clock.now()) - 60 + 0.123456
    deliver(services, chair, 0, occurred_at=iso(at))
    assert services.tables.catalog.get(chair).level_ts == Decimal(f"{at:.6f}")
