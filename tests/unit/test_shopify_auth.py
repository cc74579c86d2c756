"""A Dev Dashboard app's Admin API token: obtained with the client credentials grant, shared, renewed before it
expires, and obtained again once when Shopify answers 401; an admin-created app's static token unchanged.

Against the fake's token endpoint (devstack/fake_shopify.py), which follows:
the grant's request and answer https://shopify.dev/docs/apps/build/authentication-authorization/client-credentials-grant
and https://shopify.dev/docs/apps/build/authentication-authorization/client-secrets (form-encoded grant_type,
client_id, client_secret; access_token, scope, expires_in 86399);
a refused token request is 400 and a refused token 401 https://shopify.dev/docs/api/usage/response-codes;
admin-created apps keep their token https://shopify.dev/docs/apps/build/authentication-authorization/legacy/admin-custom-apps
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import pytest

from chalicelib.platforms.base import CatalogUnavailable, HoldRequest, StoreCredentialsRefused, StoreUnavailable
from chalicelib.platforms.http import HttpResponse
from chalicelib.platforms.shopify import ShopifyConnector
from chalicelib.platforms.shopify_auth import RENEW_BEFORE_S, ClientCredentialsToken
from devstack.clocks import FixedClock
from devstack.fake_shopify import (
    ACCESS_TOKEN,
    CLIENT_ID,
    CLIENT_SECRET,
    GRANTED_SCOPES,
    SHOP_DOMAIN,
    WEBHOOK_SECRET,
    FakeShopify,
)

NOW = 1_800_000_000.0
SKU = "WW-THROW-OAT"
TOKEN_URL = f"https://{SHOP_DOMAIN}/admin/oauth/access_token"


@dataclass
class Recording:
    """Passes each request on to the fake shop and keeps what was sent and answered."""

    shop: FakeShopify
    sent: list[dict[str, Any]] = field(default_factory=list)

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        response = self.shop.transport().send(method, url, headers, body)
        self.sent.append(
            {"method": method, "url": url, "headers": dict(headers), "body": body, "status": response.status}
        )
        return response

    def grants(self) -> list[dict[str, Any]]:
        return [s for s in self.sent if s["url"] == TOKEN_URL]

    def calls(self) -> list[dict[str, Any]]:
        return [s for s in self.sent if s["url"] != TOKEN_URL]


def setup(
    *, lifetime: int = 86399, secret: str = CLIENT_SECRET
) -> tuple[FakeShopify, FixedClock, Recording, ClientCredentialsToken, ShopifyConnector]:
    clock = FixedClock(NOW)
    shop = FakeShopify(clock=clock.now, now=clock.now, token_lifetime_s=lifetime)
    shop.set_available(SKU, 3)
    recording = Recording(shop)
    tokens = ClientCredentialsToken(
        shop_domain=SHOP_DOMAIN,
        client_id=CLIENT_ID,
        client_secret=lambda: secret,
        transport=recording,
        clock=clock.now,
    )
    connector = ShopifyConnector(
        shop_domain=SHOP_DOMAIN,
        tokens=tokens,
        webhook_secrets=lambda: [WEBHOOK_SECRET],
        transport=recording,
        sleep=clock.advance,
    )
    return shop, clock, recording, tokens, connector


def hold(shop: FakeShopify, reservation_id: str = "r-1") -> HoldRequest:
    return HoldRequest(reservation_id, SKU, shop.ids(SKU), int(NOW) + 900)


def test_the_grant_is_a_form_encoded_post_of_the_apps_credentials() -> None:
    _shop, _clock, recording, _tokens, connector = setup()
    list(connector.read_catalog())
    [grant] = recording.grants()
    assert grant["method"] == "POST"
    assert grant["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qs(grant["body"].decode("ascii"), strict_parsing=True) == {
        "grant_type": ["client_credentials"],
        "client_id": [CLIENT_ID],
        "client_secret": [CLIENT_SECRET],
    }
    answer = json.loads(recording.shop.transport().send("POST", TOKEN_URL, grant["headers"], grant["body"]).body)
    assert set(answer) == {"access_token", "scope", "expires_in"}
    assert answer["access_token"].startswith("shpat_") and answer["scope"] == GRANTED_SCOPES
    # Every Admin API call then carries the obtained token, never the secret.
    for call in recording.calls():
        assert call["headers"]["X-Shopify-Access-Token"].startswith("shpat_")
        assert CLIENT_SECRET not in json.dumps(call["headers"])


def test_one_token_is_shared_by_every_call_until_it_is_due() -> None:
    shop, clock, recording, tokens, connector = setup()
    list(connector.read_catalog())
    connector.place_hold(hold(shop))
    clock.advance(3600)
    connector.release_hold("r-1", None)
    assert tokens.grants == 1 and len(recording.grants()) == 1
    assert len({c["headers"]["X-Shopify-Access-Token"] for c in recording.calls()}) == 1


def test_a_token_is_renewed_before_it_expires_so_no_call_is_refused() -> None:
    shop, clock, recording, tokens, connector = setup(lifetime=3600)
    list(connector.read_catalog())
    first = recording.calls()[-1]["headers"]["X-Shopify-Access-Token"]
    clock.advance(3600 - RENEW_BEFORE_S - 1)  # still comfortably alive: kept
    list(connector.read_catalog())
    assert tokens.grants == 1
    clock.advance(2)  # less than five minutes left: renewed ahead of the expiry
    list(connector.read_catalog())
    assert tokens.grants == 2
    second = recording.calls()[-1]["headers"]["X-Shopify-Access-Token"]
    assert second != first
    clock.advance(RENEW_BEFORE_S + 10)  # across the first token's expiry: nothing notices
    connector.place_hold(hold(shop))
    assert recording.calls()[-1]["headers"]["X-Shopify-Access-Token"] == second
    assert shop.refused_tokens == 0
    assert all(c["status"] == 200 for c in recording.calls())


def test_a_token_long_expired_is_replaced_before_the_next_call() -> None:
    shop, clock, _recording, tokens, connector = setup(lifetime=600)
    list(connector.read_catalog())
    clock.advance(86400)  # a warm container that sat idle for a day
    connector.place_hold(hold(shop))
    assert tokens.grants == 2 and shop.refused_tokens == 0


def test_a_401_is_retried_once_with_a_freshly_obtained_token() -> None:
    shop, _clock, recording, tokens, connector = setup()
    list(connector.read_catalog())
    shop.revoke_tokens()  # Shopify stops honouring the token before its expires_in says
    placed = connector.place_hold(hold(shop))
    assert placed.checkout_url
    assert shop.refused_tokens == 1 and tokens.grants == 2
    calls = recording.calls()
    [at] = [i for i, c in enumerate(calls) if c["status"] == 401]
    refused, retried = calls[at], calls[at + 1]
    assert retried["status"] == 200 and retried["body"] == refused["body"]  # the same request, with the new token
    assert refused["headers"]["X-Shopify-Access-Token"] != retried["headers"]["X-Shopify-Access-Token"]
    order = [id(s) for s in recording.sent]
    assert order.index(id(refused)) < order.index(id(recording.grants()[-1])) < order.index(id(retried))


def test_a_second_401_is_not_retried_again() -> None:
    shop, _clock, recording, tokens, connector = setup(lifetime=0)  # every token is born expired
    with pytest.raises(StoreUnavailable, match="401"):
        connector.place_hold(hold(shop))
    assert [c["status"] for c in recording.calls()] == [401, 401]
    assert tokens.grants == 2
    assert shop.drafts_for("r-1") == []


def test_a_static_token_is_never_retried() -> None:
    clock = FixedClock(NOW)
    shop = FakeShopify(clock=clock.now, now=clock.now)
    recording = Recording(shop)
    connector = ShopifyConnector(
        shop_domain=SHOP_DOMAIN,
        access_token=lambda: "shpat_revoked",
        webhook_secrets=lambda: [WEBHOOK_SECRET],
        transport=recording,
    )
    with pytest.raises(StoreUnavailable, match="401"):
        connector.place_hold(hold(shop))
    assert [c["status"] for c in recording.sent] == [401] and recording.grants() == []


def test_an_admin_created_apps_token_still_works_beside_issued_ones() -> None:
    clock = FixedClock(NOW)
    shop = FakeShopify(clock=clock.now, now=clock.now)
    shop.set_available(SKU, 3)
    connector = ShopifyConnector(
        shop_domain=SHOP_DOMAIN,
        access_token=lambda: ACCESS_TOKEN,
        webhook_secrets=lambda: [WEBHOOK_SECRET],
        transport=shop.transport(),
    )
    clock.advance(10 * 86400)  # it does not expire
    assert connector.place_hold(hold(shop)).checkout_url


def test_refused_credentials_are_the_shops_to_fix_not_a_store_that_is_down() -> None:
    shop, _clock, _recording, _tokens, connector = setup(secret="not-the-secret")
    with pytest.raises(StoreCredentialsRefused):
        connector.place_hold(hold(shop))
    shop, _clock, _recording, _tokens, connector = setup(lifetime=0)
    with pytest.raises(StoreCredentialsRefused):
        connector.place_hold(hold(shop))
    shop, _clock, _recording, _tokens, connector = setup()
    shop.fail_next(503)  # the token endpoint is down: that is a store that is down
    with pytest.raises(StoreUnavailable) as down:
        connector.place_hold(hold(shop))
    assert not isinstance(down.value, StoreCredentialsRefused)


def test_a_wrong_client_secret_is_refused_as_shopify_refuses_it() -> None:
    shop, _clock, recording, _tokens, connector = setup(secret="not-the-secret")
    with pytest.raises(CatalogUnavailable) as refused:
        list(connector.read_catalog())
    message = str(refused.value)
    assert "invalid_client" in message and "HTTP 400" in message
    assert "not-the-secret" not in message and CLIENT_SECRET not in message
    [grant] = recording.grants()
    assert grant["status"] == 400 and recording.calls() == []
    with pytest.raises(StoreUnavailable, match="invalid_client"):
        connector.place_hold(hold(shop))
    assert shop.counts(SKU)["reserved"] == 0


def test_an_app_not_installed_names_its_error() -> None:
    shop, _clock, _recording, _tokens, connector = setup()
    shop.app_installed = False
    with pytest.raises(StoreUnavailable, match="app_not_installed"):
        connector.place_hold(hold(shop))


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, b"{}"),
        (200, b'{"access_token": ""}'),
        (200, b"<html>"),
        (500, b'{"error": "x"}'),
        (400, b'{"error": "<script>secret=abc</script>"}'),
    ],
)
def test_an_unusable_grant_answer_is_unavailable_and_repeats_nothing_odd(status: int, body: bytes) -> None:
    class Answers:
        def send(self, method: str, url: str, headers: Mapping[str, str], data: bytes | None = None) -> HttpResponse:
            return HttpResponse(status, body)

    tokens = ClientCredentialsToken(
        shop_domain=SHOP_DOMAIN, client_id=CLIENT_ID, client_secret=lambda: CLIENT_SECRET, transport=Answers()
    )
    with pytest.raises(StoreUnavailable) as refused:
        tokens.current()
    assert "script" not in str(refused.value) and "secret=" not in str(refused.value)


def test_a_token_without_expires_in_is_kept_until_refused() -> None:
    calls = []

    class NoExpiry:
        def send(self, method: str, url: str, headers: Mapping[str, str], data: bytes | None = None) -> HttpResponse:
            calls.append(url)
            return HttpResponse(200, json.dumps({"access_token": f"shpat_{len(calls)}", "scope": ""}).encode())

    clock = FixedClock(NOW)
    tokens = ClientCredentialsToken(
        shop_domain=SHOP_DOMAIN,
        client_id=CLIENT_ID,
        client_secret=lambda: CLIENT_SECRET,
        transport=NoExpiry(),
        clock=clock.now,
    )
    assert tokens.current() == "shpat_1"
    clock.advance(30 * 86400)
    assert tokens.current() == "shpat_1"
    assert tokens.refused("shpat_1") is True
    assert tokens.current() == "shpat_2"
    assert tokens.refused("shpat_1") is True  # a late 401 for an old token does not drop the new one
    assert tokens.current() == "shpat_2"


def test_concurrent_callers_share_one_grant() -> None:
    _shop, _clock, recording, tokens, _connector = setup()
    start = threading.Barrier(8)
    seen: list[str] = []

    def call() -> None:
        start.wait()
        seen.append(tokens.current())

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tokens.grants == 1 and len(recording.grants()) == 1 and len(set(seen)) == 1


@pytest.mark.parametrize(
    ("content_type", "body", "error"),
    [
        ("application/json", b'{"grant_type": "client_credentials"}', "invalid_request"),
        ("application/x-www-form-urlencoded", b"grant_type=authorization_code", "unsupported_grant_type"),
        (
            "application/x-www-form-urlencoded",
            f"grant_type=client_credentials&client_id={CLIENT_ID}".encode(),
            "invalid_client",
        ),
        (
            "application/x-www-form-urlencoded",
            b"grant_type=client_credentials&client_id=other&client_secret=x",
            "invalid_client",
        ),
    ],
)
def test_the_fakes_token_endpoint_refuses_as_an_oauth_error(content_type: str, body: bytes, error: str) -> None:
    shop = FakeShopify(now=lambda: NOW)
    answer = shop.transport().send("POST", TOKEN_URL, {"Content-Type": content_type}, body)
    assert answer.status == 400
    assert json.loads(answer.body)["error"] == error and shop.issued == {}


def test_the_fakes_admin_api_refuses_an_expired_or_unknown_token() -> None:
    clock = FixedClock(NOW)
    shop = FakeShopify(now=clock.now, token_lifetime_s=60)
    form = f"grant_type=client_credentials&client_id={CLIENT_ID}&client_secret={CLIENT_SECRET}".encode()
    grant = shop.transport().send("POST", TOKEN_URL, {"Content-Type": "application/x-www-form-urlencoded"}, form)
    token = json.loads(grant.body)["access_token"]
    url = f"https://{SHOP_DOMAIN}/admin/api/2025-10/graphql.json"
    query = json.dumps({"query": "query { draftOrder(id: $id) { id status } }", "variables": {"id": "x"}}).encode()

    def call(with_token: str) -> int:
        headers = {"Content-Type": "application/json", "X-Shopify-Access-Token": with_token}
        return shop.transport().send("POST", url, headers, query).status

    assert call(token) == 200
    assert call("shpat_unknown") == 401
    clock.advance(60)
    assert call(token) == 401
