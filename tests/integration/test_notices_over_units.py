"""NoticesOverUnits, the metric the `notices-over-units` alarm watches: 0 whenever invariant 5 holds (races
included), and the number of live offers beyond the units when a batch of offers took units that were not there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from chalicelib.metrics import NOTICES_OVER_UNITS, NOTICES_SENT
from chalicelib.tables.restocks import Restock
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock
from tests.notices import plenty, selling_the_chair, waiting_by_sms

SKU = "CHAIR-WALNUT"


@pytest.fixture
def shop(services: Services, clock: FixedClock) -> Services:
    """The chair on sale, five shoppers waiting by SMS."""
    selling_the_chair(services, SKU)
    waiting_by_sms(services, SKU, clock.now(), 5)
    return services


def first_read_says(shop: Services, monkeypatch: pytest.MonkeyPatch, offerable: int) -> None:
    """The job's first read of the restock counts `offerable` units (another job took some since); later reads
    are true."""
    real: Callable[[str, str], Restock | None] = shop.tables.restocks.get
    reads = []

    def get(sku: str, restock_ts: str) -> Restock | None:
        item = real(sku, restock_ts)
        reads.append(item)
        return replace(item, units_offerable=offerable) if item and len(reads) == 1 else item

    monkeypatch.setattr(shop.tables.restocks, "get", get)


def test_a_run_that_keeps_the_rule_reports_zero(shop: Services, clock: FixedClock) -> None:
    job = add_restock(shop, SKU, 3, clock.now())

    outcome = shop.notifier.handle(job, plenty)

    assert outcome.metrics[NOTICES_SENT] == 3
    assert outcome.metrics[NOTICES_OVER_UNITS] == 0


def test_a_batch_refused_for_units_it_counted_on_is_not_an_over_promise(
    shop: Services, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = add_restock(shop, SKU, 3, clock.now())
    first_read_says(shop, monkeypatch, 5)

    outcome = shop.notifier.handle(job, plenty)

    assert outcome.metrics[NOTICES_SENT] == 3
    assert outcome.metrics[NOTICES_OVER_UNITS] == 0


def test_offers_taken_past_the_units_are_counted(
    shop: Services, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = add_restock(shop, SKU, 3, clock.now())
    first_read_says(shop, monkeypatch, 5)
    guarded = shop.tables.restocks.take_offers_item

    def unguarded(
        sku: str, restock_ts: str, count: int, lapse_limit: int | None = None, channels: Any = None, **mark: Any
    ) -> dict[str, Any]:
        item = guarded(sku, restock_ts, count, None, channels, **mark)
        item["Update"]["ConditionExpression"] = "#state <> :closed"
        del item["Update"]["ExpressionAttributeValues"][":count"]
        return item

    # The conditional decrement of invariant 5 broken: the batch takes five units where three are left.
    monkeypatch.setattr(shop.tables.restocks, "take_offers_item", unguarded)

    outcome = shop.notifier.handle(job, plenty)

    assert outcome.metrics[NOTICES_SENT] == 5
    assert outcome.metrics[NOTICES_OVER_UNITS] == 2
