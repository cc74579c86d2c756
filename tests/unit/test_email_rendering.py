"""The restock email as mail clients get it, in every language: an HTML part built for the common clients (tables
with role="presentation", inline styles, at most 600px wide, light and dark colour schemes, a bulletproof button,
no text in images) and a plain-text part with the same facts and links. Everything a name holds is escaped."""

from __future__ import annotations

import dataclasses
import html
from html.parser import HTMLParser

import pytest

from chalicelib import i18n
from chalicelib.i18n import LANGUAGES
from chalicelib.messages.compose import Brand, Facts, compose_email, facts_for, on_colour
from chalicelib.messages.copy_rules import template_copy
from chalicelib.messages.senders import Notice
from chalicelib.tables.catalog import Product
from tests.support import CHAIR

# The local stage's shop settings (chalicelib/config.py: SHOP_URL, SHOP_LOGO_URL, SHOP_ACCENT).
BRAND = Brand(shop_url="http://127.0.0.1:8001/", logo_url="http://127.0.0.1:8001/static/logo.svg", accent="#7a4b2a")
PRODUCT = {
    "sku": "CHAIR-WALNUT",
    **CHAIR,
    "price": "129.00",
    "currency": "EUR",
    "product_url": "http://127.0.0.1:8001/products/walnut-chair",
    "image_url": "http://127.0.0.1:8001/static/chair.jpg",
}
RESERVE = "https://a.example/api/r/AbCdEfGhIjKlMnOpQrStUv"
MANAGE = "https://a.example/api/me/signed.manage.token"
UNSUBSCRIBE = "https://a.example/api/u/signed.unsubscribe.token"
VOID = {"html", "head", "meta", "title", "style", "br", "body", "hr", "span"}


