"""A walk's sends as their answers come back, with no table or provider behind them: what each answer does to the
walk, the unit and the facts (chalicelib/dispatch.py)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, cast

from botocore.exceptions import ClientError

from chalicelib.counters import UnitMoves
from chalicelib.dispatch import MAX_REFUSALS_IN_A_ROW, Dispatch, Pending, Withheld
from chalicelib.metrics import NOTICES_SENT, NOTICES_UNDELIVERABLE, SEND_FAILURES
from chalicelib.tables.audit import AuditTable
from chalicelib.walk import SkipReason
from devstack.clocks import FixedClock
from tests.notices import BAD_NUMBER
from tests.unit.test_walk import Audit, place, walk_of


class Moves:
    """The two roll-backs a dispatch may ask for, kept in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def roll_back(self, *, token_id: str, **_: Any) -> None:
        self.calls.append(("roll_back", token_id))

    def undeliverable(self, *, token_id: str, **_: Any) -> bool:
        self.calls.append(("undeliverable", token_id))
        return True


def answered(result: str | BaseException) -> Future[str]:
    future: Future[str] = Future()
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
    return future


def refusal() -> ClientError:
    # SNS Publish refusing the number itself: InvalidParameterException as tests/notices.py takes it from botocore's
    # SNS model, https://github.com/boto/botocore/blob/develop/botocore/data/sns/2010-03-31/service-2.json
    code, message = BAD_NUMBER
    return ClientError({"Error": {"Code": code, "Message": message}}, "Publish")


def dispatch_of() -> tuple[Dispatch, Moves, Audit, list[str]]:
    walk, _, _ = walk_of()
    moves, audit, reached = Moves(), Audit(), []
    dispatch = Dispatch(walk, cast(UnitMoves, moves), cast(AuditTable, audit), FixedClock(1e9), reached.append)
    return dispatch, moves, audit, reached


def send(dispatch: Dispatch, i: int, result: str | BaseException) -> None:
    dispatch.track(answered(result), Pending(f"tok{i}", place(i), i + 1, "sms"))


def test_a_sent_notice_is_counted_and_its_fact_kept_for_the_next_write() -> None:
    dispatch, moves, _, _ = dispatch_of()
    send(dispatch, 1, "msg-1")
    dispatch.collect(block=True)
    assert (dispatch.notices, dispatch.pending, moves.calls) == (1, {}, [])
    assert dispatch.walk.metrics.totals[NOTICES_SENT] == 1
    assert [f["message_id"] for f in dispatch.walk.facts.notices] == ["msg-1"]


def test_a_notice_withheld_at_the_last_moment_is_rolled_back_and_passed_over_without_parking_it_again() -> None:
    dispatch, moves, _, _ = dispatch_of()
    send(dispatch, 1, Withheld(SkipReason.OPTED_OUT))
    dispatch.collect(block=True)
    assert moves.calls == [("roll_back", "tok1")] and dispatch.withdrawn == 1
    assert dispatch.walk.skipped == {SkipReason.OPTED_OUT: 1} and dispatch.walk.park == []


def test_a_refused_recipient_gives_the_unit_back_to_the_walk_until_refusals_in_a_row_look_like_ours() -> None:
    dispatch, moves, audit, reached = dispatch_of()
    left = dispatch.walk.left
    for i in range(MAX_REFUSALS_IN_A_ROW + 1):
        send(dispatch, i, refusal())
        dispatch.collect(block=True)
    assert dispatch.undeliverable == MAX_REFUSALS_IN_A_ROW and dispatch.walk.left == left + MAX_REFUSALS_IN_A_ROW
    assert dispatch.owes_topup and reached == ["notifier.after_undeliverable"] * MAX_REFUSALS_IN_A_ROW
    assert dispatch.failures == 1, "the next refusal fails the job"
    assert moves.calls[-1] == ("roll_back", f"tok{MAX_REFUSALS_IN_A_ROW}")
    assert dispatch.walk.metrics.totals[NOTICES_UNDELIVERABLE] == MAX_REFUSALS_IN_A_ROW
    assert dispatch.walk.metrics.totals[SEND_FAILURES] == 1
    assert [(f["kind"], f["rolled_back"]) for f in audit.records] == [("send_failed", True)]


def test_finishing_waits_for_every_send_and_writes_the_facts_kept() -> None:
    dispatch, _, _, _ = dispatch_of()
    facts = Audit()
    dispatch.walk.facts.audit = cast(AuditTable, facts)
    for i in range(3):
        send(dispatch, i, f"msg-{i}")
    dispatch.finish()
    assert dispatch.notices == 3 and [len(w) for w in facts.writes] == [3]
