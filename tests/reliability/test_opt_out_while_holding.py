"""Invariant 3 when a shopper opts out while holding a unit: the unit stays theirs, the place does not."""

from __future__ import annotations

from chalicelib.tables.reservations import OfferState
from tests.reliability.invariants import Tables, assert_invariants
from tests.reliability.world import World


def test_opting_out_while_holding_leaves_the_list_once_the_hold_expires(world: World) -> None:
    world.product()
    holder, next_in_line = "+447400100301", "+447400100302"
    world.tap(holder)
    world.tap(next_in_line)
    world.inventory(1)
    world.pump()
    [offer] = world.offers(OfferState.OFFERED)
    assert world.reserve(str(offer["token_id"])).kind == "held"
    assert [e.outcome for e in world.unsubscribe(holder).exits] == ["holding"]

    world.clock.advance(901)  # the hold runs out unbought
    world.sweep()
    world.pump()

    tables = Tables.read(world.services)
    assert [r["contact"] for r in tables.requests] == [next_in_line], "the opted-out holder left the list"
    assert [f["reason"] for f in tables.facts("leave")] == ["unsubscribe"]
    assert_invariants(world.services)
