"""The widget as the API serves it (chalicelib/shopper/widget.py) on imitation shop pages, in headless Chromium.

Every page is served from a made-up origin (http://shop.test) by Playwright's request routing, so no server runs:
a Shopify-style product page (a variant picker, the URL's ?variant= and the widget's JSON map), a WooCommerce
variable product (form.variations_form and its jQuery events, with Debian's libjs-jquery) and a plain page with a
fixed data-bisn-sku. POST /notify-me is answered by the route too, which keeps each JSON body it received.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chalicelib.config import settings_from_env
from chalicelib.shopper.widget import widget_source
from infra.stages import stage_env
from tests.support import REGION

pytestmark = pytest.mark.browser

SHOP = "http://shop.test"
WIDGET_JS = widget_source(settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": REGION}))
JQUERY_JS = Path("/usr/share/javascript/jquery/jquery.min.js")
WAIT_MS = 5_000

# Small is sold out, Medium is in stock, Large is sold out.
VARIANTS = {
    "4411": {"sku": "WW-THROW-OAT-S", "available": False},
    "4412": {"sku": "WW-THROW-OAT-M", "available": True},
    "4413": {"sku": "WW-THROW-OAT-L", "available": False},
}
SIZES = {"4411": "Small", "4412": "Medium", "4413": "Large"}
SIZE_BUTTONS = "".join(
    f'<button type="button" class="pick" data-variant="{vid}">{size}</button>' for vid, size in SIZES.items()
)


def variant_widget(extra: str = "") -> str:
    return f'<div class="bisn" data-bisn-product{extra}><script type="application/json" data-bisn-variants>{json.dumps(VARIANTS)}</script></div>'


def page_html(body: str, head: str = "") -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Oat throw</title>{head}</head>'
        f'<body><main class="product"><h1>Oat throw</h1>{body}</main>'
        '<script src="/widget.js" async></script></body></html>'
    )


def options(selected: str) -> str:
    return "".join(
        f'<option value="{vid}"{" selected" if vid == selected else ""}>{size}</option>' for vid, size in SIZES.items()
    )


# A classic Shopify theme: the product form's own <select name="id">, mirrored into the URL with replaceState.
SHOPIFY_SELECT = page_html(
    '<form method="post" action="/cart/add" id="product-form">'
    f'<label for="size">Size</label><select name="id" id="size">{options("4412")}</select>'
    '<button type="submit" name="add">Add to cart</button></form>'
    + variant_widget()
    + "<script>document.getElementById('size').addEventListener('change', function (e) {"
    "history.replaceState({}, '', '?variant=' + e.target.value); });</script>"
)

# A Dawn-like theme: size buttons outside the form set the form's hidden input[name="id"] from script, dispatch a
# bubbling change on it and rewrite the URL.
SHOPIFY_DAWN = page_html(
    f"<fieldset><legend>Size</legend>{SIZE_BUTTONS}</fieldset>"
    '<form method="post" action="/cart/add" id="product-form-main">'
    '<input type="hidden" name="id" value="4412"><button type="submit" name="add">Add to cart</button></form>'
    + variant_widget()
    + "<script>document.querySelectorAll('.pick').forEach(function (b) { b.addEventListener('click', function () {"
    "var input = document.querySelector('#product-form-main input[name=\"id\"]');"
    "input.value = b.getAttribute('data-variant');"
    "input.dispatchEvent(new Event('change', { bubbles: true }));"
    "history.replaceState({}, '', '?variant=' + input.value); }); });</script>"
)

# A theme whose product form the widget cannot see: the picker only rewrites the URL, and fires no event.
SHOPIFY_URL_ONLY = page_html(
    SIZE_BUTTONS
    + variant_widget()
    + "<script>document.querySelectorAll('.pick').forEach(function (b) { b.addEventListener('click', function () {"
    "history.replaceState({}, '', '?variant=' + b.getAttribute('data-variant')); }); });</script>"
)

# WooCommerce's variation payloads (the fields the widget reads, as add-to-cart-variation.js passes them).
WOO_VARIATIONS = {
    "Small": {"variation_id": 501, "sku": "WW-THROW-OAT-S", "is_in_stock": False},
    "Medium": {"variation_id": 502, "sku": "WW-THROW-OAT-M", "is_in_stock": True},
    "Large": {"variation_id": 503, "sku": "WW-THROW-OAT-L", "is_in_stock": False},
}


def woo_page(product_variations: str, widget: str) -> str:
    """A WooCommerce variable product. The inline script stands in for add-to-cart-variation.js: on a choice it sets
    variation_id and triggers found_variation, or reset_data and hide_variation when nothing is chosen, all with
    jQuery's trigger."""
    return page_html(
        '<div class="summary"><form class="variations_form cart" action="/product/oat-throw/" method="post" '
        f'data-product_id="500" data-product_variations="{html.escape(product_variations)}">'
        '<table class="variations"><tr><th><label for="pa_size">Size</label></th><td>'
        '<select id="pa_size" name="attribute_pa_size"><option value="">Choose an option</option>'
        + "".join(f'<option value="{size}">{size}</option>' for size in WOO_VARIATIONS)
        + "</select></td></tr></table>"
        '<div class="single_variation_wrap"><div class="woocommerce-variation single_variation"></div>'
        '<button type="submit" class="single_add_to_cart_button">Add to cart</button>'
        '<input type="hidden" name="add-to-cart" value="500"><input type="hidden" name="product_id" value="500">'
        '<input type="hidden" name="variation_id" class="variation_id" value=""></div></form>'
        f"{widget}</div>"
        f"<script>var VARIATIONS = {json.dumps(WOO_VARIATIONS)};"
        "jQuery(function ($) { var $form = $('form.variations_form');"
        "$form.on('change', 'select', function () { var v = VARIATIONS[this.value];"
        "if (v) { $form.find('input[name=\"variation_id\"]').val(v.variation_id).trigger('change');"
        "$form.trigger('found_variation', [v]); }"
        "else { $form.find('input[name=\"variation_id\"]').val('').trigger('change');"
        "$form.trigger('reset_data'); $form.find('.single_variation').trigger('hide_variation'); } }); });</script>",
        head='<script src="/jquery.js"></script>',
    )


