"""The invariant checker itself: a clean story passes, and each kind of damage to the tables is named."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from chalicelib.tables.reservations import OfferState
from tests.builders import join_request
from tests.reliability.invariants import violations
from tests.reliability.world import World, scan


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


def set_restock(world: World, expression: str, values: dict[str, Any] | None = None) -> None:
    [restock] = world.restocks()
    extra: dict[str, Any] = {}
    if "#state" in expression:
        extra["ExpressionAttributeNames"] = {"#state": "state"}
    if values:
        extra["ExpressionAttributeValues"] = values
    world.table("restocks").update_item(
        Key={"sku": world.sku, "restock_ts": restock["restock_ts"]}, UpdateExpression=expression, **extra
    )


def a_new_place_for(world: World, row: dict[str, Any]) -> str:
    """The join stamp of a second place the owner of `row` took after leaving or buying (a re-join)."""
    return str(row["request_joined_ts"])[:-1] + ("0" if str(row["request_joined_ts"])[-1] != "0" else "1")


def older_untold(world: World) -> None:
    clock_back = world.clock.now() - 3600
    request = join_request(world.services, world.sku, "+447400100599", clock_back)
    # Joined an hour before anyone was told, written with an older join stamp and never passed over.
    world.table("requests").delete_item(Key={"sku": world.sku, "joined_ts": request.joined_ts})
    world.table("requests").put_item(Item={**request.to_item(), "joined_ts": "2000-01-01T00:00:00.000000Z#000000"})
    world.table("requests").update_item(
        Key={"sku": world.sku, "joined_ts": f"U#{request.contact_key}"},
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
    [offer, *_] = world.offers(OfferState.OFFERED)
    world.table("reservations").put_item(Item={**offer, "token_id": "f" * 32})


def left_pending(world: World) -> None:
    [restock] = world.restocks()
    world.table("restocks").update_item(
        Key={"sku": world.sku, "restock_ts": restock["restock_ts"]},
        UpdateExpression="SET pending_key = :p, pending_since = :s",
        ExpressionAttributeValues={":p": "pending", ":s": 0},
    )


def told_again_on_a_new_place(world: World) -> None:
    """The first person told re-joined and was recorded told again for the same restock, on the new place."""
    [offer, *_] = world.offers(OfferState.OFFERED)
    [fact] = [
        f for f in scan(world.table("audit")) if f["kind"] == "notice_sent" and f["token_id"] == offer["token_id"]
    ]
    world.table("audit").put_item(
        Item={**fact, "ts": str(fact["ts"]) + "x", "request_joined_ts": a_new_place_for(world, offer)}
    )


def messaged_again_on_a_new_place(world: World) -> None:
    """The first person told re-joined and was sent a second offer for the same restock, on the new place."""
    [offer, *_] = world.offers(OfferState.OFFERED)
    token_id = uuid.uuid4().hex
    world.table("reservations").put_item(
        Item={**offer, "token_id": token_id, "request_joined_ts": a_new_place_for(world, offer)}
    )
    link = world.services.links.reserve(token_id)
    world.services.aws.sns.publish(PhoneNumber="+447400100501", Message=f"Back in stock again: {link}")


def told_after_being_refused(world: World) -> None:
    """A person told about the restock is also recorded as refused by the provider for it."""
    [fact, *_] = [f for f in scan(world.table("audit")) if f["kind"] == "notice_sent"]
    world.table("audit").put_item(Item={**fact, "ts": str(fact["ts"]) + "u", "kind": "notice_undeliverable"})


def idle_on_the_catalogues_open_restock(world: World) -> None:
    """A unit to offer on the restock the catalogue names open, marked closed, while someone waits untold."""
    set_restock(
        world, "SET #state = :closed ADD units_available :one, units_offerable :one", {":closed": "closed", ":one": 1}
    )


def fall_then_a_promise_taken_twice(world: World) -> None:
    """The level fell under two live offers (counters set by the fall), then a promise was taken twice."""
    world.inventory(1)
    bump(world, "units_offerable", -1)


def shelf_moved_but_not_the_counter(world: World) -> None:
    """The catalogue's level says one more unit than the open restock counts."""
    world.table("catalog").update_item(
        Key={"sku": world.sku},
        UpdateExpression="ADD #level :one",
        ExpressionAttributeNames={"#level": "level"},
        ExpressionAttributeValues={":one": 1},
    )


