"""Secrets Manager reads: one cached provider per container, and a rotation reaches a warm container after the TTL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.secrets import Secrets
from chalicelib.tokens import TokenInvalid
from chalicelib.wiring import Services
from devstack.fake_model import FakeBedrock
from tests.support import REGION

OLD = "old-token-key-0123456789abcdef"
NEW = "new-token-key-fedcba9876543210"


@pytest.fixture
def secretsmanager() -> Iterator[Any]:
    """A Secrets Manager client on the emulator that counts its GetSecretValue calls in `.calls`."""
    with mock_aws():
        client = boto3.client("secretsmanager", region_name=REGION)
        calls: list[str] = []
        client.meta.events.register(
            "provide-client-params.secrets-manager.GetSecretValue", lambda params, **_: calls.append(params["SecretId"])
        )
        client.calls = calls  # type: ignore[attr-defined]
        yield client


def deployed_env(env: dict[str, str]) -> dict[str, str]:
    """The local stage's environment with TOKEN_KEY in Secrets Manager, as a deployed stage has it."""
    deployed = {k: v for k, v in env.items() if k != "TOKEN_KEY"}
    return {**deployed, "TOKEN_KEY_SECRET_ID": "bisn/token-key"}


def test_two_reads_within_the_ttl_make_one_call_and_a_rotation_is_read_after_it(
    secretsmanager: Any, env: dict[str, str]
) -> None:
    secretsmanager.create_secret(Name="bisn/token-key", SecretString=OLD)
    secrets = Secrets(settings_from_env(deployed_env(env)), secretsmanager, max_age_s=1)
    assert secrets.get_all("TOKEN_KEY") == [OLD]
    assert secrets.get_all("TOKEN_KEY") == [OLD]
    assert secretsmanager.calls == ["bisn/token-key"], "the second read came from the provider's cache"

    secretsmanager.put_secret_value(SecretId="bisn/token-key", SecretString=f"{NEW} {OLD}")
    assert secrets.get_all("TOKEN_KEY") == [OLD], "within the TTL the cached value stands"
    time.sleep(1.1)
    assert secrets.get_all("TOKEN_KEY") == [NEW, OLD]
    assert len(secretsmanager.calls) == 2


def test_the_containers_services_pick_up_a_token_key_rotation_without_a_restart(
    secretsmanager: Any, env: dict[str, str]
) -> None:
    secretsmanager.create_secret(Name="bisn/token-key", SecretString=OLD)
    services = Services(
        settings_from_env(deployed_env(env)), aws=Aws(REGION, session=boto3.session.Session()), model=FakeBedrock()
    )
    services.secrets = Secrets(services.settings, secretsmanager, max_age_s=1)  # type: ignore[misc]
    old_link = services.tokens.manage("contact-1")

    secretsmanager.put_secret_value(SecretId="bisn/token-key", SecretString=f"{NEW} {OLD}")
    time.sleep(1.1)
    new_link = services.tokens.manage("contact-2")
    assert old_link != new_link
    assert services.tokens.read_manage(old_link).value == "contact-1", "the old key still verifies"

    secretsmanager.put_secret_value(SecretId="bisn/token-key", SecretString=NEW)
    time.sleep(1.1)
    assert services.tokens.read_manage(new_link).value == "contact-2"
    with pytest.raises(TokenInvalid):
        services.tokens.read_manage(old_link)
    assert len(secretsmanager.calls) == 3, "one read per TTL, however many links were signed or read"


def test_every_platform_webhook_secret_accepts_two_values(env: dict[str, str]) -> None:
    # Each connector verifies a delivery against every value (tests/unit/test_*_webhooks.py); here, the stage's
    # setting reaches it split, newest first.
    rotating = {**env, "SHOPIFY_WEBHOOK_SECRET": "shp-new shp-old", "WOOCOMMERCE_WEBHOOK_SECRET": "wc-new,wc-old"}
    with mock_aws():
        services = Services(settings_from_env(rotating), aws=Aws(REGION, session=boto3.session.Session()))
        assert services.shopify is not None and services.woocommerce is not None
        assert list(services.shopify._webhook_secrets()) == ["shp-new", "shp-old"]
        assert list(services.woocommerce._webhook_secrets()) == ["wc-new", "wc-old"]
        assert services.webhook_secrets() == split_env(env["WEBHOOK_SECRET"])


def split_env(value: str) -> list[str]:
    """The generic webhook secret as the stage lists it."""
    return value.replace(",", " ").split()
