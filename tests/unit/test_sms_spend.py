"""The deploy-time check of the SNS SMS monthly spend limit (infra/sms_spend.py)."""

from __future__ import annotations

from typing import Any

from infra.sms_spend import check


class FakeSns:
    def __init__(self, limit: str | None) -> None:
        self.attributes = {} if limit is None else {"MonthlySpendLimit": limit}

    def get_sms_attributes(self, attributes: list[str]) -> dict[str, Any]:
        return {"attributes": dict(self.attributes)}

    def set_sms_attributes(self, attributes: dict[str, str]) -> None:
        self.attributes.update(attributes)


def test_an_unset_or_too_high_limit_fails_the_check() -> None:
    assert "no SNS SMS MonthlySpendLimit" in check(FakeSns(None), 20)
    assert "above the 20 USD" in check(FakeSns("100"), 20)
    assert check(FakeSns("10"), 20) == ""


def test_the_check_can_set_the_limit() -> None:
    sns = FakeSns(None)
    assert check(sns, 20, set_it=True) == ""
    assert sns.attributes == {"MonthlySpendLimit": "20"}
