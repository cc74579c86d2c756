"""A store that refuses our credentials (Shopify 401 to a wrong or revoked token, WooCommerce 401 to a rotated key)
is counted in the metric StoreCredentialsRefused wherever the app meets it: a hold placed at a tap or by the sweep, a
hold released, the catalogue sync (WooCommerce's store check first), and the reconciliation. The `store-credentials`
alarm in infra/template.json watches that metric (tests/integration/test_deploy_template.py), so a key the shop must
fix is never reported as a store that is down.

The stores are devstack's fakes, with metrics enabled so the EMF documents the functions print can be read back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.metrics import STORE_CREDENTIALS_REFUSED
from chalicelib.reconcile import RECONCILE_EVERY_MIN
from chalicelib.tables.reservations import OfferState, StoreState
from devstack.clocks import FixedClock
from tests.notices import drain
from tests.platforms import THROW, Shop, join, platform_shop
from tests.support import emitted, tap_link


@pytest.fixture(params=["shopify", "woocommerce"])
def shop(request: pytest.FixtureRequest, session: Any, clock: FixedClock) -> Iterator[Shop]:
    # The local stage turns metrics off; these tests read what the functions print.
    with platform_shop(str(request.param), session, clock, {"POWERTOOLS_METRICS_DISABLED": None}) as built:
        yield built


def refuse_credentials(shop: Shop) -> None:
    """The shop rotates the secret the stage still holds: every Admin or REST API call is answered 401."""
    if shop.platform == "shopify":
        shop.store.access_token = "shpat_rotated_elsewhere"
    else:
        shop.store.consumer_secret = "cs_rotated_elsewhere"


def offered(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    assert shop.restock(THROW, 1).status_code == 202
    drain(shop.services)


def test_a_hold_placed_against_refused_credentials_is_counted_and_logged_as_refused(
    shop: Shop, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    offered(shop)
    [offer] = shop.offers(THROW)
    capsys.readouterr()
    refuse_credentials(shop)
    with caplog.at_level(logging.WARNING, logger="chalicelib.store_holds"):
        tap = tap_link(shop.client, shop.services.tokens.reserve(offer.token_id))
    # The shopper's unit stays held in our tables: the page is the honest "held for you, back in a moment".
    assert tap.status_code == 503
    row = shop.offers(THROW)[0]
    assert (row.state, row.store_state) == (OfferState.HELD, StoreState.PLACING)
    assert emitted(capsys.readouterr().out, STORE_CREDENTIALS_REFUSED) == 1
    (record,) = [r for r in caplog.records if "not placed" in r.getMessage()]
    assert record.levelno == logging.ERROR and "not placed yet" not in record.getMessage()

    # The sweep's retry meets the same refusal, and counts it again: the alarm keeps seeing it until it is fixed.
    shop.clock.advance(61)
    assert shop.services.sweep.run()["store_unanswered"] == 1
    assert emitted(capsys.readouterr().out, STORE_CREDENTIALS_REFUSED) == 1


def test_a_release_refused_is_counted_and_the_hold_stays_due(shop: Shop, capsys: pytest.CaptureFixture[str]) -> None:
    offered(shop)
    [offer] = shop.offers(THROW)
    assert tap_link(shop.client, shop.services.tokens.reserve(offer.token_id)).status_code == 303
    product = shop.services.tables.catalog.get(THROW)
    assert product is not None
    capsys.readouterr()
    refuse_credentials(shop)
    shop.clock.advance(product.hold_window_s + 1)
    summary = shop.services.sweep.run()
    assert (summary["expired"], summary["store_released"], summary["store_unanswered"]) == (1, 0, 1)
    assert shop.offers(THROW)[0].store_state == StoreState.RELEASING
    assert emitted(capsys.readouterr().out, STORE_CREDENTIALS_REFUSED) == 1


def test_a_catalogue_sync_against_refused_credentials_is_counted(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    refuse_credentials(shop)
    report = shop.services.catalog_sync.run()
    assert report.error is not None and not report.complete
    assert "credentials refused" in report.error or "refused the access token" in report.error
    assert emitted(capsys.readouterr().out, STORE_CREDENTIALS_REFUSED) == 1


def test_a_catalogue_sync_against_a_store_that_is_down_is_not_counted_as_refused(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    if shop.platform == "shopify":
        shop.store.fail_next(503, count=10)
    else:
        shop.store.fail_next(503, times=10)
    report = shop.services.catalog_sync.run()
    assert emitted(capsys.readouterr().out, STORE_CREDENTIALS_REFUSED) == 0
    assert report.error is not None or report.store_problems


def test_a_reconciliation_against_refused_credentials_is_counted(
    shop: Shop, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    join(shop, THROW, "ada@example.com")
    shop.services.sweep.run()  # the roll-up counts the waiting list, so THROW is read
    capsys.readouterr()
    refuse_credentials(shop)
    shop.clock.advance(RECONCILE_EVERY_MIN * 60)
    with caplog.at_level(logging.WARNING, logger="chalicelib.reconcile"):
        summary = shop.services.reconcile.run().as_dict()
    assert summary["store_unavailable"] == 1
    assert emitted(capsys.readouterr().out, STORE_CREDENTIALS_REFUSED) == 1
    (record,) = [r for r in caplog.records if "reconciliation stopped" in r.getMessage()]
    assert record.levelno == logging.ERROR and "refused our credentials" in record.getMessage()
