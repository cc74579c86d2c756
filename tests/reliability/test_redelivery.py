"""Invariant 6: every SQS job kind and every webhook, delivered again (one after the other, and at once).

SQS delivers at least once and shop platforms retry webhooks until they see a 2xx, so each of these
arrives twice in production sooner or later. A redelivery must change nothing that the first delivery
did: no second restock, job, notice, message, unit return or conversion. Invariants 1–7 are checked
against the tables after each.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from chalicelib.queue.messages import Job, parse
from chalicelib.tables.reservations import OfferState
from chalicelib.wiring import Services
from tests.reliability.invariants import Tables, assert_invariants
from tests.reliability.tally import count
from tests.reliability.world import PLENTY_MS, World, outbox_texts

NUMBERS = [f"+4474001002{i:02d}" for i in range(8)]


def take_job(w: World, kind: str) -> Job:
    """The next job of a kind, taken off the queue (later ones are put back, untouched)."""
    url = w.sqs.get_queue_url(QueueName=w.services.settings.jobs_queue_name)["QueueUrl"]
    for _ in range(20):
        messages = w.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=0)
        [message] = messages["Messages"]
        job = parse(message["Body"])
        w.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if job.kind == kind:
            return job
        w.services.jobs.send(job)
    raise AssertionError(f"no {kind} job on the queue")


def twice(world: World, deliver: Callable[[Services], Any], *, at_once: bool) -> list[Any]:
    """Deliver the same thing twice: one after the other, or to two invocations at the same moment."""
    count("redeliveries")
    if not at_once:
        return [deliver(world.services), deliver(world.services)]
    results: list[Any] = [None, None]
    start = threading.Barrier(2)
    lambdas = [world.lambda_services(), world.lambda_services()]

    def run(i: int) -> None:
        start.wait()
        results[i] = deliver(lambdas[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def queue_of(w: World, people: int) -> None:
    w.product()
    for number in NUMBERS[:people]:
        w.tap(number)


def notices(w: World) -> Counter[str]:
    return Counter(str(f.get("request_joined_ts")) for f in Tables.read(w.services).facts("notice_sent"))


# --- SQS jobs: restock, topup, continue


@pytest.mark.parametrize("at_once", [False, True], ids=["again", "at-once"])
def test_a_redelivered_restock_job_sends_nothing_more(world: World, at_once: bool) -> None:
    queue_of(world, 4)
    world.inventory(2)
    job = take_job(world, "restock")
    outcomes = twice(world, lambda services: services.notifier.handle(job, lambda: PLENTY_MS), at_once=at_once)
    assert sum(o.notices for o in outcomes) == 2
    assert len(outbox_texts()) == 2
    assert max(notices(world).values()) == 1
    assert_invariants(world.services)


@pytest.mark.parametrize("at_once", [False, True], ids=["again", "at-once"])
def test_a_redelivered_topup_job_tells_the_next_person_once(world: World, at_once: bool) -> None:
    queue_of(world, 4)
    world.inventory(1)
    world.pump()
    world.clock.advance(3601)
    world.services.sweep.run()  # the offer lapses: a top-up job for the freed unit
    job = take_job(world, "topup")
    outcomes = twice(world, lambda services: services.notifier.handle(job, lambda: PLENTY_MS), at_once=at_once)
    assert sum(o.notices for o in outcomes) == 1
    assert len(outbox_texts()) == 2
    assert_invariants(world.services)


class Looks:
    """A Lambda whose time runs out after a number of looks at the clock (places the deadline exactly)."""

    def __init__(self, looks: int) -> None:
        self.looks = looks

    def __call__(self) -> int:
        self.looks -= 1
        return PLENTY_MS if self.looks >= 0 else 0


@pytest.mark.parametrize("at_once", [False, True], ids=["again", "at-once"])
def test_a_redelivered_continue_job_resumes_once(world: World, at_once: bool) -> None:
    queue_of(world, 6)
    world.inventory(5)
    first = take_job(world, "restock")
    outcome = world.services.notifier.handle(first, Looks(3))
    assert outcome.continued
    job = take_job(world, "continue")
    outcomes = twice(world, lambda services: services.notifier.handle(job, lambda: PLENTY_MS), at_once=at_once)
    assert outcome.notices + sum(o.notices for o in outcomes) == 5
    assert len(outbox_texts()) == 5
    assert max(notices(world).values()) == 1
    world.settle()
    assert_invariants(world.services, settled=True)


# --- webhooks: inventory (every kind of level change) and orders


@pytest.mark.parametrize("at_once", [False, True], ids=["again", "at-once"])
@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        ([3], {"units_total": 3, "units_available": 3, "jobs": 1}),  # crossing: a restock and its job
        ([3, 5], {"units_total": 5, "units_available": 5, "jobs": 2}),  # rise: and one top-up job
        ([3, 2], {"units_total": 3, "units_available": 2, "jobs": 1}),  # fall: counters lowered, no job
        ([3, 0], {"units_total": 3, "units_available": 0, "state": "closed", "jobs": 1}),  # closed
    ],
    ids=["crossing", "rise", "fall", "close"],
)
def test_a_redelivered_inventory_webhook_changes_nothing_more(
    world: World, levels: list[int], expected: dict[str, Any], at_once: bool
) -> None:
    queue_of(world, 2)
    for level in levels[:-1]:
        world.inventory(level)
    text = json.dumps({"sku": world.sku, "available": levels[-1]})
    answers = twice(world, lambda services: world.deliver_inventory(text, "msg_redelivered", services), at_once=at_once)
    assert {a.status for a in answers} <= {"restock", "no_restock"}
    [restock] = world.restocks()
    seen = {"jobs": world.jobs_waiting(), **{k: restock[k] for k in expected if k != "jobs"}}
    assert seen == expected
    assert restock.get("pending_key") is None
    world.settle()
    assert_invariants(world.services, settled=True)


def held(w: World) -> str:
    queue_of(w, 2)
    w.inventory(1)
    w.pump()
    [offer] = w.offers(OfferState.OFFERED)
    w.reserve(str(offer["token_id"]))
    assert w.row(str(offer["token_id"]))["state"] == OfferState.HELD
    return str(offer["token_id"])


@pytest.mark.parametrize("at_once", [False, True], ids=["again", "at-once"])
def test_a_redelivered_order_converts_once(world: World, at_once: bool) -> None:
    token_id = held(world)
    text = json.dumps({"reservation_id": token_id, "order_id": "order-77"})
    answers = twice(world, lambda services: world.deliver_order(text, "msg_order_77", services), at_once=at_once)
    assert sorted(a.status for a in answers) == ["already_converted", "converted"]
    assert len(Tables.read(world.services).facts("conversion")) == 1
    world.settle()
    assert_invariants(world.services, settled=True)


@pytest.mark.parametrize("at_once", [False, True], ids=["again", "at-once"])
def test_a_redelivered_order_on_an_expired_hold_is_counted_once(world: World, at_once: bool) -> None:
    token_id = held(world)
    world.clock.advance(901)
    world.services.sweep.run()
    text = json.dumps({"reservation_id": token_id, "order_id": "order-78"})
    answers = twice(world, lambda services: world.deliver_order(text, "msg_order_78", services), at_once=at_once)
    assert [a.status for a in answers] == ["hold_expired", "hold_expired"]
    [restock] = world.restocks()
    assert int(restock.get("orders_on_expired_holds", 0)) == 1
    assert len(Tables.read(world.services).facts("order_on_expired_hold")) == 1
    world.settle()
    assert_invariants(world.services, settled=True)
