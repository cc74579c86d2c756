"""The orders webhook's service: conversion, redelivery, late orders and refusals."""

from __future__ import annotations

import json

import pytest

from chalicelib.errors import BadRequest, Conflict, InvalidSignature, NotFound
from chalicelib.orders import Order
from chalicelib.webhooks import sign
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from tests.scenes import Scene, scene
from tests.support import CHAIR, queued_jobs


@pytest.fixture
def s(services: Services, clock: FixedClock) -> Scene:
    return scene(services, clock)


def held(s: Scene, index: int = 0) -> str:
    token_id = s.offer(index)
    s.tap(token_id)
    return token_id


def test_conversion_stops_the_return(s: Scene) -> None:
    token_id = held(s)
    assert s.services.orders.record(Order(token_id, "order-1")).status == "converted"
    s.clock.advance(CHAIR["hold_window_s"] + 1)
    summary = s.services.sweep.run()
    assert summary["expired"] == 0
    assert s.counters() == (1, 1)
    row = s.row(token_id)
    assert row.state == "converted"
    assert row.order_id == "order-1"
    assert row.due_at is None
    assert queued_jobs(s.services) == []


def test_redelivered_order_answers_already_converted(s: Scene) -> None:
    token_id = held(s)
    s.services.orders.record(Order(token_id, "order-1"))
    again = s.services.orders.record(Order(token_id, "order-1"))
    assert again.body() == {"status": "already_converted", "reservation_id": token_id, "order_id": "order-1"}
    # A second, different order names the order that did convert it.
    other = s.services.orders.record(Order(token_id, "order-2"))
    assert (other.status, other.order_id) == ("already_converted", "order-1")
    assert s.audit_kinds()["conversion"] == 1
    assert s.waiting_count() == 2


def test_order_a_moment_after_expiry_but_before_the_sweep_converts(s: Scene) -> None:
    token_id = held(s)
    s.clock.advance(CHAIR["hold_window_s"] + 5)
    assert s.services.orders.record(Order(token_id, "order-1")).status == "converted"
    assert s.services.sweep.run()["expired"] == 0
    assert s.counters() == (1, 1)


def test_order_on_an_expired_hold_is_recorded_and_counted_once(s: Scene) -> None:
    token_id = held(s)
    s.clock.advance(CHAIR["hold_window_s"])
    s.services.sweep.run()
    outcome = s.services.orders.record(Order(token_id, "order-7"))
    s.services.orders.record(Order(token_id, "order-7"))
    assert outcome.status == "hold_expired"
    restock = s.services.tables.restocks.get(s.sku, s.restock.restock_ts)
    assert restock.orders_on_expired_holds == 1
    facts = [f for f in s.services.tables.audit.for_sku(s.sku) if f["kind"] == "order_on_expired_hold"]
    assert [(f["order_id"], f["hold_state"]) for f in facts] == [("order-7", "expired")]
    # The unit was already returned; the order does not take it again.
    assert s.counters() == (2, 2)
    assert s.row(token_id).state == "expired"


def test_order_on_a_lapsed_offer_is_recorded(s: Scene) -> None:
    token_id = s.offer()
    s.clock.advance(CHAIR["offer_window_s"])
    s.services.sweep.run()
    assert s.services.orders.record(Order(token_id, "order-8")).status == "hold_expired"


def test_order_on_an_untapped_offer_is_a_conflict(s: Scene) -> None:
    token_id = s.offer()
    with pytest.raises(Conflict) as raised:
        s.services.orders.record(Order(token_id, "order-1"))
    assert raised.value.code == "not_held"
    assert s.row(token_id).state == "offered"


def test_unknown_reservation_is_not_found(s: Scene) -> None:
    with pytest.raises(NotFound) as raised:
        s.services.orders.record(Order("f" * 32, "order-1"))
    assert raised.value.code == "unknown_reservation"


def test_conversion_goes_on_when_the_request_was_tidied_away(s: Scene) -> None:
    token_id = held(s)
    s.services.tables.requests.table.delete_item(Key={"sku": s.sku, "joined_ts": s.requests[0].joined_ts})
    waiting = s.waiting_count()
    assert s.services.orders.record(Order(token_id, "order-1")).status == "converted"
    # The waiting count moves only with a request that moved.
    assert s.waiting_count() == waiting


def signed(services: Services, body: object, webhook_id: str = "msg_1") -> tuple[bytes, dict[str, str]]:
    text = body if isinstance(body, str) else json.dumps(body)
    return text.encode(), sign(services.webhook_secrets()[0], text, webhook_id)


def test_signed_delivery_converts(s: Scene) -> None:
    token_id = held(s)
    raw, headers = signed(s.services, {"reservation_id": token_id, "order_id": 1042})
    assert s.services.orders.receive(raw, headers).body()["order_id"] == "1042"


def test_bad_signature_is_refused_before_anything_is_read(s: Scene) -> None:
    token_id = held(s)
    raw, headers = signed(s.services, {"reservation_id": token_id, "order_id": "o-1"})
    with pytest.raises(InvalidSignature):
        s.services.orders.receive(raw.replace(b"o-1", b"o-2"), headers)
    assert s.row(token_id).state == "held"


def test_malformed_order_is_a_bad_request(services: Services) -> None:
    # One end to end; every malformed body is in tests/unit/test_order_bodies.py.
    raw, headers = signed(services, {"reservation_id": 12, "order_id": "o-1"})
    with pytest.raises(BadRequest) as raised:
        services.orders.receive(raw, headers)
    assert raised.value.code == "invalid_field"


def test_crash_after_conversion_is_answered_by_the_redelivery(s: Scene) -> None:
    from tests.support import CrashAt, InjectedCrash

    token_id = held(s)
    crashing = Services(
        s.services.settings,
        aws=s.services.aws,
        clock=s.clock,
        faults=CrashAt("orders.after_convert"),
        model=FakeBedrock(),
    )
    with pytest.raises(InjectedCrash):
        crashing.orders.record(Order(token_id, "order-1"))
    assert s.services.orders.record(Order(token_id, "order-1")).status == "already_converted"
    assert s.audit_kinds()["conversion"] == 1
