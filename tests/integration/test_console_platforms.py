"""The console on each store platform, in-process: the storefront switches platform, the restock control emits the
platform's own signed webhook, a tap holds a unit on the fake store (seen through /api/store/{sku}), paying
completes the store's order and converts, and switching back to generic works.

The stores are devstack/stores.py's fake Shopify and fake WooCommerce, reached through their in-process transports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from chalice.test import Client
from flask.testing import FlaskClient
from werkzeug.test import Client as WsgiClient

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.wiring import Services
from devstack import outbox
from devstack.clocks import FixedClock
from devstack.console import create_console
from devstack.fake_model import FakeBedrock
from devstack.stack import ConsoleClock, InProcessApi, SharedPlatform, Stack, verify_sender
from devstack.stores import LocalStores
from tests.integration.test_console_api import ORIGIN, post, tap
from tests.support import REGION, app_client, tap_link

THROW = "WW-THROW-OAT"
BOARD = "WW-BOARD-WALNUT"


@pytest.fixture
def stack_clock(clock: FixedClock) -> ConsoleClock:
    return ConsoleClock(clock)


@pytest.fixture
def stores(env: dict[str, str], stack_clock: ConsoleClock) -> LocalStores:
    return LocalStores(settings_from_env(env), now=stack_clock.now, console_base=ORIGIN)


@pytest.fixture
def stack_services(
    session: boto3.session.Session, env: dict[str, str], stack_clock: ConsoleClock, stores: LocalStores
) -> Services:
    services = Services(
        settings_from_env(env),
        aws=Aws(REGION, session=session),
        clock=stack_clock,
        model=FakeBedrock(),
        transport=stores.transport(),
    )
    verify_sender(services)
    outbox.record_sends(stack_clock)
    return services


@pytest.fixture
def api(stack_services: Services) -> Iterator[Client]:
    with app_client(stack_services) as test_client:
        yield test_client


@pytest.fixture
def shared(tmp_path: Any) -> SharedPlatform:
    return SharedPlatform(tmp_path / "platform.json")


@pytest.fixture
def stack(
    stack_services: Services, stack_clock: ConsoleClock, api: Client, stores: LocalStores, shared: SharedPlatform
) -> Stack:
    running = Stack(
        stack_services, stack_clock, InProcessApi(api), retry_after_s=0, stores=stores, shared_platform=shared
    )
    running.run_scheduled("catalog_sync")  # the demo feed, as the local stack loads it at start
    return running


@pytest.fixture
def console(stack: Stack) -> FlaskClient:
    return create_console(stack, origins=[ORIGIN]).test_client()


def switch(console: FlaskClient, platform: str) -> dict[str, Any]:
    answer = post(console, "/api/platform", {"platform": platform})
    assert answer.status_code == 200, answer.get_json()
    data = answer.get_json()
    assert data["platform"] == platform
    assert data["catalog_sync"] and not data["catalog_sync"].get("error"), data
    return data


def store_counts(console: FlaskClient, sku: str) -> dict[str, int]:
    answer = console.get(f"/api/store/{sku}")
    assert answer.status_code == 200, answer.get_json()
    data = answer.get_json()
    return {"available": data["available"], "reserved": data["reserved"]}


def the_offer(console: FlaskClient, sku: str) -> dict[str, Any]:
    [entry] = [e for e in console.get(f"/api/queue/{sku}").get_json()["entries"] if e.get("offer")]
    return dict(entry["offer"])


def test_generic_is_the_default_and_has_no_store_to_ask(console: FlaskClient) -> None:
    assert console.get("/api/platform").get_json() == {
        "platform": "generic",
        "platforms": ["generic", "shopify", "woocommerce"],
    }
    answer = console.get(f"/api/store/{THROW}")
    assert answer.status_code == 409
    assert answer.get_json()["error"] == "no_store"


def test_an_unknown_platform_is_refused(console: FlaskClient) -> None:
    for body in ({"platform": "magento"}, {"platform": 3}, {}):
        answer = post(console, "/api/platform", body)
        assert answer.status_code == 400, body
    assert console.get("/api/platform").get_json()["platform"] == "generic"


def test_the_catalogue_lists_each_products_platform_ids(console: FlaskClient, stores: LocalStores) -> None:
    products = {p["sku"]: p for p in console.get("/api/catalog").get_json()["products"]}
    throw = products[THROW]["ids"]
    shopify = stores.shopify.variant(THROW)
    assert throw["shopify.variant_id"] == str(shopify.id)
    assert throw["shopify.inventory_item_id"] == str(shopify.inventory_item_id)
    assert throw["woocommerce.product_id"] == str(stores.woocommerce.by_sku(THROW).id)
    beanie = products["WW-BEANIE-MOSS"]["ids"]  # sold as a variation on WooCommerce
    variation = stores.woocommerce.by_sku("WW-BEANIE-MOSS")
    assert (beanie["woocommerce.product_id"], beanie["woocommerce.variation_id"]) == (
        str(variation.parent_id),
        str(variation.id),
    )

    switch(console, "shopify")
    row = {p["sku"]: p for p in console.get("/api/catalog").get_json()["products"]}[THROW]
    assert row["store_ids"]["shopify.variant_id"] == str(shopify.id)  # written by the catalogue sync from Shopify


@pytest.mark.parametrize("platform", ["shopify", "woocommerce"])
def test_on_a_store_platform_restock_hold_and_payment_go_through_the_store(
    platform: str, console: FlaskClient, api: Client, stack: Stack, shared: SharedPlatform
) -> None:
    data = switch(console, platform)
    assert THROW in data["catalog_sync"]["updated"]
    assert console.get("/api/platform").get_json()["platform"] == platform
    assert console.get("/api/status").get_json()["platform"] == platform
    assert shared.read() == platform  # the API process follows
    tap(api, THROW, "email", "ada@example.com")
    assert store_counts(console, THROW) == {"available": 0, "reserved": 0}

    # The restock control emits the platform's own signed webhook, to its own route.
    restock = post(console, "/api/restock", {"sku": THROW, "available": 1}).get_json()
    assert restock["platform"] == platform
    assert restock["api"]["status"] == 202, restock
    assert restock["api"]["body"]["status"] == "restock"
    assert restock["webhook_id"]
    assert console.get(f"/api/queue/{THROW}").get_json()["restock"]["units_total"] == 1
    assert post(console, "/api/run/notifier").get_json()["processed"] == 1
    assert store_counts(console, THROW) == {"available": 1, "reserved": 0}

    # The shopper taps the reserve link: the unit is held on the store, out of its storefront.
    offer = the_offer(console, THROW)
    held = tap_link(api, stack.services.tokens.reserve(offer["reservation_id"]))
    assert held.status_code == 303
    assert store_counts(console, THROW) == {"available": 0, "reserved": 1}
    assert the_offer(console, THROW)["state"] == "held"

    # The store's checkout page: Shopify's invoice sends the shopper on to the console's checkout for that
    # reservation; WooCommerce's claim link puts the held draft in their session and lands on the shop's checkout.
    assert stack.stores is not None
    checkout = urlsplit(held.headers["Location"])
    site = WsgiClient(stack.stores.site(platform))
    page = site.get(checkout.path, query_string=checkout.query)
    if platform == "shopify":
        assert page.status_code == 302
        target = urlsplit(page.headers["Location"])
        assert f"{target.scheme}://{target.netloc}{target.path}" == f"{ORIGIN}/checkout"
        assert parse_qs(target.query)["reservation"] == [offer["reservation_id"]]
    else:
        assert page.status_code == 303
        assert page.headers["Location"] == f"{stack.stores.woocommerce.store_url}/checkout/"
        form = site.get("/checkout/").get_data(as_text=True)
        assert f"SKU {THROW}" in form
        assert "name='billing_address_1'" in form

    # The console's shortcut pays: the store completes its order; its signed order webhook converts the hold.
    paid = post(console, "/api/orders", {"reservation_id": offer["reservation_id"]}).get_json()
    assert paid["api"]["status"] == 200, paid
    assert paid["api"]["body"]["status"] == "orders"
    assert paid["order_id"]
    assert the_offer(console, THROW)["state"] == "converted"
    assert store_counts(console, THROW) == {"available": 0, "reserved": 0}

    # And back to generic: Standard Webhooks again, and no store of ours to ask.
    switch(console, "generic")
    assert shared.read() == "generic"
    assert console.get(f"/api/store/{THROW}").status_code == 409
    again = post(console, "/api/restock", {"sku": BOARD, "available": 1}).get_json()
    assert again["platform"] == "generic"
    assert (again["sent"]["sku"], again["sent"]["available"]) == (BOARD, 1)  # the Standard Webhooks payload
    assert again["api"]["status"] == 202, again


def test_woocommerces_other_options_join_the_catalogue_and_leave_it_with_the_feed(console: FlaskClient) -> None:
    extra = {"WW-BEANIE-MOSS-CHARCOAL", "WW-CARDI-RUST-S", "WW-CARDI-RUST-L"}
    assert set(switch(console, "woocommerce")["catalog_sync"]["created"]) == extra
    assert extra <= set(switch(console, "generic")["catalog_sync"]["discontinued"])


@pytest.mark.parametrize("platform", ["shopify", "woocommerce"])
def test_store_counts_of_an_unknown_sku_are_404_and_paying_without_a_hold_is_refused(
    platform: str, console: FlaskClient, api: Client
) -> None:
    switch(console, platform)
    answer = console.get("/api/store/WW-NOT-SOLD")
    assert answer.status_code == 404
    assert answer.get_json()["error"] == "unknown_sku"
    tap(api, THROW, "email", "ada@example.com")
    post(console, "/api/restock", {"sku": THROW, "available": 1})
    post(console, "/api/run/notifier")
    refused = post(console, "/api/orders", {"reservation_id": the_offer(console, THROW)["reservation_id"]})
    assert refused.status_code == 409
    assert refused.get_json()["error"] == "no_store_hold"


ADDRESS = {
    "billing_first_name": "Grace",
    "billing_last_name": "Hopper",
    "billing_country": "IE",
    "billing_address_1": "4 Harbour Row",
    "billing_city": "Cobh",
    "billing_postcode": "P24 X998",
    "billing_phone": "+353 21 481 1000",
    "billing_email": "grace@example.org",
}


def test_on_woocommerce_the_shop_checkout_asks_for_the_address_then_pays_and_converts(
    console: FlaskClient, api: Client, stack: Stack
) -> None:
    switch(console, "woocommerce")
    tap(api, THROW, "email", "ada@example.com")
    post(console, "/api/restock", {"sku": THROW, "available": 1})
    post(console, "/api/run/notifier")
    offer = the_offer(console, THROW)
    held = tap_link(api, stack.services.tokens.reserve(offer["reservation_id"]))
    assert stack.stores is not None
    woo = stack.stores.woocommerce
    order = woo.order_for(offer["reservation_id"])
    assert order is not None and order.status == "checkout-draft"
    site = WsgiClient(stack.stores.site("woocommerce"))
    claim = urlsplit(held.headers["Location"])
    assert site.get(claim.path, query_string=claim.query).status_code == 303

    # Only a name and an email: WC_Checkout's notices for each missing address field; what was typed stays.
    partial = {k: ADDRESS[k] for k in ("billing_first_name", "billing_last_name", "billing_email")}
    refused = site.post("/checkout/", data=partial)
    page = refused.get_data(as_text=True)
    assert refused.status_code == 200
    for label in ("Street address", "Town / City", "Postcode / ZIP", "Country / Region"):
        assert f"Billing {label} is a required field." in page
    assert "Billing First name is a required field." not in page
    assert "value='Grace'" in page and "value='grace@example.org'" in page
    assert (
        "id='billing_city' name='billing_city' autocomplete='address-level2' aria-required='true' aria-invalid" in page
    )
    assert order.status == "checkout-draft" and order.date_paid is None
    assert the_offer(console, THROW)["state"] == "held"

    # The whole address: the draft is paid with it, the order webhook reaches the app and the hold converts.
    placed = site.post("/checkout/", data=ADDRESS)
    assert placed.status_code == 303
    received = urlsplit(placed.headers["Location"])
    assert received.path == f"/checkout/order-received/{order.id}/"
    thanks = site.get(received.path, query_string=received.query).get_data(as_text=True)
    assert "Thank you. Your order has been received." in thanks
    assert f"<strong id='order-number'>{order.id}</strong>" in thanks
    paid = woo.orders[order.id]  # the same order, read again now that the checkout has changed it
    assert paid.status == "processing" and paid.date_paid is not None
    assert paid.billing == {
        "first_name": "Grace",
        "last_name": "Hopper",
        "address_1": "4 Harbour Row",
        "city": "Cobh",
        "postcode": "P24 X998",
        "country": "IE",
        "email": "grace@example.org",
        "phone": "+353 21 481 1000",
    }
    assert the_offer(console, THROW)["state"] == "converted"
    assert store_counts(console, THROW) == {"available": 0, "reserved": 0}
    hook = woo.webhook_for("order.updated")
    assert hook is not None and hook.failure_count == 0  # the app's answer to the delivery was recorded

    # The cart is empty now: the checkout says so, and posting again pays nothing twice.
    again = site.post("/checkout/", data=ADDRESS).get_data(as_text=True)
    assert "Your cart is currently empty." in again
    # A key that is not the order's shows nothing of it.
    assert site.get(received.path, query_string="key=wc_order_wrong").status_code == 404


def test_a_claim_link_that_was_altered_or_has_ended_gets_the_plugins_page(console: FlaskClient, stack: Stack) -> None:
    assert stack.stores is not None
    site = WsgiClient(stack.stores.site("woocommerce"))
    answer = site.get("/", query_string="bisn_claim=r1&bisn_order=501&bisn_expires=9999999999&bisn_sig=00")
    assert answer.status_code == 400
    assert "This link is not complete." in answer.get_data(as_text=True)
    assert site.get("/checkout/").get_data(as_text=True).count("Your cart is currently empty.") == 1


def test_paying_on_shopify_delivers_the_draft_orders_completion_too(
    console: FlaskClient, api: Client, stack: Stack, stores: LocalStores
) -> None:
    switch(console, "shopify")
    # The order arrives without our attribute: only the draft order's draft_orders/update names the hold.
    stores.shopify.attributes_reach_order = False
    tap(api, THROW, "email", "ada@example.com")
    assert post(console, "/api/restock", {"sku": THROW, "available": 1}).get_json()["api"]["status"] == 202
    assert post(console, "/api/run/notifier").get_json()["processed"] == 1
    offer = the_offer(console, THROW)
    assert tap_link(api, stack.services.tokens.reserve(offer["reservation_id"])).status_code == 303

    paid = post(console, "/api/orders", {"reservation_id": offer["reservation_id"]}).get_json()
    assert paid["api"]["status"] == 200, paid
    assert paid["sent"]["note_attributes"] == []
    assert the_offer(console, THROW)["state"] == "converted"
    assert store_counts(console, THROW) == {"available": 0, "reserved": 0}
