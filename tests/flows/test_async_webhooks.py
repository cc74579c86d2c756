"""The platforms' webhooks as they really arrive: late, out of order and more than once. Each fake queues its
deliveries (devstack/webhook_outbox.py) and posts them to the app through the HTTP API when the test says, in the
order and as many times as it says, with the headers a real redelivery carries (Shopify: the same X-Shopify-Event-Id
under a new X-Shopify-Webhook-Id; WooCommerce: the same body under a new X-WC-Webhook-Delivery-ID).

What the app promises under them (docs/PLATFORMS.md, *Webhooks as they arrive*): levels are ordered by the body's own
time (Shopify `updated_at`, WooCommerce `date_modified_gmt`), so the newer level stands whatever arrives last; a
repeated delivery opens one restock and tells each person once; a repeated order converts its hold once; a
product's update arriving after its deletion does not list it again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from chalicelib.tables.reservations import OfferState
from devstack.clocks import FixedClock
from devstack.webhook_outbox import Sent
from tests.notices import drain
from tests.platforms import THROW, Shop, join, platform_shop
from tests.support import tap_link


@pytest.fixture(params=["shopify", "woocommerce"])
def shop(request: pytest.FixtureRequest, session: Any, clock: FixedClock) -> Iterator[Shop]:
    with platform_shop(str(request.param), session, clock) as built:

        def post(body: bytes, headers: Mapping[str, str]) -> int:
            response = built.client.http.post(f"/webhooks/{built.platform}", headers=dict(headers), body=body)
            return int(response.status_code)

        built.store.queue_webhooks(post)
        yield built


def set_level(shop: Shop, units: int) -> None:
    """The store's level changes a second after the last change (both platforms stamp bodies to the second)."""
    shop.clock.advance(1)
    if shop.platform == "shopify":
        shop.store.set_available(THROW, units)
    else:
        shop.store.set_stock(THROW, units)


def level(shop: Shop) -> int | None:
    product = shop.services.tables.catalog.get(THROW, consistent=True)
    assert product is not None
    return product.level


def statuses(sent: list[Sent]) -> list[int | None]:
    return [s.status for s in sent]


