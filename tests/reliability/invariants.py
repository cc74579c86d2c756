"""DESIGN §4's invariants 1–7, checked against everything in the tables (and the emulator's outbox).

`violations(services, now)` reads every table whole and returns one line per broken invariant; the tests
call `assert_invariants` after a crash and its retry, after concurrent runs, after redeliveries. It reads
rows only, never the code's own opinion of them, so a bug anywhere shows up here.

With `settled=True` (after the queue was drained and the sweep ran past every window) it also checks
that nothing is left half done: no restock still owed a job, no freed unit idle while someone eligible
waits untold, no job left on the queue. `store_levels` (SKU -> units on the store's shelf, after the
platform's last report) checks that the catalogue's last level is the store's.

`store` (devstack's fake Shopify or WooCommerce, for a world selling through one) checks the store's own holds
against our rows (`store_holds`): one store hold per reservation at most; no ended hold still reserves a unit there
(settled: none at all, and the store reserves exactly one unit per held row with a store hold); a live hold recorded
as placed is reserved on the store; a converted hold's unit is sold, not reserved; and, settled, every unit the
store sold through one of our holds is an order we recorded. With it, `store_shelf` checks the shelf level (DESIGN §4,
Counters): each product's `store_held` is the number of our holds the store holds for us whose placing was recorded
(held rows placed on the store, and ended rows whose unit the store still has, releasing, with a store reference);
and, with `store_reported` (the store's last level report delivered since its stock last changed), the catalogue's
last level is the store's available plus `store_held`.

The unit counters, after any move of the stock level:

- `units_offerable == units_available - offers outstanding`, for every restock, open or closed, always;
- `units_available` may be below zero only after a fall (holds already granted that the shelf no longer
  covers), so never without a `restock_lowered` or `restock_closed` fact;
- the open restock's `units_available == level - holds - sales no report has shown yet` (`unseen_sales`);
- with no fall, holds + conversions never exceed `units_total`, and with no move at all
  `units_available == units_total - holds - conversions` exactly.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.conditions import Attr

from chalicelib.tables.catalog import BACKORDER_MARK, SHARD_OF, backorder_mark, is_shard
from chalicelib.tables.requests import ACTIVE_STATES, UNIQUE_PREFIX, RequestState
from chalicelib.tables.reservations import OfferState, StoreState
from chalicelib.tables.restocks import RestockState
from chalicelib.wiring import Services
from tests.reliability.world import RESERVE_LINK, offer_id, outbox_texts, scan

# Audit kinds that mean the stock level fell under an open restock (a close is a fall below the threshold),
# so its counters were set, not only counted.
LEVEL_MOVES = ("restock_lowered", "restock_closed")


@dataclass
class Tables:
    """Everything in the tables at one moment."""

    catalog: list[dict[str, Any]]
    shards: list[dict[str, Any]]  # the products' waiting shards (chalicelib/tables/catalog.py)
    requests: list[dict[str, Any]]
    uniques: list[dict[str, Any]]
    restocks: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    optouts: dict[str, dict[str, Any]]
    audit: list[dict[str, Any]]

    @classmethod
    def read(cls, services: Services) -> Tables:
        """Scan every table once."""
        everything = list(scan(services.tables.requests.table))
        catalog = list(scan(services.tables.catalog.table))
        return cls(
            catalog=[p for p in catalog if not is_shard(p)],
            shards=[p for p in catalog if is_shard(p)],
            requests=[r for r in everything if not str(r["joined_ts"]).startswith(UNIQUE_PREFIX)],
            uniques=[r for r in everything if str(r["joined_ts"]).startswith(UNIQUE_PREFIX)],
            restocks=list(scan(services.tables.restocks.table)),
            rows=list(scan(services.tables.reservations.table)),
            optouts={str(o["contact"]): o for o in scan(services.tables.optout.table)},
            audit=sorted(scan(services.tables.audit.table), key=lambda f: (str(f["sku"]), str(f["ts"]))),
        )

    def facts(self, kind: str) -> list[dict[str, Any]]:
        """Audit facts of one kind."""
        return [f for f in self.audit if f["kind"] == kind]


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


def violations(
    services: Services,
    now: float,
    *,
    settled: bool = False,
    store_levels: dict[str, int] | None = None,
    store: Any = None,
    store_reported: bool = False,
) -> list[str]:
    """Every broken invariant, one line each (empty when all hold)."""
    t = Tables.read(services)
    found: list[str] = []
    found += fair_order(t)
    found += one_place_per_person(t)
    found += opt_out_at_both_ends(services, t)
    found += never_oversell(t)
    found += store_counts(t, store_levels or {})
    found += never_over_promise(t, now)
    found += exactly_once(services, t)
    found += nothing_lost(services, t, settled=settled)
    if store is not None:
        found += store_holds(t, store, now, settled=settled)
        found += store_shelf(t, store, reported=store_reported)
    return found


def assert_invariants(
    services: Services,
    now: float | None = None,
    *,
    settled: bool = False,
    store: Any = None,
    store_reported: bool = False,
) -> None:
    """Fail with every broken invariant listed (`store`: the fake store a platform world sells through;
    `store_reported`: its last level report was delivered since its stock last changed)."""
    at = services.clock.now() if now is None else now
    broken = violations(services, at, settled=settled, store=store, store_reported=store_reported)
    assert not broken, "invariants broken:\n  " + "\n  ".join(broken)


# --- 1. Fair order


def fair_order(t: Tables) -> list[str]:
    """Nobody was told about a restock while an older, eligible person still waits untold for it.

    An older request with an offer row for the restock was told too (its request remembers only the last
    restock it was told about). One counts as passed over fairly when the audit says why (`notice_skipped`),
    when it joined no earlier than the younger one was told (a join stamp's time is the joining Lambda's
    clock, so a tap landing while a walk is under way may sort just before people already told), or when
    its owner opted out.
    """
    found = []
    skipped = {(f.get("restock_id"), f.get("request_joined_ts")) for f in t.facts("notice_skipped")}
    told_for = {(row.get("restock_id"), str(row["request_joined_ts"])) for row in t.rows}
    accounted = skipped | told_for
    by_sku: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in t.requests:
        by_sku[str(request["sku"])].append(request)
    for row in t.rows:
        restock_id, told = row.get("restock_id"), str(row["request_joined_ts"])
        for older in by_sku[str(row["sku"])]:
            joined = str(older["joined_ts"])
            if joined >= told or older.get("state") != RequestState.WAITING:
                continue
            if older.get("last_notified_restock") == restock_id or (restock_id, joined) in accounted:
                continue
            if _int(older.get("created_at")) >= _int(row.get("offered_at")) or older.get("contact_key") in t.optouts:
                continue
            found.append(f"1 fair order: {row['sku']} {joined} waits untold for {restock_id} while {told} was told")
    return found


# --- 2. One place per person per item


def one_place_per_person(t: Tables) -> list[str]:
    """At most one live request per (SKU, person), and it is the one the uniqueness item names."""
    found = []
    live = Counter((str(r["sku"]), str(r["contact_key"])) for r in t.requests if r.get("state") in ACTIVE_STATES)
    for (sku, key), count in live.items():
        if count > 1:
            found.append(f"2 one place: {sku} has {count} live places for contact {key[:8]}")
    names = {(str(u["sku"]), str(u["joined_ts"])[len(UNIQUE_PREFIX) :]): str(u.get("ref", "")) for u in t.uniques}
    for request in t.requests:
        if request.get("state") not in ACTIVE_STATES:
            continue
        ref = names.get((str(request["sku"]), str(request["contact_key"])))
        if ref != request["joined_ts"]:
            found.append(
                f"2 one place: live place {request['sku']} {request['joined_ts']} not held by its item ({ref})"
            )
    waiting = Counter(str(r["sku"]) for r in t.requests if r.get("state") in ACTIVE_STATES)
    counts: Counter[str] = Counter()
    for shard in t.shards:
        counts[str(shard[SHARD_OF])] += _int(shard.get("waiting_count"))
    shards: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for shard in t.shards:
        shards[str(shard[SHARD_OF])].append(shard)
    for product in t.catalog:
        # A tap reads its shard, never the product: each shard must carry the product's idle mark (invariant 7)
        # and whether it is sold.
        for shard in shards[str(product["sku"])]:
            if shard.get("idle_restock_ts") != product.get("idle_restock_ts"):
                found.append(
                    f"7 idle mark: {shard['sku']} has {shard.get('idle_restock_ts')}, its product has "
                    f"{product.get('idle_restock_ts')}"
                )
            if bool(shard.get("discontinued")) != bool(product.get("discontinued")):
                found.append(f"2 sold: {shard['sku']} discontinued={shard.get('discontinued')}, not as its product")
            # A product sold on backorder takes places only where the shop chose notify-me (a discontinued one's
            # shards refuse every tap whatever they carry).
            if not product.get("discontinued") and shard.get(BACKORDER_MARK) != backorder_mark(product):
                found.append(
                    f"2 list open: {shard['sku']} on_backorder={shard.get(BACKORDER_MARK)}, its product's is "
                    f"{backorder_mark(product)}"
                )
    for product in t.catalog:
        counted = counts[str(product["sku"])]
        if counted != waiting[str(product["sku"])]:
            found.append(f"2 one place: {product['sku']} counts {counted} waiting, has {waiting[str(product['sku'])]}")
    return found


# --- 3. Opt-out at both ends


def opt_out_at_both_ends(services: Services, t: Tables) -> list[str]:
    """A suppressed contact is on no list (a unit already held stays) and was sent nothing after opting out."""
    found = []
    for request in t.requests:
        key = str(request.get("contact_key"))
        if key in t.optouts and request.get("state") in (RequestState.WAITING, OfferState.OFFERED):
            found.append(f"3 opt-out: suppressed {key[:8]} still {request['state']} for {request['sku']}")
    for fact in t.facts("notice_sent"):
        optout = t.optouts.get(str(fact.get("contact_key")))
        if optout is not None and _int(fact.get("at")) > _int(optout.get("at")):
            found.append(f"3 opt-out: {str(fact.get('contact_key'))[:8]} was told after opting out")
    # Every message carries its offer's token; the offer row says when the decision to tell was made.
    rows = {str(r["token_id"]): r for r in t.rows}
    for token_id in _sent_tokens(services):
        row = rows.get(token_id) or {}
        optout = t.optouts.get(str(row.get("contact_key")))
        if optout is not None and _int(row.get("offered_at")) > _int(optout.get("at")):
            found.append(f"3 opt-out: offer {token_id[:8]} was made and sent after its owner opted out")
    return found


# --- 4. Never oversell


# An ended hold whose unit the store still holds (store_state "releasing"): the unit is still out of our counters,
# as a held one is, until the store has it back (DESIGN §4, Counters).
RELEASING = "expired, store releasing"


def _rows_by_restock(t: Tables) -> dict[str, Counter[str]]:
    states: dict[str, Counter[str]] = defaultdict(Counter)
    for row in t.rows:
        states[str(row.get("restock_id"))][str(row["state"])] += 1
        if row["state"] == OfferState.EXPIRED and row.get("store_state") == StoreState.RELEASING:
            states[str(row.get("restock_id"))][RELEASING] += 1
    return states


def _level_moved(t: Tables, restock_id: str) -> bool:
    return any(f.get("restock_id") == restock_id for f in t.audit if f["kind"] in LEVEL_MOVES)


def _unseen_sales(restock: dict[str, Any]) -> int:
    """How many converted sales no inventory report has yet been seen to include: `unseen_sales` holds their
    order times (a list or set), or just their number."""
    value = restock.get("unseen_sales")
    if value is None:
        return 0
    if isinstance(value, list | set | tuple):
        return len(value)
    return int(value)


def open_restocks(t: Tables) -> dict[str, tuple[dict[str, Any], dict[str, Any] | None]]:
    """The restock each product's catalogue item names as open: restock_id -> (product, restock or None)."""
    restocks = {str(r["restock_id"]): r for r in t.restocks}
    return {
        str(p["open_restock_id"]): (p, restocks.get(str(p["open_restock_id"])))
        for p in t.catalog
        if p.get("open_restock_id")
    }


