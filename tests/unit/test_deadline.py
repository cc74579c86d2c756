"""A scheduled run's deadline: the earlier of its own budget and the Lambda's remaining time less a margin."""

from __future__ import annotations

from chalicelib.clock import Deadline, remaining_ms_of


def test_a_deadline_takes_the_earlier_of_the_budget_and_the_lambda_time_less_its_margin() -> None:
    now = [100.0]
    by_lambda = Deadline.for_run(20.0, remaining_ms=lambda: 12_000, margin_s=5.0, monotonic=lambda: now[0])
    by_budget = Deadline.for_run(20.0, remaining_ms=lambda: 60_000, margin_s=5.0, monotonic=lambda: now[0])
    assert (by_lambda.left_s(), by_budget.left_s()) == (7.0, 20.0)
    now[0] += 7.0
    assert by_lambda.passed() and not by_budget.passed()
    assert Deadline.for_run(20.0, remaining_ms=lambda: 1_000, margin_s=5.0).passed()


def test_a_run_without_a_lambda_context_has_only_its_budget() -> None:
    assert remaining_ms_of(None) is None
    assert remaining_ms_of({}) is None
