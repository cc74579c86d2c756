"""Every state-changing form of ours refuses a post from another site's page (by Origin, or by Referer when there
is no Origin) with an honest 403 page and writes nothing; same-origin posts and posts with neither header (our
pages send no Referer; a mail provider's one-click unsubscribe is a server's POST) go on."""

from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.contacts import contact_key
from chalicelib.wiring import Services
from tests.support import stored

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
ELSEWHERE = [
    {"Origin": "https://evil.example"},
    {"Referer": "https://evil.example/drop-bot.html"},
    {"Origin": "https://evil.example", "Referer": "https://evil.example/"},
]


def email_place(client: Client, services: Services, sku: str, contact: str = "ada@example.com") -> Any:
    body = json.dumps({"sku": sku, "channel": "email", "contact": contact})
    assert client.http.post("/notify-me", headers={"Content-Type": "application/json"}, body=body).status_code == 202
    (place,) = list(services.tables.requests.queue(sku))
    return place


def form_routes(services: Services, sku: str, place: Any) -> dict[str, tuple[str, str]]:
    """Each POST form route, with a link that would work from our own page, and the body its form sends."""
    key = contact_key("ada@example.com", services.hash_key)
    return {
        "confirm": (f"/confirm/{services.tokens.confirm(sku, place.joined_ts)}", ""),
        "unsubscribe": (f"/unsubscribe/{services.tokens.unsubscribe(key)}", "List-Unsubscribe=One-Click"),
        "reserve": (f"/reserve/{services.tokens.reserve('x' * 22)}", ""),
        "short reserve": ("/r/" + "x" * 22, ""),
        "manage": (f"/me/{services.tokens.manage(key)}", "action=leave&sku=" + sku),
        "short manage": ("/m/" + "y" * 22, "action=stop"),
        "opt-in": (f"/optin/{services.tokens.optin(key, 'n' * 16)}", ""),
        "resubscribe": ("/resubscribe/" + "z" * 22, ""),
    }


@pytest.mark.parametrize("headers", ELSEWHERE)
@pytest.mark.parametrize(
    "route", ["confirm", "unsubscribe", "reserve", "short reserve", "manage", "short manage", "opt-in", "resubscribe"]
)
def test_a_form_posted_from_another_site_is_refused_with_a_page_and_writes_nothing(
    client: Client, services: Services, chair: str, route: str, headers: dict[str, str]
) -> None:
    place = email_place(client, services, chair)
    path, body = form_routes(services, chair, place)[route]
    before = stored(services)
    response = client.http.post(path, headers={**FORM, **headers}, body=body)
    assert response.status_code == 403
    assert response.headers["Content-Type"].startswith("text/html")
    assert "<h1>" in response.body.decode()  # a page a person can read, not an error document
    assert stored(services) == before


@pytest.mark.parametrize(
    "headers",
    [
        {},  # our pages send no Referer; a mail provider's one-click POST has no browser headers
        {"Origin": "null"},  # what a browser may send from a page with Referrer-Policy: no-referrer
        {"Origin": "http://127.0.0.1:8000"},
        {"Referer": "http://127.0.0.1:8000/confirm/abc"},
    ],
)
def test_a_confirmation_from_our_own_page_or_with_no_origin_goes_on(
    client: Client, services: Services, chair: str, headers: dict[str, str]
) -> None:
    place = email_place(client, services, chair)
    path, body = form_routes(services, chair, place)["confirm"]
    response = client.http.post(path, headers={**FORM, **headers}, body=body)
    assert response.status_code == 200
    confirmed = services.tables.requests.get(chair, place.joined_ts)
    assert confirmed is not None and not confirmed.unconfirmed


def test_a_one_click_unsubscribe_with_no_browser_headers_goes_on(
    client: Client, services: Services, chair: str
) -> None:
    place = email_place(client, services, chair)
    path, body = form_routes(services, chair, place)["unsubscribe"]
    response = client.http.post(path, headers=FORM, body=body)
    assert response.status_code == 200
    assert services.tables.optout.get(contact_key("ada@example.com", services.hash_key)) is not None
