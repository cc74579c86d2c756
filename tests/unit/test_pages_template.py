"""The shopper pages' one frame: escaping, the shop's look, scripts allowed by hash, local times, languages."""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser

import pytest

from app import RESERVE_STATUS
from chalicelib import holds
from chalicelib.colours import contrast, link_colour
from chalicelib.holds import ReserveOutcome
from chalicelib.shopper.pages import (
    LINK_INCOMPLETE,
    About,
    Shop,
    img_sources,
    on_accent,
    reserve_link_page,
    shopper_page,
    shopper_text_page,
)
from chalicelib.web.responses import page_response

SHOP = Shop("Walnut <&> Wool", "https://shop.example/", "https://cdn.shop.example/logo.svg", "#7a4b2a")
CHAIR = About('Chair "Oak" <b>', "https://cdn.shop.example/chair.jpg", "https://shop.example/chair?a=1&b=2")


class Outline(HTMLParser):
    """What a page is made of: its tags' attributes and its text, as a browser parses them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.tags if name == tag]


def outline(body: str) -> Outline:
    parsed = Outline()
    parsed.feed(body)
    return parsed


def test_names_are_escaped_wherever_they_appear() -> None:
    body = shopper_page(200, "Title", "Message", SHOP, lang="en", about=CHAIR).html
    assert "<b>" not in body and "<&>" not in body
    parsed = outline(body)
    [logo, picture] = parsed.all("img")
    assert logo == {"src": SHOP.logo_url, "alt": SHOP.name, "height": "48"}
    assert picture == {"src": CHAIR.image_url, "alt": CHAIR.name}
    assert {"href": CHAIR.url} in parsed.all("a")
    assert CHAIR.name in parsed.text


def test_every_page_has_one_heading_landmarks_its_language_and_a_way_back_to_the_shop() -> None:
    body = shopper_text_page(400, LINK_INCOMPLETE, SHOP, "de").html
    parsed = outline(body)
    assert parsed.all("html") == [{"lang": "de"}]
    assert len(parsed.all("h1")) == 1 and parsed.all("main") and parsed.all("header") and parsed.all("footer")
    assert "Dieser Link ist unvollständig" in parsed.text
    assert {"href": SHOP.url} in parsed.all("a") and "Zurück zum Shop" in parsed.text


def test_without_a_shop_url_the_way_back_is_the_products_page_and_without_either_there_is_none() -> None:
    no_home = Shop("W&W")
    with_product = outline(
        shopper_page(200, "T", "M", no_home, about=About("Chair", url="https://shop.example/chair")).html
    )
    assert {"href": "https://shop.example/chair"} in with_product.all("a") and "Back to the shop" in with_product.text
    bare = outline(shopper_page(200, "T", "M", no_home).html)
    assert bare.all("a") == [] and bare.all("footer") == [] and "Back to the shop" not in bare.text


def test_without_a_logo_the_shop_is_named_in_words() -> None:
    parsed = outline(shopper_page(200, "T", "M", Shop("Walnut & Wool", "https://shop.example/")).html)
    assert parsed.all("img") == [] and "Walnut & Wool" in parsed.text


@pytest.mark.parametrize("url", ["javascript:alert(1)", "data:image/svg+xml,<svg/>", "//evil.example/x.png"])
def test_only_web_addresses_become_links_or_images(url: str) -> None:
    parsed = outline(shopper_page(200, "T", "M", Shop("S", url, url), about=About("Chair", url, url)).html)
    assert parsed.all("img") == [] and parsed.all("a") == []


def _scripts_and_policy(outcome: ReserveOutcome) -> tuple[list[str], str]:
    response = page_response(reserve_link_page(outcome, RESERVE_STATUS[outcome.kind], SHOP, "tok.en"))
    return re.findall(r"<script>(.*?)</script>", response.body), response.headers["Content-Security-Policy"]


@pytest.mark.parametrize(
    "outcome",
    [
        ReserveOutcome(holds.OFFER_PAGE, product_name="Chair", offer_expires_at=1796400000),
        ReserveOutcome(holds.HOLDING_PAGE, product_name="Chair", hold_expires_at=1796400000),
        ReserveOutcome(holds.EXPIRED_LINK, reason="used", product_name="Chair"),
        ReserveOutcome(holds.JUST_GONE_PAGE, product_name="Chair"),
    ],
)
def test_the_policy_allows_exactly_the_pages_own_scripts_by_their_hashes(outcome: ReserveOutcome) -> None:
    scripts, policy = _scripts_and_policy(outcome)
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    hashes = [f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in scripts]
    assert directives.get("script-src", "").split() == hashes
    assert directives["default-src"] == "'none'" and directives["style-src"] == "'unsafe-inline'"
    assert directives["frame-ancestors"] == "'none'" and directives["base-uri"] == "'none'"
    assert "unsafe-inline" not in directives.get("script-src", "")


def test_times_are_utc_in_the_page_and_local_with_the_script() -> None:
    outcome = ReserveOutcome(holds.HOLDING_PAGE, product_name="Stuhl", hold_expires_at=1796400000, lang="de")
    response = page_response(reserve_link_page(outcome, 200, SHOP, "tok.en"))
    assert '<time datetime="2026-12-04T16:00:00Z" data-local>4. Dez., 16:00 UTC</time>' in response.body
    scripts, _ = _scripts_and_policy(outcome)
    assert any("Intl.DateTimeFormat(document.documentElement.lang" in s for s in scripts)
    assert '<html lang="de">' in response.body and "Ein Stuhl ist für Sie reserviert" in response.body


def test_a_page_without_times_carries_no_script() -> None:
    scripts, policy = _scripts_and_policy(ReserveOutcome(holds.UNKNOWN_LINK))
    assert scripts == [] and "script-src" not in policy


def test_images_may_come_from_https_and_from_the_configured_local_origins_only() -> None:
    assert img_sources("https://cdn.example/a.png") == "https:"
    assert img_sources("http://127.0.0.1:8001/static/logo.svg", "http://127.0.0.1:8001/x.png", "") == (
        "https: http://127.0.0.1:8001"
    )
    response = page_response(shopper_page(200, "T", "M", Shop("S", logo_url="http://127.0.0.1:8001/static/logo.svg")))
    assert "img-src https: http://127.0.0.1:8001;" in response.headers["Content-Security-Policy"]


GREYS = [f"#{v:02x}{v:02x}{v:02x}" for v in range(0, 256, 5)]
ACCENTS = ["#7a4b2a", "#1f2937", "#ffcc00", "#00a651", "#e11d48", "#777777", "#3b82f6", "#ffffff", "#000000"]


@pytest.mark.parametrize("accent", GREYS + ACCENTS)
def test_a_buttons_text_always_reads_on_the_accent(accent: str) -> None:
    # WCAG 2.2 SC 1.4.3: 4.5:1 for text of normal size; black or white always reach it on some side.
    assert contrast(accent, on_accent(accent)) >= 4.5


@pytest.mark.parametrize("accent", ACCENTS)
@pytest.mark.parametrize(("background", "text"), [("#ffffff", "#1a1a1a"), ("#121212", "#ececec")])
def test_links_read_on_light_and_dark_pages(accent: str, background: str, text: str) -> None:
    assert contrast(link_colour(accent, background, text), background) >= 4.5


def test_the_stylesheet_carries_the_accent_the_readable_text_and_touch_sized_buttons() -> None:
    body = shopper_page(200, "T", "M", Shop("S", accent="#ffcc00")).html
    assert "--accent:#ffcc00;--on-accent:#000000" in body
    assert "min-height:44px" in body and "prefers-color-scheme:dark" in body
    assert "--accent:#1f2937" in shopper_page(200, "T", "M", Shop("S", accent="red; } body{display:none")).html
