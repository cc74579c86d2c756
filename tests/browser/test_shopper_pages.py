"""Every kind of page a shopper's links open, in a real browser on the real local stack, at a desktop and a phone
size: each screenshotted (artifacts/screenshots/page-*.png) and audited with axe-core, with its language, the
shop's logo and the way back to the shop checked.

The stack is driven as shoppers and the shop drive it: taps on /notify-me, a restock through the console, links
read from the console's outbox, the console's clock moved on. A reserve link's page holds nothing until its
button is pressed (a link scanner that runs scripts must not start the shopper's hold).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.browser.axe import assert_accessible, audit
from tests.browser.running import RunningStack, get_json, shot

pytestmark = pytest.mark.browser

MUG = "WW-MUG-SPECKLE"
ANNA = "+447400123461"  # a German shopper, by SMS
EMMA = "emma@example.com"  # an English shopper, by email
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


def post_json(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"{}")


def links_to(stack: RunningStack, contact: str, kind: str, *, wait_s: float = 30) -> dict[str, str]:
    """The links of the newest message of `kind` ('confirmation' or a notice) to `contact`, once it is sent."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for message in reversed(get_json(f"{stack.console}/api/outbox")["messages"]):
            links = message.get("links") or {}
            if message.get("to") == contact and kind in links:
                return dict(links)
        post_json(f"{stack.console}/api/run/notifier", {})
        time.sleep(0.5)
    raise AssertionError(f"no message with a {kind} link to {contact}")


@pytest.fixture
def tabs(browser: Any) -> Iterator[dict[str, Any]]:
    """A German-speaking tab in Berlin's time zone at each size (Accept-Language follows the locale)."""
    contexts = {
        size: browser.new_context(viewport=viewport, locale="de-DE", timezone_id="Europe/Berlin")
        for size, viewport in SIZES.items()
    }
    tabs = {size: context.new_page() for size, context in contexts.items()}
    for tab in tabs.values():
        tab.set_default_timeout(20_000)
    yield tabs
    for context in contexts.values():
        context.close()


def frozen(tab: Any, url: str) -> None:
    """Open a reserve link's page and let its scripts run: nothing may post its form until its button is pressed."""
    posted: list[str] = []

    def no_post(route: Any) -> None:
        if route.request.method == "POST":
            posted.append(route.request.url)
            route.abort("aborted")
        else:
            route.continue_()

    tab.route(url, no_post)
    tab.goto(url, wait_until="commit")  # not "load": a page that sent its form would never finish loading
    ready = "() => document.readyState === 'complete' && [...document.images].every(i => i.complete)"
    for _ in range(100):  # polled from here: the page's policy forbids the eval a wait_for_function would need
        if tab.evaluate(ready):
            break
        tab.wait_for_timeout(100)
    tab.wait_for_timeout(500)  # time for any script that would send the form
    tab.unroute(url)
    assert posted == [], "something but the button sent the page's form"


def look(
    tabs: dict[str, Any],
    stack: RunningStack,
    name: str,
    *,
    lang: str,
    says: str,
    open_: Any = None,
    picture: str | None = None,
    spotless: bool = False,
) -> None:
    """Open a page at every size: screenshot, axe audit, and what every page must have (and, for a page about one
    product, its `picture` loaded). A `spotless` page may have no axe violation at all, of any impact."""
    for size, tab in tabs.items():
        if open_ is not None:
            open_(tab)
        assert tab.locator("html").get_attribute("lang") == lang, (name, size, tab.url)
        assert says in tab.inner_text("main"), tab.inner_text("main")
        assert tab.locator("h1").count() == 1
        back = tab.locator("footer a")
        assert back.get_attribute("href") == f"{stack.console}/"
        logo = tab.locator("header img")
        assert logo.get_attribute("alt") == "Walnut & Wool (demo shop)"
        loaded = "img => img.complete && img.naturalWidth > 0"
        assert tab.evaluate(loaded, logo.element_handle()), logo.get_attribute("src")
        if picture is not None:
            image = tab.locator("main .product img")
            assert image.get_attribute("src") == f"{stack.console}/static/products/{picture}.svg"
            assert tab.evaluate(loaded, image.element_handle()), (name, size, "the product's picture did not load")
        shot(tab, f"page-{name}-{size}")
        if spotless:
            found = audit(tab, f"{name} page ({size})")
            assert found == [], [(v["id"], v["impact"]) for v in found]
        else:
            assert_accessible(tab, f"{name} page ({size})")


