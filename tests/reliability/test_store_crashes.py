"""Crashes and outages around every store call, on Shopify and on WooCommerce (devstack's fakes).

A hold on a platform is a side effect outside DynamoDB (chalicelib/store_holds.py): the intent is written with our
hold, the store call is idempotent on the reservation id, and the row stays due for the sweep while anything is owed.
Each test breaks one step of that, lets what follows in production follow it (the shopper's second tap, the next
sweep), and checks every invariant with the store's own holds (tests/reliability/invariants.py, `store_holds`) and,
once settled and the store's level reported, the shelf level (`store_shelf`).
"""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest

from chalicelib.counters import STORE_RETRY_S
from chalicelib.holds import HELD_AGAIN, HELD_NOW, STORE_DOWN
from chalicelib.tables.reservations import OfferState, StoreState
from devstack.clocks import FixedClock
from tests.reliability.invariants import RESERVED, SOLD, Tables, assert_invariants, store_hold_states
from tests.reliability.world import PLATFORMS, World
from tests.support import CHAIR, InjectedCrash, app_client, tap_link

ADA = "ada@example.com"
BO = "+447400100102"
HOLD_S = int(CHAIR["hold_window_s"])


@pytest.fixture(params=PLATFORMS)
def shop(request: pytest.FixtureRequest, session: boto3.session.Session, env: dict[str, str]) -> World:
    """A shop selling through Shopify or WooCommerce, its product synced from the store and sold out."""
    w = World.build(session, env, FixedClock(int(time.time())), platform=str(request.param))
    w.product()
    return w


def offered(w: World, *contacts: str, units: int = 1) -> list[str]:
    """People join, the store restocks `units`, the notifier tells the front of the line: the offers, oldest first."""
    for contact in contacts:
        w.tap(contact)
    w.inventory(units)
    w.pump()
    return [str(r["token_id"]) for r in w.offers(OfferState.OFFERED)]


def on_store(w: World, token_id: str) -> list[str]:
    """What the store's holds for one reservation hold (RESERVED, SOLD...); empty when it has none."""
    return store_hold_states(w.store).get(token_id, [])


def holds(w: World) -> None:
    """Every invariant, with the store's holds, as things stand now."""
    assert_invariants(w.services, store=w.store)


def settles(w: World) -> None:
    """Every window runs out and every job is delivered; the store reports its stock as it then stands (and what that
    report starts settles too); then nothing is owed, here or on the store, and the catalogue's last level is the
    store's shelf level."""
    w.settle()
    w.report_store()
    w.settle(rounds=1)
    assert_invariants(w.services, settled=True, store=w.store, store_reported=True)
    assert w.store.counts(w.sku)["reserved"] == 0


def store_down(w: World) -> None:
    """The store answers nothing but errors until `store_up`."""
    if w.platform == "shopify":
        w.store.fail_next(503, count=100)
    else:
        w.store.fail_next(503, times=100)


def store_up(w: World) -> None:
    w.store._faults.clear()


def tap(w: World, token_id: str) -> Any:
    """One tap on a reserve link, with no retry: a crash is left as it fell."""
    return w.services.holds.reserve(w.services.tokens.reserve(token_id))


def one_draft_or_order(w: World, token_id: str) -> None:
    """Exactly one hold on the store for the reservation, reserving one unit, and our row names it."""
    assert on_store(w, token_id) == [RESERVED]
    assert w.store.counts(w.sku)["reserved"] == 1
    row = w.row(token_id)
    assert (row["state"], row["store_state"]) == (OfferState.HELD, StoreState.PLACED)
    if w.platform == "shopify":
        [draft] = w.store.drafts_for(token_id)
        assert row["store_ref"] == draft.gid
    else:
        order = w.store.order_for(token_id)
        assert order is not None and row["store_ref"] == str(order.id)


# --- a crash on either side of the store call


@pytest.mark.parametrize("point", ["reserve.after_hold", "store.after_place"])
def test_a_crash_around_the_store_call_is_placed_once_by_the_second_tap(shop: World, point: str) -> None:
    [token] = offered(shop, ADA)
    shop.faults.crash_at(point)
    outcome = shop.reserve(token)  # the page errored; the shopper taps again
    assert shop.faults.crashes == [point]
    assert outcome.kind == HELD_AGAIN
    one_draft_or_order(shop, token)
    assert outcome.location == shop.row(token)["store_checkout_url"]
    holds(shop)
    settles(shop)


