"""Stories that random storms of operations broke, each replayed step by step against the invariants.

Every test here failed before the fix it names and passes after; the storms themselves
(`test_storms.py`) keep looking for the next one.
"""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib import holds
from chalicelib.leaving import HOLDING, RELEASED
from chalicelib.tables.requests import Request
from tests.reliability.invariants import Tables, assert_invariants
from tests.reliability.world import World

A, B, C = "+447400100601", "+447400100602", "+447400100603"
PEOPLE = [f"+4474001006{n:02d}" for n in range(10, 20)]


def offers_to(world: World, contact: str, restock_id: str | None = None) -> list[dict[str, Any]]:
    """Offer rows made to one contact (any place of theirs), optionally for one restock."""
    key = world.key_of(contact)
    rows = [r for r in world.offers() if r["contact_key"] == key]
    return [r for r in rows if restock_id is None or r["restock_id"] == restock_id]


def notices_to(world: World, contact: str, restock_id: str) -> int:
    """How many `notice_sent` facts name this contact for this restock."""
    key = world.key_of(contact)
    facts = Tables.read(world.services).facts("notice_sent")
    return sum(1 for f in facts if f.get("contact_key") == key and f.get("restock_id") == restock_id)


def places_of(world: World, contact: str) -> list[Request]:
    """Every request (any state) of one contact for the world's SKU."""
    return [r for r in world.services.exits.places(world.key_of(contact)) if r.sku == world.sku]


def offered_token(world: World, contact: str) -> str:
    [row] = [r for r in offers_to(world, contact) if r["state"] == "offered"]
    return str(row["token_id"])


def test_someone_who_joins_while_units_wait_for_nobody_is_told_at_once(world: World) -> None:
    world.product()
    world.tap(A)
    world.inventory(3)
    world.pump()
    [restock] = world.restocks()
    assert len(offers_to(world, A)) == 1
    world.tap(B)  # two units still wait for anyone
    world.pump()
    assert [r["restock_id"] for r in offers_to(world, B)] == [restock["restock_id"]]
    world.settle()
    assert_invariants(world.services, settled=True)


def test_a_late_joiner_is_told_when_a_unit_comes_back_after_the_line_ran_out(world: World) -> None:
    world.product()
    world.tap(A)
    world.inventory(1)
    world.pump()
    world.clock.advance(3601)
    world.sweep()  # A's offer lapses: the unit waits for nobody
    world.pump()
    world.tap(B)
    world.pump()
    assert len(offers_to(world, B)) == 1
    world.settle()
    assert_invariants(world.services, settled=True)


def test_a_holder_of_an_older_restocks_offer_is_told_about_the_open_one_when_it_lapses(world: World) -> None:
    world.product()
    world.tap(A)
    world.inventory(1)
    world.pump()  # A holds an offer from the first restock
    world.inventory(0)  # it closes
    world.inventory(5)  # a second one opens, within A's offer window
    world.pump()  # A is passed over: still holding the first one's offer
    [second] = [r["restock_id"] for r in world.restocks() if r["state"] != "closed"]
    assert offers_to(world, A, second) == []
    world.clock.advance(3601)
    world.sweep()  # the old offer lapses
    world.pump()
    assert len(offers_to(world, A, second)) == 1
    world.settle()
    assert_invariants(world.services, settled=True)


def test_someone_who_bought_and_joins_again_is_never_told_twice_about_that_restock(world: World) -> None:
    world.product()
    world.tap(A)
    world.tap(B)
    world.inventory(2)
    world.pump()
    [restock] = world.restocks()
    token = offered_token(world, A)
    assert world.reserve(token).kind == holds.HELD_NOW
    world.order(token, "order-a")
    world.tap(A)  # A wants another one: a new place at the back
    world.clock.advance(3601)
    world.sweep()  # B's offer lapses: a unit comes back
    world.pump()
    assert notices_to(world, A, restock["restock_id"]) == 1
    world.settle()
    assert_invariants(world.services, settled=True)


def test_someone_who_left_with_a_live_offer_and_joins_again_is_never_told_twice(world: World) -> None:
    world.product()
    world.tap(A)
    world.inventory(1)
    world.pump()
    [restock] = world.restocks()
    exit_ = world.services.exits.leave_sku(world.key_of(A), world.sku, reason="manage")
    assert exit_.outcome == RELEASED
    world.pump()
    world.tap(A)  # changes their mind: a new place
    world.pump()
    assert notices_to(world, A, restock["restock_id"]) == 1
    [place] = places_of(world, A)
    assert place.last_notified_restock == restock["restock_id"]
    world.settle()
    assert_invariants(world.services, settled=True)


def test_sales_through_our_holds_are_not_taken_off_again_when_the_platform_reports_them(world: World) -> None:
    world.product()
    for contact in PEOPLE[:8]:
        world.tap(contact)
    world.inventory(4)
    world.pump()  # the first four are told
    for n, contact in enumerate(PEOPLE[:2]):
        token = offered_token(world, contact)
        assert world.reserve(token).kind == holds.HELD_NOW
        world.order(token, f"order-{n}")
    world.inventory(2)  # the platform reports the two sales
    [restock] = world.restocks()
    assert int(restock["units_available"]) == 2
    world.clock.advance(3601)
    world.sweep()  # the other two offers lapse unused
    world.pump()
    assert all(len(offers_to(world, contact)) == 1 for contact in PEOPLE[4:6]), "the two units go to the next two"
    world.settle()
    assert_invariants(world.services, settled=True)


