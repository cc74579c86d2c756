"""A Shopify stage's Admin API credential: an admin-created app's SHOPIFY_ACCESS_TOKEN, or a Dev Dashboard app's
SHOPIFY_CLIENT_ID with its SHOPIFY_CLIENT_SECRET (a secret, like the token), never both and never half.

New admin-created apps cannot be made since 2026-01-01:
https://shopify.dev/docs/apps/build/authentication-authorization/legacy/admin-custom-apps
"""

from __future__ import annotations

import pytest

from chalicelib.config import ConfigError, settings_from_env
from chalicelib.platforms.shopify_auth import ClientCredentialsToken, StaticToken
from chalicelib.wiring import Services
from infra.stages import stage_env

CLIENT_ID = "0f6e5d4c3b2a19080f6e5d4c3b2a1908"


def shopify(**changes: str | None) -> dict[str, str]:
    env = {k: v for k, v in stage_env("local").items() if not k.startswith(("PLATFORM", "SHOPIFY_", "WOOCOMMERCE_"))}
    env.update(
        AWS_DEFAULT_REGION="eu-west-2",
        PLATFORM="shopify",
        SHOPIFY_SHOP_DOMAIN="walnut-and-wool.myshopify.com",
        SHOPIFY_WEBHOOK_SECRET="whsec",
        SHOPIFY_CLIENT_ID=CLIENT_ID,
        SHOPIFY_CLIENT_SECRET="client-secret",
    )
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def test_a_dev_dashboard_app_loads_with_its_client_id_and_secret() -> None:
    settings = settings_from_env(shopify())
    assert settings.shopify_client_id == CLIENT_ID
    assert settings.secret_values["SHOPIFY_CLIENT_SECRET"] == "client-secret"
    assert "SHOPIFY_ACCESS_TOKEN" not in settings.secret_values


def test_the_client_secret_may_live_in_secrets_manager_like_the_token() -> None:
    settings = settings_from_env(
        shopify(SHOPIFY_CLIENT_SECRET=None, SHOPIFY_CLIENT_SECRET_SECRET_ID="bisn/shopify-client-secret")
    )
    assert settings.secret_refs["SHOPIFY_CLIENT_SECRET"] == "bisn/shopify-client-secret"


def test_an_admin_created_apps_token_still_loads() -> None:
    settings = settings_from_env(
        shopify(SHOPIFY_CLIENT_ID=None, SHOPIFY_CLIENT_SECRET=None, SHOPIFY_ACCESS_TOKEN="shpat_x")
    )
    assert settings.shopify_client_id == "" and settings.secret_values["SHOPIFY_ACCESS_TOKEN"] == "shpat_x"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"SHOPIFY_CLIENT_SECRET": None}, "SHOPIFY_CLIENT_SECRET"),
        ({"SHOPIFY_CLIENT_ID": None}, "SHOPIFY_CLIENT_ID"),
        ({"SHOPIFY_CLIENT_ID": None, "SHOPIFY_CLIENT_SECRET": None}, "SHOPIFY_ACCESS_TOKEN"),
        ({"SHOPIFY_ACCESS_TOKEN": "shpat_x"}, "not both"),
        ({"SHOPIFY_CLIENT_ID": "id with spaces"}, "SHOPIFY_CLIENT_ID must be"),
    ],
)
def test_half_or_both_credentials_fail_fast(changes: dict[str, str | None], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_env(shopify(**changes))


def test_the_connector_renews_a_dev_dashboard_apps_token_and_keeps_a_static_one() -> None:
    renewed = Services(settings_from_env(shopify())).shopify
    assert renewed is not None and isinstance(renewed.tokens, ClientCredentialsToken)
    assert renewed.tokens.client_id == CLIENT_ID
    static = Services(
        settings_from_env(shopify(SHOPIFY_CLIENT_ID=None, SHOPIFY_CLIENT_SECRET=None, SHOPIFY_ACCESS_TOKEN="shpat_x"))
    ).shopify
    assert static is not None and isinstance(static.tokens, StaticToken)
    assert static.tokens.current() == "shpat_x"