@pytest.mark.parametrize("point", ["reserve.after_hold", "store.after_place"])
def test_a_crash_around_the_store_call_is_placed_once_by_the_sweep(shop: World, point: str) -> None:
    [token] = offered(shop, ADA)
    shop.faults.crash_at(point)
    with pytest.raises(InjectedCrash):
        tap(shop, token)
    shop.faults.restore()
    row = shop.row(token)
    assert (row["state"], row["store_state"]) == (OfferState.HELD, StoreState.PLACING)
    # Before the crash the store was called (after_place) or not (after_hold); either way the row is due soon.
    assert on_store(shop, token) == ([RESERVED] if point == "store.after_place" else [])
    holds(shop)
    assert shop.services.sweep.run()["store_placed"] == 0, "not due before STORE_RETRY_S"
    shop.clock.advance(STORE_RETRY_S)
    assert shop.services.sweep.run()["store_placed"] == 1
    one_draft_or_order(shop, token)
    # The shopper's tap now goes straight to the store's checkout, holding nothing more.
    again = tap(shop, token)
    assert (again.kind, again.location) == (HELD_AGAIN, shop.row(token)["store_checkout_url"])
    one_draft_or_order(shop, token)
    holds(shop)
    settles(shop)


def test_a_create_whose_answer_is_lost_is_found_by_the_retry(shop: World) -> None:
    [token] = offered(shop, ADA)
    shop.store.timeout_after_next("draftOrderCreate" if shop.platform == "shopify" else "POST /orders")
    first = tap(shop, token)
    # The store made the hold, but we never heard: an honest page, our hold stands and is still placing.
    assert first.kind == STORE_DOWN
    assert shop.row(token)["store_state"] == StoreState.PLACING
    assert on_store(shop, token) == [RESERVED]
    holds(shop)
    second = tap(shop, token)
    assert second.kind == HELD_AGAIN
    one_draft_or_order(shop, token)
    holds(shop)
    settles(shop)


# --- releasing


def held_and_ended(w: World) -> tuple[str, str]:
    """ADA holds the only unit on the store (BO waits untold behind her); her hold's time runs out."""
    tokens = offered(w, ADA, BO)
    assert len(tokens) == 1
    assert tap(w, tokens[0]).kind == HELD_NOW
    [bo] = [r for r in Tables.read(w.services).requests if r["contact_key"] == w.key_of(BO)]
    w.clock.advance(HOLD_S + 1)
    return tokens[0], str(bo["joined_ts"])


def told(w: World, joined_ts: str) -> bool:
    return any(str(r["request_joined_ts"]) == joined_ts for r in w.offers())


def test_a_hold_that_ends_while_the_store_is_down_is_released_before_its_unit_is_offered(shop: World) -> None:
    token, bo = held_and_ended(shop)
    store_down(shop)
    for _ in range(2):
        summary = shop.services.sweep.run()
        assert summary["store_unanswered"] == 1 and summary["store_released"] == 0
        assert summary["topups"] == 0, "no top-up while the store may still hold the unit"
        row = shop.row(token)
        assert (row["state"], row["store_state"]) == (OfferState.EXPIRED, StoreState.RELEASING)
        assert row.get("due_key"), "the row stays due for the next sweep"
        assert shop.jobs_waiting() == 0
        shop.pump()
        assert not told(shop, bo), "nobody is offered the unit the store may still hold"
        holds(shop)
        shop.clock.advance(60)
    store_up(shop)
    summary = shop.services.sweep.run()
    assert (summary["store_released"], summary["topups"]) == (1, 1)
    assert shop.row(token)["store_state"] == StoreState.RELEASED
    assert RESERVED not in on_store(shop, token)
    assert shop.store.counts(shop.sku) == {"available": 1, "reserved": 0}
    shop.pump()
    assert told(shop, bo), "the unit the store has back goes to the next in line"
    holds(shop)
    settles(shop)


def test_a_crash_after_the_release_call_is_finished_by_the_next_sweep_which_tops_up_once(shop: World) -> None:
    token, bo = held_and_ended(shop)
    shop.faults.crash_at("store.after_release")
    summary = shop.sweep()  # crashes after the store gave the unit back; the next minute's sweep finishes
    assert shop.faults.crashes == ["store.after_release"]
    assert (summary["expired"], summary["store_released"], summary["topups"]) == (0, 1, 1)
    assert shop.row(token)["store_state"] == StoreState.RELEASED
    assert shop.store.counts(shop.sku) == {"available": 1, "reserved": 0}
    assert shop.jobs_waiting() == 1, "one top-up"
    assert len(Tables.read(shop.services).facts("expiry")) == 1
    shop.pump()
    assert told(shop, bo)
    holds(shop)
    settles(shop)


