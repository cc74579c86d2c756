"""The capture service on the emulator: concurrency, re-joining, and what one tap costs."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from chalicelib.errors import Busy, UnknownSku
from chalicelib.line import read_place
from chalicelib.tables import base
from chalicelib.tables.base import TRANSACTION_CONFLICT, Reason, TransactionCancelled
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.support import CHAIR

TAP = {"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 123456"}


def finish(services: Services, sku: str, joined_ts: str, state: str) -> None:
    services.tables.requests.table.update_item(
        Key={"sku": sku, "joined_ts": joined_ts},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":s": state},
    )


def test_sixteen_simultaneous_taps_leave_one_place(services: Services, chair: str) -> None:
    outcomes: list[Any] = []
    barrier = threading.Barrier(16)
    # More taps than one number may make in an hour by default: the cap is tried on its own elsewhere.
    settings = dataclasses.replace(services.settings, taps_per_number_per_hour=16)
    capture = dataclasses.replace(services.capture, settings=settings)

    def one(i: int) -> None:
        barrier.wait()
        outcomes.append(capture.capture(f"10.0.0.{i}", TAP))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.status for o in outcomes) == ["already_queued"] * 15 + ["queued"]
    assert {o.joined_ts for o in outcomes} == {next(o.joined_ts for o in outcomes if o.status == "queued")}
    assert len(list(services.tables.requests.queue(chair))) == 1
    assert services.tables.catalog.waiting(chair) == 1


def test_simultaneous_taps_from_many_people_all_get_distinct_places(services: Services, chair: str) -> None:
    outcomes: list[Any] = []
    barrier = threading.Barrier(12)

    def one(i: int) -> None:
        barrier.wait()
        outcomes.append(services.capture.capture(f"10.0.1.{i}", {**TAP, "contact": f"0740012{i:04d}"}))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o.status == "queued" for o in outcomes)
    final = sorted(services.tables.requests.position(chair, o.joined_ts or "") for o in outcomes)
    assert final == list(range(1, 13))
    # The line's figures agree with the count, place by place, without counting (chalicelib/line.py).
    for o in outcomes:
        place = read_place(services.tables, services.tables.requests.get(chair, o.joined_ts or ""))
        assert place.exact == services.tables.requests.position(chair, o.joined_ts or "")
    assert services.tables.catalog.waiting(chair) == 12


def test_a_shopper_who_bought_joins_again_at_the_back(services: Services, chair: str, clock: FixedClock) -> None:
    first = services.capture.capture("ip", TAP)
    clock.advance(1)
    services.capture.capture("ip", {**TAP, "contact": "07400 123457"})
    finish(services, chair, first.joined_ts or "", "converted")
    clock.advance(1)
    again = services.capture.capture("ip", TAP)
    assert again.status == "queued"
    assert again.joined_ts != first.joined_ts
    assert services.tables.requests.position(chair, again.joined_ts or "") == 2
    unique = services.tables.requests.unique(
        chair, services.tables.requests.get(chair, again.joined_ts or "").contact_key
    )
    assert unique is not None and unique.ref == again.joined_ts


def test_a_new_tap_costs_a_ticket_and_one_transaction(services: Services, chair: str) -> None:
    # No place in line is counted: the place takes the line's next ticket (one plain write), whatever the length.
    calls: list[str] = []
    client = services.tables.requests.table.meta.client
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    services.capture.capture("ip", TAP)
    assert calls == ["UpdateItem", "TransactWriteItems"]


def test_a_tap_that_takes_no_new_place_hands_its_ticket_back(services: Services, chair: str) -> None:
    first = services.capture.capture("ip", TAP)
    assert services.tables.line_tickets.line(chair) == (1, 0)
    again = services.capture.capture("ip", TAP)
    assert (again.status, again.joined_ts) == ("already_queued", first.joined_ts)
    assert services.tables.line_tickets.line(chair) == (1, 0)  # handed back: the line's figures stay exact
    with pytest.raises(UnknownSku):
        services.capture.capture("ip", {**TAP, "sku": "NO-SUCH-SKU", "contact": "07400 123458"})
    assert services.tables.line_tickets.line("NO-SUCH-SKU") == (0, 0)


def test_a_ticket_handed_back_after_a_later_one_counts_as_burnt(services: Services, chair: str) -> None:
    services.tables.line_tickets.take_ticket(chair, 10**10)
    services.tables.line_tickets.take_ticket(chair, 10**10)
    services.tables.line_tickets.return_ticket(chair, 1)  # ticket 2 is out: 1 cannot go back, so it is burnt
    assert services.tables.line_tickets.line(chair) == (2, 1)
    assert services.tables.line_tickets.take_ticket(chair, 10**10) == (3, 1, 0)


def test_the_callers_address_is_stored_only_as_a_keyed_hash(services: Services, chair: str) -> None:
    address = "198.51.100.23"
    services.capture.capture(address, {"sku": chair, "channel": "sms", "contact": "+447400300001"})
    with pytest.raises(UnknownSku):
        services.capture.capture(address, {"sku": "NO-SUCH-SKU", "channel": "sms", "contact": "+447400300002"})
    stored = [str(item) for short in ("throttle", "audit") for item in services.tables.whole(short).scan()["Items"]]
    assert stored, "the taps were counted and audited"
    assert not [item for item in stored if address in item]


def test_a_tap_whose_retries_all_conflict_is_told_to_try_again(
    services: Services, chair: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What DynamoDB answers while other transactions hold the product item (TransactWriteItems API reference:
    # CancellationReasons, code TransactionConflict); `transact` gives up after its bounded attempts.
    # Only transactions that hold the product item meet others; the rest run as usual.
    attempts: list[int] = []
    real = base.transact
    catalog = services.tables.catalog.name

    def conflicted(client: Any, items: Any, **kwargs: Any) -> None:
        if not any(next(iter(i.values()))["TableName"] == catalog for i in items):
            return real(client, items, **kwargs)
        attempts.append(len(items))
        raise TransactionCancelled([Reason(TRANSACTION_CONFLICT, None) for _ in items])

    monkeypatch.setattr(base, "transact", conflicted)
    with pytest.raises(Busy):
        services.capture.capture("ip", TAP)
    assert attempts  # it tried, and wrote nothing
    assert list(services.tables.requests.queue(chair)) == []
    assert services.tables.line_tickets.line(chair) == (0, 0)  # the ticket went back


def test_an_email_tap_whose_retries_all_conflict_is_told_to_try_again(
    services: Services, chair: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An email tap's transaction holds no number's counters: its refusal is read without them.
    real = base.transact
    catalog = services.tables.catalog.name

    def conflicted(client: Any, items: Any, **kwargs: Any) -> None:
        if not any(next(iter(i.values()))["TableName"] == catalog for i in items):
            return real(client, items, **kwargs)
        raise TransactionCancelled([Reason(TRANSACTION_CONFLICT, None) for _ in items])

    monkeypatch.setattr(base, "transact", conflicted)
    with pytest.raises(Busy):
        services.capture.capture("ip", {**TAP, "channel": "email", "contact": "ada@example.com"})
    assert list(services.tables.requests.queue(chair)) == []
    assert services.tables.line_tickets.line(chair) == (0, 0)


def test_a_product_stored_before_waiting_shards_gets_them_at_its_first_tap(services: Services) -> None:
    # A product item written as the catalogue wrote them before shards: no `waiting_shards`, no shard items.
    services.tables.catalog.table.put_item(Item={"sku": "CHAIR-WALNUT", **dict(CHAIR), "waiting_count": 0})
    outcome = services.capture.capture("ip", TAP)
    assert outcome.status == "queued"
    assert services.tables.catalog.waiting("CHAIR-WALNUT") == 1
    # Opened once: a second person joins through the shards as usual.
    assert services.tables.catalog.open_shards("CHAIR-WALNUT") is False
    assert services.capture.capture("ip", {**TAP, "contact": "+447400123457"}).status == "queued"
    assert services.tables.catalog.waiting("CHAIR-WALNUT") == 2


def test_a_tap_on_a_sku_nobody_sells_opens_nothing(services: Services) -> None:
    with pytest.raises(UnknownSku):
        services.capture.capture("ip", TAP)
    assert services.tables.catalog.open_shards("CHAIR-WALNUT") is False
    assert services.tables.catalog.table.scan()["Items"] == []
