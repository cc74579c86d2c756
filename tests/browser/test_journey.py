"""The whole story in a real browser: the local stack started as `python -m devstack` on free ports, and
headless Chromium (Debian's package) driven by Playwright, tapping and clicking as a person would.

Screenshots of every step go to artifacts/screenshots/. The browser and the stack come from
tests/browser/conftest.py, which skips these tests and says why when Chromium or Playwright is missing.
"""

from __future__ import annotations

import socket
import urllib.request
from typing import Any

import pytest

from tests.browser.running import RunningStack, confirm_from_inbox, get_json, scan_then_tap, shot, tap_notify_me

pytestmark = pytest.mark.browser

THROW = "WW-THROW-OAT"
BOARD = "WW-BOARD-WALNUT"


def test_a_tap_from_the_widget_appears_in_the_queue(page: Any, stack: RunningStack) -> None:
    said = tap_notify_me(page, stack, "alan", BOARD)
    assert "we'll text you" in said
    shot(page, "00-storefront-tap")

    entries = get_json(f"{stack.console}/api/queue/{BOARD}")["entries"]
    assert [(e["position"], e["contact"], e["state"]) for e in entries] == [(1, "+4479•••••456", "waiting")]
    # The card links to the product's waiting list on the app's dashboard, which the console does not repeat.
    page.reload()
    link = page.locator(f'a[href="{stack.api}/admin#waiting/{BOARD}"]')
    assert "1 waiting" in link.inner_text()
    assert page.locator("#dashboard-link").get_attribute("href") == f"{stack.api}/admin"
    # The API process (chalice local) serves the dashboard and its script, with the dashboard's policy.
    with urllib.request.urlopen(f"{stack.api}/admin", timeout=5) as dashboard:
        assert dashboard.headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert b'src="admin/static/admin.js"' in dashboard.read()
    with urllib.request.urlopen(f"{stack.api}/admin/static/admin.js", timeout=5) as script:
        assert script.headers["Content-Type"].startswith("text/javascript")
    assert page.errors == []


def test_journey_from_notify_me_to_a_converted_order(page: Any, stack: RunningStack) -> None:
    # 1. Two shoppers ask to be told: Ada by SMS, then Grace by email.
    assert "we'll" in tap_notify_me(page, stack, "ada", THROW)
    assert "still needs confirming, we have emailed you a link" in tap_notify_me(page, stack, "grace", THROW)
    shot(page, "01-storefront-two-shoppers-waiting")

    # Grace confirms her address from the confirmation email in her inbox (the outbox), as email shoppers must
    # before they are told about a restock.
    confirm_from_inbox(page, stack, "grace@example.com")
    shot(page, "01b-grace-confirmed")

    # 2. Two units come back: the platform's signed inventory webhook, from the controls.
    page.goto(stack.console + "/controls")
    page.select_option("#restock-sku", THROW)
    page.fill("#restock-available", "2")
    page.get_by_role("button", name="Send restock").click()
    page.locator("#restock-result", has_text="API answered").wait_for()
    assert "API answered 202" in page.inner_text("#restock-result")
    shot(page, "02-controls-restock-sent")

    # 3. The pump hands the job to the notifier: both notices appear in the outbox.
    page.goto(f"{stack.console}/outbox?sku={THROW}")
    sms = page.locator('li[data-channel="sms"]', has_text="+447400123456")
    email = page.locator('li[data-channel="email"]:not([data-kind="confirmation"])', has_text="grace@example.com")
    sms.wait_for()
    email.wait_for()
    assert email.locator("iframe.email-frame").count() == 1
    assert email.locator('a[data-link="unsubscribe"]').count() == 1
    shot(page, "03-outbox-notices")

    # 4. A mail scanner opens Ada's reserve link first: nothing is held. Then Ada taps it: the link's page sends
    # its form at once, a unit is held and the API redirects to the shop's checkout.
    def nothing_held() -> None:
        entries = get_json(f"{stack.console}/api/queue/{THROW}")["entries"]
        assert [e["status"] for e in entries] == ["offered", "offered"], entries

    scan_then_tap(page, sms.locator('a[data-link="reserve"]').first, nothing_held)
    assert "One unit is held for you" in page.inner_text("#hold-state")
    shot(page, "04-checkout-unit-held")

    # 5. She places the order: the checkout sends the shop's signed orders webhook.
    page.get_by_role("button", name="Place order").click()
    page.wait_for_selector('#hold-state[data-state="converted"]')
    assert "answered 200" in page.inner_text("#checkout-result")
    shot(page, "05-checkout-order-placed")

    # 6. The queue shows her converted, Grace still offered, and counters that add up.
    queue = get_json(f"{stack.console}/api/queue/{THROW}")
    assert [e["state"] for e in queue["entries"]] == ["converted", "offered"]
    restock = queue["restock"]
    assert (restock["units_total"], restock["units_available"], restock["units_offerable"]) == (2, 1, 0)
    assert (restock["offers"]["offered"], restock["offers"]["converted"]) == (1, 1)
    assert all(restock["checks"].values()), restock["checks"]

    # 7. The audit tells the same story.
    kinds = [e["kind"] for e in get_json(f"{stack.console}/api/audit/{THROW}")["events"]]
    for kind in ("restock_detected", "notice_sent", "hold", "conversion"):
        assert kind in kinds
    assert page.errors == []


def test_ctrl_c_stops_the_whole_stack_cleanly(stack: RunningStack) -> None:
    assert stack.interrupt() == 0
    for port in stack.ports:
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"something still listens on {port}"
