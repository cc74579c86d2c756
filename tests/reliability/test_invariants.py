"""The invariant checker itself: a clean story passes, and each kind of damage to the tables is named."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from chalicelib.tables.reservations import OfferState
from tests.builders import join_request
from tests.reliability.invariants import Moment, step_violations, told_after_suppression, violations
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


# --- each step's counter moves (step_violations)


def moment(available: int, offerable: int, *rows: tuple[str, str], facts: tuple[dict[str, Any], ...] = ()) -> Moment:
    """One restock `rs_1`'s counters, with offer rows (token_id, state) and level facts."""
    return Moment(
        counters={"rs_1": (available, offerable)},
        rows={
            token: {"token_id": token, "restock_id": "rs_1", "state": state}
            | ({"held_at": 1} if state in (OfferState.HELD, OfferState.CONVERTED) else {})
            for token, state in rows
        },
        level_facts={str(n): {"ts": str(n), "restock_id": "rs_1", **f} for n, f in enumerate(facts)},
        suppressed=frozenset(),
    )


FELL_BY_ONE = {"kind": "restock_lowered", "level_before": 3, "level_after": 2, "own_sales": 0}


def test_a_step_that_moves_the_counters_by_its_rows_passes(world: World) -> None:
    told(world)
    before = Moment.read(world.table)
    [offer, *_] = world.offers(OfferState.OFFERED)
    world.reserve(str(offer["token_id"]))
    world.inventory(1)  # a fall of one under the two offers, one of them held now
    assert step_violations(before, Moment.read(world.table), "tap and fall") == []


STEPS: dict[str, tuple[Moment, Moment, str]] = {
    "a hold granted with no unit left": (
        moment(0, -1, ("a", OfferState.OFFERED)),
        moment(-1, -1, ("a", OfferState.HELD)),
        "4 oversell: hold: 1 hold(s) granted on rs_1 with units_available 0 before the step",
    ),
    "a debt with no fall": (
        moment(0, -1, ("a", OfferState.OFFERED)),
        moment(-1, -1, ("a", OfferState.HELD)),
        "4 debt: hold: rs_1 owes 1 unit(s) to holders after no fall, 0 before it",
    ),
    "a hold that took two units": (
        moment(2, 1, ("a", OfferState.OFFERED)),
        moment(0, 1, ("a", OfferState.HELD)),
        "4 counters: hold: rs_1 units_available moved -2; its rows moved -1 and the level +0",
    ),
    "an offer that promised nothing": (
        moment(2, 2),
        moment(2, 2, ("a", OfferState.OFFERED)),
        "5 counters: hold: rs_1 units_offerable moved +0; its rows moved -1 and the level +0",
    ),
    "more offers than units in one step": (
        moment(1, 1, ("a", OfferState.LAPSED)),
        moment(1, -1, ("a", OfferState.LAPSED), ("b", OfferState.OFFERED), ("c", OfferState.OFFERED)),
        "5 over-promise: hold: 2 offer(s) made on rs_1 with units_offerable 1 before the step",
    ),
    "a lapse that gave back two promises": (
        moment(2, 1, ("a", OfferState.OFFERED)),
        moment(2, 3, ("a", OfferState.LAPSED)),
        "5 counters: hold: rs_1 units_offerable moved +2; its rows moved +1 and the level +0",
    ),
    "a fall that left a debt deeper than it took": (
        moment(1, 1, ("a", OfferState.HELD), ("b", OfferState.HELD)),
        moment(-2, -2, ("a", OfferState.HELD), ("b", OfferState.HELD), facts=(FELL_BY_ONE,)),
        "4 debt: hold: rs_1 owes 2 unit(s) to holders after a fall of 1, 0 before it",
    ),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_each_wrong_counter_move_is_named(step: str) -> None:
    before, after, says = STEPS[step]
    assert says in step_violations(before, after, "hold")


def test_a_promise_given_back_in_a_step_may_be_made_again_in_it() -> None:
    before = moment(1, 1)
    after = moment(1, 0, ("a", OfferState.LAPSED), ("b", OfferState.OFFERED))
    assert step_violations(before, after, "told, lapsed, told another") == []


def test_a_fall_may_leave_a_debt_as_deep_as_it_took() -> None:
    before = moment(0, 0, ("a", OfferState.HELD))
    after = moment(-1, -1, ("a", OfferState.HELD), facts=(FELL_BY_ONE,))
    assert step_violations(before, after, "fall") == []


def test_an_offer_sent_after_its_owners_suppression_row_is_named(world: World) -> None:
    told(world)
    [offer, *_] = world.offers(OfferState.OFFERED)
    key = str(offer["contact_key"])
    world.table("optout").put_item(Item={"contact": key, "source": "unsubscribe", "at": int(world.clock.now())})
    sent = set(world.sent_tokens())
    assert told_after_suppression(world.services, {key: sent}) == []
    [line] = told_after_suppression(world.services, {key: sent - {str(offer["token_id"])}})
    assert line.startswith("3 opt-out: offer ") and "after its suppression row was written" in line
