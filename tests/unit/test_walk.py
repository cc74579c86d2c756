"""A notifier walk's own state, with no table behind it: where it resumes, what it parks, how far it settles, and
when its facts are written (chalicelib/walk.py, chalicelib/fact_buffer.py)."""

from __future__ import annotations

from typing import Any, cast

from chalicelib.fact_buffer import FactBuffer
from chalicelib.metrics import Metrics, skip_metric
from chalicelib.queue.messages import Job
from chalicelib.tables.audit import FACTS_PER_TRANSACTION, AuditTable
from chalicelib.tables.requests import Request
from chalicelib.tables.restocks import Parked, Restock, RestockState
from chalicelib.walk import MAX_PAGE, PARKED_MAX, Candidate, SkipReason, Walk, rewalk_from
from devstack.clocks import FixedClock

SKU = "CHAIR"
RESTOCK = "rs_aaaaaaaaaaaaaaaaaaaaaaaa"
RESTOCK_TS = "2026-03-01T09:00:00.000000Z#aaaaaa"


def stamp(i: int) -> str:
    """The join stamp of the i-th place in line."""
    return f"2026-02-01T10:{i // 60:02d}:{i % 60:02d}.000000Z#{i:06d}"


class Audit:
    """The audit table's calls a walk and its dispatch make: a fact built, facts written together (each write kept,
    in order), one fact written on its own."""

    def __init__(self) -> None:
        self.writes: list[list[dict[str, Any]]] = []
        self.records: list[dict[str, Any]] = []

    def fact(self, sku: str, kind: str, now: float, **facts: Any) -> dict[str, Any]:
        return {"sku": sku, "kind": kind, "at": now, **facts}

    def record_many(self, rows: list[dict[str, Any]]) -> None:
        self.writes.append(list(rows))

    def record(self, sku: str, kind: str, now: float, **facts: Any) -> dict[str, Any]:
        self.records.append(self.fact(sku, kind, now, **facts))
        return self.records[-1]


def restock(**fields: Any) -> Restock:
    return Restock(SKU, RESTOCK_TS, RESTOCK, RestockState.QUEUED, units_total=10, units_offerable=10, **fields)


def walk_of(kind: str = "restock", stock: Restock | None = None, **job: Any) -> tuple[Walk, Audit, Metrics]:
    audit, metrics = Audit(), Metrics("Test", "bisn", enabled=False)
    facts = FactBuffer(cast(AuditTable, audit), SKU)
    walk = Walk(Job(SKU, RESTOCK, RESTOCK_TS, kind=kind, **job), stock or restock(), facts, metrics, FixedClock(1e9))
    return walk, audit, metrics


def place(i: int, **fields: Any) -> Request:
    item = {"sku": SKU, "joined_ts": stamp(i), "state": "waiting", "contact_key": f"k{i}", "channel": "sms"}
    return Request.from_item({**item, "contact": f"+4474001{i:05d}", **fields})


def test_a_top_up_resumes_a_little_before_the_stored_cursor_and_looks_at_the_parked_places_first() -> None:
    parked = Parked(stamp(2), SkipReason.HOLDING_OFFER, 3)
    walk, _, _ = walk_of("topup", restock(walk_cursor=stamp(9), walk_passed=8, walk_parked=frozenset({parked.element})))
    assert (walk.start, walk.cursor, walk.position, walk.seen_up_to) == (rewalk_from(stamp(9)), stamp(9), 8, stamp(9))
    assert walk.take_parked() == {stamp(2): [parked]}
    assert walk.take_parked() == {}, "read once a job"


def test_a_continuation_resumes_after_its_own_place_and_leaves_the_parked_places_to_the_others() -> None:
    parked = Parked(stamp(2), SkipReason.HOLDING_OFFER, 3)
    stock = restock(walk_cursor=stamp(9), walk_passed=8, walk_parked=frozenset({parked.element}))
    walk, _, _ = walk_of("continue", stock, after=stamp(20), passed=19)
    assert (walk.start, walk.cursor, walk.position) == (stamp(20), stamp(20), 19)
    assert walk.take_parked() == {}
    assert walk.mark_cursor == stamp(9), "settled where the restock says, not where this slice starts"


