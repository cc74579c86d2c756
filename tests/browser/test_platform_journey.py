"""The storefront on each store platform in a real browser: the local stack started as `python -m devstack` on free
ports, headless Chromium driving the console. On Shopify and then WooCommerce: switch the storefront's platform,
join a waiting list from the widget, restock through the console (the platform's own signed webhook), open the
reserve link from the outbox, and watch the fake store's own counts move as the unit is held and then bought. On
WooCommerce the claim link lands on the fake shop's own checkout, where the address is typed (first without it).

Screenshots go to artifacts/screenshots/; the stack's output to artifacts/devstack-browser-platform_journey.log.
"""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any

import pytest

from tests.browser import axe
from tests.browser.running import RunningStack, get_json, scan_then_tap, shot, tap_notify_me
from tests.support import ROOT

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


def hold_from_the_widget(page: Any, stack: RunningStack, platform: str, lands: str) -> None:
    """On the platform: Ada joins the list from the storefront's widget, the restock control restocks the store,
    and her SMS's reserve link holds the unit on the store; the browser is left on the checkout it lands on."""
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

    # 4. Her SMS arrives; its reserve link holds the unit on the store and sends her to its checkout.
    # The outbox page filters to this product from its first render, so only this round's SMS is shown.
    page.goto(f"{stack.console}/outbox?sku={sku}")
    sms = page.locator(f'li[data-channel="sms"][data-sku="{sku}"]', has_text="+447400123456")
    sms.wait_for()
    assert page.locator(f'#messages > li:not([data-sku="{sku}"])').count() == 0

    def nothing_held() -> None:
        counts = get_json(f"{stack.console}/api/store/{sku}")
        assert (counts["available"], counts["reserved"]) == (1, 0), counts

    scan_then_tap(page, sms.locator('a[data-link="reserve"]').first, nothing_held, lands)


def test_on_shopify_a_hold_comes_out_of_the_store_and_the_order_is_paid_there(page: Any, stack: RunningStack) -> None:
    sku = PRODUCTS["shopify"]
    # The draft order's invoice hands over to the console's checkout.
    hold_from_the_widget(page, stack, "shopify", "**/checkout?**")
    assert "store=shopify" in page.url
    assert "One unit is held for you" in page.inner_text("#hold-state")
    checkout = page.url
    shot(page, "p-shopify-02-checkout-held")

    # 5. The hold is taken out of the store: one fewer available, one reserved.
    store_counts_on_card(page, stack, sku, 0, 1)
    shot(page, "p-shopify-03-storefront-store-counts")

    # 6. She pays: the store completes its order and its order webhook converts the hold.
    page.goto(checkout)
    page.get_by_role("button", name="Place order").click()
    page.wait_for_selector('#hold-state[data-state="converted"]')
    assert "answered 200" in page.inner_text("#checkout-result")
    store_counts_on_card(page, stack, sku, 0, 0)
    assert page.errors == []


def at_phone_size(page: Any, name: str) -> None:
    """A screenshot of the page as a phone shows it, then back to the desktop size."""
    desktop = page.viewport_size
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, name)
    page.set_viewport_size(desktop)