def test_opening_a_reserve_link_in_a_browser_holds_nothing_until_its_button_is_pressed(
    tabs: dict[str, Any], stack: RunningStack
) -> None:
    # A link scanner that runs scripts opens the link as this headless Chromium does: the hold must wait for a
    # person's press, or its minutes would run out before the shopper saw the message.
    board, ben = "WW-BOARD-WALNUT", "+447400123462"
    post_json(f"{stack.api}/notify-me", {"sku": board, "channel": "sms", "contact": ben, "lang": "en"})
    post_json(f"{stack.console}/api/restock", {"sku": board, "available": 1})
    reserve = links_to(stack, ben, "reserve")["reserve"]

    def statuses() -> list[str]:
        return [e["status"] for e in get_json(f"{stack.console}/api/queue/{board}")["entries"]]

    tab = tabs["phone"]
    frozen(tab, reserve)
    assert statuses() == ["offered"]
    tab.reload(wait_until="load")
    assert statuses() == ["offered"]
    tab.locator("form#go button").click()
    tab.wait_for_url("**/checkout?**")
    assert statuses() == ["holding"]


def test_every_page_a_shoppers_link_opens(tabs: dict[str, Any], stack: RunningStack) -> None:
    api = stack.api
    # Anna taps Notify me in German; mugs come back.
    post_json(f"{api}/notify-me", {"sku": MUG, "channel": "sms", "contact": ANNA, "lang": "de"})
    post_json(f"{stack.console}/api/restock", {"sku": MUG, "available": 3})
    anna = links_to(stack, ANNA, "reserve")
    reserve, me = anna["reserve"], anna["manage"]

    # The offer's page, in her language; its time in her own zone (the script replaced the UTC fallback).
    look(tabs, stack, "offer", lang="de", says="ist wieder vorrätig", open_=lambda t: frozen(t, reserve), picture=MUG)
    local = tabs["phone"].locator("main time").inner_text()
    assert "UTC" not in local and ("MEZ" in local or "CET" in local or "GMT+1" in local), local

    # Opening it held nothing; she presses its button: one is held and she goes on to checkout.
    assert get_json(f"{stack.console}/api/queue/{MUG}")["entries"][0]["status"] == "offered"
    tabs["desktop"].goto(reserve)
    tabs["desktop"].locator("form#go button").click()
    tabs["desktop"].wait_for_url("**/checkout?**")
    look(
        tabs,
        stack,
        "holding",
        lang="de",
        says="ist für Sie reserviert",
        open_=lambda t: frozen(t, reserve),
        picture=MUG,
    )

    # Her own page: the held mug has a button on to checkout.
    look(tabs, stack, "me", lang="de", says="Ihre Anfragen", open_=lambda t: t.goto(me))
    assert tabs["phone"].get_by_role("link", name="Zur Kasse").count() == 1
    # The same page in dark mode: its colours are worked out again for a dark background.
    dark = tabs["phone"]
    dark.emulate_media(color_scheme="dark")
    shot(dark, "page-me-phone-dark")
    assert_accessible(dark, "me page (phone, dark)")
    dark.emulate_media(color_scheme="light")

    # A tap sent from another website is refused (the browser is handed the API's answer to one).
    def cross_site(tab: Any) -> None:
        # Another website's page whose form posts to Anna's link (a made-up site, served to the browser here).
        elsewhere = "http://elsewhere.test/"
        form = f'<form method="post" action="{reserve}"><button>Win a mug</button></form>'
        tab.route(elsewhere, lambda route: route.fulfill(content_type="text/html", body=form))
        tab.goto(elsewhere)
        with tab.expect_response(reserve) as refused:
            tab.get_by_role("button", name="Win a mug").click()
        assert refused.value.status == 403
        tab.wait_for_load_state()
        tab.unroute(elsewhere)

    look(tabs, stack, "cross-site", lang="de", says="von einer anderen Website", open_=cross_site)

    # Bad links: cut short, and one that names nothing.
    look(tabs, stack, "incomplete", lang="de", says="unvollständig", open_=lambda t: t.goto(f"{api}/reserve/abc.def"))
    unknown = f"{api}/r/AAAAAAAAAAAAAAAAAAAAAA"
    look(tabs, stack, "unknown", lang="de", says="Reservierung nicht", open_=lambda t: t.goto(unknown))

    # Time passes: the hold ends, and the link says so (she keeps her place).
    post_json(f"{stack.console}/api/clock/advance", {"minutes": 180})
    post_json(f"{stack.console}/api/run/sweep", {})
    look(tabs, stack, "expired", lang="de", says="abgelaufen", open_=lambda t: t.goto(reserve))

    # Emma asks by email in English: her confirmation link's page, and the page after its button.
    post_json(f"{api}/notify-me", {"sku": MUG, "channel": "email", "contact": EMMA, "lang": "en"})
    emma = links_to(stack, EMMA, "confirm")
    confirm = emma["confirm"]
    look(tabs, stack, "confirm", lang="en", says="Press the button", open_=lambda t: t.goto(confirm))
    tabs["desktop"].get_by_role("button", name="Yes, email me when it is back").click()
    tabs["desktop"].get_by_role("heading", name="You are on the list").wait_for()
    look(tabs, stack, "confirmed", lang="en", says="Thank you", open_=lambda t: t.goto(confirm))

    # Unsubscribing from her email: the question, then the answer. With no place to take a language from, the
    # page speaks the browser's (German here).
    unsubscribe = emma["unsubscribe"]
    look(tabs, stack, "unsubscribe", lang="de", says="alle Wartelisten", open_=lambda t: t.goto(unsubscribe))

    def press(tab: Any) -> None:
        tab.goto(unsubscribe)
        tab.get_by_role("button", name="Abmelden").click()
        tab.get_by_role("heading", name="Sie sind abgemeldet").wait_for()

    look(tabs, stack, "unsubscribed", lang="de", says="abgemeldet", open_=press)