# data-product_variations="false" is what WooCommerce writes when it fetches variations by AJAX: the SKU can only
# come from the found_variation event.
WOO_PAGE = woo_page("false", '<div class="bisn" data-bisn-product></div>')
# The same product with its variations written into the form, and no widget until a test adds one.
WOO_PAGE_INLINE = woo_page(json.dumps(list(WOO_VARIATIONS.values())), "")

PLAIN = page_html('<div class="bisn" data-bisn-sku="WW-BOARD-WALNUT"></div>')
EMPTY = page_html("<p>Nothing to tap yet.</p>")

PAGES = {
    "/shopify-select": SHOPIFY_SELECT,
    "/shopify-dawn": SHOPIFY_DAWN,
    "/shopify-url": SHOPIFY_URL_ONLY,
    "/woocommerce": WOO_PAGE,
    "/woocommerce-inline": WOO_PAGE_INLINE,
    "/plain": PLAIN,
    "/empty": EMPTY,
}


class Shop:
    """Answers every request to http://shop.test and keeps the body of each POST /notify-me."""

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []

    def __call__(self, route: Any) -> None:
        request = route.request
        path = request.url[len(SHOP) :].split("?", 1)[0]
        if path == "/notify-me" and request.method == "POST":
            self.posted.append(json.loads(request.post_data))
            channel = self.posted[-1].get("channel")
            body = {"status": "received", "channel": channel, "confirm_email": channel == "email"}
            route.fulfill(status=202, content_type="application/json", body=json.dumps(body))
        elif path == "/widget.js":
            route.fulfill(content_type="application/javascript", body=WIDGET_JS)
        elif path == "/jquery.js" and JQUERY_JS.exists():
            route.fulfill(content_type="application/javascript", body=JQUERY_JS.read_text(encoding="utf-8"))
        elif path in PAGES:
            route.fulfill(content_type="text/html", body=PAGES[path])
        else:
            route.fulfill(status=404, content_type="text/plain", body="not found")


@pytest.fixture
def shop() -> Shop:
    return Shop()


@pytest.fixture
def page(browser: Any, shop: Shop) -> Iterator[Any]:
    """A fresh tab whose every request to the shop is answered by `shop`; page errors are collected."""
    # A British browser: the local stage texts British numbers, so text message is the widget's first choice.
    context = browser.new_context(viewport={"width": 1000, "height": 800}, locale="en-GB")
    context.route(f"{SHOP}/**", shop)
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    tab.errors = []  # type: ignore[attr-defined]
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))  # type: ignore[attr-defined]
    yield tab
    context.close()


def open_page(page: Any, path: str) -> Any:
    """Load a page and wait until its widget has mounted; returns the widget's locator."""
    page.goto(SHOP + path)
    page.wait_for_selector(".bisn[data-bisn-ready]", state="attached")
    return page.locator(".bisn")