class Parsed(HTMLParser):
    """Every start tag with its attributes, the open-tag stack kept to prove the tables close, and the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.open: list[str] = []
        self.unbalanced: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag in ("table", "tr", "td", "a", "p"):
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        closes = tag in ("table", "tr", "td", "a", "p")
        if closes and (not self.open or self.open.pop() != tag):
            self.unbalanced.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str) -> list[dict[str, str]]:
        return [attrs for t, attrs in self.tags if t == tag]

    def words(self) -> str:
        return " ".join(" ".join(self.text).split())


def email(lang: str, **product: str) -> tuple[Notice, Parsed]:
    return email_of(facts_for(Product.from_item({**PRODUCT, **product}), "Walnut & Wool", lang, BRAND), "Ada")


def email_of(facts: Facts, name: str) -> tuple[Notice, Parsed]:
    """The email composed from the template copy for these facts, and its HTML parsed."""
    notice = compose_email(
        template_copy(facts),
        to="ada@example.com",
        name=name,
        facts=facts,
        reserve_url=RESERVE,
        manage_url=MANAGE,
        unsubscribe_url=UNSUBSCRIBE,
    )
    assert notice.html is not None
    parsed = Parsed()
    parsed.feed(notice.html)
    parsed.close()
    return notice, parsed


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_html_part_is_built_for_mail_clients(lang: str) -> None:
    notice, parsed = email(lang)
    assert parsed.unbalanced == [] and parsed.open == []  # every table, row, cell, link and paragraph closes
    [root] = parsed.all("html")
    assert root["lang"] == lang
    metas = {m.get("name"): m.get("content") for m in parsed.all("meta")}
    assert metas["color-scheme"] == "light dark" and metas["supported-color-schemes"] == "light dark"
    tables = parsed.all("table")
    assert tables and all(t.get("role") == "presentation" for t in tables)  # layout tables, not data tables
    assert any("max-width:600px" in t.get("style", "") for t in tables)
    # Inline styles carry the look: every visible block and link has its own, whatever a <style> adds.
    for tag, attrs in parsed.tags:
        if tag not in VOID and tag not in ("table", "tr"):
            assert attrs.get("style"), f"<{tag}> without an inline style"
    assert "<link" not in notice.html and "<script" not in notice.html


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_html_part_shows_the_shop_the_product_its_price_and_every_link(lang: str) -> None:
    t = i18n.text("messages", lang)
    notice, parsed = email(lang)
    images = {i["src"]: i for i in parsed.all("img")}
    logo = images[BRAND.logo_url]
    assert logo["alt"] == "Walnut & Wool"
    picture = images[PRODUCT["image_url"]]
    assert picture["alt"] == CHAIR["name"] and picture["width"] == picture["height"] == "120"
    words = parsed.words()
    price = i18n.price("129.00", "EUR", lang)
    assert price is not None and " ".join(price.split()) in words  # "€129.00", "129,00 €", "€ 129,00"
    assert CHAIR["name"] in words and t("Hold one for me") in words and t("View the product") in words
    links = [a["href"] for a in parsed.all("a")]
    for href in (PRODUCT["product_url"], RESERVE, MANAGE, UNSUBSCRIBE, BRAND.shop_url):
        assert href in links, href
    assert links.count(RESERVE) == 1  # the button is the one reserve link
    # The button: a cell with the accent as its background, the link inside in a readable colour.
    [cell] = [c for c in parsed.all("td") if c.get("bgcolor") == BRAND.accent]
    assert f"background:{BRAND.accent}" in cell["style"]
    [button] = [a for a in parsed.all("a") if a["href"] == RESERVE]
    assert f"color:{on_colour(BRAND.accent)}" in button["style"]
    window = t("Link valid for {window}.", window=t.plural("{n} hour", "{n} hours", 1))
    for said in (window, t("Manage your alerts"), t("Unsubscribe")):
        assert said in words
    assert (
        t("You asked {shop} to tell you when {product} was back in stock.", shop="Walnut & Wool", product=CHAIR["name"])
        in words
    )
    assert notice.subject == t("{product} is back in stock").replace("{product}", CHAIR["name"])


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_text_part_carries_the_same_facts_and_links(lang: str) -> None:
    t = i18n.text("messages", lang)
    notice, _ = email(lang)
    text = notice.text or ""
    price = i18n.price("129.00", "EUR", lang)
    window = t("Link valid for {window}.", window=t.plural("{n} hour", "{n} hours", 1))
    for fact in (CHAIR["name"], price, PRODUCT["product_url"], RESERVE, window, MANAGE, UNSUBSCRIBE):
        assert fact is not None and fact in text, fact
    assert "Walnut & Wool" in text and BRAND.shop_url in text
    assert text.count(RESERVE) == 1
    assert text.startswith(t("Hi {name},", name="Ada"))
    assert "<" not in text  # plain text, no markup


def test_what_is_unknown_is_left_out_not_printed_empty() -> None:
    notice, parsed = email_of(
        facts_for(Product.from_item({"sku": "MUG", "name": "Mug"}), "Walnut & Wool", "de", Brand()), ""
    )
    assert notice.html is not None
    assert parsed.all("img") == []  # no logo and no picture set: no broken images
    assert "Walnut & Wool" in parsed.words()  # the shop's name stands where the logo would
    assert "€" not in (notice.text or "") and "None" not in notice.html
    assert i18n.text("messages", "de")("View the product") not in notice.html  # no product page, no link to one
    assert (notice.text or "").startswith("Guten Tag,")


def test_every_name_is_escaped_in_the_html_and_kept_as_written_in_the_text() -> None:
    hostile = '<img src=x onerror=alert(1)> "Chair" & {link}'
    notice, parsed = email("fr", name=hostile, image_url='http://x.example/a.jpg" onload="alert(1)')
    assert notice.html is not None
    assert "<img src=x" not in notice.html and 'onload="alert' not in notice.html
    assert html.escape(hostile, quote=True) in notice.html
    assert hostile in (notice.text or "") and (notice.text or "").count(RESERVE) == 1  # "{link}" in a name stays text
    assert all(i.get("onerror") is None and i.get("onload") is None for i in parsed.all("img"))


@pytest.mark.parametrize(("accent", "text"), [("#7a4b2a", "#ffffff"), ("#ffd700", "#111827"), ("#1f2937", "#ffffff")])
def test_the_buttons_text_is_readable_on_the_shops_accent(accent: str, text: str) -> None:
    assert on_colour(accent) == text
    facts = dataclasses.replace(
        facts_for(Product.from_item(PRODUCT), "W", "en"), brand=dataclasses.replace(BRAND, accent=accent)
    )
    notice = compose_email(
        template_copy(facts),
        to="a@example.com",
        name="",
        facts=facts,
        reserve_url=RESERVE,
        manage_url=MANAGE,
        unsubscribe_url=UNSUBSCRIBE,
    )
    assert f'bgcolor="{accent}"' in (notice.html or "") and f"color:{text}" in (notice.html or "")
