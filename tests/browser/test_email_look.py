"""A restock email as the shopper sees it, on the real local stack: a tap from the storefront's widget, the address
confirmed, a restock from the console, and the notice opened in the console's outbox. Its HTML is then shown on its
own, as a mail client shows it, at a desktop and a phone size and in dark mode, each screenshotted
(artifacts/screenshots/email-*.png), with the shop's logo and the product's picture loaded and its page linked.

The demo catalogue's board costs 45.00 GBP (devstack/demo-catalog.json): the email shows it as the shopper's
language writes it.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest

from tests.browser.running import RunningStack, confirm_from_inbox, get_json, shot, tap_notify_me

pytestmark = pytest.mark.browser

BOARD = "WW-BOARD-WALNUT"
GRACE = "grace@example.com"  # an email shopper of the storefront's "Shop as" list
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
LOADED = "img => img.complete && img.naturalWidth > 0"


def restock(stack: RunningStack, sku: str, available: int) -> None:
    body = json.dumps({"sku": sku, "available": available}).encode()
    request = urllib.request.Request(
        f"{stack.console}/api/restock", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert json.loads(answer.read())["api"]["status"] == 202


def notice_to(stack: RunningStack, address: str, sku: str, *, wait_s: float = 30) -> dict[str, Any]:
    """The restock notice emailed to `address` about `sku`, once the pump has sent it."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for message in get_json(f"{stack.console}/api/outbox")["messages"]:
            if message.get("to") == address and message.get("sku") == sku and "reserve" in (message.get("links") or {}):
                return dict(message)
        time.sleep(0.5)
    raise AssertionError(f"no restock email to {address} about {sku}")


def check_the_product(view: Any, stack: RunningStack, where: str) -> None:
    """The logo and the product's picture loaded, its name links to its page, and its price is shown."""
    logo = view.locator(f'img[src="{stack.console}/static/logo.svg"]')
    picture = view.locator(f'img[src="{stack.console}/static/products/{BOARD}.svg"]')
    assert logo.count() == 1 and picture.count() == 1, where
    for image in (logo, picture):
        image.scroll_into_view_if_needed()
        assert image.evaluate(LOADED), (where, image.get_attribute("src"))
    assert picture.get_attribute("alt") == "Walnut serving board, large"
    page_links = view.locator(f'a[href="{stack.console}/#{BOARD}"]')
    assert page_links.get_by_text("Walnut serving board, large").count() == 1, where
    assert page_links.get_by_text("View the product").count() == 1, where
    assert "£45.00" in view.locator("body").inner_text(), where


def test_a_restock_email_shows_the_shop_and_the_product(browser: Any, page: Any, stack: RunningStack) -> None:
    assert "still needs confirming, we have emailed you a link" in tap_notify_me(page, stack, "grace", BOARD)
    confirm_from_inbox(page, stack, GRACE)
    restock(stack, BOARD, 1)
    message = notice_to(stack, GRACE, BOARD)

    # In the console's outbox: the email in its (sandboxed) frame, pictures and links as sent.
    page.goto(f"{stack.console}/outbox?sku={BOARD}")
    item = page.locator('li[data-channel="email"]:not([data-kind="confirmation"])', has_text=GRACE)
    item.wait_for()
    frame = item.locator("iframe.email-frame").element_handle().content_frame()
    frame.wait_for_load_state()
    check_the_product(frame, stack, "outbox")
    shot(page, "email-outbox")

    # On its own, as a mail client shows it: each size, and the phone in dark mode.
    for size, viewport in SIZES.items():
        context = browser.new_context(viewport=viewport)
        try:
            view = context.new_page()
            view.set_content(message["html"], wait_until="load")
            check_the_product(view, stack, size)
            assert view.evaluate("document.documentElement.scrollWidth") <= viewport["width"], size
            shot(view, f"email-{size}")
            if size == "phone":
                view.emulate_media(color_scheme="dark")
                shot(view, "email-phone-dark")
        finally:
            context.close()
    assert page.errors == []


def test_the_re_subscribe_email_wears_the_shops_look(browser: Any) -> None:
    import base64
    from pathlib import Path

    from chalicelib.messages.compose import Brand
    from chalicelib.shopper.resubscribe import proof_email
    from tests.browser.axe import assert_accessible

    logo = Path(__file__).resolve().parents[2] / "devstack" / "console" / "static" / "logo.svg"
    brand = Brand(
        shop_url="https://walnut-and-wool.example/",
        logo_url="data:image/svg+xml;base64," + base64.b64encode(logo.read_bytes()).decode(),
        accent="#7a4b2a",
    )
    notice = proof_email(
        shop="Walnut & Wool (demo shop)",
        product="Walnut serving board, large",
        to=GRACE,
        name="Grace",
        lang="en",
        link="https://api.walnut-and-wool.example/resubscribe/" + "a" * 32,
        unsubscribe_url="https://api.walnut-and-wool.example/unsubscribe/x",
        brand=brand,
    )
    assert notice.html is not None
    for size, viewport in SIZES.items():
        context = browser.new_context(viewport=viewport)
        try:
            view = context.new_page()
            view.set_content(notice.html, wait_until="load")
            assert view.evaluate(LOADED, view.locator("img.logo").element_handle()), "the shop's logo"
            button = view.get_by_role("link", name="Turn messages back on")
            assert view.evaluate("a => getComputedStyle(a.parentElement).backgroundColor", button.element_handle()) == (
                "rgb(122, 75, 42)"
            )
            assert view.evaluate("document.documentElement.scrollWidth") <= viewport["width"], size
            shot(view, f"email-resubscribe-{size}")
            # The card, not the page: a mail client shows the email inside its own page, which has the landmarks
            # and the heading that axe's page-level rules look for.
            assert_accessible(view, f"re-subscribe email ({size})", context="table.card")
        finally:
            context.close()
