"""The storefront on each store platform in a real browser: the local stack started as `python -m devstack` on free
ports, headless Chromium driving the console. On Shopify and then WooCommerce: switch the storefront's platform,
join a waiting list from the widget, restock through the console (the platform's own signed webhook), open the
reserve link from the outbox, and watch the fake store's own counts move as the unit is held and then bought.

Screenshots go to artifacts/screenshots/; the stack's output to artifacts/devstack-browser-platform_journey.log.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.running import RunningStack, get_json, scan_then_tap, shot, tap_notify_me

pytestmark = pytest.mark.browser

# A product of its own for each platform, so one's restock is not the other's.
PRODUCTS = {"shopify": "WW-THROW-OAT", "woocommerce": "WW-BOARD-WALNUT"}


def switch_platform(page: Any, stack: RunningStack, platform: str) -> None:
    page.goto(stack.console + "/")
    with page.expect_navigation():
        page.select_option("#platform", platform)
    assert page.inner_text("#platform-tag") == platform


def store_counts_on_card(page: Any, stack: RunningStack, sku: str, available: int, reserved: int) -> None:
    page.goto(stack.console + "/")
    page.wait_for_selector(f'[data-store-sku="{sku}"][data-available="{available}"][data-reserved="{reserved}"]')


@pytest.mark.parametrize("platform", ["shopify", "woocommerce"])
def test_on_each_platform_a_hold_comes_out_of_the_store_and_the_order_is_paid_there(
    page: Any, stack: RunningStack, platform: str
) -> None:
    sku = PRODUCTS[platform]
    # 1. The storefront switches the app to the platform; each card shows the store's own counts.
    switch_platform(page, stack, platform)
    assert get_json(stack.console + "/api/platform")["platform"] == platform
    store_counts_on_card(page, stack, sku, 0, 0)
    shot(page, f"p-{platform}-01-storefront")

    # 2. Ada joins the list from the widget.
    assert "we'll" in tap_notify_me(page, stack, "ada", sku)

    # 3. The restock control sets the store's stock and sends the platform's signed webhook.
    page.goto(stack.console + "/controls")
    assert platform in page.inner_text("#restock-hint")
    page.select_option("#restock-sku", sku)
    page.fill("#restock-available", "1")
    page.get_by_role("button", name="Send restock").click()
    page.locator("#restock-result", has_text="API answered").wait_for()
    assert "API answered 202" in page.inner_text("#restock-result")
    store_counts_on_card(page, stack, sku, 1, 0)

    # 4. Her SMS arrives; its reserve link holds the unit on the store, whose checkout hands over to the console's.
    page.goto(f"{stack.console}/outbox?sku={sku}")
    sms = page.locator('li[data-channel="sms"]', has_text="+447400123456")
    sms.wait_for()

    def nothing_held() -> None:
        counts = get_json(f"{stack.console}/api/store/{sku}")
        assert (counts["available"], counts["reserved"]) == (1, 0), counts

    scan_then_tap(page, sms.locator('a[data-link="reserve"]').first, nothing_held)
    assert f"store={platform}" in page.url
    assert "One unit is held for you" in page.inner_text("#hold-state")
    checkout = page.url
    shot(page, f"p-{platform}-02-checkout-held")

    # 5. The hold is taken out of the store: one fewer available, one reserved.
    store_counts_on_card(page, stack, sku, 0, 1)
    shot(page, f"p-{platform}-03-storefront-store-counts")

    # 6. She pays: the store completes its order and its order webhook converts the hold.
    page.goto(checkout)
    page.get_by_role("button", name="Place order").click()
    page.wait_for_selector('#hold-state[data-state="converted"]')
    assert "answered 200" in page.inner_text("#checkout-result")
    store_counts_on_card(page, stack, sku, 0, 0)
    assert page.errors == []


def test_switching_back_to_generic_leaves_no_store_to_ask(page: Any, stack: RunningStack) -> None:
    switch_platform(page, stack, "generic")
    assert page.locator("[data-store-sku]").count() == 0
    page.goto(stack.console + "/controls")
    assert "Standard Webhooks" in page.inner_text("#restock-hint")
    assert page.errors == []
