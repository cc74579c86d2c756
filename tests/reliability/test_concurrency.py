"""Many things at once, from threads, against the emulator (serialised per operation, like DynamoDB).

chalice.test.Client is not thread-safe (the app's current request is global), so the threads call the
service layer, exactly what each route calls. Each thread stands for its own invocation and builds its
own services (boto3's DynamoDB resources are not safe to share between threads, and two Lambda
processes never share one). After every run invariants 1–7 are checked against the
tables. The heavier variants (more threads, more rounds) are marked slow.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from chalicelib.holds import HELD_AGAIN, HELD_NOW, JUST_GONE_PAGE
from chalicelib.tables.reservations import OfferState
from chalicelib.wiring import Services
from tests.reliability.invariants import Tables, assert_invariants
from tests.reliability.tally import count
from tests.reliability.world import PLENTY_MS, World, outbox_texts

Task = Callable[[Services], Any]


def at_once(world: World, tasks: list[Task]) -> list[Any]:
    """Run every task on its own thread, as its own invocation, released together; results or exceptions."""
    results: list[Any] = [None] * len(tasks)
    lambdas = [world.lambda_services() for _ in tasks]
    start = threading.Barrier(len(tasks))

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = tasks[i](lambdas[i])
        except Exception as exc:  # reported, not swallowed: the tests assert on what came back
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(tasks))]
    count("threads started", len(threads))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def number(i: int) -> str:
    return f"+4474001{i:05d}"


def tap(services: Services, sku: str, contact: str, source: str) -> Any:
    channel = "email" if "@" in contact else "sms"
    return services.capture.capture(source, {"sku": sku, "channel": channel, "contact": contact})


# --- taps


@pytest.mark.parametrize("people", [12, pytest.param(48, marks=pytest.mark.slow)])
def test_simultaneous_taps_by_different_people_each_get_one_place(world: World, people: int) -> None:
    world.product()
    results = at_once(world, [lambda s, i=i: tap(s, world.sku, number(i), f"203.0.113.{i}") for i in range(people)])
    assert [r.status for r in results] == ["queued"] * people, results
    positions = sorted(world.services.tables.requests.position(world.sku, str(r.joined_ts)) for r in results)
    assert positions == list(range(1, people + 1))
    assert len({r.joined_ts for r in results}) == people
    assert_invariants(world.services)


@pytest.mark.parametrize("threads", [8, pytest.param(32, marks=pytest.mark.slow)])
def test_simultaneous_taps_by_one_person_make_one_place(world: World, threads: int) -> None:
    world.product()
    results = at_once(
        world, [lambda s, i=i: tap(s, world.sku, "Same.Person@Example.com", f"203.0.113.{i}") for i in range(threads)]
    )
    assert Counter(r.status for r in results) == {"queued": 1, "already_queued": threads - 1}, results
    assert len({r.joined_ts for r in results}) == 1
    assert_invariants(world.services)


# --- taps on reserve links


def restock_with_offers(w: World, people: int, units: int) -> list[dict[str, Any]]:
    w.product()
    for i in range(people):
        w.tap(number(i))
    w.inventory(units)
    w.pump()
    return w.offers(OfferState.OFFERED)


@pytest.mark.parametrize("threads", [8, pytest.param(24, marks=pytest.mark.slow)])
def test_simultaneous_taps_on_one_link_hold_one_unit(world: World, threads: int) -> None:
    [offer, *_] = restock_with_offers(world, 3, 2)
    token = world.services.tokens.reserve(str(offer["token_id"]))
    results = at_once(world, [lambda s: s.holds.reserve(token) for _ in range(threads)])
    assert Counter(r.kind for r in results) == {HELD_NOW: 1, HELD_AGAIN: threads - 1}, results
    [restock] = world.restocks()
    assert int(restock["units_available"]) == 1
    assert_invariants(world.services)


def test_more_links_tapped_at_once_than_units_left_hold_only_the_units(world: World) -> None:
    offers = restock_with_offers(world, 6, 6)
    world.inventory(2)  # the shop sold four elsewhere while six offers were out
    tokens = [world.services.tokens.reserve(str(o["token_id"])) for o in offers]
    results = at_once(world, [lambda s, t=t: s.holds.reserve(t) for t in tokens])
    assert Counter(r.kind for r in results) == {HELD_NOW: 2, JUST_GONE_PAGE: 4}, results
    tables = Tables.read(world.services)
    assert sum(1 for r in tables.rows if r["state"] == "held") == 2
    assert_invariants(world.services)


# --- sweeps


@pytest.mark.parametrize("sweeps", [4, pytest.param(12, marks=pytest.mark.slow)])
def test_simultaneous_sweeps_return_each_unit_once(world: World, sweeps: int) -> None:
    offers = restock_with_offers(world, 8, 6)
    for offer in offers[:3]:
        world.reserve(str(offer["token_id"]))
    world.clock.advance(3601)  # every offer lapsed and every hold expired
    results = at_once(world, [lambda s: s.sweep.run() for _ in range(sweeps)])
    assert not [r for r in results if isinstance(r, Exception)], results
    assert sum(r["lapsed"] for r in results) == 3
    assert sum(r["expired"] for r in results) == 3
    [restock] = world.restocks()
    assert (int(restock["units_available"]), int(restock["units_offerable"])) == (6, 6)
    world.settle()
    assert_invariants(world.services, settled=True)


# --- notifier runs


@pytest.mark.parametrize("runs", [4, pytest.param(12, marks=pytest.mark.slow)])
def test_one_job_handled_by_several_invocations_at_once_tells_each_person_once(world: World, runs: int) -> None:
    world.product()
    for i in range(10):
        world.tap(number(i))
    world.inventory(6)
    url = world.sqs.get_queue_url(QueueName=world.services.settings.jobs_queue_name)["QueueUrl"]
    [message] = world.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    from chalicelib.queue.messages import parse

    job = parse(message["Body"])
    results = at_once(world, [lambda s: s.notifier.handle(job, lambda: PLENTY_MS) for _ in range(runs)])
    assert not [r for r in results if isinstance(r, Exception)], results
    assert sum(r.notices for r in results) == 6
    assert len(outbox_texts()) == 6
    world.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert_invariants(world.services)


# --- everything at once


def chaos(world: World, rounds: int, width: int, seed: int) -> None:
    """Rounds of taps, link taps, leaving, notifier runs and sweeps racing each other; checked after each."""
    rng = random.Random(seed)
    world.product()
    for i in range(width):
        world.tap(number(i))
    world.inventory(width // 2)
    people = width
    for _ in range(rounds):
        offers = world.offers(OfferState.OFFERED)
        tasks: list[Task] = []
        for _ in range(width):
            choice = rng.random()
            if choice < 0.3:
                people += 1
                newcomer, source = number(people), f"192.0.2.{people % 250}"
                tasks.append(lambda s, n=newcomer, a=source: tap(s, world.sku, n, a))
            elif choice < 0.55 and offers:
                token = world.services.tokens.reserve(str(rng.choice(offers)["token_id"]))
                tasks.append(lambda s, t=token: s.holds.reserve(t))
            elif choice < 0.65:
                key = world.key_of(number(rng.randrange(people)))
                tasks.append(lambda s, k=key: s.optouts.opt_out(k, "unsubscribe"))
            elif choice < 0.85:
                tasks.append(lambda s: world.pump(services=s))
            else:
                tasks.append(lambda s: s.sweep.run())
        errors = [r for r in at_once(world, tasks) if isinstance(r, Exception)]
        assert not errors, errors
        assert_invariants(world.services)
        world.clock.advance(rng.choice([1, 60, 901, 3601]))
    world.settle()
    assert_invariants(world.services, settled=True)


def test_taps_links_leaving_notifier_and_sweep_racing_keep_every_invariant(world: World) -> None:
    chaos(world, rounds=4, width=8, seed=7)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_longer_races_keep_every_invariant(world: World, seed: int) -> None:
    chaos(world, rounds=8, width=12, seed=seed)
