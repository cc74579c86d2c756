"""How the WooCommerce connector authenticates, and what a refused key becomes.

Sources:
  * https://woocommerce.github.io/woocommerce-rest-api-docs/#authentication-over-https: HTTP Basic with the
    consumer key and secret, or, where the server does not pass the Authorization header on, the same two as the
    `consumer_key` and `consumer_secret` query parameters (HTTPS only).
  * WC_REST_Authentication::perform_basic_authentication (includes/class-wc-rest-authentication.php): the query
    parameters are read first, then PHP_AUTH_USER / PHP_AUTH_PW, and only when is_ssl(); a known key with the
    wrong secret sets 401 `woocommerce_rest_authentication_error`, while no key (or an unknown one) leaves the
    request unauthenticated, so the controller's permission check answers 401 `woocommerce_rest_cannot_view`
    (`rest_authorization_required_code()`), `_create` or `_edit`; an authenticated key without the permission
    gets 403 with the same codes.
"""

from __future__ import annotations

import json
import logging

import pytest

from chalicelib.metrics import STORE_CREDENTIALS_REFUSED, MetricsFactory
from chalicelib.platforms.base import CatalogUnavailable, StoreCredentialsRefused
from chalicelib.platforms.woocommerce import WooCommerceConnector
from chalicelib.store_holds import StoreHolds
from tests.unit.test_woocommerce_contract import HOLD, HOLDS, ORDERS, PRODUCTS, SECRET, Recording, error, ok

EMPTY_PAGE = ok([], **{"x-wp-total": "0", "x-wp-totalpages": "0"})


def connector(transport: Recording, store_url: str = "https://shop.example") -> WooCommerceConnector:
    return WooCommerceConnector(
        store_url=store_url,
        consumer_key=lambda: "ck_key",
        consumer_secret=lambda: SECRET,
        webhook_secrets=lambda: ("w",),
        transport=transport,
        sleep=lambda s: None,
    )


def test_a_dropped_authorization_header_falls_back_to_query_keys_and_keeps_them() -> None:
    transport = Recording(
        [
            ("GET", PRODUCTS, error(401, "woocommerce_rest_cannot_view")),
            ("GET", PRODUCTS, EMPTY_PAGE),
            ("GET", PRODUCTS, EMPTY_PAGE),
        ]
    )
    woo = connector(transport)
    assert list(woo.read_catalog()) == []
    assert list(woo.read_catalog()) == []
    first, fallback, later = transport.sent
    assert "Authorization" in first["headers"] and "consumer_key" not in first["query"]
    for request in (fallback, later):
        assert "Authorization" not in request["headers"]
        assert request["query"]["consumer_key"] == "ck_key" and request["query"]["consumer_secret"] == SECRET
        assert request["query"]["per_page"] == "100"


def test_a_write_refused_for_want_of_a_header_is_sent_again_with_query_keys() -> None:
    transport = Recording(
        [
            ("PUT", f"{ORDERS}/501", error(401, "woocommerce_rest_cannot_edit")),
            ("PUT", f"{ORDERS}/501", ok({"id": 501, "status": "cancelled"})),
        ]
    )
    connector(transport)._cancel("501")
    assert [r["json"] for r in transport.sent] == [{"status": "cancelled"}, {"status": "cancelled"}]
    assert transport.sent[1]["query"]["consumer_key"] == "ck_key"


def test_a_wrong_secret_is_credentials_refused_without_a_second_try() -> None:
    transport = Recording([("GET", PRODUCTS, error(401, "woocommerce_rest_authentication_error"))])
    with pytest.raises(CatalogUnavailable) as failed:
        list(connector(transport).read_catalog())
    assert len(transport.sent) == 1
    message = str(failed.value)
    assert "credentials refused" in message and SECRET not in message and "ck_key" not in message
    assert isinstance(failed.value.__cause__, StoreCredentialsRefused)


def test_a_key_refused_both_ways_is_credentials_refused_and_names_no_secret() -> None:
    transport = Recording(
        [
            ("POST", HOLDS, error(401, "woocommerce_rest_cannot_create")),
            ("POST", HOLDS, error(401, "woocommerce_rest_cannot_create")),
        ]
    )
    with pytest.raises(StoreCredentialsRefused) as failed:
        connector(transport).place_hold(HOLD)
    assert "credentials refused" in str(failed.value) and SECRET not in str(failed.value)
    assert "woocommerce_rest_cannot_create" in str(failed.value)


def test_a_read_only_key_is_credentials_refused() -> None:
    transport = Recording([("POST", HOLDS, error(403, "woocommerce_rest_cannot_create"))])
    with pytest.raises(StoreCredentialsRefused):
        connector(transport).place_hold(HOLD)


def test_keys_never_go_into_a_plain_http_query() -> None:
    transport = Recording([("GET", PRODUCTS, error(401, "woocommerce_rest_cannot_view"))])
    with pytest.raises(CatalogUnavailable):
        list(connector(transport, "http://shop.example").read_catalog())
    assert len(transport.sent) == 1 and "consumer_key" not in transport.sent[0]["query"]


def test_a_refused_key_is_logged_as_an_error_not_as_a_store_down(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    class Refusing:
        name = "woocommerce"
        holds_on_store = True

        def release_hold(self, reservation_id: str, ref: str | None) -> None:
            raise StoreCredentialsRefused("credentials refused: WooCommerce refused our REST API key")

    metrics = MetricsFactory("BackInStockTest")
    holds = StoreHolds(tables=None, store=Refusing(), moves=None, clock=None, metrics=metrics)  # type: ignore[arg-type]

    class Row:
        token_id = "tok_1"
        store_ref = "501"

    with caplog.at_level(logging.WARNING, logger="chalicelib.store_holds"):
        assert holds.release(Row()) is False  # type: ignore[arg-type]
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and "credentials refused" in record.getMessage()
    assert "not released yet" not in record.getMessage()
    (document,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert document[STORE_CREDENTIALS_REFUSED] == [1.0]
