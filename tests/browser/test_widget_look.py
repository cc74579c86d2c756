"""What a shopper sees of the widget, in headless Chromium: collapsed to one button, its own scoped styles, errors by
their field with a fix, the shopper's language, the SMS opt-back-in code, keyboard use, and axe on each state.

A bare third-party page is served from a made-up origin (http://shop.test) by Playwright's request routing, with the
widget as the API serves it; POST /notify-me and POST /notify-me/code are answered there too (the code route stands
in for the server's answer, per the contract in docs/openapi.yaml). The demo storefront runs on the real local stack.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from chalicelib.config import settings_from_env
from chalicelib.widget import widget_source
from infra.stages import stage_env
from tests.browser.axe import assert_accessible
from tests.browser.running import RunningStack, shot
from tests.support import REGION

pytestmark = pytest.mark.browser

SHOP = "http://shop.test"
WAIT_MS = 5_000
SETTINGS = settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": REGION})
WIDGET_JS = widget_source(SETTINGS)
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# A theme with loud bare-element rules: none of them may reach into the widget, and none of the widget's out.
THEME = "<style>button{background:#ff0;color:#000;font-size:30px;border:0} p{color:#333} input{border:0}</style>"


def bare_page(lang: str = "en", widget: str = '<div data-bisn-sku="WW-BOARD-WALNUT"></div>', script: str = "") -> str:
    return (
        f'<!doctype html><html lang="{lang}"><head><meta charset="utf-8"><title>Walnut board</title>{THEME}</head>'
        "<body><main><h1>Walnut board</h1><p>Sold out.</p>"
        f'<button type="button" id="theme-button">Add to wishlist</button>{widget}</main>'
        f'<script src="/widget.js"{script}></script></body></html>'
    )


class Shop:
    """Answers http://shop.test: the pages, the widget, and the API's two routes (each body it got is kept)."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        self.posted: list[dict[str, Any]] = []
        self.codes: list[dict[str, Any]] = []
        self.code_answers: list[tuple[int, dict[str, str]]] = []

    def __call__(self, route: Any) -> None:
        request = route.request
        path = request.url[len(SHOP) :].split("?", 1)[0]
        if path == "/notify-me" and request.method == "POST":
            body = json.loads(request.post_data)
            self.posted.append(body)
            if body["contact"] == "12":
                # chalicelib/contacts.py's refusal of a number libphonenumber cannot read.
                answer = (400, {"error": "invalid_phone", "message": "That is not a valid phone number."})
            else:
                answer = (202, {"status": "received", "channel": body["channel"], "confirm_email": False})
            route.fulfill(status=answer[0], content_type="application/json", body=json.dumps(answer[1]))
        elif path == "/notify-me/code" and request.method == "POST":
            self.codes.append(json.loads(request.post_data))
            status, answer = self.code_answers.pop(0)
            route.fulfill(status=status, content_type="application/json", body=json.dumps(answer))
        elif path == "/widget.js":
            route.fulfill(content_type="application/javascript", body=WIDGET_JS)
        elif path in self.pages:
            route.fulfill(content_type="text/html", body=self.pages[path])
        else:
            route.fulfill(status=404, content_type="text/plain", body="not found")


@pytest.fixture
def shop() -> Shop:
    return Shop()


def tab(browser: Any, shop: Shop, viewport: dict[str, int]) -> Iterator[Any]:
    context = browser.new_context(viewport=viewport)
    context.route(f"{SHOP}/**", shop)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


@pytest.fixture
def page(browser: Any, shop: Shop) -> Iterator[Any]:
    yield from tab(browser, shop, DESKTOP)


@pytest.fixture
def phone(browser: Any, shop: Shop) -> Iterator[Any]:
    yield from tab(browser, shop, PHONE)


def visit(page: Any, shop: Shop, html: str) -> Any:
    shop.pages["/p"] = html
    page.goto(SHOP + "/p")
    page.wait_for_selector(".bisn[data-bisn-ready]", state="attached")
    return page.locator(".bisn")


def box_of(locator: Any) -> dict[str, float]:
    box = locator.bounding_box()
    assert box is not None
    return dict(box)


