"""The invariant checker itself: a clean story passes, and each kind of damage to the tables is named."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chalicelib.tables.reservations import OFFERED
from tests.builders import join_request
from tests.reliability.invariants import violations
from tests.reliability.world import World


def told(world: World) -> World:
    """Three people waiting, two told about a restock of two units."""
    world.product()
    for n in ("+447400100501", "+447400100502", "+447400100503"):
        world.tap(n)
    world.inventory(2)
    world.pump()
    return world


def bump(world: World, field: str, by: int) -> None:
    [restock] = world.restocks()
    world.table("restocks").update_item(
        Key={"sku": world.sku, "restock_ts": restock["restock_ts"]},
        UpdateExpression="ADD #f :by",
        ExpressionAttributeNames={"#f": field},
        ExpressionAttributeValues={":by": by},
    )


def older_untold(world: World) -> None:
    clock_back = world.clock.now() - 3600
    request = join_request(world.services, world.sku, "+447400100599", clock_back)
    # Joined an hour before anyone was told, written with an older join stamp and never passed over.
    world.table("requests").delete_item(Key={"sku": world.sku, "joined_ts": request["joined_ts"]})
    world.table("requests").put_item(Item={**request, "joined_ts": "2000-01-01T00:00:00.000000Z#000000"})
    world.table("requests").update_item(
        Key={"sku": world.sku, "joined_ts": f"U#{request['contact_key']}"},
        UpdateExpression="SET #r = :r",
        ExpressionAttributeNames={"#r": "ref"},
        ExpressionAttributeValues={":r": "2000-01-01T00:00:00.000000Z#000000"},
    )


def second_place(world: World) -> None:
    first = world.shoppers[0]
    item = world.table("requests").get_item(Key={"sku": world.sku, "joined_ts": first.joined_ts})["Item"]
    # A stamp one suffix digit away, so the copy is always a second item (never the same key).
    last = item["joined_ts"][-1]
    other = "0" if last != "0" else "1"
    world.table("requests").put_item(Item={**item, "joined_ts": item["joined_ts"][:-1] + other, "state": "waiting"})


def suppress_waiting(world: World) -> None:
    waiting = world.shoppers[-1]
    world.table("optout").put_item(Item={"contact": waiting.key, "source": "admin", "at": 0})


def duplicate_offer(world: World) -> None:
    [offer, *_] = world.offers(OFFERED)
    world.table("reservations").put_item(Item={**offer, "token_id": "f" * 32})


def left_pending(world: World) -> None:
    [restock] = world.restocks()
    world.table("restocks").update_item(
        Key={"sku": world.sku, "restock_ts": restock["restock_ts"]},
        UpdateExpression="SET pending_key = :p, pending_since = :s",
        ExpressionAttributeValues={":p": "pending", ":s": 0},
    )


DAMAGE: dict[str, tuple[Callable[[World], Any], str]] = {
    "older person passed over": (older_untold, "1 fair order"),
    "two live places": (second_place, "2 one place"),
    "suppressed but waiting": (suppress_waiting, "3 opt-out"),
    "a unit held twice": (lambda w: bump(w, "units_available", -1), "4 oversell"),
    "a unit promised twice": (lambda w: bump(w, "units_offerable", -1), "5 over-promise"),
    "two offers for one place": (duplicate_offer, "6 exactly once"),
    "a restock still owed its job": (left_pending, "7 nothing lost"),
}


def test_a_clean_story_has_no_violations(world: World) -> None:
    told(world)
    assert violations(world.services, world.clock.now()) == []


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_each_kind_of_damage_is_named(world: World, damage: str) -> None:
    told(world)
    harm, invariant = DAMAGE[damage]
    harm(world)
    found = violations(world.services, world.clock.now(), settled=True)
    assert any(line.startswith(invariant) for line in found), found
