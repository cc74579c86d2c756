"""A second Shopify draft order made by a retry after a lost answer never keeps a second unit for the hold's whole
window. draftOrderCreate takes no idempotency key and the draftOrders tag search is an index that may lag
(https://shopify.dev/docs/api/admin-graphql/2025-10/queries/draftOrders): a retry whose lookup misses the first draft
creates another. The hold is then recorded unsettled, and each sweep deletes every other open draft with the hold's
tag, clearing the flag once the search shows the recorded draft (chalicelib/store_holds.py `settle`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.counters import STORE_RETRY_S
from chalicelib.platforms import shopify
from chalicelib.tables.reservations import Offer, OfferState, StoreState
from devstack.clocks import FixedClock
from tests.notices import drain
from tests.platforms import THROW, Shop, join, platform_shop
from tests.support import tap_link

LAG_S = 300.0


@pytest.fixture
def shop(session: Any, clock: FixedClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[Shop]:
    # The connector's own waits for the index would only cost real time here: the fake's index follows the clock.
    monkeypatch.setattr(shopify, "INDEX_WAITS_S", ())
    with platform_shop("shopify", session, clock) as built:
        yield built


def the_row(shop: Shop) -> Offer:
    [row] = shop.offers(THROW)
    return row


def test_a_lost_create_answer_and_a_lagging_search_leave_one_reserved_draft_after_the_sweep(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    assert shop.restock(THROW, 2).status_code == 202
    drain(shop.services)
    offer = the_row(shop)
    shop.store.search_lag_s = LAG_S
    link = shop.services.tokens.reserve(offer.token_id)

    # The first attempt's draft order is made but its answer is lost; the shopper taps again, the lookup misses it
    # (not in the search yet) and a second one is made: two units reserved for one hold.
    shop.store.timeout_after_next("draftOrderCreate")
    assert tap_link(shop.client, link).status_code == 503
    again = tap_link(shop.client, link)
    assert again.status_code == 303
    held = the_row(shop)
    assert (held.state, held.store_state, held.store_unsettled) == (OfferState.HELD, StoreState.PLACED, True)
    assert held.store_ref is not None and again.headers["Location"] == held.store_checkout_url
    assert len(shop.store.drafts_for(offer.token_id)) == 2
    assert shop.store.counts(THROW) == {"available": 0, "reserved": 2}

    # The search is still behind: the sweep looks each minute, deletes nothing it cannot tell apart.
    assert shop.services.sweep.run()["store_settled"] == 0, "not due before STORE_RETRY_S"
    shop.clock.advance(STORE_RETRY_S)
    assert shop.services.sweep.run()["store_settled"] == 0
    assert len(shop.store.drafts_for(offer.token_id)) == 2
    assert the_row(shop).store_unsettled

    # The index catches up: the next run deletes the other draft order and clears the flag.
    shop.clock.advance(LAG_S)
    assert shop.services.sweep.run()["store_settled"] == 1
    assert [d.gid for d in shop.store.drafts_for(offer.token_id)] == [held.store_ref]
    assert shop.store.counts(THROW) == {"available": 1, "reserved": 1}
    settled = the_row(shop)
    assert not settled.store_unsettled
    assert settled.due_at == settled.hold_expires_at  # not looked at again before the hold's end
    assert (settled.state, settled.store_ref, settled.store_checkout_url) == (
        OfferState.HELD,
        held.store_ref,
        held.store_checkout_url,
    )
    assert shop.services.sweep.run()["store_settled"] == 0

    # The shopper's link still goes to the same checkout, and paying there converts the hold.
    assert tap_link(shop.client, link).headers["Location"] == held.store_checkout_url
    assert shop.pay(settled).status_code == 200
    assert the_row(shop).state == OfferState.CONVERTED
    assert shop.store.counts(THROW) == {"available": 1, "reserved": 0}


def test_a_call_that_loses_the_race_to_record_its_draft_sends_the_shopper_to_the_recorded_one(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    assert shop.restock(THROW, 2).status_code == 202
    drain(shop.services)
    offer = the_row(shop)
    link = shop.services.tokens.reserve(offer.token_id)
    assert tap_link(shop.client, link).status_code == 303
    recorded = the_row(shop)
    assert recorded.store_ref is not None and not recorded.store_unsettled

    # A simultaneous call read the row while it was still placing; the search does not show the recorded draft
    # order yet, so it makes a second one, and finds the hold recorded when it comes to record its own.
    shop.store.search_lag_s = LAG_S
    product = shop.services.tables.catalog.get(THROW)
    assert product is not None
    stale = dataclasses.replace(recorded, store_state=StoreState.PLACING, store_ref=None, store_checkout_url=None)
    placing = shop.services.store_holds.place(stale, product)
    assert placing.hold is not None
    assert (placing.hold.ref, placing.hold.checkout_url) == (recorded.store_ref, recorded.store_checkout_url)
    assert len(shop.store.drafts_for(offer.token_id)) == 2
    assert the_row(shop).store_unsettled

    # Once the search shows both, the sweep takes the other one back.
    shop.clock.advance(LAG_S)
    assert shop.services.sweep.run()["store_settled"] == 1
    assert [d.gid for d in shop.store.drafts_for(offer.token_id)] == [recorded.store_ref]
    assert shop.store.counts(THROW) == {"available": 1, "reserved": 1}
