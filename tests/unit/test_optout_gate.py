"""When the notifier's last look at the suppression list is read: after the commit, about a round of sends ahead."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from chalicelib.optout_gate import BatchOptoutCheck, LastLooks


class Optout:
    """The suppression list, recording each read (and failing the next `failing` of them)."""

    def __init__(self, suppressed: set[str] | None = None, failing: int = 0) -> None:
        self.suppressed = set(suppressed or ())
        self.failing = failing
        self.reads: list[list[str]] = []
        self.threads: list[str] = []

    def suppressed_among(self, keys: list[str]) -> set[str]:
        self.reads.append(list(keys))
        self.threads.append(threading.current_thread().name)
        if self.failing:
            self.failing -= 1
            raise ConnectionError("the table could not be read")
        return self.suppressed & set(keys)


def test_the_first_batch_is_read_as_it_commits_since_nothing_is_ahead_of_it() -> None:
    optout = Optout()
    looks = LastLooks(optout, lead=2)
    looks.batch(["a", "b", "c"])
    assert optout.reads == [["a", "b", "c"]]


def test_a_batch_far_behind_is_read_only_once_the_sends_ahead_are_down_to_the_lead() -> None:
    optout = Optout()
    looks = LastLooks(optout, lead=2)
    first = looks.batch(["a", "b", "c", "d"])  # turns 0..3
    second = looks.batch(["e", "f"])  # turns 4..5: four sends ahead
    assert second.first_turn == 4
    assert optout.reads == [["a", "b", "c", "d"]], "not read at the commit: four sends are ahead of it"
    looks.reached(1)  # out of order: turn 0 has not gone yet, so four are still counted ahead
    assert len(optout.reads) == 1
    looks.reached(0)  # turns 0 and 1 gone: two ahead
    assert optout.reads[1:] == [["e", "f"]]
    for turn in (2, 3, 4, 5, 3):
        looks.reached(turn)
    assert not first.suppressed("a") and not second.suppressed("e")
    assert len(optout.reads) == 2, "one read per batch, however many sends ask"


def test_a_batch_whose_first_send_comes_before_the_lookahead_reads_then() -> None:
    optout = Optout({"f"})
    looks = LastLooks(optout, lead=0)
    looks.batch(["a", "b"])
    second = looks.batch(["e", "f"])
    assert len(optout.reads) == 1
    assert second.suppressed("f") and not second.suppressed("e")
    looks.reached(0)
    looks.reached(1)
    assert optout.reads == [["a", "b"], ["e", "f"]], "started by its first send, not again by the lookahead"


def test_a_read_made_on_the_reader_is_what_the_sends_wait_for() -> None:
    optout = Optout({"b"})
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="optout-read") as reader:
        looks = LastLooks(optout, lead=16, reader=reader)
        check = looks.batch(["a", "b"])
        assert check.suppressed("b") and not check.suppressed("a")
    assert optout.reads == [["a", "b"]]
    assert optout.threads[0].startswith("optout-read")


def test_a_read_that_failed_is_not_kept_and_the_next_send_reads_again() -> None:
    optout = Optout({"b"}, failing=1)
    check = BatchOptoutCheck(optout, ["a", "b"])
    with pytest.raises(ConnectionError):
        check.suppressed("a")
    assert check.suppressed("b")
    assert len(optout.reads) == 2


def test_a_negative_lead_is_refused() -> None:
    with pytest.raises(ValueError):
        LastLooks(Optout(), lead=-1)
