"""/notify-me takes JSON from anywhere CORS lets it (a cross-site fetch of JSON is preflighted), but a form or
text/plain post, which any page can make a visitor's browser send without a preflight, only from an allowed page."""

from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.wiring import Services

FORM = "sku=CHAIR-WALNUT&channel=email&contact=ada%40example.com"
TEXT = json.dumps({"sku": "CHAIR-WALNUT", "channel": "email", "contact": "ada@example.com"})


def post(client: Client, body: str, content_type: str, **headers: str) -> Any:
    return client.http.post("/notify-me", headers={"Content-Type": content_type, **headers}, body=body)


def waiting(services: Services, sku: str) -> int:
    return services.tables.catalog.waiting(sku)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(FORM, "application/x-www-form-urlencoded"), (TEXT, "text/plain"), (TEXT, "text/plain; charset=utf-8")],
)
@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},  # a sandboxed frame or a page with no referrer policy to speak of
        {"Referer": "https://evil.example/page"},
        {},  # neither header: browsers send Origin on every cross-origin POST, so this is no browser we serve
    ],
)
def test_a_cross_site_simple_post_is_refused_and_writes_nothing(
    client: Client, services: Services, chair: str, body: str, content_type: str, headers: dict[str, str]
) -> None:
    response = post(client, body, content_type, **headers)
    assert response.status_code == 403
    assert response.json_body["error"] == "cross_site_form"
    assert waiting(services, chair) == 0


@pytest.mark.parametrize(("body", "content_type"), [(FORM, "application/x-www-form-urlencoded"), (TEXT, "text/plain")])
def test_a_simple_post_from_an_allowed_storefront_or_the_api_itself_is_taken(
    client: Client, services: Services, chair: str, body: str, content_type: str
) -> None:
    storefront = services.settings.cors_origins[0]
    assert post(client, body, content_type, Origin=storefront).status_code == 202
    own = services.settings.public_base_url
    again = post(client, body, content_type, Referer=f"{own}/some/page")
    assert again.status_code == 202  # the same person again: their place is kept
    assert waiting(services, chair) == 1


def test_json_is_taken_whatever_the_origin_header_says(client: Client, services: Services, chair: str) -> None:
    # A browser sends cross-site JSON only after a preflight that only CORS_ORIGINS pass.
    response = post(client, TEXT, "application/json", Origin="https://evil.example")
    assert response.status_code == 202
    assert "Access-Control-Allow-Origin" not in response.headers


def test_the_preflight_answers_only_allowed_origins(client: Client, services: Services) -> None:
    allowed = services.settings.cors_origins[0]
    ok = client.http.request("OPTIONS", "/notify-me", headers={"Origin": allowed})
    assert ok.headers["Access-Control-Allow-Origin"] == allowed
    refused = client.http.request("OPTIONS", "/notify-me", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in refused.headers


def test_a_refused_origin_is_logged_by_name_and_an_allowed_one_is_not(
    client: Client, services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="chalicelib")
    client.http.request("OPTIONS", "/notify-me", headers={"Origin": services.settings.cors_origins[0]})
    assert [r for r in caplog.records if hasattr(r, "origin")] == []
    client.http.request("OPTIONS", "/notify-me", headers={"Origin": "https://theme.walnut-and-wool.test"})
    post(client, TEXT, "application/json", Origin="https://theme.walnut-and-wool.test/")
    refused = [r for r in caplog.records if hasattr(r, "origin")]
    assert [(r.levelname, r.origin) for r in refused] == [  # type: ignore[attr-defined]
        ("WARNING", "https://theme.walnut-and-wool.test"),
        ("WARNING", "https://theme.walnut-and-wool.test/"),
    ]
    assert "CORS_ORIGINS" in refused[0].getMessage()