def assert_big_enough(widget: Any) -> None:
    """Every visible button and text field is at least 44x44 CSS px; radio labels are at least 44 high and wide."""
    targets = "button:visible, input[type=tel]:visible, input[type=email]:visible, label:visible:has(input[type=radio])"
    for target in widget.locator(targets).all():
        box = box_of(target)
        assert box["height"] >= 44 and box["width"] >= 44, (target.inner_text() or target.get_attribute("name"), box)


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_each_state_on_a_bare_page_is_accessible_and_big_enough(
    request: pytest.FixtureRequest, shop: Shop, viewport: str
) -> None:
    page = request.getfixturevalue("page" if viewport == "desktop" else "phone")
    widget = visit(page, shop, bare_page())
    opener = widget.get_by_role("button", name="Notify me when available")
    assert opener.is_visible() and not widget.locator("form.bisn-form").is_visible()
    assert_big_enough(widget)
    assert_accessible(page, f"widget collapsed ({viewport})")
    shot(page, f"widget-{viewport}-1-collapsed")

    opener.click()
    assert widget.locator("form.bisn-form").is_visible()
    assert_big_enough(widget)
    assert_accessible(page, f"widget open ({viewport})")
    shot(page, f"widget-{viewport}-2-open")

    widget.locator("input[name=contact]").fill("12")
    widget.get_by_role("button", name="Notify me", exact=True).click()
    contact = widget.locator("input[name=contact]")
    widget.locator(".bisn-error", has_text="Add your country code").wait_for()
    assert contact.get_attribute("aria-invalid") == "true"
    described = " ".join(
        page.locator(f"#{i}").inner_text() for i in (contact.get_attribute("aria-describedby") or "").split()
    )
    assert "Add your country code, for example +44 7400 123456" in described
    assert page.evaluate("document.activeElement.name") == "contact"
    assert_accessible(page, f"widget with an error ({viewport})")
    shot(page, f"widget-{viewport}-3-error")

    contact.fill("07400 123456")
    widget.get_by_role("button", name="Notify me", exact=True).click()
    status = widget.locator(".bisn-status", has_text="You're on the list")
    status.wait_for()
    assert contact.get_attribute("aria-invalid") is None
    assert page.evaluate("document.activeElement.classList.contains('bisn-status')")
    assert_accessible(page, f"widget after success ({viewport})")
    shot(page, f"widget-{viewport}-4-success")
    assert page.errors == []


def test_styles_are_scoped_and_themable_and_the_accent_is_the_shops(page: Any, shop: Shop) -> None:
    widget = visit(page, shop, bare_page().replace("</head>", "<style>body{font-family:Georgia,serif}</style></head>"))
    opener = widget.locator(".bisn-open")
    style = "(n) => { const s = getComputedStyle(n); return [s.backgroundColor, s.fontFamily, s.fontSize]; }"
    # The shop's accent (SHOP_ACCENT, local stage #7a4b2a), the page's font, not the theme's 30px buttons.
    assert opener.evaluate(style) == ["rgb(122, 75, 42)", "Georgia, serif", "16px"]
    # Nothing of the widget reaches the theme's own button.
    assert page.locator("#theme-button").evaluate(style)[0] == "rgb(255, 255, 0)"
    assert page.locator("style[data-bisn-style]").count() == 1
    page.evaluate("document.querySelector('.bisn').style.setProperty('--bisn-accent', '#0a5c36')")
    assert opener.evaluate(style)[0] == "rgb(10, 92, 54)"
    page.evaluate("document.documentElement.style.setProperty('--bisn-radius', '0px')")
    assert opener.evaluate("(n) => getComputedStyle(n).borderRadius") == "0px"
    assert page.errors == []


@pytest.mark.parametrize(
    ("html", "styled"),
    [
        (bare_page(script=" data-bisn-unstyled"), False),
        (bare_page(widget='<div data-bisn-sku="WW-BOARD-WALNUT" data-bisn-unstyled></div>'), True),
    ],
)
def test_the_unstyled_switch_leaves_the_classes_to_the_shop(page: Any, shop: Shop, html: str, styled: bool) -> None:
    widget = visit(page, shop, html)
    # On the script: no stylesheet at all. On one element: that element takes none of it.
    assert page.locator("style[data-bisn-style]").count() == (1 if styled else 0)
    opener = widget.locator("button.bisn-open")
    assert opener.evaluate("(n) => getComputedStyle(n).backgroundColor") == "rgb(255, 255, 0)"  # the theme's
    opener.click()
    assert widget.locator("form.bisn-form input[name=contact]").is_visible()


