"""Holds against the emulator: DESIGN §4's counter table, simultaneous taps, and "just gone"."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest

from chalicelib import counters, holds
from chalicelib.orders import Order
from chalicelib.tables.base import TransactionCancelled
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from tests.builders import join_request
from tests.scenes import Scene, level_falls_to, scene
from tests.support import CHAIR


@pytest.fixture
def s(services: Services, clock: FixedClock) -> Scene:
    return scene(services, clock)


# --- DESIGN §4: every event, its counter changes and its row change, checked against the tables.


def _nothing(s: Scene) -> None:
    return None


def _offered(s: Scene) -> None:
    s.offer()


def _held(s: Scene) -> None:
    s.tap(s.offer())


def _notice_sent(s: Scene) -> None:
    s.offer()


def _link_clicked(s: Scene) -> None:
    assert s.tap(s.tokens[0]).kind == holds.HELD_NOW


def _offer_lapses(s: Scene) -> None:
    s.clock.advance(CHAIR["offer_window_s"])
    assert s.services.sweep.run()["lapsed"] == 1


def _hold_expires(s: Scene) -> None:
    s.clock.advance(CHAIR["hold_window_s"])
    assert s.services.sweep.run()["expired"] == 1


def _order_placed(s: Scene) -> None:
    assert s.services.orders.record(Order(s.tokens[0], "order-1")).status == "converted"


COUNTER_TABLE = [
    # event, before, do, Δ units_available, Δ units_offerable, row state after, request state after, audit kind
    ("notice sent", _nothing, _notice_sent, 0, -1, "offered", "offered", None),
    ("link clicked", _offered, _link_clicked, -1, 0, "held", "reserved", "hold"),
    ("offer lapses unused", _offered, _offer_lapses, 0, +1, "lapsed", "waiting", "lapse"),
    ("hold expires unbought", _held, _hold_expires, +1, +1, "expired", "waiting", "expiry"),
    ("order placed", _held, _order_placed, 0, 0, "converted", "converted", "conversion"),
]


def tap_at_once(services: Services, links: list[str]) -> list[str]:
    """Every link tapped in the same instant, one thread each; the kind of answer each got."""
    barrier = threading.Barrier(len(links))
    kinds: list[str] = []

    def tap(link: str) -> None:
        barrier.wait()
        kinds.append(services.holds.reserve(link).kind)

    threads = [threading.Thread(target=tap, args=(link,)) for link in links]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return kinds


@pytest.mark.parametrize(
    ("event", "before", "do", "d_available", "d_offerable", "row_state", "request_state", "audit_kind"),
    COUNTER_TABLE,
    ids=[row[0] for row in COUNTER_TABLE],
)
def test_counter_table_moves_counters_and_rows_together(
    s: Scene,
    event: str,
    before: Callable[[Scene], None],
    do: Callable[[Scene], None],
    d_available: int,
    d_offerable: int,
    row_state: str,
    request_state: str,
    audit_kind: str | None,
) -> None:
    before(s)
    available, offerable = s.counters()
    waiting = s.waiting_count()
    audit = s.audit_kinds()
    do(s)
    assert s.counters() == (available + d_available, offerable + d_offerable)
    [token_id] = s.tokens
    row = s.row(token_id)
    assert row.state == row_state
    request = s.request()
    assert request.state == request_state
    # The request owns the offer while it is live, and lets go of it once the row is settled.
    assert request.offer_token == (token_id if row_state in ("offered", "held") else None)
    assert request.last_notified_restock == s.restock.restock_id
    # Only a conversion takes the shopper off the list.
    assert s.waiting_count() == waiting - (1 if row_state == "converted" else 0)
    if audit_kind:
        assert s.audit_kinds()[audit_kind] == audit[audit_kind] + 1


def test_hold_sets_the_hold_window_and_the_sweeps_due_time(s: Scene) -> None:
    token_id = s.offer()
    outcome = s.tap(token_id)
    row = s.row(token_id)
    assert row.hold_expires_at == int(s.clock.now()) + CHAIR["hold_window_s"]
    assert row.due_at == row.hold_expires_at
    assert row.held_at == int(s.clock.now())
    assert outcome.hold_expires_at == row.hold_expires_at
    assert outcome.location == f"https://shop.example/checkout?sku=CHAIR-WALNUT&reservation={token_id}"


def test_second_tap_on_own_live_hold_redirects_without_a_second_unit(s: Scene) -> None:
    token_id = s.offer()
    first = s.tap(token_id)
    s.clock.advance(60)
    again = s.tap(token_id)
    assert (first.kind, again.kind) == (holds.HELD_NOW, holds.HELD_AGAIN)
    assert again.location == first.location
    assert s.counters() == (1, 1)
    assert s.audit_kinds()["hold"] == 1


def test_eight_simultaneous_taps_on_one_link_hold_one_unit(s: Scene) -> None:
    token_id = s.offer()
    link = s.services.tokens.reserve(token_id)
    kinds = tap_at_once(s.services, [link] * 8)
    assert sorted(kinds) == sorted([holds.HELD_NOW] + [holds.HELD_AGAIN] * 7)
    assert s.counters() == (1, 1)
    assert s.row(token_id).state == "held"
    assert s.audit_kinds()["hold"] == 1


def test_more_live_offers_than_units_after_a_level_fall_hold_only_the_units(
    services: Services, clock: FixedClock
) -> None:
    k, u = 6, 2
    sc = scene(services, clock, units=k, people=k)
    tokens = [sc.offer(i) for i in range(k)]
    level_falls_to(sc, u)
    links = [services.tokens.reserve(t) for t in tokens]
    kinds = tap_at_once(services, links)
    assert Counter(kinds) == {holds.HELD_NOW: u, holds.JUST_GONE_PAGE: k - u}
    states = Counter(sc.row(t).state for t in tokens)
    assert states == {"held": u, "lapsed": k - u}
    # Nothing held beyond the units; nothing promised beyond what is left.
    assert sc.counters() == (0, 0)
    assert sc.audit_kinds()["just_gone"] == k - u
    # The refused keep their place: back to waiting, not offered again for this restock.
    for i, token_id in enumerate(tokens):
        if sc.row(token_id).state == "lapsed":
            assert sc.request(i).state == "waiting"
            assert sc.request(i).last_notified_restock == sc.restock.restock_id


def test_just_gone_link_keeps_saying_so(s: Scene) -> None:
    token_id = s.offer()
    level_falls_to(s, 0)
    assert s.tap(token_id).kind == holds.JUST_GONE_PAGE
    assert s.tap(token_id).kind == holds.JUST_GONE_PAGE
    assert s.row(token_id).lapse_reason == "just_gone"


def test_lapsed_expired_and_used_links_are_expired(s: Scene) -> None:
    lapsed, expired, used = s.offer(0), s.offer(1), None
    s.tap(expired)
    s.clock.advance(CHAIR["hold_window_s"])
    s.services.sweep.run()
    s.clock.advance(CHAIR["offer_window_s"])
    s.services.sweep.run()
    s.clock.advance(1)
    used = s.offer(2)
    s.tap(used)
    s.services.orders.record(Order(used, "order-9"))
    assert [(o.kind, o.reason) for o in map(s.tap, (lapsed, expired, used))] == [
        (holds.EXPIRED_LINK, "offer_lapsed"),
        (holds.EXPIRED_LINK, "hold_expired"),
        (holds.EXPIRED_LINK, "used"),
    ]


def test_row_expiry_is_authoritative_before_the_sweep_runs(s: Scene) -> None:
    offered, held = s.offer(0), s.offer(1)
    s.tap(held)
    s.clock.advance(CHAIR["offer_window_s"])
    assert s.tap(offered).reason == "offer_lapsed"
    assert s.tap(held).reason == "hold_expired"
    # Nothing moved: the sweep returns the units, once.
    assert s.counters() == (1, 0)


def test_tampered_and_unknown_links_are_refused(s: Scene) -> None:
    token_id = s.offer()
    link = s.services.tokens.reserve(token_id)
    tampered = link[:-2] + ("AA" if not link.endswith("AA") else "BB")
    assert s.services.holds.reserve(tampered).kind == holds.INVALID_LINK
    assert s.services.holds.reserve("").kind == holds.INVALID_LINK
    assert s.services.holds.reserve(s.services.tokens.reserve("0" * 32)).kind == holds.UNKNOWN_LINK
    # A genuine token of another kind (an unsubscribe link) does not reserve anything.
    assert s.services.holds.reserve(s.services.tokens.unsubscribe(token_id)).kind == holds.INVALID_LINK
    assert s.counters() == (2, 1)


def test_link_older_than_offer_and_hold_windows_is_expired(s: Scene) -> None:
    import time

    from itsdangerous import TimestampSigner, URLSafeTimedSerializer

    class SignedLongAgo(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - CHAIR["offer_window_s"] - CHAIR["hold_window_s"] - 5

    token_id = s.offer()
    old = URLSafeTimedSerializer(s.services.secrets.get("TOKEN_KEY"), salt="reserve", signer=SignedLongAgo)
    outcome = s.services.holds.reserve(old.dumps({"t": token_id}))
    assert (outcome.kind, outcome.reason) == (holds.EXPIRED_LINK, "link_too_old")
    assert s.row(token_id).state == "offered"


def test_a_shortened_offer_window_never_refuses_a_live_link(s: Scene) -> None:
    import time

    from itsdangerous import TimestampSigner, URLSafeTimedSerializer

    class SignedTenMinutesAgo(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - 600

    token_id = s.offer()
    # The shop shortens both windows after the notice went out: the row keeps the window it was given.
    s.services.tables.catalog.upsert(s.sku, {"offer_window_s": 300, "hold_window_s": 60})
    s.services.tables.catalog._cache.clear()
    link = URLSafeTimedSerializer(s.services.secrets.get("TOKEN_KEY"), salt="reserve", signer=SignedTenMinutesAgo)
    outcome = s.services.holds.reserve(link.dumps({"t": token_id}))
    assert outcome.kind == holds.HELD_NOW
    assert s.row(token_id).state == "held"


def test_product_without_checkout_url_holds_nothing(s: Scene) -> None:
    token_id = s.offer()
    s.services.tables.catalog.upsert(s.sku, {"checkout_url": "javascript:alert(1)"})
    assert s.tap(token_id).kind == holds.UNAVAILABLE
    assert s.row(token_id).state == "offered"
    assert s.counters() == (2, 1)


def test_hold_goes_on_when_the_request_was_tidied_away(s: Scene) -> None:
    token_id = s.offer()
    # DynamoDB's TTL deletes on its own schedule; the shopper's unit must not be stranded by it.
    s.services.tables.requests.table.delete_item(Key={"sku": s.sku, "joined_ts": s.requests[0].joined_ts})
    assert s.tap(token_id).kind == holds.HELD_NOW
    assert s.counters() == (1, 1)
    s.clock.advance(CHAIR["hold_window_s"])
    assert s.services.sweep.run()["expired"] == 1
    assert s.counters() == (2, 2)


def test_hold_refused_by_conflicts_writes_nothing(s: Scene) -> None:
    token_id = s.offer()
    row = s.row(token_id)
    s.services.tables.reservations.table.update_item(
        Key={"token_id": token_id},
        UpdateExpression="SET #s = :held",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":held": "held"},
    )
    move = s.services.moves.hold(row, s.clock.now(), 900)
    assert move.result == counters.MOVED
    assert move.row is not None and move.row.state == "held"
    assert s.counters() == (2, 1)


def test_transaction_cancelled_without_a_failed_condition_surfaces() -> None:
    from chalicelib.tables.base import Reason

    names = {"row": [0], "units": [1]}
    cancelled = TransactionCancelled([Reason("TransactionConflict", None), Reason("None", None)], names)
    with pytest.raises(TransactionCancelled):
        counters.UnitMoves._outcome(cancelled, counter="units")


# --- Level changes through restock detection, as the shop platform reports them.


def detected_scene(services: Services, clock: FixedClock, units: int, people: int) -> Scene:
    """A restock opened by restock detection (level 0 → `units`), with `people` waiting."""
    from chalicelib.detect import InventoryEvent

    sku = "CHAIR-WALNUT"
    services.tables.catalog.upsert(sku, dict(CHAIR))
    requests = []
    for i in range(people):
        requests.append(join_request(services, sku, f"+4474003000{i:02d}", clock.now()))
        clock.advance(1)
    services.detector.apply("wh_level_0", clock.now(), InventoryEvent(sku, 0, None))
    clock.advance(1)
    services.detector.apply("wh_restock", clock.now(), InventoryEvent(sku, units, None))
    product = services.tables.catalog.get(sku, consistent=True)
    restock = services.tables.restocks.get(sku, str(product.open_restock_ts))
    return Scene(services, clock, sku, restock, requests, [])


def platform_level(s: Scene, level: int, webhook_id: str) -> None:
    from chalicelib.detect import InventoryEvent

    s.clock.advance(1)
    s.services.detector.apply(webhook_id, s.clock.now(), InventoryEvent(s.sku, level, None))


def test_more_live_offers_than_units_after_a_platform_level_drop_hold_only_the_units(
    services: Services, clock: FixedClock
) -> None:
    k, u = 6, 2
    sc = detected_scene(services, clock, units=k, people=k)
    tokens = [sc.offer(i) for i in range(k)]
    platform_level(sc, u, "wh_drop")
    assert sc.counters()[0] == u
    links = [services.tokens.reserve(t) for t in tokens]
    kinds = tap_at_once(services, links)
    assert Counter(kinds) == {holds.HELD_NOW: u, holds.JUST_GONE_PAGE: k - u}
    # The just-gone offers gave back no promise that the fall had already taken: nothing left to offer.
    assert sc.counters() == (0, 0)


def test_offers_stranded_by_a_level_drop_are_not_promised_again(services: Services, clock: FixedClock) -> None:
    k, u = 6, 2
    sc = detected_scene(services, clock, units=k, people=k + 3)
    for i in range(k):
        sc.offer(i)
    platform_level(sc, u, "wh_drop")
    # Three of the stranded offers lapse; three are still live, so one unit is promised beyond the two left.
    for token_id in sc.tokens[:3]:
        services.moves.lapse(sc.row(token_id), clock.now())
    live = k - 3
    available, offerable = sc.counters()
    assert offerable <= available - live


def test_crash_after_the_hold_commits_is_answered_by_the_next_tap(s: Scene) -> None:
    from tests.support import CrashAt, InjectedCrash

    token_id = s.offer()
    crashing = Services(
        s.services.settings,
        aws=s.services.aws,
        clock=s.clock,
        faults=CrashAt("reserve.after_hold"),
        model=FakeBedrock(),
    )
    with pytest.raises(InjectedCrash):
        crashing.holds.reserve(s.services.tokens.reserve(token_id))
    # The hold stands (one transaction), so tapping again goes straight to checkout on the same unit.
    assert s.tap(token_id).kind == holds.HELD_AGAIN
    assert s.counters() == (1, 1)
