"""What a WooCommerce stage says about the store's own set-up: at the start of every catalogue sync (in its report
and the logs) and on the dashboard's Operations view (`store`).

The store is devstack's fake WooCommerce; the settings, plugin and webhook resources it answers with are described
in its docstring, each with its WooCommerce source.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.clocks import FixedClock
from tests.platforms import Shop, platform_shop


@pytest.fixture
def shop(session: Any, clock: FixedClock) -> Iterator[Shop]:
    with platform_shop("woocommerce", session, clock) as built:
        yield built


def test_a_sync_names_stock_management_off_and_still_reads_the_catalogue(
    shop: Shop, caplog: pytest.LogCaptureFixture
) -> None:
    shop.store.manage_stock = "no"
    with caplog.at_level(logging.ERROR, logger="chalicelib.catalog_sync"):
        report = shop.services.catalog_sync.run()
    assert report.error is None and report.complete
    (problem,) = report.store_problems
    assert "stock management is off" in problem
    assert any("store check: stock management is off" in r.getMessage() for r in caplog.records)


def test_a_sync_with_refused_credentials_stops_and_says_so(shop: Shop) -> None:
    shop.store.consumer_secret = "cs_rotated"
    report = shop.services.catalog_sync.run()
    assert report.error is not None and report.error.startswith("credentials refused")
    assert "cs_fake_secret" not in report.error and "cs_rotated" not in report.error
    assert not report.complete


def test_the_dashboard_shows_the_store_and_its_webhooks(shop: Shop) -> None:
    store = shop.services.admin.operations_view()["store"]
    assert store["platform"] == "woocommerce" and store["problems"] == []
    assert {h["status"] for h in store["webhooks"]} == {"active"}

    hook = shop.store.webhook_for("order.updated")
    for _ in range(7):
        shop.store.record_delivery({"X-WC-Webhook-ID": str(hook.id)}, 503)
    store = shop.services.admin.operations_view()["store"]
    assert [h["status"] for h in store["webhooks"] if h["topic"] == "order.updated"] == ["disabled"]
    (problem,) = store["problems"]
    assert "(order.updated) is disabled" in problem and "Settings > Advanced > Webhooks" in problem


def test_the_dashboard_says_credentials_refused_not_store_down(shop: Shop) -> None:
    shop.store.consumer_secret = "cs_rotated"
    store = shop.services.admin.operations_view()["store"]
    assert store["credentials"] == "refused"
    assert store["problems"][0].startswith("credentials refused")