def woocommerce_order(stack: RunningStack, order_id: str) -> dict[str, Any]:
    """The fake WooCommerce's order as its REST API gives it, with the local stage's key (.chalice/config.json)."""
    secrets = json.loads((ROOT / ".chalice" / "config.json").read_text())["stages"]["local"]["environment_variables"]
    key = f"{secrets['WOOCOMMERCE_CONSUMER_KEY']}:{secrets['WOOCOMMERCE_CONSUMER_SECRET']}"
    request = urllib.request.Request(
        f"http://127.0.0.1:{stack.woocommerce_port}/wp-json/wc/v3/orders/{order_id}",
        headers={"Authorization": "Basic " + base64.b64encode(key.encode()).decode()},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return dict(json.loads(response.read()))


def test_on_woocommerce_the_claim_link_opens_the_shops_checkout_where_an_address_is_typed_and_the_order_converts(
    page: Any, stack: RunningStack
) -> None:
    sku = PRODUCTS["woocommerce"]
    store = f"http://127.0.0.1:{stack.woocommerce_port}"
    # The plugin's claim link puts the held draft in her cart and lands on the shop's own checkout.
    hold_from_the_widget(page, stack, "woocommerce", f"{store}/checkout/")
    [entry] = [e for e in get_json(f"{stack.console}/api/queue/{sku}")["entries"] if e.get("offer")]
    reservation = entry["offer"]["reservation_id"]
    store_counts = get_json(f"{stack.console}/api/store/{sku}")
    assert (store_counts["available"], store_counts["reserved"]) == (0, 1), store_counts
    review = page.locator(".woocommerce-checkout-review-order-table")
    assert f"SKU {sku}" in review.inner_text()
    assert page.get_by_role("button", name="Place order").is_visible()
    shot(page, "p-woocommerce-02-store-checkout")
    axe.assert_accessible(page, "WooCommerce checkout (fake store)")

    # 5. She gives her name and email only: every missing address field is named, nothing is paid, and what she
    # typed is still there.
    page.get_by_label("First name").fill("Grace")
    page.get_by_label("Last name").fill("Hopper")
    page.get_by_label("Email address").fill("grace@example.org")
    page.get_by_role("button", name="Place order").click()
    alert = page.get_by_role("alert")
    alert.wait_for()
    for label in ("Country / Region", "Street address", "Town / City", "Postcode / ZIP"):
        assert f"Billing {label} is a required field." in alert.inner_text()
    assert "Billing First name" not in alert.inner_text()
    assert page.get_by_label("First name").input_value() == "Grace"
    assert page.get_by_label("Email address").input_value() == "grace@example.org"
    assert page.get_by_label("Street address").get_attribute("aria-invalid") == "true"
    assert get_json(f"{stack.console}/api/reservations/{reservation}")["reservation"]["state"] == "held"
    shot(page, "p-woocommerce-03-store-checkout-errors")
    at_phone_size(page, "p-woocommerce-03-store-checkout-errors-phone")
    axe.assert_accessible(page, "WooCommerce checkout with required-field errors (fake store)")

    # 6. The whole address, and she places the order: the store pays it and its order webhook converts the hold.
    page.get_by_label("Country / Region").select_option("IE")
    page.get_by_label("Street address").fill("4 Harbour Row")
    page.get_by_label("Town / City").fill("Cobh")
    page.get_by_label("Postcode / ZIP").fill("P24 X998")
    page.get_by_label("Phone").fill("+353 21 481 1000")
    page.get_by_role("button", name="Place order").click()
    page.wait_for_url(f"{store}/checkout/order-received/**")
    assert "Thank you. Your order has been received." in page.inner_text("main")
    order_id = page.inner_text("#order-number")
    shot(page, "p-woocommerce-04-order-received")
    at_phone_size(page, "p-woocommerce-04-order-received-phone")

    order = woocommerce_order(stack, order_id)
    assert order["status"] == "processing" and order["date_paid"]
    assert {k: order["billing"].get(k) for k in ("first_name", "last_name", "email", "phone")} == {
        "first_name": "Grace",
        "last_name": "Hopper",
        "email": "grace@example.org",
        "phone": "+353 21 481 1000",
    }
    assert {k: order["billing"][k] for k in ("address_1", "city", "postcode", "country")} == {
        "address_1": "4 Harbour Row",
        "city": "Cobh",
        "postcode": "P24 X998",
        "country": "IE",
    }
    assert [m["value"] for m in order["meta_data"] if m["key"] == "_bisn_reservation_id"] == [reservation]
    assert get_json(f"{stack.console}/api/reservations/{reservation}")["reservation"]["state"] == "converted"
    store_counts_on_card(page, stack, sku, 0, 0)

    assert page.errors == []


def test_switching_back_to_generic_leaves_no_store_to_ask(page: Any, stack: RunningStack) -> None:
    switch_platform(page, stack, "generic")
    assert page.locator("[data-store-sku]").count() == 0
    page.goto(stack.console + "/controls")
    assert "Standard Webhooks" in page.inner_text("#restock-hint")
    assert page.errors == []


# SMS notices as the console's /api/outbox gives them (devstack/views.py `messages`, fields from
# devstack/outbox.py `Sent.to_json`): the earlier round's for the throw, then this round's for the board.
NOTICES = [
    {
        "id": f"sms-{n}",
        "channel": "sms",
        "to": "+447400123456",
        "subject": None,
        "body": f"Back in stock. Reserve one: http://127.0.0.1:9/r/link{n}",
        "sent_at": 1_790_000_000 + n,
        "links": {"reserve": f"http://127.0.0.1:9/r/link{n}"},
        "sku": sku,
        "reservation": {"id": f"link{n}", "state": "offered"},
    }
    for n, sku in enumerate(("WW-THROW-OAT", "WW-BOARD-WALNUT"))
]


def test_the_outbox_filters_to_the_product_in_its_address_before_that_product_has_a_message(
    page: Any, stack: RunningStack
) -> None:
    # The outbox holds only the earlier round's SMS, and the product list answers only after the outbox has been
    # drawn, as on a busy machine: the page still shows nothing of another product.
    sent = NOTICES[:1]
    held: list[Any] = []
    page.route("**/api/products", lambda route: held.append(route))
    page.route(
        "**/api/outbox",
        lambda route: route.fulfill(content_type="application/json", body=json.dumps({"messages": sent})),
    )
    page.goto(f"{stack.console}/outbox?sku=WW-BOARD-WALNUT")
    page.locator("#outbox-summary", has_text="0 of 1 message(s) shown").wait_for()
    assert page.locator("#messages > li").count() == 0
    assert page.input_value("#filter-sku") == "WW-BOARD-WALNUT"

    # Once the product list answers, the option carries the product's name and the filter stays.
    assert len(held) == 1  # asked before the outbox, so already handed to the handler
    held[0].continue_()
    page.locator("#filter-sku option[value='WW-BOARD-WALNUT']", has_text="(WW-BOARD-WALNUT)").wait_for(state="attached")
    assert page.input_value("#filter-sku") == "WW-BOARD-WALNUT"

    # This round's SMS arrives: it alone is shown.
    sent.append(NOTICES[1])
    page.locator("#outbox-summary", has_text="1 of 2 message(s) shown").wait_for()
    assert page.locator("#messages > li").evaluate_all("items => items.map(li => li.dataset.sku)") == [
        "WW-BOARD-WALNUT"
    ]

    # Choosing all products sticks: the next polls do not put the address's product back.
    page.select_option("#filter-sku", "")
    page.locator("#outbox-summary", has_text="2 of 2 message(s) shown").wait_for()
    for _ in range(2):  # the page asks again only once the previous answer is drawn
        with page.expect_request("**/api/outbox", timeout=30_000):
            pass
    assert page.input_value("#filter-sku") == ""
    assert page.locator("#messages > li").count() == 2
    assert page.errors == []