class Damage(NamedTuple):
    harm: Callable[[World], Any]
    invariant: str  # how the violation line starts
    says: str = ""  # and what it says, where one invariant has several checks


DAMAGE: dict[str, Damage] = {
    "older person passed over": Damage(older_untold, "1 fair order"),
    "two live places": Damage(second_place, "2 one place"),
    "suppressed but waiting": Damage(suppress_waiting, "3 opt-out"),
    "a unit held twice": Damage(lambda w: bump(w, "units_available", -1), "4 oversell"),
    "units_available negative with no fall": Damage(
        lambda w: bump(w, "units_available", -3), "4 oversell", "and the level never fell"
    ),
    "the open restock off the shelf level": Damage(shelf_moved_but_not_the_counter, "4 oversell: open", "unseen sales"),
    "a unit promised twice": Damage(lambda w: bump(w, "units_offerable", -1), "5 over-promise"),
    "a unit promised twice after a fall": Damage(fall_then_a_promise_taken_twice, "5 over-promise", "offered"),
    "two offers for one place": Damage(duplicate_offer, "6 exactly once"),
    "one person recorded told twice for one restock": Damage(told_again_on_a_new_place, "6 exactly once: contact"),
    "one person messaged twice for one restock": Damage(
        messaged_again_on_a_new_place, "6 exactly once: contact", "messaged 2 times"
    ),
    "told after the provider refused them": Damage(
        told_after_being_refused, "6 exactly once", "after its notice was refused"
    ),
    "a restock still owed its job": Damage(left_pending, "7 nothing lost"),
    "a unit idle on the catalogue's open restock": Damage(
        idle_on_the_catalogues_open_restock, "7 nothing lost: rs_", "waiting untold"
    ),
}


def test_a_clean_story_has_no_violations(world: World) -> None:
    told(world)
    assert violations(world.services, world.clock.now()) == []


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_each_kind_of_damage_is_named(world: World, damage: str) -> None:
    told(world)
    harm, invariant, says = DAMAGE[damage]
    harm(world)
    found = violations(world.services, world.clock.now(), settled=True)
    assert any(line.startswith(invariant) and says in line for line in found), found


def test_a_sale_no_report_has_shown_yet_is_counted_off_the_shelf(world: World) -> None:
    told(world)
    [offer, *_] = world.offers(OfferState.OFFERED)
    world.reserve(str(offer["token_id"]))
    assert world.row(str(offer["token_id"]))["state"] == OfferState.HELD
    world.order(str(offer["token_id"]), "order-1")
    # The shelf still says 2 (no report since the sale); one unit is sold, so the open restock has 1.
    set_restock(world, "REMOVE unseen_sales")
    found = violations(world.services, world.clock.now())
    assert any(line.startswith("4 oversell: open") for line in found), found
    set_restock(world, "SET unseen_sales = :sales", {":sales": [int(world.clock.now())]})
    assert not any(line.startswith("4 oversell") for line in violations(world.services, world.clock.now()))


def test_the_store_and_the_catalogue_must_agree_on_the_level(world: World) -> None:
    told(world)
    now = world.clock.now()
    assert violations(world.services, now, store_levels={world.sku: 2}) == []
    found = violations(world.services, now, store_levels={world.sku: 3})
    assert found == [f"4 store level: {world.sku} has 3 on the shelf, the catalogue says 2"]


def test_people_told_for_an_earlier_restock_were_not_passed_over_for_it(world: World) -> None:
    told(world)  # the two oldest told about the first restock
    world.inventory(0)  # it closes
    world.inventory(3)  # the next one tells all three, so each request now remembers only that one
    world.settle()
    found = violations(world.services, world.clock.now(), settled=True)
    assert not [line for line in found if line.startswith("1 fair order")], found
