"""The WooCommerce connector's authentication and store checks against the in-memory WooCommerce.

The fake's authentication follows WC_REST_Authentication (includes/class-wc-rest-authentication.php; see the fake's
docstring): query keys over HTTPS first, then Basic; a host that drops the Authorization header leaves the request
unauthenticated, answered 401 `woocommerce_rest_cannot_view`.
"""

from __future__ import annotations

import pytest

from chalicelib.platforms.base import CatalogUnavailable
from chalicelib.platforms.woocommerce import WooCommerceConnector
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
