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
from chalicelib.contacts import check_sms_number, normalise_contact
from chalicelib.errors import BadRequest
from chalicelib.shopper.widget import widget_source
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
        self.confirm_email = False

    def __call__(self, route: Any) -> None:
        request = route.request
        path = request.url[len(SHOP) :].split("?", 1)[0]
        if path == "/notify-me" and request.method == "POST":
            body = json.loads(request.post_data)
            self.posted.append(body)
            answer = self.answer(body)
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

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """chalicelib/contacts.py's own refusal of the contact, as the API answers it; else the uniform 202."""
        try:
            contact = normalise_contact(body["channel"], body["contact"], SETTINGS.default_phone_region)
            if contact.channel == "sms":
                check_sms_number(contact.address, SETTINGS.sms_allowed_countries)
        except BadRequest as refused:
            reason = {"reason": refused.reason} if refused.reason else {}
            return 400, {"error": refused.code, "message": refused.message, **reason}
        return 202, {"status": "received", "channel": body["channel"], "confirm_email": self.confirm_email}


@pytest.fixture
def shop() -> Shop:
    return Shop()


def tab(browser: Any, shop: Shop, viewport: dict[str, int], locale: str = "en-GB") -> Iterator[Any]:
    # A British browser by default: the local stage texts British numbers only (SMS_ALLOWED_COUNTRIES).
    context = browser.new_context(viewport=viewport, locale=locale)
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
    widget.locator(".bisn-error", has_text="That number is too short.").wait_for()
    assert contact.get_attribute("aria-invalid") == "true"
    described = " ".join(
        page.locator(f"#{i}").inner_text() for i in (contact.get_attribute("aria-describedby") or "").split()
    )
    # libphonenumber's example mobile for GB (PhoneNumberMetadata.xml).
    assert "That number is too short. For example: +44 7400 123456" in described
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
    widget.locator("input[name=contact]").fill("+44 7400 1234567")
    widget.get_by_role("button", name="Benachrichtigen", exact=True).click()
    widget.locator(".bisn-error", has_text="Diese Nummer ist zu lang. Zum Beispiel: +44 7400 123456").wait_for()
    assert shop.posted[-1]["lang"] == "de"
    shot(page, "widget-desktop-german-error")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_shopper_whose_country_we_do_not_text_is_offered_email_first(
    browser: Any, shop: Shop, viewport: dict[str, int]
) -> None:
    # A German browser on a German page; the local stage texts British numbers only.
    page = next(tab(browser, shop, viewport, locale="de-DE"))
    widget = visit(page, shop, bare_page(lang="de"))
    widget.get_by_role("button", name="Benachrichtigen, wenn verfügbar").click()
    assert widget.get_by_label("E-Mail", exact=True).is_checked()
    assert widget.locator("label", has_text="E-Mail-Adresse").is_visible()
    assert widget.locator("input[name=contact]").get_attribute("type") == "email"
    # Texts can still be chosen; a German mobile is refused for its country, a short number for its length, with the
    # example of a number we do text.
    widget.get_by_label("SMS", exact=True).check()
    widget.locator("input[name=contact]").fill("+49 1512 3456789")
    widget.get_by_role("button", name="Benachrichtigen", exact=True).click()
    widget.locator(".bisn-error", has_text="An Nummern in diesem Land können wir keine SMS senden.").wait_for()
    widget.locator("input[name=contact]").fill("07400 12")
    widget.get_by_role("button", name="Benachrichtigen", exact=True).click()
    widget.locator(".bisn-error", has_text="Diese Nummer ist zu kurz. Zum Beispiel: +44 7400 123456").wait_for()
    assert_accessible(page, "widget offering email first")
    shot(page, f"widget-{'phone' if viewport is PHONE else 'desktop'}-email-first")
    page.context.close()


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
    # Only a number that had stopped our texts was sent a code: the field waits behind the question.
    asked = widget.get_by_text("Got a code from us by text?")
    asked.wait_for()
    code = widget.get_by_label("6-digit code")
    assert not code.is_visible()
    assert_accessible(page, "widget after an SMS tap")
    asked.click()
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


def test_an_email_tap_offers_no_code_and_claims_an_email_only_where_one_was_owed(page: Any, shop: Shop) -> None:
    shop.confirm_email = True  # the shop asks for confirmation: every email tap's answer says so, listed or not
    widget = visit(page, shop, bare_page())
    widget.locator(".bisn-open").click()
    widget.get_by_label("Email", exact=True).check()
    widget.locator("input[name=contact]").fill("ada@example.com")
    widget.get_by_role("button", name="Notify me", exact=True).click()
    status = widget.locator(".bisn-status", has_text="email you")
    status.wait_for()
    assert status.inner_text() == (
        "You're on the list — we'll email you when it's back. "
        "If your address still needs confirming, we have emailed you a link."
    )
    assert widget.locator("input[name=code]").count() == 0


@pytest.fixture(scope="module")
def storefront(browser: Any, stack: RunningStack) -> Iterator[Any]:
    context = browser.new_context(viewport=DESKTOP, locale="en-GB")
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
    widget.locator(".bisn-error", has_text="That number is too short.").wait_for()
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