def test_an_eligible_place_joins_the_batch_and_a_passed_one_settles_the_cursor_with_its_fact_kept() -> None:
    walk, audit, metrics = walk_of()
    batch: list[Candidate] = []
    walk.examine(place(1, state="converted"), set(), batch)
    assert (walk.mark_cursor, walk.mark_passed) == (stamp(1), 0), "a converted place is no longer counted"
    walk.examine(place(2), set(), batch)
    assert batch == [Candidate(place(2), 1)]
    walk.examine(place(3, last_notified_restock=RESTOCK), set(), batch)
    assert walk.mark_cursor == stamp(1), "not past a candidate whose offer is not made"
    assert walk.skipped == {SkipReason.CONVERTED: 1, SkipReason.ALREADY_NOTIFIED: 1}
    assert metrics.totals[skip_metric(SkipReason.CONVERTED)] == 1
    assert audit.writes == [] and [f["reason"] for f in walk.facts.skips] == ["converted", "already_notified"]
    assert walk.park == [], "neither reason can change"


def test_facts_of_places_passed_over_are_written_a_transaction_at_a_time() -> None:
    walk, audit, _ = walk_of()
    for i in range(FACTS_PER_TRANSACTION + 1):
        walk.examine(place(i, state="converted"), set(), [])
    assert [len(w) for w in audit.writes] == [FACTS_PER_TRANSACTION]
    assert len(walk.facts.skips) == 1


def test_places_past_the_parked_limit_stop_the_cursor_before_them() -> None:
    walk, _, _ = walk_of()
    for i in range(PARKED_MAX + 2):
        walk.examine(place(i), {f"k{i}"}, [])
    assert len(walk.park) == PARKED_MAX and walk.frozen
    assert walk.mark_cursor == stamp(PARKED_MAX - 1), "never past the place it could not park"
    assert walk.skipped == {SkipReason.OPTED_OUT: PARKED_MAX + 2}, "each still has its fact"


def test_a_mark_writes_the_facts_first_and_carries_the_places_parked_up_to_its_cursor() -> None:
    walk, audit, _ = walk_of()
    walk.examine(place(1), {"k1"}, [])
    walk.examine(place(2, state="converted"), set(), [])
    assert walk.mark(walk.written_cursor, 0) is None, "nothing moved, nothing parked up to there"
    mark = walk.mark(walk.mark_cursor, walk.mark_passed)
    assert mark is not None and mark.cursor == stamp(2) and mark.park == (walk.park[0].element,)
    assert [len(w) for w in audit.writes] == [2], "the facts are kept before the cursor passes their places"
    walk.marked(mark)
    assert (walk.written_cursor, walk.park) == (stamp(2), [])


def test_a_batch_cut_short_by_the_units_settles_only_up_to_its_last_offer() -> None:
    walk, _, _ = walk_of()
    batch: list[Candidate] = []
    for i in range(3):
        walk.examine(place(i), set(), batch)
    assert walk.settled_by(batch[:2], whole=False) == (stamp(1), 2)
    assert walk.settled_by(batch, whole=True) == (stamp(2), 3)
    walk.offered(batch[:2], None, stamp(1), 2)
    assert (walk.mark_cursor, walk.mark_passed, walk.left) == (stamp(1), 2, 8)


def test_a_parked_place_read_again_for_a_new_reason_is_parked_under_it_and_its_old_entry_goes() -> None:
    old = Parked(stamp(2), SkipReason.HOLDING_OFFER, 3)
    walk, _, _ = walk_of("topup", restock(walk_cursor=stamp(9), walk_parked=frozenset({old.element})))
    parked = walk.take_parked()
    assert walk.parked_found(parked, {stamp(2): place(2)}) == [place(2)]
    walk.look_again(place(2), {"k2"}, [])
    assert walk.park == [Parked(stamp(2), SkipReason.OPTED_OUT, 3)] and walk.unpark == [old.element]


def test_a_parked_place_now_eligible_carries_its_old_position_and_entries_into_the_batch() -> None:
    old = Parked(stamp(2), SkipReason.HOLDING_OFFER, 3)
    walk, _, _ = walk_of("topup", restock(walk_cursor=stamp(9), walk_parked=frozenset({old.element})))
    assert walk.parked_found(walk.take_parked(), {}) == [] and walk.unpark == [old.element], "gone: it comes off"
    walk.unpark.clear()
    walk.parked_found({stamp(2): [old]}, {stamp(2): place(2)})
    batch: list[Candidate] = []
    walk.look_again(place(2), set(), batch)
    assert batch == [Candidate(place(2), 3, parked=(old.element,))]


def test_the_first_page_is_short_and_the_next_ones_follow_the_units_left() -> None:
    walk, _, _ = walk_of()
    walk.left = 5000
    assert [walk.page_size(100) for _ in range(2)] == [100, MAX_PAGE]
    walk.left = 3
    assert walk.page_size(100) == 100
    walk.restart(after=stamp(0))
    assert walk.page_size(100) == 100 and walk.start == stamp(0)