# --- the store refuses, or is paid too late


def test_a_hold_the_store_refuses_shows_just_gone_and_keeps_the_place(shop: World) -> None:
    [token] = offered(shop, ADA)
    # A walk-in buys the unit on the storefront first; its level report has not reached us yet.
    sold_out = shop.store.set_available if shop.platform == "shopify" else shop.store.set_stock
    walk_in = sold_out(shop.sku, 0)
    with app_client(shop.services) as client:
        page = tap_link(client, shop.services.tokens.reserve(token))
    assert page.status_code == 410
    row = shop.row(token)
    assert (row["state"], row["store_state"]) == (OfferState.EXPIRED, StoreState.RELEASING)
    [place] = [r for r in Tables.read(shop.services).requests if r["contact_key"] == shop.key_of(ADA)]
    assert place["state"] == "waiting", "the shopper keeps their place"
    assert on_store(shop, token) == [] and shop.store.counts(shop.sku) == {"available": 0, "reserved": 0}
    holds(shop)
    shop.attempt("store level webhook", lambda: shop.deliver_store(walk_in))
    holds(shop)
    settles(shop)


def test_an_order_paid_after_the_hold_ended_and_was_released_is_recorded_once_and_not_converted(
    shop: World,
) -> None:
    [token] = offered(shop, ADA)
    assert tap(shop, token).kind == HELD_NOW
    ref = str(shop.row(token)["store_ref"])
    shop.clock.advance(HOLD_S + 1)
    if shop.platform == "shopify":
        # The store is down as the sweep ends the hold; meanwhile the shopper pays the draft order they still have.
        store_down(shop)
        assert shop.services.sweep.run()["store_unanswered"] == 1
        store_up(shop)
        paid = shop.store.complete_draft_order(ref)
        summary = shop.services.sweep.run()
    else:
        summary = shop.services.sweep.run()
        paid = shop.store.pay_order(int(ref))  # a cancelled order can still be paid on WooCommerce
    assert summary["store_released"] == 1 and shop.row(token)["store_state"] == StoreState.RELEASED
    for _ in range(2):  # and the platform delivers it again
        answer = shop.deliver_store(paid)
        assert answer.status == "ignored"
        assert [r["status"] for r in answer.results] == ["hold_expired"]
    row = shop.row(token)
    assert row["state"] == OfferState.EXPIRED and row.get("late_order_id")
    [restock] = shop.restocks()
    assert int(restock["orders_on_expired_holds"]) == 1
    t = Tables.read(shop.services)
    assert not t.facts("conversion") and len(t.facts("order_on_expired_hold")) == 1
    assert on_store(shop, token) == [SOLD]
    holds(shop)
    settles(shop)


# --- a second Shopify draft order made by a retry after a lost answer (chalicelib/store_holds.py `settle`)


def test_a_crash_after_the_duplicate_draft_is_deleted_repeats_the_look_next_run(
    session: boto3.session.Session, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from chalicelib.platforms import shopify

    monkeypatch.setattr(shopify, "INDEX_WAITS_S", ())  # the fake's index follows the clock, not real time
    w = World.build(session, env, FixedClock(int(time.time())), platform="shopify")
    w.product()
    [token] = offered(w, ADA, units=2)
    w.store.search_lag_s = 300.0
    w.store.timeout_after_next("draftOrderCreate")
    assert tap(w, token).kind == STORE_DOWN
    assert tap(w, token).kind == HELD_AGAIN
    assert on_store(w, token) == [RESERVED, RESERVED]
    assert w.row(token)["store_unsettled"] is True

    w.clock.advance(300)
    w.faults.crash_at("store.after_duplicates")
    with pytest.raises(InjectedCrash):
        w.services.sweep.run()
    w.faults.restore()
    assert on_store(w, token) == [RESERVED]  # deleted, but the flag still says to look
    assert w.row(token)["store_unsettled"] is True
    w.clock.advance(STORE_RETRY_S)
    assert w.services.sweep.run()["store_settled"] == 1
    assert "store_unsettled" not in w.row(token)
    one_draft_or_order(w, token)
    holds(w)
    settles(w)
