"""A stage on a Dev Dashboard app (client id and secret, no static token), wired as deployed: the catalogue sync, a
hold and its release share one renewed token, and still work after the app's token has expired and after Shopify stopped honouring it.

The token's lifetime and the 401 for a lapsed token follow
https://shopify.dev/docs/apps/build/authentication-authorization/client-credentials-grant (expires_in 86399) and
https://shopify.dev/docs/api/usage/response-codes (401: the credentials are incorrect).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.platforms.base import HoldRequest
from chalicelib.platforms.shopify_auth import ClientCredentialsToken
from devstack import fake_shopify
from devstack.clocks import FixedClock
from tests.platforms import THROW, Shop, platform_shop

DEV_DASHBOARD_APP = {
    "SHOPIFY_ACCESS_TOKEN": None,
    "SHOPIFY_CLIENT_ID": fake_shopify.CLIENT_ID,
    "SHOPIFY_CLIENT_SECRET": fake_shopify.CLIENT_SECRET,
}


@pytest.fixture
def shop(session: Any, clock: FixedClock) -> Iterator[Shop]:
    with platform_shop("shopify", session, clock, env=DEV_DASHBOARD_APP) as built:
        yield built


def tokens(shop: Shop) -> ClientCredentialsToken:
    connector = shop.services.shopify
    assert connector is not None and isinstance(connector.tokens, ClientCredentialsToken)
    return connector.tokens


def test_the_catalogue_is_read_with_an_obtained_token_and_again_a_day_later(shop: Shop) -> None:
    assert shop.services.tables.catalog.get(THROW) is not None
    assert tokens(shop).grants == 1
    shop.clock.advance(fake_shopify.TOKEN_LIFETIME_S + 60)
    report = shop.services.catalog_sync.run()
    assert report.error is None
    assert tokens(shop).grants == 2 and shop.store.refused_tokens == 0


def test_a_hold_is_placed_and_given_back_across_an_expiry_and_a_revoked_token(shop: Shop) -> None:
    shop.restock(THROW, 1)
    store = shop.services.store
    product = shop.services.tables.catalog.get(THROW)
    assert product is not None and product.store_ids

    shop.clock.advance(fake_shopify.TOKEN_LIFETIME_S)  # the sync's token has lapsed by the time of the hold
    expires_at = int(shop.clock.now()) + product.hold_window_s
    held = store.place_hold(HoldRequest("r-dev-dashboard", THROW, product.store_ids, expires_at))
    assert held.checkout_url and shop.store.counts(THROW) == {"available": 0, "reserved": 1}
    assert tokens(shop).grants == 2 and shop.store.refused_tokens == 0

    shop.store.revoke_tokens()  # Shopify stops honouring it early: one 401, a new token, the call again
    store.release_hold("r-dev-dashboard", held.ref)
    assert shop.store.counts(THROW) == {"available": 1, "reserved": 0}
    assert shop.store.refused_tokens == 1 and tokens(shop).grants == 3