def test_a_deep_fall_keeps_the_debt_so_a_small_rise_gives_nobody_a_unit_the_shelf_lacks(world: World) -> None:
    world.product()
    for contact in PEOPLE[:7]:
        world.tap(contact)
    world.inventory(6)
    world.pump()  # six told
    for contact in PEOPLE[:5]:
        assert world.reserve(offered_token(world, contact)).kind == holds.HELD_NOW
    world.inventory(3)  # walk-in sales: the shelf holds 3 for 5 holders
    world.inventory(4)
    assert world.reserve(offered_token(world, PEOPLE[5])).kind == holds.JUST_GONE_PAGE
    assert len(world.offers("held")) == 5
    world.settle()
    assert_invariants(world.services, settled=True)


def test_an_opted_out_holder_leaves_the_list_even_when_the_sweep_crashes_after_the_expiry(world: World) -> None:
    world.product()
    world.tap(A)
    world.tap(B)
    world.inventory(1)
    world.pump()
    assert world.reserve(offered_token(world, A)).kind == holds.HELD_NOW
    result = world.unsubscribe(A)
    assert [e.outcome for e in result.exits] == [HOLDING]
    world.clock.advance(901)
    world.faults.crash_at("sweep.after_expiry")
    world.sweep()  # crashes after the expiry; the next minute's sweep finishes
    assert [p.state for p in places_of(world, A)] == []
    world.settle()
    assert len(offers_to(world, B)) == 1
    assert_invariants(world.services, settled=True)


def test_leave_this_list_while_holding_takes_the_place_away_when_the_hold_ends(world: World) -> None:
    world.product()
    world.tap(A)
    world.tap(B)
    world.inventory(1)
    world.pump()
    assert world.reserve(offered_token(world, A)).kind == holds.HELD_NOW
    exit_ = world.services.exits.leave_sku(world.key_of(A), world.sku, reason="manage")
    assert exit_.outcome == HOLDING
    world.clock.advance(901)
    world.sweep()  # the hold ends unbought: A's place goes, the unit goes to B
    world.pump()
    assert places_of(world, A) == []
    assert len(offers_to(world, B)) == 1
    world.inventory(0)
    world.inventory(3)  # the next restock never reaches A
    world.pump()
    assert len(offers_to(world, A)) == 1
    world.settle()
    assert_invariants(world.services, settled=True)


def test_tapping_notify_me_again_while_a_leave_waits_for_the_hold_keeps_the_place(world: World) -> None:
    world.product()
    world.tap(A)
    world.inventory(1)
    world.pump()
    assert world.reserve(offered_token(world, A)).kind == holds.HELD_NOW
    world.services.exits.leave_sku(world.key_of(A), world.sku, reason="manage")
    world.tap(A)  # asking again means staying
    world.clock.advance(901)
    world.sweep()
    assert [p.state for p in places_of(world, A)] == ["waiting"]
    world.settle()
    assert_invariants(world.services, settled=True)


def test_a_place_can_switch_onto_a_contact_that_left_after_being_told_and_keeps_that_memory(world: World) -> None:
    email = "ada@example.com"
    world.product()
    world.tap(A)
    world.inventory(1)
    world.pump()
    [restock] = world.restocks()
    world.services.exits.leave_sku(world.key_of(A), world.sku, reason="manage")  # A was told, then left
    world.pump()
    world.tap(email)
    # The code that proves A is the email owner's is the manage page's step; the switch itself moves the place.
    switched = world.services.manage.switch(world.key_of(email), A, channel="sms")
    assert switched.moved == [world.sku]
    [place] = places_of(world, A)
    assert place.last_notified_restock == restock["restock_id"]
    world.settle()
    assert notices_to(world, A, restock["restock_id"]) == 1
    assert_invariants(world.services, settled=True)


def test_a_late_joiner_whose_tap_died_before_its_job_went_is_told_after_the_sweep(world: World) -> None:
    from tests.reliability.world import PowerCut

    world.product()
    world.tap(A)
    world.inventory(3)
    world.pump()  # two units wait for nobody
    # B's tap: its line ticket, the refused first try, then the place with its owed job, then the Lambda dies.
    world.faults.cut_before_call(4)
    with pytest.raises(PowerCut):
        world.services.capture.capture("198.51.100.7", {"sku": world.sku, "channel": "sms", "contact": B})
    world.faults.restore()
    assert [p.state for p in places_of(world, B)] == ["waiting"]
    world.pump()
    assert offers_to(world, B) == []
    world.clock.advance(61)
    world.sweep()  # finds the restock still owed its job and sends it
    world.pump()
    assert len(offers_to(world, B)) == 1
    world.settle()
    assert_invariants(world.services, settled=True)