def never_oversell(t: Tables) -> list[str]:
    """Holds + conversions within the units; units_available below zero only as a fall's debt, and exact.

    The open restock's units_available is checked against the shelf: the catalogue's last level, less the
    units held, less the sales already converted that no inventory report has yet been seen to include.
    """
    found = []
    states = _rows_by_restock(t)
    for restock in t.restocks:
        rid = str(restock["restock_id"])
        taken = states[rid][OfferState.HELD] + states[rid][RELEASING] + states[rid][OfferState.CONVERTED]
        total, available = _int(restock.get("units_total")), _int(restock.get("units_available"))
        fell = _level_moved(t, rid)
        if not fell and taken > total:
            found.append(f"4 oversell: {rid} has {taken} holds+conversions for {total} units")
        if available < 0 and not fell:
            found.append(f"4 oversell: {rid} units_available is {available} and the level never fell")
        if not fell and available != total - taken:
            found.append(f"4 oversell: {rid} units_available {available} != {total} - {taken} held or sold")
    for rid, (product, restock) in open_restocks(t).items():
        if restock is None:
            continue  # named by nothing_lost
        level = _int(product.get("level"))
        held = states[rid][OfferState.HELD] + states[rid][RELEASING]
        unseen = _unseen_sales(restock)
        available = _int(restock.get("units_available"))
        if available != level - held - unseen:
            found.append(
                f"4 oversell: open {rid} units_available {available} != level {level} - {held} held"
                f" - {unseen} unseen sales"
            )
    return found


