"""The WooCommerce connector's authentication and store checks against the in-memory WooCommerce.

The fake's authentication follows WC_REST_Authentication (includes/class-wc-rest-authentication.php; see the fake's
docstring): query keys over HTTPS first, then Basic; a host that drops the Authorization header leaves the request
unauthenticated, answered 401 `woocommerce_rest_cannot_view`.
"""

from __future__ import annotations

import base64

import pytest

from chalicelib.platforms.base import CatalogUnavailable
from chalicelib.platforms.woocommerce import WooCommerceConnector
from devstack import fake_woocommerce
from devstack.fake_woocommerce import FakeWooCommerce


@pytest.fixture
def store() -> FakeWooCommerce:
    return FakeWooCommerce(store_url="https://shop.example", stock={"WW-THROW-OAT": 2})


def connector(store: FakeWooCommerce, *, key: str | None = None, secret: str | None = None) -> WooCommerceConnector:
    return WooCommerceConnector(
        store_url=store.store_url,
        consumer_key=lambda: key or store.consumer_key,
        consumer_secret=lambda: secret or store.consumer_secret,
        webhook_secrets=lambda: (store.webhook_secret,),
        transport=store.transport(),
        sleep=lambda s: None,
    )


def test_a_host_that_drops_the_header_is_read_with_query_keys(store: FakeWooCommerce) -> None:
    store.strip_authorization = True
    assert any(e.sku == "WW-THROW-OAT" for e in connector(store).read_catalog())
    assert all("consumer_key=" in path for _, path in store.requests[1:])


def test_an_unknown_key_is_credentials_refused(store: FakeWooCommerce) -> None:
    with pytest.raises(CatalogUnavailable, match="credentials refused"):
        list(connector(store, key="ck_unknown").read_catalog())


def test_a_wrong_secret_is_credentials_refused_at_once(store: FakeWooCommerce) -> None:
    with pytest.raises(CatalogUnavailable, match="woocommerce_rest_authentication_error"):
        list(connector(store, secret="cs_wrong").read_catalog())
    assert len(store.requests) == 1


# ---------------------------------------------------------------- the store's settings and webhooks


def test_a_store_set_up_as_docs_platforms_says_has_no_problem(store: FakeWooCommerce) -> None:
    checks = connector(store).check_store()
    assert checks["problems"] == []
    assert checks["credentials"] == "ok" and checks["stock_management"] == "on"
    assert checks["stock_reduction"] == "hooked"
    assert sorted(h["topic"] for h in checks["webhooks"]) == sorted(fake_woocommerce.WEBHOOK_TOPICS)
    assert {h["status"] for h in checks["webhooks"]} == {"active"}


def test_stock_management_off_is_named(store: FakeWooCommerce) -> None:
    store.manage_stock = "no"
    checks = connector(store).check_store()
    assert checks["stock_management"] == "off"
    (problem,) = checks["problems"]
    assert "stock management is off" in problem


def test_an_inventory_plugin_unhooking_stock_reduction_is_named(store: FakeWooCommerce) -> None:
    store.unhooked = {"woocommerce_payment_complete", "woocommerce_order_status_processing"}
    checks = connector(store).check_store()
    assert checks["stock_reduction"] == "unhooked"
    (problem,) = checks["problems"]
    assert "woocommerce_payment_complete" in problem and "woocommerce_order_status_processing" in problem


def test_a_missing_plugin_is_named(store: FakeWooCommerce) -> None:
    store.plugin_installed = False
    (problem,) = connector(store).check_store()["problems"]
    assert "bisn-holds plugin" in problem


def test_refused_credentials_are_the_checks_answer(store: FakeWooCommerce) -> None:
    checks = connector(store, secret="cs_wrong").check_store()
    assert checks["credentials"] == "refused"
    (problem,) = checks["problems"]
    assert problem.startswith("credentials refused") and "cs_wrong" not in problem


def test_a_store_that_does_not_answer_is_not_called_refused(store: FakeWooCommerce) -> None:
    store.fail_next(None)
    checks = connector(store).check_store()
    assert checks["credentials"] == "unknown" and "could not be checked" in checks["problems"][0]


def test_the_seventh_failed_delivery_in_a_row_disables_the_webhook(store: FakeWooCommerce) -> None:
    # WC_Webhook::failed_delivery disables when it finds more than 5 failures recorded: the 7th failure in a row.
    for _ in range(6):
        _, headers = store.set_stock("WW-THROW-OAT", 3)
        store.record_delivery(headers, 500)
    hook = store.webhook_for("product.updated")
    assert hook is not None and hook.status == "active" and hook.failure_count == 6
    _, headers = store.set_stock("WW-THROW-OAT", 4)
    store.record_delivery(headers, None)
    assert hook.status == "disabled"

    sent = len(store.sent)
    store.set_stock("WW-THROW-OAT", 5)
    assert len(store.sent) == sent  # a disabled webhook sends nothing
    checks = connector(store).check_store()
    (problem,) = checks["problems"]
    assert f"webhook {hook.id} (product.updated) is disabled" in problem and "Active again" in problem


def test_a_success_resets_the_count_and_a_re_enabled_webhook_delivers(store: FakeWooCommerce) -> None:
    hook = store.webhook_for("product.updated")
    assert hook is not None
    for status in (500, 500, 302):
        _, headers = store.set_stock("WW-THROW-OAT", 3)
        store.record_delivery(headers, status)
    assert hook.failure_count == 0
    hook.status = "disabled"
    response = store.transport().send(
        "PUT",
        f"{store.store_url}/wp-json/wc/v3/webhooks/{hook.id}",
        {"Authorization": "Basic " + base64.b64encode(b"ck_fake_key:cs_fake_secret").decode()},
        b'{"status": "active"}',
    )
    assert response.status == 200 and hook.status == "active"
    sent = len(store.sent)
    store.set_stock("WW-THROW-OAT", 5)
    assert len(store.sent) == sent + 1
