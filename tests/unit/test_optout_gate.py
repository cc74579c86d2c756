"""When the notifier's last look before a send is read: after the commit, about a round of sends ahead, and never
older than MAX_LOOK_AGE_S when a send goes."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from chalicelib.messages.optout_gate import MAX_LOOK_AGE_S, NOT_WAITING, OPTED_OUT, Addressee, BatchLook, LastLooks


def to(contact: str) -> Addressee:
    """The notice for `contact`, its place and offer named after it."""
    return Addressee(contact, f"ts-{contact}", f"tok-{contact}")


class Lists:
    """The suppression list and the places, recording each look (and failing the next `failing` of them)."""

    def __init__(self, suppressed: set[str] | None = None, failing: int = 0) -> None:
        self.suppressed = set(suppressed or ())
        self.gone: set[str] = set()  # contacts whose place no longer holds their offer
        self.failing = failing
        self.reads: list[list[str]] = []
        self.threads: list[str] = []

    def read(self, addressees: Sequence[Addressee]) -> dict[str, str]:
        self.reads.append([a.contact_key for a in addressees])
        self.threads.append(threading.current_thread().name)
        if self.failing:
            self.failing -= 1
            raise ConnectionError("the table could not be read")
        withheld = {a.token_id: OPTED_OUT for a in addressees if a.contact_key in self.suppressed}
        withheld.update({a.token_id: NOT_WAITING for a in addressees if a.contact_key in self.gone})
        return withheld


class Clock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def batch(*contacts: str) -> list[Addressee]:
    return [to(c) for c in contacts]


def test_the_first_batch_is_read_as_it_commits_since_nothing_is_ahead_of_it() -> None:
    lists = Lists()
    looks = LastLooks(lists.read, lead=2)
    looks.batch(batch("a", "b", "c"))
    assert lists.reads == [["a", "b", "c"]]


def test_a_batch_far_behind_is_read_only_once_the_sends_ahead_are_down_to_the_lead() -> None:
    lists = Lists()
    looks = LastLooks(lists.read, lead=2)
    first = looks.batch(batch("a", "b", "c", "d"))  # turns 0..3
    second = looks.batch(batch("e", "f"))  # turns 4..5: four sends ahead
    assert second.first_turn == 4
    assert lists.reads == [["a", "b", "c", "d"]], "not read at the commit: four sends are ahead of it"
    looks.reached(1)  # out of order: turn 0 has not gone yet, so four are still counted ahead
    assert len(lists.reads) == 1
    looks.reached(0)  # turns 0 and 1 gone: two ahead
    assert lists.reads[1:] == [["e", "f"]]
    for turn in (2, 3, 4, 5, 3):
        looks.reached(turn)
    assert first.withheld(to("a")) is None and second.withheld(to("e")) is None
    assert len(lists.reads) == 2, "one read per batch, however many sends ask"


def test_a_batch_whose_first_send_comes_before_the_lookahead_reads_then() -> None:
    lists = Lists({"f"})
    looks = LastLooks(lists.read, lead=0)
    looks.batch(batch("a", "b"))
    second = looks.batch(batch("e", "f"))
    assert len(lists.reads) == 1
    assert second.withheld(to("f")) == OPTED_OUT and second.withheld(to("e")) is None
    looks.reached(0)
    looks.reached(1)
    assert lists.reads == [["a", "b"], ["e", "f"]], "started by its first send, not again by the lookahead"


def test_a_read_made_on_the_reader_is_what_the_sends_wait_for() -> None:
    lists = Lists({"b"})
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="optout-read") as reader:
        looks = LastLooks(lists.read, lead=16, reader=reader)
        check = looks.batch(batch("a", "b"))
        assert check.withheld(to("b")) == OPTED_OUT and check.withheld(to("a")) is None
    assert lists.reads == [["a", "b"]]
    assert lists.threads[0].startswith("optout-read")


def test_a_read_that_failed_is_not_kept_and_the_next_send_reads_again() -> None:
    lists = Lists({"b"}, failing=1)
    check = BatchLook(lists.read, batch("a", "b"))
    with pytest.raises(ConnectionError):
        check.withheld(to("a"))
    assert check.withheld(to("b")) == OPTED_OUT
    assert len(lists.reads) == 2


def test_a_place_that_no_longer_holds_its_offer_is_withheld_as_not_waiting() -> None:
    lists = Lists()
    lists.gone.add("b")  # left, switched, or the offer lapsed
    check = BatchLook(lists.read, batch("a", "b"))
    assert check.withheld(to("b")) == NOT_WAITING and check.withheld(to("a")) is None


def test_a_send_held_past_the_age_bound_looks_again_for_itself_and_sees_a_later_opt_out() -> None:
    clock = Clock()
    lists = Lists()
    check = BatchLook(lists.read, batch("a", "b", "c"), clock=clock)
    assert check.withheld(to("a")) is None  # the batch's look, made now
    clock.now += MAX_LOOK_AGE_S  # exactly at the bound: the batch's look still serves
    assert check.withheld(to("b")) is None
    assert len(lists.reads) == 1
    lists.suppressed.add("c")  # "c" opts out after the batch's look
    clock.now += 0.001  # past the bound: "c"'s send is held by its rate limit
    assert check.withheld(to("c")) == OPTED_OUT
    assert lists.reads == [["a", "b", "c"], ["c"]], "a look of its own, for its own notice alone"


def test_every_retry_after_a_back_off_past_the_bound_looks_again() -> None:
    clock = Clock()
    lists = Lists()
    check = BatchLook(lists.read, batch("a"), clock=clock)
    assert check.withheld(to("a")) is None
    for _ in range(3):  # throttled: the sender waits 0.4 s, 0.8 s, 1.6 s between tries
        clock.now += 0.4
        assert check.withheld(to("a")) is None
    lists.gone.add("a")
    clock.now += 0.4
    assert check.withheld(to("a")) == NOT_WAITING
    assert len(lists.reads) == 5


def test_a_batch_look_started_late_by_the_send_itself_is_fresh() -> None:
    clock = Clock()
    lists = Lists({"b"})
    looks = LastLooks(lists.read, lead=0, clock=clock)
    looks.batch(batch("a"))
    second = looks.batch(batch("b", "c"))  # not started: one send ahead of it, lead 0
    clock.now += 5  # the batch waits five seconds behind a slow send
    assert second.withheld(to("b")) == OPTED_OUT and second.withheld(to("c")) is None
    assert lists.reads == [["a"], ["b", "c"]], "its look begins at the asking, so it is not too old"


def test_a_negative_lead_is_refused() -> None:
    with pytest.raises(ValueError):
        LastLooks(Lists().read, lead=-1)