# A product and a shopper of this test alone: the module's stack is shared, and the tests above use the board.
CARDIGAN = "WW-CARDI-RUST"
BEA = "+447400123463"  # a German shopper who buys


def test_a_bought_link_and_an_address_that_leads_nowhere(tabs: dict[str, Any], stack: RunningStack) -> None:
    api = stack.api
    post_json(f"{api}/notify-me", {"sku": CARDIGAN, "channel": "sms", "contact": BEA, "lang": "de"})
    post_json(f"{stack.console}/api/restock", {"sku": CARDIGAN, "available": 1})
    bea = links_to(stack, BEA, "reserve")
    reserve = bea["reserve"]

    # The SMS's "Stop texts" link opens her page on the form that stops everything.
    look(tabs, stack, "stop-texts", lang="de", says="Alles beenden", open_=lambda t: t.goto(bea["manage"] + "?stop"))
    first = tabs["phone"].locator("main form button").first
    assert first.inner_text() == "Abmelden und alle Listen verlassen"

    buyer = tabs["desktop"]
    buyer.goto(reserve)
    buyer.locator("form#go button").click()
    buyer.wait_for_url("**/checkout?**")
    reservation = parse_qs(urlsplit(buyer.url).query)["reservation"][0]
    post_json(f"{stack.console}/api/orders", {"reservation_id": reservation})

    # Her link opened again after the purchase: she bought it, nothing expired.
    look(tabs, stack, "bought", lang="de", says="Vielen Dank für Ihre Bestellung", open_=lambda t: t.goto(reserve))
    assert tabs["phone"].locator("h1").inner_text() == "Sie haben es gekauft"

    # An address no route serves: the shop's own 404 page, not the gateway's "Missing Authentication Token".
    def nowhere(tab: Any) -> None:
        answer = tab.goto(f"{api}/reserve-my-mug/please")
        assert answer is not None and answer.status == 404

    look(tabs, stack, "not-found", lang="de", says="Unter dieser Adresse gibt es nichts", open_=nowhere)


# The undo of an unsubscribe: a shopper and products of this test alone.
THROW, BEANIE = "WW-THROW-OAT", "WW-BEANIE-MOSS"
FINN = "finn@example.com"  # a German shopper, by email
CLEO = "+447400123464"  # joins the throw's line while Finn is unsubscribed


def waiting(stack: RunningStack, sku: str) -> list[str]:
    """The channels of the people waiting in `sku`'s line, in line order."""
    entries = get_json(f"{stack.console}/api/queue/{sku}")["entries"]
    return [e["channel"] for e in sorted(entries, key=lambda e: e["position"] or 0) if e["position"] is not None]