def open_form(widget: Any) -> None:
    """Tap the collapsed "Notify me when available" button, if the form is not open yet."""
    opener = widget.locator(".bisn-open")
    if opener.is_visible():
        opener.click()


def tap(page: Any, widget: Any, shop: Shop, contact: str = "+447400123456") -> dict[str, Any]:
    """Fill the contact if empty, tap Notify me and return the JSON body the widget posted."""
    before = len(shop.posted)
    open_form(widget)
    field = widget.locator("input[name=contact]")
    if not field.input_value():
        field.fill(contact)
    widget.get_by_role("button", name="Notify me", exact=True).click()
    widget.locator(".bisn-status", has_text="we'll").wait_for()
    assert len(shop.posted) == before + 1
    return shop.posted[-1]


def wait_for_state(widget: Any, state: str, sku: str | None = None) -> None:
    sku_test = f'[data-bisn-current-sku="{sku}"]' if sku else ""
    widget.page.wait_for_selector(f'.bisn[data-bisn-state="{state}"]{sku_test}', state="attached")


def test_the_shopify_select_picker_decides_the_sku_and_whether_the_form_shows(page: Any, shop: Shop) -> None:
    widget = open_page(page, "/shopify-select")
    form = widget.locator(".bisn-box")
    # Medium, the form's own choice, is in stock: nothing to ask for.
    wait_for_state(widget, "in-stock", "WW-THROW-OAT-M")
    assert not form.is_visible()

    page.select_option("#size", "4411")
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-S")
    assert form.is_visible()
    assert "variant=4411" in page.url
    open_form(widget)
    widget.locator("input[name=contact]").fill("ada@example.com")

    # Switching to another sold-out size keeps what the shopper typed and posts the new SKU.
    page.select_option("#size", "4413")
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-L")
    assert widget.locator("input[name=contact]").input_value() == "ada@example.com"
    assert tap(page, widget, shop) == {
        "sku": "WW-THROW-OAT-L",
        "channel": "sms",
        "contact": "ada@example.com",
        "name": "",
        "lang": "en",
    }
    assert widget.get_attribute("data-bisn-result") == "received"

    # Back to the size in stock: the form goes, and the last answer (about Large) with it.
    page.select_option("#size", "4412")
    wait_for_state(widget, "in-stock", "WW-THROW-OAT-M")
    assert not form.is_visible()
    assert widget.get_attribute("data-bisn-result") is None
    assert page.errors == []


def test_a_dawn_style_hidden_id_input_changed_from_script_is_followed(page: Any, shop: Shop) -> None:
    widget = open_page(page, "/shopify-dawn")
    wait_for_state(widget, "in-stock", "WW-THROW-OAT-M")

    page.get_by_role("button", name="Small").click()
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-S")
    assert tap(page, widget, shop)["sku"] == "WW-THROW-OAT-S"

    page.get_by_role("button", name="Large").click()
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-L")
    # The status line spoke about Small; it is cleared for Large.
    assert widget.locator(".bisn-status").inner_text() == ""
    assert tap(page, widget, shop)["sku"] == "WW-THROW-OAT-L"
    assert page.errors == []


def test_without_a_product_form_the_urls_variant_parameter_is_followed(page: Any, shop: Shop) -> None:
    page.goto(f"{SHOP}/shopify-url?variant=4411")
    widget = page.locator(".bisn")
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-S")

    # The buttons only call history.replaceState: no event reaches the widget, which notices within its poll.
    page.get_by_role("button", name="Medium").click()
    wait_for_state(widget, "in-stock", "WW-THROW-OAT-M")
    assert not widget.locator(".bisn-box").is_visible()
    page.get_by_role("button", name="Large").click()
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-L")
    assert tap(page, widget, shop)["sku"] == "WW-THROW-OAT-L"
    assert page.errors == []


def test_an_unknown_or_missing_variant_shows_nothing(page: Any) -> None:
    page.goto(f"{SHOP}/shopify-url")
    widget = page.locator(".bisn")
    wait_for_state(widget, "none")
    assert widget.get_attribute("data-bisn-current-sku") is None
    assert not widget.locator(".bisn-box").is_visible()
    page.goto(f"{SHOP}/shopify-url?variant=9999")
    wait_for_state(widget, "none")
    assert page.errors == []


