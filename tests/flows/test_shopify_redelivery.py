"""A Shopify event delivered twice counts once: a retry, or the event sent again for a second subscription to its
topic, carries the same X-Shopify-Event-Id and a new X-Shopify-Webhook-Id
(https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates; Shopify retries 8 times over 4 hours with the
original payload, https://shopify.dev/changelog/updates-to-webhook-retry-mechanism).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.clocks import FixedClock
from tests.platforms import THROW, Shop, platform_shop


@pytest.fixture
def shop(session: Any, clock: FixedClock) -> Iterator[Shop]:
    with platform_shop("shopify", session, clock) as built:
        yield built


def test_the_same_event_with_a_new_webhook_id_is_a_duplicate(shop: Shop) -> None:
    request = shop.store.set_available(THROW, 3)
    first = shop.webhook(request)
    assert first.status_code in (200, 202), first.body
    before = shop.snapshot()
    redelivered = shop.store.redeliver(request)
    assert redelivered[1]["X-Shopify-Webhook-Id"] != request[1]["X-Shopify-Webhook-Id"]
    assert redelivered[1]["X-Shopify-Event-Id"] == request[1]["X-Shopify-Event-Id"]
    again = shop.webhook(redelivered)
    assert again.status_code == 200, again.body
    assert json.loads(again.body)["results"] == [{"status": "no_restock", "reason": "duplicate"}]
    assert shop.snapshot() == before


def test_a_new_event_for_the_same_level_is_not_a_duplicate(shop: Shop) -> None:
    shop.webhook(shop.store.set_available(THROW, 3))
    later = shop.webhook(shop.store.set_available(THROW, 0))
    assert later.status_code in (200, 202), later.body
    assert json.loads(later.body)["results"][0].get("reason") != "duplicate"
    product = shop.services.tables.catalog.get(THROW)
    assert product is not None and product.level == 0
