"""The embed snippet's plain form, posted by a browser with scripts off: a page in the shopper's language that says
what happened and links back to the product (never to a URL the request names). JSON callers keep their JSON."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client

from chalicelib.contacts import contact_key
from chalicelib.wiring import Services
from tests.support import CHAIR

PRODUCT_URL = "https://shop.example/products/walnut-chair"
# What a browser sends for a form post (Chromium's Accept for a navigation, per the Fetch standard's "document").
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
LINK = re.compile(r'<a href="([^"]*)"')


def links_back(page: str, shop_url: str) -> set[str]:
    """The page's links: the product's page first, and otherwise only the shop's home page (the frame's own
    "back to the shop")."""
    found = LINK.findall(page)
    assert set(found) <= {PRODUCT_URL, shop_url}, found
    return set(found)


@pytest.fixture
def chair_page(services: Services) -> str:
    """The chair, with its product page in the catalogue."""
    services.tables.catalog.upsert("CHAIR-WALNUT", {**CHAIR, "product_url": PRODUCT_URL})
    return "CHAIR-WALNUT"


def form_post(client: Client, services: Services, accept: str = BROWSER_ACCEPT, **fields: str) -> Any:
    body = urlencode({"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 123456", **fields})
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Origin": services.settings.cors_origins[0],
        "Accept": accept,
    }
    return client.http.post("/notify-me", headers=headers, body=body)


def text_of(response: Any) -> str:
    return str(response.body.decode())


def test_an_accepted_form_post_gets_a_page_linking_back_to_the_product(
    client: Client, services: Services, chair_page: str
) -> None:
    response = form_post(client, services)
    assert response.status_code == 202
    assert response.headers["Content-Type"].startswith("text/html")
    page = text_of(response)
    assert "You&#x27;re on the list — we&#x27;ll text you when it&#x27;s back." in page
    assert PRODUCT_URL in links_back(page, services.settings.shop_url)
    assert services.tables.catalog.waiting(chair_page) == 1


def test_new_repeat_and_opted_out_read_the_same(client: Client, services: Services, chair_page: str) -> None:
    stopped = "+447400123458"
    services.tables.optout.add(contact_key(stopped, services.hash_key), "stop", services.clock.now())
    new = text_of(form_post(client, services))
    again = text_of(form_post(client, services))
    opted_out = text_of(form_post(client, services, contact=stopped))
    assert new == again == opted_out
    assert services.tables.catalog.waiting(chair_page) == 1


def test_the_page_is_in_the_shoppers_language(client: Client, services: Services, chair_page: str) -> None:
    response = form_post(client, services, lang="de-AT", channel="email", contact="ada@example.com")
    page = text_of(response)
    assert response.headers["Content-Language"] == "de"
    assert '<html lang="de">' in page
    # An email went only if the address still needed confirming, and the page says no more than that.
    assert "Sie stehen auf der Liste" in page and "Muss Ihre Adresse noch bestätigt werden" in page
    assert "Zurück zum Produkt" in page


def test_without_a_lang_field_accept_language_decides(client: Client, services: Services, chair_page: str) -> None:
    body = urlencode({"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 123456"})
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Origin": services.settings.cors_origins[0],
        "Accept": BROWSER_ACCEPT,
        "Accept-Language": "fr-FR,fr;q=0.9",
    }
    page = text_of(client.http.post("/notify-me", headers=headers, body=body))
    assert "Vous êtes sur la liste" in page


def test_a_refused_phone_says_how_to_fix_it_with_the_same_status(
    client: Client, services: Services, chair_page: str
) -> None:
    response = form_post(client, services, contact="+44 7400 12")
    assert response.status_code == 400
    page = text_of(response)
    # Typed with its country code and too short: said so, with libphonenumber's example mobile for GB.
    assert "That number is too short. For example: +44 7400 123456" in page
    assert "country code" not in page
    assert PRODUCT_URL in links_back(page, services.settings.shop_url)
    assert services.tables.catalog.waiting(chair_page) == 0


def test_a_name_typed_in_decomposed_unicode_joins_from_the_form(
    client: Client, services: Services, chair_page: str
) -> None:
    response = form_post(client, services, name="Na\u0301ndor")
    assert response.status_code == 202
    assert "You&#x27;re on the list" in text_of(response)
    [place] = services.tables.requests.queue(chair_page, active_only=False)
    assert place.name == "N\u00e1ndor"


def test_a_refused_name_says_what_a_name_may_hold(client: Client, services: Services, chair_page: str) -> None:
    response = form_post(client, services, name="Ada2")
    assert response.status_code == 400
    assert "Please use only letters, spaces, apostrophes and hyphens in your name." in text_of(response)
    assert services.tables.catalog.waiting(chair_page) == 0


def test_an_unknown_sku_links_back_to_the_shop(client: Client, services: Services, chair_page: str) -> None:
    response = form_post(client, services, sku="LAMP-OLD")
    assert response.status_code == 404
    page = text_of(response)
    assert "Sorry, alerts are not available for this product." in page
    assert links_back(page, services.settings.shop_url) == {services.settings.shop_url}


def test_the_link_back_never_comes_from_the_request(client: Client, services: Services, chair_page: str) -> None:
    body = urlencode(
        {"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 123456", "product_url": "https://evil.example/"}
    )
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Referer": f"{services.settings.public_base_url}/?next=https://evil.example/",
        "Accept": BROWSER_ACCEPT,
    }
    page = text_of(client.http.post("/notify-me", headers=headers, body=body))
    assert PRODUCT_URL in links_back(page, services.settings.shop_url)
    assert "evil.example" not in page


def test_a_rate_limited_form_post_is_a_429_page_with_retry_after(
    client: Client, services: Services, chair_page: str
) -> None:
    for i in range(services.settings.rate_limit_per_minute):
        form_post(client, services, channel="email", contact=f"shopper{i}@example.com")
    response = form_post(client, services, channel="email", contact="late@example.com")
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) >= 1
    assert "Too many tries." in text_of(response)


def test_a_cross_site_form_post_from_a_browser_gets_a_403_page(client: Client, services: Services, chair: str) -> None:
    body = urlencode({"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 123456"})
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Origin": "https://evil.example",
        "Accept": BROWSER_ACCEPT,
    }
    response = client.http.post("/notify-me", headers=headers, body=body)
    assert response.status_code == 403
    assert "Please sign up from the shop&#x27;s own product page." in text_of(response)
    assert services.tables.catalog.waiting(chair) == 0


def test_a_form_post_asking_for_json_and_json_itself_keep_their_answers(
    client: Client, services: Services, chair_page: str
) -> None:
    form = form_post(client, services, accept="application/json")
    assert form.json_body == {"status": "received", "channel": "sms", "confirm_email": False}
    refused = form_post(client, services, accept="*/*", contact="12")
    assert refused.json_body["error"] == "invalid_phone"
    headers = {"Content-Type": "application/json", "Accept": BROWSER_ACCEPT}
    body = '{"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 123456"}'
    assert client.http.post("/notify-me", headers=headers, body=body).json_body["status"] == "received"