def store_counts(t: Tables, store_levels: dict[str, int]) -> list[str]:
    """After the platform's last report, each product's last level is what the store has on its shelf."""
    found = []
    products = {str(p["sku"]): p for p in t.catalog}
    for sku, shelf in sorted(store_levels.items()):
        level = products.get(sku, {}).get("level")
        if level is None or int(level) != shelf:
            found.append(f"4 store level: {sku} has {shelf} on the shelf, the catalogue says {level}")
    return found


# --- 4 and 7 on the store itself (Shopify, WooCommerce)

RESERVED = "reserved"  # the store holds the unit out of its storefront for this reservation
SOLD = "sold"  # the store sold it (the hold was paid)
LET_GO = "let_go"  # the store's hold exists but holds nothing (cancelled, or its reservation lapsed)


def store_hold_states(store: Any) -> dict[str, list[str]]:
    """Every hold the fake store has made for one of our reservations: reservation id -> what each one holds."""
    from devstack.fake_shopify import FakeShopify
    from devstack.fake_woocommerce import RESERVATION_META_KEY

    found: dict[str, list[str]] = defaultdict(list)
    if isinstance(store, FakeShopify):
        for sku in {v.sku for p in store.products.values() for v in p.variants}:
            store.counts(sku)  # lets reservations past their time lapse, as the shop would
        for draft in store.draft_orders.values():
            for attribute in draft.custom_attributes:
                held = RESERVED if draft.reserved_at is not None else LET_GO
                state = SOLD if draft.status == "COMPLETED" else held
                found[str(attribute["value"])].append(state)
        return found
    for order in store.orders.values():
        for meta in order.meta:
            if meta["key"] != RESERVATION_META_KEY:
                continue
            # A draft's unit is reserved until its reservation lapses (ReserveStock); an on-hold order took it.
            live = order.reserved_until is not None and order.reserved_until > store.clock()
            held = (
                RESERVED
                if order.status == "on-hold" or (order.status in ("checkout-draft", "pending") and live)
                else LET_GO
            )
            state = SOLD if order.status in ("processing", "completed") else held
            found[str(meta["value"])].append(state)
    return found