def test_woocommerce_found_variation_and_reset_data_drive_the_widget(page: Any, shop: Shop) -> None:
    if not JQUERY_JS.exists():
        pytest.skip(f"{JQUERY_JS} is missing: `make test-browser` installs Debian's libjs-jquery")
    widget = open_page(page, "/woocommerce")
    form = widget.locator(".bisn-box")
    # No size chosen yet: nothing is shown.
    wait_for_state(widget, "none")
    assert not form.is_visible()

    page.select_option("#pa_size", "Small")
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-S")
    assert form.is_visible()
    open_form(widget)
    widget.get_by_label("Email", exact=True).check()
    widget.locator("input[name=contact]").fill("grace@example.com")

    page.select_option("#pa_size", "Medium")
    wait_for_state(widget, "in-stock", "WW-THROW-OAT-M")
    assert not form.is_visible()

    page.select_option("#pa_size", "Large")
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-L")
    assert tap(page, widget, shop) == {
        "sku": "WW-THROW-OAT-L",
        "channel": "email",
        "contact": "grace@example.com",
        "name": "",
        "lang": "en",
    }

    page.select_option("#pa_size", "")
    wait_for_state(widget, "none")
    assert not form.is_visible()
    assert page.errors == []


def test_a_widget_added_after_a_woocommerce_choice_reads_it_from_the_form(page: Any, shop: Shop) -> None:
    if not JQUERY_JS.exists():
        pytest.skip(f"{JQUERY_JS} is missing: `make test-browser` installs Debian's libjs-jquery")
    page.goto(SHOP + "/woocommerce-inline")
    page.wait_for_function("window.bisn && window.jQuery")
    page.select_option("#pa_size", "Small")
    page.evaluate(
        """() => {
            const late = document.createElement("div");
            late.className = "bisn";
            late.setAttribute("data-bisn-product", "");
            document.querySelector(".summary").appendChild(late);
        }"""
    )
    widget = page.locator(".bisn")
    # found_variation fired before the widget existed: the id in variation_id is looked up in
    # data-product_variations.
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-S")
    assert tap(page, widget, shop)["sku"] == "WW-THROW-OAT-S"
    assert page.errors == []


def test_bisn_mount_mounts_a_late_element_once(page: Any, shop: Shop) -> None:
    page.goto(SHOP + "/empty")
    page.wait_for_function("window.bisn && typeof window.bisn.mount === 'function'")
    results = page.evaluate(
        """() => {
            const late = document.createElement("div");
            late.className = "bisn";
            late.setAttribute("data-bisn-sku", "WW-LAMP-BRASS");
            const first = window.bisn.mount(late);
            const second = window.bisn.mount(late);
            document.querySelector("main").appendChild(late);
            const plain = document.createElement("div");
            return [first, second, window.bisn.mount(plain), late.querySelectorAll("form").length];
        }"""
    )
    assert results == [True, False, False, 1]
    widget = page.locator(".bisn")
    # The observer sees the element arrive already mounted and leaves it alone.
    page.wait_for_timeout(100)
    assert widget.locator("form").count() == 1
    assert tap(page, widget, shop)["sku"] == "WW-LAMP-BRASS"
    assert page.errors == []


def test_widgets_added_after_load_mount_by_themselves(page: Any, shop: Shop) -> None:
    page.goto(SHOP + "/shopify-dawn")
    page.wait_for_selector(".bisn[data-bisn-ready]", state="attached")
    # A theme re-renders the section: the widget's markup arrives again, unmounted, with its map.
    page.evaluate(
        """(html) => {
            const old = document.querySelector(".bisn");
            const holder = document.createElement("section");
            holder.innerHTML = html;
            old.replaceWith(holder);
        }""",
        variant_widget(' id="fresh"'),
    )
    widget = page.locator("#fresh")
    page.wait_for_selector("#fresh[data-bisn-ready]", state="attached")
    assert widget.locator("form").count() == 1
    wait_for_state(widget, "in-stock", "WW-THROW-OAT-M")
    page.get_by_role("button", name="Small").click()
    wait_for_state(widget, "sold-out", "WW-THROW-OAT-S")
    assert tap(page, widget, shop)["sku"] == "WW-THROW-OAT-S"
    assert page.errors == []


def test_a_plain_page_with_a_fixed_sku_works_as_before(page: Any, shop: Shop) -> None:
    widget = open_page(page, "/plain")
    assert widget.locator(".bisn-box").is_visible()
    assert widget.get_attribute("data-bisn-state") is None
    open_form(widget)
    widget.locator("input[name=name]").fill("Ada")
    assert tap(page, widget, shop) == {
        "sku": "WW-BOARD-WALNUT",
        "channel": "sms",
        "contact": "+447400123456",
        "name": "Ada",
        "lang": "en",
    }
    said = widget.locator(".bisn-status").inner_text()
    assert said == "You're on the list — we'll text you when it's back."
    assert widget.get_by_role("link").count() == 0  # no link to anyone's page in the answer
    assert page.errors == []