def test_two_levels_arriving_in_reverse_leave_the_newer_one(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    set_level(shop, 3)
    set_level(shop, 0)  # sold out again before either delivery arrives
    sent = shop.store.deliver(order="reversed")
    assert len(sent) == 2 and all(status is not None and status < 300 for status in statuses(sent))
    # The 0 arrives first; the older 3 after it is stale: no restock is opened for a level the store no longer has.
    assert level(shop) == 0
    assert shop.services.tables.restocks.for_sku(THROW) == []
    drain(shop.services)
    assert shop.offers(THROW) == []


def test_two_levels_in_order_leave_the_newer_one_too(shop: Shop) -> None:
    set_level(shop, 0)
    set_level(shop, 4)
    shop.store.deliver(order="fifo")
    assert level(shop) == 4


def test_a_delivery_repeated_three_times_opens_one_restock_and_one_notice(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    set_level(shop, 2)
    sent = shop.store.deliver(repeat=3, order="shuffled", seed=7)
    assert len(sent) == 3
    # Each repeat is the same event under another delivery id, as its platform sends it again.
    if shop.platform == "shopify":
        assert len({s.headers["X-Shopify-Event-Id"] for s in sent}) == 1
        assert len({s.headers["X-Shopify-Webhook-Id"] for s in sent}) == 3
        assert len({s.headers["X-Shopify-Triggered-At"] for s in sent}) == 1
    else:
        assert len({s.headers["X-WC-Webhook-Delivery-ID"] for s in sent}) == 3
    assert len({s.delivery.body for s in sent}) == 1
    assert len(shop.services.tables.restocks.for_sku(THROW)) == 1
    drain(shop.services)
    assert len(shop.offers(THROW)) == 1
    assert shop.store.outbox is not None and shop.store.outbox.pending == []


def test_an_order_paid_delivered_three_times_converts_its_hold_once(shop: Shop) -> None:
    join(shop, THROW, "ada@example.com")
    set_level(shop, 1)
    shop.store.deliver()
    drain(shop.services)
    [offer] = shop.offers(THROW)
    assert tap_link(shop.client, shop.services.tokens.reserve(offer.token_id)).status_code == 303
    held = shop.offers(THROW)[0]
    if shop.platform == "shopify":
        shop.store.complete_draft_order(held.store_ref)
    else:
        shop.store.pay_order(int(held.store_ref or 0))
    orders = [d for d in shop.store.outbox.pending if d.topic.startswith("order")]
    assert len(orders) == 1
    sent = shop.store.deliver(repeat=3, order="shuffled", seed=3)
    assert len(sent) >= 3 and all(status == 200 for status in statuses(sent))
    assert shop.offers(THROW)[0].state == OfferState.CONVERTED
    facts = shop.services.tables.audit.for_sku(THROW)
    assert [f["token_id"] for f in facts if f["kind"] == "conversion"] == [held.token_id]


def test_a_shopify_delivery_not_answered_stays_queued_and_is_retried_with_its_event_id(shop: Shop) -> None:
    if shop.platform != "shopify":
        pytest.skip("WooCommerce never sends a delivery again (test_a_woocommerce_failure_is_never_resent)")
    set_level(shop, 2)
    outbox = shop.store.outbox
    assert outbox is not None
    answer = outbox.post
    outbox.post = lambda body, headers: 503
    (first,) = shop.store.deliver()
    assert first.status == 503 and len(outbox.pending) == 1
    outbox.post = answer
    (retry,) = shop.store.deliver()
    assert retry.status is not None and retry.status < 300 and outbox.pending == []
    assert retry.headers["X-Shopify-Event-Id"] == first.headers["X-Shopify-Event-Id"]
    assert retry.headers["X-Shopify-Webhook-Id"] != first.headers["X-Shopify-Webhook-Id"]
    assert level(shop) == 2


def test_a_woocommerce_failure_is_never_resent_and_counts_towards_disabling(shop: Shop) -> None:
    if shop.platform != "woocommerce":
        pytest.skip("Shopify retries a failed delivery")
    outbox = shop.store.outbox
    assert outbox is not None
    outbox.post = lambda body, headers: 503
    hook = shop.store.webhook_for("product.updated")
    for _ in range(7):
        set_level(shop, 2)
        shop.store.deliver()
        assert outbox.pending == []
    assert hook.status == "disabled"
    set_level(shop, 5)  # a disabled webhook sends nothing
    assert outbox.pending == []


def test_a_dropped_delivery_is_lost(shop: Shop) -> None:
    set_level(shop, 2)
    set_level(shop, 3)
    sent = shop.store.deliver(drop=lambda d: d.seq == 1)
    assert len(sent) == 1 and level(shop) == 2


def test_a_delete_arriving_before_the_products_last_update_keeps_it_off_sale(shop: Shop) -> None:
    # Neither platform orders a products/delete (product.deleted) after the product's last update, and the delete's
    # body is the id alone. The deletion is remembered with the time it arrived, after every update the product had,
    # so the late update is older than it and lists nothing; the next catalogue sync agrees. WooCommerce's product
    # body carries its stock too, which opens no restock for a product no longer sold.
    shop.clock.advance(1)
    if shop.platform == "shopify":
        shop.store.product_webhook(THROW)
    else:
        shop.store.set_stock(THROW, 3)
    shop.clock.advance(1)
    shop.store.delete_product(THROW)
    sent = shop.store.deliver(order="reversed")
    assert statuses(sent) == [200, 200]
    product = shop.services.tables.catalog.get(THROW, consistent=True)
    assert product is not None and product.discontinued
    assert shop.services.tables.restocks.for_sku(THROW) == []
    report = shop.services.catalog_sync.run()
    assert report.complete and THROW not in report.restored
    product = shop.services.tables.catalog.get(THROW, consistent=True)
    assert product is not None and product.discontinued


def test_a_delete_arriving_after_the_update_discontinues_at_once(shop: Shop) -> None:
    shop.clock.advance(1)
    if shop.platform == "shopify":
        shop.store.product_webhook(THROW)
    else:
        shop.store.stock_webhook(THROW)
    shop.store.delete_product(THROW)
    shop.store.deliver(order="fifo")
    product = shop.services.tables.catalog.get(THROW, consistent=True)
    assert product is not None and product.discontinued