def store_holds(t: Tables, store: Any, now: float, *, settled: bool) -> list[str]:
    """The store's holds agree with our rows (the module docstring's `store`)."""
    found = []
    on_store = store_hold_states(store)
    rows = {str(r["token_id"]): r for r in t.rows}
    for token_id, states in sorted(on_store.items()):
        short = token_id[:8]
        if len(states) > 1:
            found.append(f"6 exactly once: reservation {short} has {len(states)} holds on the store ({states})")
        row = rows.get(token_id)
        if row is None:
            found.append(f"7 nothing lost: the store holds for reservation {short}, which has no row")
            continue
        state, store_state = row["state"], row.get("store_state")
        if RESERVED in states and state != OfferState.HELD:
            # Between an ending and its release the store may still have the unit (a store that was down).
            releasing = state == OfferState.EXPIRED and store_state == StoreState.RELEASING
            if settled or not releasing:
                found.append(f"4 store: {state} hold {short} ({store_state}) still holds a unit on the store")
        if state == OfferState.CONVERTED and states != [SOLD]:
            found.append(f"4 store: converted hold {short} is {states} on the store, not sold")
        if settled and SOLD in states and state != OfferState.CONVERTED and not row.get("late_order_id"):
            found.append(f"7 nothing lost: the store sold reservation {short}'s unit; no order was recorded")
    for token_id, row in sorted(rows.items()):
        if row["state"] != OfferState.HELD or row.get("store_state") != StoreState.PLACED:
            continue
        # A shop lets a reservation lapse at the hold's end, maybe before the sweep has ended ours.
        if RESERVED not in on_store.get(token_id, []) and now < _int(row.get("hold_expires_at")):
            found.append(f"4 store: live hold {token_id[:8]} is recorded as placed; the store holds nothing for it")
    if settled:
        held: Counter[str] = Counter(
            str(r["sku"]) for r in t.rows if r["state"] == OfferState.HELD and r.get("store_state") == StoreState.PLACED
        )
        for product in t.catalog:
            sku = str(product["sku"])
            try:
                reserved = int(store.counts(sku)["reserved"])
            except KeyError:
                continue  # a product the store does not sell
            if reserved != held[sku]:
                found.append(f"4 store: {sku} has {reserved} reserved on the store for {held[sku]} held rows")
    return found