def test_unsubscribing_by_mistake_and_pressing_undo(tabs: dict[str, Any], stack: RunningStack) -> None:
    api = stack.api
    for sku in (THROW, BEANIE):
        post_json(f"{api}/notify-me", {"sku": sku, "channel": "email", "contact": FINN, "lang": "de"})
    finn = links_to(stack, FINN, "confirm")
    confirm = tabs["desktop"]
    confirm.goto(finn["confirm"])
    confirm.get_by_role("button", name="Ja, per E-Mail benachrichtigen").click()
    confirm.get_by_role("heading", name="Sie stehen auf der Liste").wait_for()
    unsubscribe, me = finn["unsubscribe"], finn["manage"]
    assert waiting(stack, THROW) == ["email"] and waiting(stack, BEANIE) == ["email"]

    def press(tab: Any, button: str, heading: str, status: int) -> None:
        with tab.expect_response(lambda r: r.request.method == "POST") as answer:
            tab.get_by_role("button", name=button, exact=True).click()
        assert answer.value.status == status, answer.value.status
        tab.get_by_role("heading", name=heading).wait_for()

    # At each size in turn Finn unsubscribes from the email's link, then presses Undo on the done page.
    for size, tab in tabs.items():
        one = {size: tab}
        look(one, stack, "undo-ask", lang="de", says="alle Wartelisten", open_=lambda t: t.goto(unsubscribe))
        look(
            one,
            stack,
            "undo-offer",
            lang="de",
            says="Aus Versehen abgemeldet?",
            open_=lambda t: press(t, "Abmelden", "Sie sind abgemeldet", 200),
            spotless=True,
        )
        offer = tab.inner_text("main")
        assert "Wir schicken Ihnen keine Nachrichten mehr" in offer, offer
        assert "Oatmeal merino throw" in offer and "Moss-stitch beanie, forest green" in offer, offer
        assert "„Rückgängig“ setzt Sie wieder ans Ende jeder Warteschlange" in offer, offer
        assert tab.locator("#undo h2").inner_text() == "Aus Versehen abgemeldet?"
        undo_url = tab.locator("#undo form").evaluate("form => form.action")
        assert "/unsubscribe/undo/" in undo_url, undo_url
        assert "email" not in waiting(stack, THROW) and waiting(stack, BEANIE) == []
        # Someone joins the throw's line meanwhile: Finn's old place is not hers to take back, the end is.
        if size == "desktop":
            post_json(f"{api}/notify-me", {"sku": THROW, "channel": "sms", "contact": CLEO, "lang": "en"})
        assert waiting(stack, THROW) == ["sms"]

        look(
            one,
            stack,
            "undone",
            lang="de",
            says="Ihre Abmeldung ist rückgängig gemacht",
            open_=lambda t: press(t, "Rückgängig", "Ihre Abmeldung ist rückgängig gemacht", 200),
            spotless=True,
        )
        done = tab.inner_text("main")
        assert "Wir dürfen Ihnen wieder Nachrichten schicken" in done, done
        assert "Sie stehen wieder am Ende der Warteschlange für:" in done, done
        assert "Oatmeal merino throw" in done and "Moss-stitch beanie, forest green" in done, done
        # Back on both lists, at the end of the throw's.
        assert waiting(stack, THROW) == ["sms", "email"] and waiting(stack, BEANIE) == ["email"]

        # The undo link opened again and pressed a second time: nothing more changes, and the page says so.
        def again(t: Any, url: str = undo_url) -> None:
            t.goto(url)
            t.get_by_role("heading", name="Aus Versehen abgemeldet?").wait_for()
            press(t, "Rückgängig", "Schon rückgängig gemacht", 200)

        look(one, stack, "undo-already", lang="de", says="schon zurückgenommen", open_=again, spotless=True)
        assert waiting(stack, THROW) == ["sms", "email"] and waiting(stack, BEANIE) == ["email"]

    # Her own page shows both places again.
    look(tabs, stack, "undone-me", lang="de", says="Ihre Anfragen", open_=lambda t: t.goto(me))
    mine = tabs["phone"].inner_text("main")
    assert "Oatmeal merino throw" in mine and "Moss-stitch beanie, forest green" in mine, mine

    # An undo link cut short: the honest page, not an error.
    def broken(t: Any) -> None:
        answer = t.goto(f"{api}/unsubscribe/undo/abc.def")
        assert answer is not None and answer.status == 400

    look(tabs, stack, "undo-broken", lang="de", says="unvollständig", open_=broken, spotless=True)
