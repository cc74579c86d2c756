"""The fake stores' webhook outbox: deliveries queued when the store's state changes, posted to the app later, in
the order and as many times as a test chooses, as the platforms deliver them.

Neither platform posts a webhook inside the request that changed the store: Shopify queues every event and delivers
it from its own workers, and WooCommerce hands each delivery to Action Scheduler (`wc_deliver_webhook_async`, the
`woocommerce_webhook_deliver_async` filter, true by default), which sends it on a later WP-Cron or async request. So
deliveries arrive late, and neither promises their order:
  * Shopify: "Shopify doesn't guarantee ordering within a topic, or across different topics for the same resource"
    (https://shopify.dev/docs/apps/build/webhooks, *Ordering*), and the same event may arrive more than once, with one
    X-Shopify-Event-Id (https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates); a delivery not answered 2xx
    is retried 8 times over 4 hours (https://shopify.dev/changelog/updates-to-webhook-retry-mechanism).
  * WooCommerce: never retries (WC_Webhook::deliver sends once and logs the answer), but fires one change more than
    once where a topic has several hooks, e.g. product.updated on a single save
    (https://github.com/woocommerce/woocommerce/issues/24729, https://github.com/woocommerce/woocommerce/pull/25183),
    and scheduled actions run in no promised order.

Each fake says, through two functions, what its platform does on a second send and with an answer:
`again(delivery)` gives the headers of one more send of the same event, and `settle(delivery, status)` records an
answer and says whether it takes the delivery out of the outbox (False for every send: it stays for a later
`deliver`, a Shopify retry).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

# Posts one delivery (body, headers) to the app; the HTTP status it answered, or None when there was no answer.
Post = Callable[[bytes, Mapping[str, str]], int | None]
SendOrder = Literal["fifo", "reversed", "shuffled"]


@dataclass
class Delivery:
    """One event the store queued: the body and headers of its first send, and how often it has been sent."""

    seq: int  # the order the store produced it in
    topic: str
    body: bytes
    headers: dict[str, str]
    sends: int = 0


@dataclass(frozen=True)
class Sent:
    """One post of a delivery to the app, with the headers it carried and the app's answer."""

    delivery: Delivery
    headers: dict[str, str]
    status: int | None


@dataclass
class WebhookOutbox:
    """Deliveries waiting to be posted to the app by `post`."""

    post: Post
    again: Callable[[Delivery], dict[str, str]]
    settle: Callable[[Delivery, int | None], bool]
    pending: list[Delivery] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def queue(self, body: bytes, headers: Mapping[str, str]) -> Delivery:
        """Keep a delivery the store produced, to be posted by a later `deliver`."""
        delivery = Delivery(
            next(self._seq),
            str(headers.get("X-Shopify-Topic") or headers.get("X-WC-Webhook-Topic")),
            body,
            dict(headers),
        )
        self.pending.append(delivery)
        return delivery

    def deliver(
        self,
        *,
        order: SendOrder = "fifo",
        repeat: int = 1,
        drop: Callable[[Delivery], bool] | None = None,
        seed: int = 0,
    ) -> list[Sent]:
        """Post every pending delivery `repeat` times, the sends in `order` ("fifo" as produced, "reversed", or
        "shuffled" by `seed`, repeats interleaved with the rest); the ones `drop` picks are lost, never posted.
        The first send of a delivery carries its own headers, each later one `again`'s."""
        if repeat < 1:
            raise ValueError("repeat is at least 1")
        batch, self.pending = self.pending, []
        kept = [d for d in batch if drop is None or not drop(d)]
        sends = [d for d in kept for _ in range(repeat)]
        if order == "reversed":
            sends.reverse()
        elif order == "shuffled":
            random.Random(seed).shuffle(sends)
        elif order != "fifo":
            raise ValueError(f"unknown order {order!r}")
        sent: list[Sent] = []
        answers: dict[int, list[int | None]] = {d.seq: [] for d in kept}
        for delivery in sends:
            headers = dict(delivery.headers) if delivery.sends == 0 else self.again(delivery)
            delivery.sends += 1
            status = self.post(delivery.body, headers)
            answers[delivery.seq].append(status)
            sent.append(Sent(delivery, headers, status))
        for delivery in kept:
            # Every answer is settled (WooCommerce counts each failure); one that settles it takes it out.
            settled = [self.settle(delivery, status) for status in answers[delivery.seq]]
            if not any(settled):
                self.pending.append(delivery)
        return sent