def test_a_keyboard_alone_opens_chooses_types_submits_and_lands_on_the_result(page: Any, shop: Shop) -> None:
    widget = visit(page, shop, bare_page())
    page.locator("#theme-button").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "bisn-open"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"  # a visible focus ring
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.value") == "sms"
    page.keyboard.press("ArrowRight")  # radio groups move by arrow keys: email
    assert page.evaluate("document.activeElement.value") == "email"
    assert widget.locator("label", has_text="Email address").is_visible()
    page.keyboard.press("Tab")
    page.keyboard.type("ada@gmial.com")
    page.keyboard.press("Tab")  # the fix is offered as the address is typed, the next stop after the field
    fix = widget.get_by_role("button", name="Did you mean ada@gmail.com?")
    fix.wait_for()
    assert page.evaluate("document.activeElement.textContent") == "Did you mean ada@gmail.com?"
    page.keyboard.press("Space")
    assert widget.locator("input[name=contact]").input_value() == "ada@gmail.com"
    # The fix puts focus back in the field; on to the name, then the button.
    page.keyboard.press("Tab")
    page.keyboard.type("Ada")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.type") == "submit"
    page.keyboard.press("Enter")
    widget.locator(".bisn-status", has_text="You're on the list — we'll email you when it's back.").wait_for()
    assert page.evaluate("document.activeElement.getAttribute('role')") == "status"
    assert shop.posted[-1] == {
        "sku": "WW-BOARD-WALNUT",
        "channel": "email",
        "contact": "ada@gmail.com",
        "name": "Ada",
        "lang": "en",
    }
    assert page.errors == []


def test_the_pages_language_decides_the_words_and_is_sent(page: Any, shop: Shop) -> None:
    widget = visit(page, shop, bare_page(lang="de-CH"))
    widget.get_by_role("button", name="Benachrichtigen, wenn verfügbar").click()
    assert widget.locator("legend").first.inner_text() == "Sagen Sie mir Bescheid, wenn es wieder da ist"
    widget.locator("input[name=contact]").fill("12")
    widget.get_by_role("button", name="Benachrichtigen", exact=True).click()
    widget.locator(".bisn-error", has_text="Bitte mit Ländervorwahl, zum Beispiel +44 7400 123456").wait_for()
    assert shop.posted[-1]["lang"] == "de"
    shot(page, "widget-desktop-german-error")


def test_an_unserved_page_language_falls_back_to_the_browsers_then_english(browser: Any, shop: Shop) -> None:
    context = browser.new_context(locale="nl-NL")
    context.route(f"{SHOP}/**", shop)
    page = context.new_page()
    try:
        widget = visit(page, shop, bare_page(lang="pt-BR"))
        assert widget.locator(".bisn-open").inner_text() == "Laat het me weten als het er weer is"
    finally:
        context.close()


def test_after_an_sms_tap_a_code_turns_texts_back_on(page: Any, shop: Shop) -> None:
    widget = visit(page, shop, bare_page())
    widget.locator(".bisn-open").click()
    widget.locator("input[name=contact]").fill("07400 123456")
    widget.get_by_role("button", name="Notify me", exact=True).click()
    widget.get_by_text("If you had stopped our texts before, we have just texted you a 6-digit code").wait_for()
    code = widget.get_by_label("6-digit code")
    assert code.get_attribute("inputmode") == "numeric"
    assert code.get_attribute("autocomplete") == "one-time-code"
    send = widget.get_by_role("button", name="Turn texts back on")

    # The answers of POST /notify-me/code, by the contract: wrong code, too many tries, then the right one.
    shop.code_answers = [
        (400, {"error": "wrong_code", "message": "That code is not right."}),
        (429, {"error": "rate_limited", "message": "Too many tries."}),
        (200, {"status": "resubscribed"}),
    ]
    code.fill("12")
    send.click()
    widget.locator(".bisn-error", has_text="Enter the 6 digits from our text.").wait_for()
    assert shop.codes == []
    code.fill("123 455")
    send.click()
    widget.locator(".bisn-error", has_text="That code is not right.").wait_for()
    assert code.get_attribute("aria-invalid") == "true"
    assert_accessible(page, "widget opt-in code with an error")
    shot(page, "widget-desktop-5-code-error")
    code.fill("123456")
    send.click()
    widget.locator(".bisn-error", has_text="Too many tries.").wait_for()
    send.click()
    widget.locator(".bisn-status", has_text="You will get texts again, and you are on the list").wait_for()
    assert shop.codes[0] == {
        "sku": "WW-BOARD-WALNUT",
        "channel": "sms",
        "contact": "07400 123456",
        "code": "123455",
        "lang": "en",
    }
    assert widget.get_attribute("data-bisn-result") == "resubscribed"
    assert not code.is_visible()
    assert_accessible(page, "widget after opting back in")
    assert page.errors == []