def store_shelf(t: Tables, store: Any, *, reported: bool) -> list[str]:
    """The shelf level on a store that holds units itself (the module docstring's `store`): `store_held` counts our
    holds there whose placing was recorded, always; once the store's last report is in (`reported`), the catalogue's
    last level is the store's available plus them (a product never reported counts as 0)."""
    found = []
    placed: Counter[str] = Counter()
    for row in t.rows:
        state, store_state = row["state"], row.get("store_state")
        held = state == OfferState.HELD and store_state == StoreState.PLACED
        releasing = state == OfferState.EXPIRED and store_state == StoreState.RELEASING and row.get("store_ref")
        if held or releasing:
            placed[str(row["sku"])] += 1
    for product in t.catalog:
        sku = str(product["sku"])
        store_held = _int(product.get("store_held"))
        if store_held != placed[sku]:
            found.append(f"4 shelf level: {sku} counts {store_held} units held on the store, our rows {placed[sku]}")
        if not reported:
            continue
        try:
            available = int(store.counts(sku)["available"])
        except KeyError:
            continue  # a product the store does not sell
        level = _int(product.get("level"))
        if level != available + store_held:
            found.append(
                f"4 shelf level: {sku} last level {level} != the store's {available} available"
                f" + {store_held} held there for us"
            )
    return found


# --- 5. Never over-promise


def never_over_promise(t: Tables, now: float) -> list[str]:
    """units_offerable is always units_available less the offers outstanding; with no fall, live offers fit.

    A fall may strand offers already sent (DESIGN): then units_offerable goes below zero and the offers are
    told "just gone" when tapped, but the counter still says exactly that.
    """
    found = []
    states = _rows_by_restock(t)
    live: Counter[str] = Counter(
        str(r.get("restock_id"))
        for r in t.rows
        if r["state"] == OfferState.OFFERED and _int(r.get("offer_expires_at")) > now
    )
    for restock in t.restocks:
        rid = str(restock["restock_id"])
        available, offerable = _int(restock.get("units_available")), _int(restock.get("units_offerable"))
        if offerable != available - states[rid][OfferState.OFFERED]:
            found.append(
                f"5 over-promise: {rid} units_offerable {offerable} != {available} - {states[rid][OfferState.OFFERED]} offered"
            )
        if _level_moved(t, rid):
            continue  # stranded offers after a fall are documented; the counter above still binds
        if live[rid] > available:
            found.append(f"5 over-promise: {rid} has {live[rid]} live offers for {available} units")
        if offerable < 0:
            found.append(f"5 over-promise: {rid} units_offerable is {offerable}")
    return found


# --- 6. Exactly once


