"""A stage on Shopify or WooCommerce for the flow, edge and fuzz tests: devstack's fake store reached through its
in-process transport, the app's services on the emulator, and the app's test client."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from chalice.test import Client

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.platforms.shopify import ShopifyConnector
from chalicelib.platforms.woocommerce import WooCommerceConnector
from chalicelib.tables.reservations import Offer
from chalicelib.wiring import Services
from devstack import fake_shopify
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from devstack.fake_shopify import FakeShopify
from devstack.fake_woocommerce import FakeWooCommerce
from tests.notices import confirm_by_email, verify_sender
from tests.support import REGION, app_client

THROW = "WW-THROW-OAT"
WOO_URL = "http://127.0.0.1:8002"
# The tables a refused delivery must leave as they were.
TABLES = ("catalog", "restocks", "reservations", "throttle", "audit")


@dataclass
class Shop:
    """A stage on one platform, its fake store, and the app's test client."""

    platform: str
    services: Services
    client: Client
    store: Any
    clock: FixedClock

    def webhook(self, request: tuple[bytes, dict[str, str]]) -> Any:
        body, headers = request
        return self.client.http.post(f"/webhooks/{self.platform}", headers=headers, body=body)

    def restock(self, sku: str, units: int) -> Any:
        if self.platform == "shopify":
            return self.webhook(self.store.set_available(sku, units))
        return self.webhook(self.store.set_stock(sku, units))

    def offers(self, sku: str) -> list[Offer]:
        items = self.services.tables.reservations.table.scan()["Items"]
        return sorted((Offer.from_item(i) for i in items if i["sku"] == sku), key=lambda o: o.request_joined_ts)

    def pay(self, offer: Offer) -> Any:
        if self.platform == "shopify":
            return self.webhook(self.store.complete_draft_order(offer.store_ref))
        return self.webhook(self.store.pay_order(int(offer.store_ref or 0)))

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every item of the tables a delivery may write, to compare before and after."""
        tables = self.services.tables
        found = {}
        for name in TABLES:
            items = tables.whole(name).scan(ConsistentRead=True)["Items"]
            found[name] = sorted(items, key=lambda item: json.dumps(item, sort_keys=True, default=str))
        return found


def platform_env(platform: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (the local stage by default) on `platform`, with every dialect's secrets set (so both stores'
    webhooks are taken)."""
    from infra.stages import stage_env

    env = dict(base) if base is not None else {**stage_env("local"), "AWS_DEFAULT_REGION": REGION}
    env["PLATFORM"] = platform
    env.update(
        SHOPIFY_SHOP_DOMAIN=fake_shopify.SHOP_DOMAIN,
        SHOPIFY_WEBHOOK_SECRET=fake_shopify.WEBHOOK_SECRET,
        SHOPIFY_ACCESS_TOKEN=fake_shopify.ACCESS_TOKEN,
        WOOCOMMERCE_STORE_URL=WOO_URL,
        WOOCOMMERCE_WEBHOOK_SECRET="fake-webhook-secret",
        WOOCOMMERCE_CONSUMER_KEY="ck_fake_key",
        WOOCOMMERCE_CONSUMER_SECRET="cs_fake_secret",
    )
    return env


def fake_store(platform: str, clock: FixedClock) -> Any:
    """The platform's fake, with THROW sold out."""
    if platform == "shopify":
        shopify = FakeShopify(now=clock.now)
        shopify.set_available(THROW, 0)
        return shopify
    woocommerce = FakeWooCommerce(store_url=WOO_URL, clock=clock.now)
    woocommerce.set_stock(THROW, 0)
    return woocommerce


@contextmanager
def platform_shop(
    platform: str, session: Any, clock: FixedClock, env: Mapping[str, str | None] | None = None
) -> Iterator[Shop]:
    """A stage on `platform` with its catalogue synced from the fake store; `env` overrides (None removes)."""
    store = fake_store(platform, clock)
    settings_env = platform_env(platform)
    for name, value in (env or {}).items():
        if value is None:
            settings_env.pop(name, None)
        else:
            settings_env[name] = value
    services = Services(
        settings_from_env(settings_env),
        aws=Aws(REGION, session=session),
        clock=clock,
        model=FakeBedrock(),
        transport=store.transport(),
    )
    verify_sender(services)
    report = services.catalog_sync.run()
    assert report.error is None and THROW in report.created
    with app_client(services) as client:
        yield Shop(platform, services, client, store, clock)


def join(shop: Shop, sku: str, email: str) -> None:
    """A shopper joins by email and confirms the address (double opt-in), as they would from their inbox."""
    response = shop.client.http.post(
        "/notify-me",
        headers={"Content-Type": "application/json"},
        body=json.dumps({"sku": sku, "channel": "email", "contact": email}).encode(),
    )
    assert response.status_code == 202, response.body
    confirm_by_email(shop.client, shop.services, email)


def woocommerce_connector(store: FakeWooCommerce) -> WooCommerceConnector:
    """The WooCommerce connector talking straight to `store` (its own keys and secret), never sleeping on a retry."""
    return WooCommerceConnector(
        store_url=store.store_url,
        consumer_key=lambda: store.consumer_key,
        consumer_secret=lambda: store.consumer_secret,
        webhook_secrets=lambda: (store.webhook_secret,),
        transport=store.transport(),
        sleep=lambda s: None,
    )


def shopify_connector(shop: FakeShopify, clock: FixedClock) -> ShopifyConnector:
    """The Shopify connector talking straight to `shop` (its token and webhook secret), a retry's wait on `clock`."""
    return ShopifyConnector(
        shop_domain=fake_shopify.SHOP_DOMAIN,
        access_token=lambda: fake_shopify.ACCESS_TOKEN,
        webhook_secrets=lambda: [fake_shopify.WEBHOOK_SECRET],
        transport=shop.transport(),
        sleep=clock.advance,
    )
