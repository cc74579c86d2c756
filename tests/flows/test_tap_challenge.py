"""The optional human check on the tap (TURNSTILE_SITE_KEY): verified server-side with a fake Siteverify (never
the network); off, taps are as before and the widget loads nothing of Cloudflare's."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from chalice.test import Client

from chalicelib import challenge
from chalicelib.config import ConfigError, settings_from_env
from chalicelib.wiring import Services
from tests.support import app_client, rebuilt

SITE_KEY = "0x4AAAAAAAtestsitekey"
SECRET = "0x4AAAAAAAtestsecret"
GOOD = "token-a-person-solved"
JSON = {"Content-Type": "application/json"}


class FakeSiteverify:
    """Cloudflare's Siteverify as its documentation describes the answers: the one good token, solved on the
    storefront, passes; anything else fails with an error code."""

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname
        self.asked: list[dict[str, str]] = []

    def __call__(self, url: str, fields: Mapping[str, str]) -> Mapping[str, Any]:
        assert url == "https://challenges.cloudflare.com/turnstile/v0/siteverify"
        self.asked.append(dict(fields))
        if fields.get("secret") != SECRET:
            return {"success": False, "error-codes": ["invalid-input-secret"]}
        if fields.get("response") != GOOD:
            return {"success": False, "error-codes": ["invalid-input-response"]}
        return {"success": True, "error-codes": [], "hostname": self.hostname, "action": "", "cdata": ""}


@pytest.fixture
def siteverify(services: Services, monkeypatch: pytest.MonkeyPatch) -> FakeSiteverify:
    storefront = services.settings.cors_origins[0].split("://", 1)[1].split(":")[0]
    fake = FakeSiteverify(storefront)
    monkeypatch.setattr(challenge, "post_form", fake)
    return fake


@pytest.fixture
def checked(services: Services) -> Iterator[Client]:
    settings = dataclasses.replace(
        services.settings,
        turnstile_site_key=SITE_KEY,
        secret_values={**services.settings.secret_values, "TURNSTILE_SECRET": SECRET},
    )
    with app_client(rebuilt(services, settings=settings)) as client:
        yield client


def tap(client: Client, sku: str, **extra: str) -> Any:
    body = {"sku": sku, "channel": "email", "contact": "ada@example.com", **extra}
    return client.http.post("/notify-me", headers=JSON, body=json.dumps(body))


def test_with_the_check_on_a_tap_without_a_token_is_refused_and_writes_nothing(
    checked: Client, services: Services, chair: str, siteverify: FakeSiteverify
) -> None:
    response = tap(checked, chair)
    assert response.status_code == 403
    assert response.json_body["error"] == "challenge_failed"
    assert siteverify.asked == []  # nothing to verify: refused before the network
    assert services.tables.catalog.waiting(chair) == 0


def test_with_the_check_on_a_bad_token_is_refused(
    checked: Client, services: Services, chair: str, siteverify: FakeSiteverify
) -> None:
    response = tap(checked, chair, challenge="made-up-by-a-script")
    assert response.status_code == 403
    assert response.json_body["error"] == "challenge_failed"
    assert siteverify.asked[0]["response"] == "made-up-by-a-script"
    assert siteverify.asked[0]["secret"] == SECRET
    assert services.tables.catalog.waiting(chair) == 0


def test_with_the_check_on_a_good_token_takes_a_place(
    checked: Client, services: Services, chair: str, siteverify: FakeSiteverify
) -> None:
    response = tap(checked, chair, challenge=GOOD)
    assert response.status_code == 202
    assert services.tables.catalog.waiting(chair) == 1
    assert "remoteip" in siteverify.asked[0]


def test_a_good_token_solved_on_another_host_is_refused(
    checked: Client, services: Services, chair: str, siteverify: FakeSiteverify
) -> None:
    siteverify.hostname = "evil.example"
    response = tap(checked, chair, challenge=GOOD)
    assert response.status_code == 403
    assert services.tables.catalog.waiting(chair) == 0


def test_siteverify_out_of_reach_refuses_the_tap_honestly(
    checked: Client, services: Services, chair: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(url: str, fields: Mapping[str, str]) -> Mapping[str, Any]:
        raise OSError("network is unreachable")

    monkeypatch.setattr(challenge, "post_form", unreachable)
    response = tap(checked, chair, challenge=GOOD)
    assert response.status_code == 503
    assert response.json_body["error"] == "challenge_unavailable"
    assert services.tables.catalog.waiting(chair) == 0


def test_with_the_check_off_a_tap_needs_no_token_and_nothing_is_asked(
    client: Client, services: Services, chair: str, siteverify: FakeSiteverify
) -> None:
    assert services.settings.turnstile_site_key == ""
    assert tap(client, chair).status_code == 202
    assert siteverify.asked == []
    widget = client.http.get("/widget.js").body.decode()
    assert "challenges.cloudflare.com" in widget  # the loader is in the script, used only with a site key
    assert '"turnstile"' not in widget


def test_the_widget_is_given_the_site_key_only_with_the_check_on(checked: Client) -> None:
    widget = checked.http.get("/widget.js").body.decode()
    assert f'"turnstile":"{SITE_KEY}"' in widget


def test_a_site_key_without_its_secret_stops_the_app_at_start(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="TURNSTILE_SECRET"):
        settings_from_env({**env, "TURNSTILE_SITE_KEY": SITE_KEY})
    on = settings_from_env({**env, "TURNSTILE_SITE_KEY": SITE_KEY, "TURNSTILE_SECRET": SECRET})
    assert on.turnstile_site_key == SITE_KEY
    assert settings_from_env(env).turnstile_site_key == ""