def exactly_once(services: Services, t: Tables) -> list[str]:
    """One restock per webhook; one offer, one notice, one return per place and restock; one message per offer."""
    found = []
    per_webhook = Counter((str(r["sku"]), str(r.get("webhook_id"))) for r in t.restocks)
    found += [f"6 exactly once: {sku} webhook {w} made {n} restocks" for (sku, w), n in per_webhook.items() if n > 1]
    offers = Counter((str(r.get("restock_id")), str(r["request_joined_ts"])) for r in t.rows)
    found += [f"6 exactly once: {j} got {n} offers for {rid}" for (rid, j), n in offers.items() if n > 1]
    notices = Counter((str(f.get("restock_id")), str(f.get("request_joined_ts"))) for f in t.facts("notice_sent"))
    found += [f"6 exactly once: {j} recorded {n} notices for {rid}" for (rid, j), n in notices.items() if n > 1]
    # One notice per person per restock, whatever place they hold: a person who bought or left and joined
    # again has a new place, but the restock already told them.
    # A notice the provider refused for its recipient is undone once, and that place is never told the restock.
    refused = Counter(
        (str(f.get("restock_id")), str(f.get("request_joined_ts"))) for f in t.facts("notice_undeliverable")
    )
    found += [
        f"6 exactly once: {j} was found undeliverable {n} times for {rid}" for (rid, j), n in refused.items() if n > 1
    ]
    found += [
        f"6 exactly once: {j} was told about {rid} after its notice was refused"
        for rid, j in refused
        if notices[rid, j]
    ]
    people = Counter((str(f.get("restock_id")), str(f.get("contact_key"))) for f in t.facts("notice_sent"))
    found += [
        f"6 exactly once: contact {key[:8]} recorded {n} notices for {rid}" for (rid, key), n in people.items() if n > 1
    ]
    for kind in ("lapse", "expiry", "hold", "conversion"):
        per_token = Counter(str(f.get("token_id")) for f in t.facts(kind))
        found += [f"6 exactly once: offer {tok[:8]} has {n} '{kind}' facts" for tok, n in per_token.items() if n > 1]
    rows = {str(r["token_id"]): r for r in t.rows}
    # An offer's one reminder before it lapses (chalicelib/reminders.py) carries its link too, once at most, and
    # only while the offer was live: never after its hold, its lapse or its end.
    reminded = Counter(str(f.get("token_id")) for f in t.facts("reminder_sent"))
    found += [f"6 exactly once: offer {tok[:8]} was reminded {n} times" for tok, n in reminded.items() if n > 1]
    for token_id, row in rows.items():
        at = row.get("reminder_sent_at")
        if at is None:
            continue
        ends = [row.get(k) for k in ("offer_expires_at", "held_at", "lapsed_at") if row.get(k) is not None]
        if any(_int(at) > _int(end) for end in ends):
            found.append(f"6 exactly once: offer {token_id[:8]} was reminded after its hold or its end")
    sent = Counter(_sent_tokens(services))
    sent.subtract(reminded)
    for token_id, n in sent.items():
        if n > 1:
            found.append(f"6 exactly once: offer {token_id[:8]} was messaged {n} times")
        if token_id not in rows:
            found.append(f"6 exactly once: a message carries offer {token_id[:8]}, which has no row")
    per_place = Counter(
        (str(rows[tok].get("restock_id")), str(rows[tok]["request_joined_ts"])) for tok in sent if tok in rows
    )
    found += [f"6 exactly once: {j} was messaged {n} times for {rid}" for (rid, j), n in per_place.items() if n > 1]
    per_person = Counter(
        (str(rows[tok].get("restock_id")), str(rows[tok].get("contact_key"))) for tok in sent if tok in rows
    )
    found += [
        f"6 exactly once: contact {key[:8]} was messaged {n} times for {rid}"
        for (rid, key), n in per_person.items()
        if n > 1
    ]
    return found


def _sent_tokens(services: Services) -> list[str]:
    tokens = []
    for text in outbox_texts():
        for link in set(RESERVE_LINK.findall(text)):
            tokens.append(offer_id(services, link))
    return tokens


# --- 7. Nothing lost