def test_an_email_tap_offers_no_code(page: Any, shop: Shop) -> None:
    widget = visit(page, shop, bare_page())
    widget.locator(".bisn-open").click()
    widget.get_by_label("Email", exact=True).check()
    widget.locator("input[name=contact]").fill("ada@example.com")
    widget.get_by_role("button", name="Notify me", exact=True).click()
    widget.locator(".bisn-status", has_text="email you").wait_for()
    assert widget.locator("input[name=code]").count() == 0


@pytest.fixture(scope="module")
def storefront(browser: Any, stack: RunningStack) -> Iterator[Any]:
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def test_each_state_on_the_demo_storefront_is_accessible(storefront: Any, stack: RunningStack) -> None:
    page = storefront
    page.goto(stack.console + "/")
    page.wait_for_selector("[data-bisn-ready]", state="attached")
    widget = page.locator("[data-bisn-ready]").first
    assert_accessible(page, "storefront, widgets collapsed")
    widget.locator(".bisn-open").click()
    assert_accessible(page, "storefront, a widget open")
    widget.locator("input[name=contact]").fill("12")
    widget.get_by_role("button", name="Notify me", exact=True).click()
    widget.locator(".bisn-error", has_text="Add your country code").wait_for()
    assert_accessible(page, "storefront, a widget with an error")
    widget.locator("input[name=contact]").fill("07400 123499")
    widget.get_by_role("button", name="Notify me", exact=True).click()
    widget.locator(".bisn-status", has_text="on the list").wait_for()
    assert_accessible(page, "storefront, a widget after success")
    shot(page, "widget-storefront-success")
    page.set_viewport_size(PHONE)
    shot(page, "widget-storefront-phone")


class NoCorsApi(BaseHTTPRequestHandler):
    """An API that answers every request without CORS headers, as ours does an origin missing from CORS_ORIGINS."""

    def _answer(self) -> None:
        body = b'{"status":"received"}'
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_OPTIONS = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def no_cors_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NoCorsApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_api_that_refuses_the_pages_origin_is_named_in_the_console_not_to_the_shopper(
    page: Any, shop: Shop, no_cors_api: str
) -> None:
    # A real server, not a routed answer: the browser applies CORS to what comes off the network.
    api = no_cors_api
    lines: list[str] = []
    page.on("console", lambda message: lines.append(f"{message.type}: {message.text}"))
    shop.pages["/p"] = bare_page(script=f' data-bisn-api="{api}"')
    page.goto(SHOP + "/p")
    page.wait_for_selector(".bisn[data-bisn-ready]", state="attached")
    widget = page.locator(".bisn")
    widget.get_by_role("button", name="Notify me when available").click()
    widget.locator("input[name=contact]").fill("07400 123456")
    widget.get_by_role("button", name="Notify me", exact=True).click()
    widget.locator(".bisn-status", has_text="Sorry, we could not reach the shop").wait_for()
    mine = [line for line in lines if "bisn widget" in line]
    assert mine == [
        f"error: bisn widget - no answer from {api}/notify-me to a page on {SHOP}. If the API is up then its "
        f"CORS_ORIGINS lacks {SHOP}."
    ]
    # The shopper reads the widget's usual words, never the developer's.
    assert "CORS" not in widget.inner_text()