def nothing_lost(services: Services, t: Tables, *, settled: bool) -> list[str]:
    """Every offer row belongs to a restock; settled, no restock owes a job and no unit idles while someone waits."""
    found = []
    restocks = {str(r["restock_id"]): r for r in t.restocks}
    for row in t.rows:
        if str(row.get("restock_id")) not in restocks:
            found.append(
                f"7 nothing lost: offer {str(row['token_id'])[:8]} names unknown restock {row.get('restock_id')}"
            )
        if row["state"] in (OfferState.LAPSED, OfferState.EXPIRED) and settled and row.get("due_key"):
            found.append(f"7 nothing lost: {row['state']} offer {str(row['token_id'])[:8]} still owes its top-up")
    if not settled:
        return found
    named = open_restocks(t)
    for rid, (product, restock) in named.items():
        if restock is None:
            found.append(f"7 nothing lost: {product['sku']} names open restock {rid}, which does not exist")
        elif restock.get("state") == RestockState.CLOSED:
            found.append(f"7 nothing lost: {product['sku']} names restock {rid} open, but it is closed")
    for restock in t.restocks:
        rid = str(restock["restock_id"])
        if restock.get("state") == RestockState.PENDING or restock.get("pending_key"):
            found.append(f"7 nothing lost: restock {rid} still owed its job after the sweep")
        if restock.get("state") != RestockState.CLOSED and rid not in named:
            found.append(f"7 nothing lost: restock {rid} is {restock.get('state')} but not its product's open restock")
        # Open: the catalogue names it, or it was never closed.
        is_open = rid in named or restock.get("state") != RestockState.CLOSED
        if not is_open or _int(restock.get("units_offerable")) <= 0:
            continue
        idle = [
            r
            for r in t.requests
            if r["sku"] == restock["sku"]
            and r.get("state") == RequestState.WAITING
            and r.get("last_notified_restock") != rid
            and r.get("contact_key") not in t.optouts
        ]
        if idle:
            found.append(
                f"7 nothing lost: {rid} has {restock['units_offerable']} units to offer and {len(idle)} waiting untold"
            )
    attributes = services.aws.sqs.get_queue_attributes(
        QueueUrl=services.jobs.url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    left = int(attributes["Attributes"]["ApproximateNumberOfMessages"])
    if left:
        found.append(f"7 nothing lost: {left} job(s) still on the queue after settling")
    return found


# --- Each step's counter moves (DESIGN §4, Counters), from what the tables held before and after it
#
# The checks above read one moment, so a counter that ends up agreeing with its rows passes them however it got
# there: a hold granted on a unit a fall had already taken leaves the counters consistent, only one lower. A storm
# reads the counters, the offer rows and the level facts between its steps (`Moment`), and `step_violations`
# holds each step to DESIGN's counter table: every counter moved by exactly what its rows and the level moved.

# The facts of the only counter moves no offer row makes: a restock opened, and the level under an open restock.
LEVEL_FACTS = ("restock_detected", "restock_topped_up", "restock_lowered", "restock_closed")


def _kept(row: dict[str, Any]) -> tuple[int, int]:
    """The units an offer row keeps out of (units_available, units_offerable) in its state (DESIGN's table)."""
    state = row["state"]
    if state == OfferState.OFFERED:
        return 0, 1
    if state in (OfferState.HELD, OfferState.CONVERTED):
        return 1, 1
    if state == OfferState.EXPIRED and row.get("store_state") == StoreState.RELEASING:
        return 1, 1  # the store still holds the unit: it comes back with the release, not with the expiry
    return 0, 0


def level_move(fact: dict[str, Any]) -> int:
    """The units a level fact added to both counters of its restock (negative for a fall or a close)."""
    if fact["kind"] == "restock_detected":
        return _int(fact.get("units"))
    if fact["kind"] == "restock_topped_up":
        return _int(fact.get("units_added"))
    # As detection decides it: the level is compared with the one before less our own sales it includes.
    return _int(fact.get("level_after")) - (_int(fact.get("level_before")) - _int(fact.get("own_sales")))


@dataclass(frozen=True)
class Moment:
    """The unit counters, the offer rows and the level facts at one moment between two steps."""

    counters: dict[str, tuple[int, int]]  # restock_id -> (units_available, units_offerable)
    rows: dict[str, dict[str, Any]]  # token_id -> its row
    level_facts: dict[str, dict[str, Any]]  # the fact's key (ts) -> the fact
    suppressed: frozenset[str]  # contact keys with a suppression row

    @classmethod
    def read(cls, table: Callable[[str], Any], *, since: Moment | None = None, suppressions: bool = True) -> Moment:
        """Read through `table` (short name -> boto3 Table): the storm's observer, which no fault plan cuts.

        With `since` (the moment before), the level facts are read again only when a counter or a row moved (a level
        fact that moved nothing, or whose move rows undid, changes no check), and the suppression list only with
        `suppressions`: a storm reads between every two operations, and each scan costs as much as a small one."""
        counters = {
            str(r["restock_id"]): (_int(r.get("units_available")), _int(r.get("units_offerable")))
            for r in scan(table("restocks"))
        }
        rows = {str(r["token_id"]): r for r in scan(table("reservations"))}
        if since is not None and counters == since.counters and rows == since.rows:
            level_facts = since.level_facts
        else:
            facts = scan(table("audit"), FilterExpression=Attr("kind").is_in(list(LEVEL_FACTS)))
            level_facts = {str(f["ts"]): f for f in facts}
        if since is not None and not suppressions:
            suppressed = since.suppressed
        else:
            suppressed = frozenset(str(o["contact"]) for o in scan(table("optout")))
        return cls(
            counters=counters,
            rows=rows,
            level_facts=level_facts,
            suppressed=suppressed,
        )


def step_violations(before: Moment, after: Moment, step: str) -> list[str]:
    """What one step did to the counters, held to DESIGN's counter table: per restock, each counter moved by
    exactly what its rows moved (offers made, holds, lapses, expiries, releases, conversions, offers withdrawn)
    and what the level moved; the offers made and the holds granted fit the units_offerable and units_available
    read before the step (with what the step itself freed or added); and a debt grows only by a fall, by no more
    than the fall took."""
    found = []
    moved: Counter[str] = Counter()
    fell: Counter[str] = Counter()
    added: Counter[str] = Counter()
    for ts, fact in after.level_facts.items():
        if ts in before.level_facts:
            continue
        units = level_move(fact)
        moved[str(fact.get("restock_id"))] += units
        (added if units > 0 else fell)[str(fact.get("restock_id"))] += abs(units)
    kept: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # before a, o; after a, o
    holds: Counter[str] = Counter()
    returned: Counter[str] = Counter()
    offers: Counter[str] = Counter()
    freed: Counter[str] = Counter()
    for token_id in before.rows.keys() | after.rows.keys():
        old, new = before.rows.get(token_id), after.rows.get(token_id)
        row = new if new is not None else old
        assert row is not None
        rid = str(row.get("restock_id"))
        was, now = _kept(old) if old else (0, 0), _kept(new) if new else (0, 0)
        sums = kept[rid]
        sums[0], sums[1], sums[2], sums[3] = sums[0] + was[0], sums[1] + was[1], sums[2] + now[0], sums[3] + now[1]
        # An offer withdrawn in the step it was made in leaves no row: it took and gave back the same promise.
        if old is None:
            offers[rid] += 1
        if (was[1] or old is None) and not now[1]:
            freed[rid] += 1
        held = new is not None and new.get("held_at") is not None and (old is None or old.get("held_at") is None)
        if held:
            holds[rid] += 1
        if (was[0] or held) and not now[0]:
            returned[rid] += 1
    for rid in before.counters.keys() | after.counters.keys():
        if rid not in after.counters:
            found.append(f"7 nothing lost: {step}: restock {rid} is gone")
            continue
        a0, o0 = before.counters.get(rid, (0, 0))
        a1, o1 = after.counters[rid]
        k = kept[rid]
        rows_a, rows_o = k[0] - k[2], k[1] - k[3]  # units the rows gave back (negative: took)
        if a1 - a0 != rows_a + moved[rid]:
            found.append(
                f"4 counters: {step}: {rid} units_available moved {a1 - a0:+d}; its rows moved {rows_a:+d}"
                f" and the level {moved[rid]:+d}"
            )
        if o1 - o0 != rows_o + moved[rid]:
            found.append(
                f"5 counters: {step}: {rid} units_offerable moved {o1 - o0:+d}; its rows moved {rows_o:+d}"
                f" and the level {moved[rid]:+d}"
            )
        room = max(0, o0) + added[rid] + freed[rid]
        if offers[rid] > room:
            found.append(
                f"5 over-promise: {step}: {offers[rid]} offer(s) made on {rid} with units_offerable {o0} before the"
                " step" + (f" (+{room - max(0, o0)} freed or added in it)" if room > max(0, o0) else "")
            )
        room = max(0, a0) + added[rid] + returned[rid]
        if holds[rid] > room:
            found.append(
                f"4 oversell: {step}: {holds[rid]} hold(s) granted on {rid} with units_available {a0} before the step"
                + (f" (+{room - max(0, a0)} freed or added in it)" if room > max(0, a0) else "")
            )
        debt0, debt1 = max(0, -a0), max(0, -a1)
        if debt1 > debt0 + fell[rid]:
            took = f"a fall of {fell[rid]}" if fell[rid] else "no fall"
            found.append(f"4 debt: {step}: {rid} owes {debt1} unit(s) to holders after {took}, {debt0} before it")
    return found


def told_after_suppression(services: Services, sent_before: dict[str, set[str]]) -> list[str]:
    """No offer went to a contact after its suppression row was written (`sent_before`: contact key -> the offers
    sent up to the moment its row was first seen), while the row stands."""
    found = []
    t = Tables.read(services)
    rows = {str(r["token_id"]): r for r in t.rows}
    for token_id in dict.fromkeys(_sent_tokens(services)):
        key = str((rows.get(token_id) or {}).get("contact_key"))
        if key in sent_before and key in t.optouts and token_id not in sent_before[key]:
            found.append(f"3 opt-out: offer {token_id[:8]} went to {key[:8]} after its suppression row was written")
    return found
