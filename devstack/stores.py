"""The local stack's stores: the fake Shopify and the fake WooCommerce (devstack/fake_*.py), seeded with the demo
catalogue, and the ways the app reaches them.

In the stack's own process (console, notifier, sweep) the connectors reach the fakes in process, by the host of
the URL they build; the API process reaches them over HTTP, each fake served on a port of this machine (Shopify's
`https://<shop>.myshopify.com/admin/...` is sent there). Each served fake also answers its checkout pages. A
Shopify invoice sends the shopper on to the console's checkout for that reservation, where paying completes the
draft order and delivers the store's signed webhook. A WooCommerce claim link lands on the fake shop's own checkout
(devstack/woo_checkout.py), where the shopper types their address and email and places the order; the fake then
delivers its order webhook to the app through `deliver` (the stack connects it). The console's own shortcut,
`pay`, checks a WooCommerce draft out with the demo shopper's address.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from chalicelib.config import Settings
from chalicelib.errors import UnknownSku
from chalicelib.platforms.http import HttpResponse, Transport, UrllibTransport
from devstack import fake_shopify
from devstack.fake_shopify import FakeShopify
from devstack.fake_woocommerce import FakeWooCommerce
from devstack.woo_checkout import Deliver, WooCheckout

PLATFORMS = ("generic", "shopify", "woocommerce")
STORE_PLATFORMS = ("shopify", "woocommerce")


class RoutedTransport:
    """Sends each request to the transport registered for its URL's host (host or host:port), else `fallback`."""

    def __init__(self, routes: Mapping[str, Transport], fallback: Transport | None = None) -> None:
        self.routes = dict(routes)
        self.fallback: Transport = fallback or UrllibTransport()

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        """One request, through the transport for its host."""
        netloc = urlsplit(url).netloc.lower()
        transport = self.routes.get(netloc) or self.routes.get(netloc.rsplit(":", 1)[0]) or self.fallback
        return transport.send(method, url, headers, body)


class Rebased:
    """A transport that sends every request to another scheme://host:port, path and query unchanged."""

    def __init__(self, base_url: str, inner: Transport | None = None) -> None:
        parts = urlsplit(base_url)
        self.scheme, self.netloc = parts.scheme, parts.netloc
        self.inner: Transport = inner or UrllibTransport()

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        """One request, to the same path on the new base."""
        parts = urlsplit(url)
        return self.inner.send(
            method, urlunsplit((self.scheme, self.netloc, parts.path, parts.query, "")), headers, body
        )


def api_transport(settings: Settings, shopify_url: str) -> RoutedTransport:
    """How the API process reaches the fakes: the Shopify shop's host goes to the fake served at `shopify_url`;
    the WooCommerce store URL is already the fake's own address."""
    return RoutedTransport({settings.shopify_shop_domain: Rebased(shopify_url)})


class LocalStores:
    """The fake Shopify and fake WooCommerce, with the settings of the local stage (.chalice/config.json)."""

    def __init__(
        self,
        settings: Settings,
        *,
        now: Callable[[], float],
        console_base: str,
        shopify_url: str | None = None,
        catalog_path: Path = fake_shopify.DEMO_CATALOG,
    ) -> None:
        secrets = settings.secret_values
        self.console_base = console_base.rstrip("/")
        self.shopify = FakeShopify(
            shop_domain=settings.shopify_shop_domain or fake_shopify.SHOP_DOMAIN,
            access_token=secrets.get("SHOPIFY_ACCESS_TOKEN", fake_shopify.ACCESS_TOKEN),
            webhook_secret=secrets.get("SHOPIFY_WEBHOOK_SECRET", fake_shopify.WEBHOOK_SECRET),
            catalog_path=catalog_path,
            now=now,
            storefront_url=shopify_url,
        )
        woo: dict[str, Any] = {
            "consumer_key": secrets.get("WOOCOMMERCE_CONSUMER_KEY"),
            "consumer_secret": secrets.get("WOOCOMMERCE_CONSUMER_SECRET"),
            "webhook_secret": secrets.get("WOOCOMMERCE_WEBHOOK_SECRET"),
        }
        self.woocommerce = FakeWooCommerce(
            store_url=settings.woocommerce_store_url or "http://127.0.0.1:8002",
            catalog_path=catalog_path,
            clock=now,
            **{k: v for k, v in woo.items() if v},
        )
        self._lock = threading.RLock()
        # Where a store's own checkout sends the order webhook it produces: the app's API, once the stack is up.
        self.deliver: Deliver | None = None
        self.woo_checkout = WooCheckout(self.woocommerce, self._lock, lambda: self.deliver, settings.shop_name)

    # --- reaching them

    def transport(self) -> RoutedTransport:
        """In-process transports onto both fakes, by the host the connectors' URLs name."""
        woo_host = urlsplit(self.woocommerce.store_url).netloc.lower()
        return RoutedTransport(
            {self.shopify.shop_domain: self.shopify.transport(), woo_host: self.woocommerce.transport()}
        )

    def store(self, platform: str) -> FakeShopify | FakeWooCommerce:
        """The fake for a store platform; KeyError for generic."""
        fakes: dict[str, FakeShopify | FakeWooCommerce] = {"shopify": self.shopify, "woocommerce": self.woocommerce}
        return fakes[platform]

    # --- what the console asks of them

    def counts(self, platform: str, sku: str) -> dict[str, int]:
        """The store's own available and reserved units of a SKU; UnknownSku when it sells none."""
        store = self.store(platform)
        try:
            return store.counts(sku)
        except KeyError as exc:
            raise UnknownSku(f"The fake {platform} store sells no product with SKU {sku!r}.") from exc

    def ids(self, sku: str) -> dict[str, str]:
        """Every platform id the fakes give this SKU, as their catalogues report them to the app."""
        ids: dict[str, str] = {}
        with suppress(KeyError):
            ids.update(self.shopify.ids(sku))
        try:
            product = self.woocommerce.by_sku(sku)
        except KeyError:
            return ids
        if product.type == "variation":
            ids["woocommerce.product_id"] = str(product.parent_id)
            ids["woocommerce.variation_id"] = str(product.id)
        else:
            ids["woocommerce.product_id"] = str(product.id)
        return ids

    def restock(self, platform: str, sku: str, available: int) -> tuple[bytes, dict[str, str]]:
        """Set the store's stock of a SKU; the signed webhook the platform sends for it (body, headers)."""
        with self._lock:
            try:
                if platform == "shopify":
                    return self.shopify.set_available(sku, available)
                return self.woocommerce.set_stock(sku, available)
            except KeyError as exc:
                raise UnknownSku(f"The fake {platform} store sells no product with SKU {sku!r}.") from exc

    def pay(self, platform: str, ref: str) -> list[tuple[bytes, dict[str, str]]]:
        """The shopper pays for the store's hold `ref` (a draft order, or an order): every signed webhook the store
        sends for it, the order's last. Shopify completing a draft order sends orders/create and the draft order's
        draft_orders/update (in no set order: https://shopify.dev/docs/apps/build/webhooks, *Ordering*); the
        app matches an order to its hold through either."""
        with self._lock:
            if platform == "shopify":
                order = self.shopify.complete_draft_order(ref)
                return [self.shopify.draft_order_webhook(ref), order]
            return [self.woocommerce.pay_order(int(ref))]

    # --- served over HTTP

    def checkout_for(self, path: str) -> str | None:
        """The console's checkout for the hold whose Shopify invoice has this path, or None."""
        draft = self.shopify.draft_for_invoice(path)
        attribute = next((a for a in draft.custom_attributes if a.get("value")), None) if draft else None
        if attribute is None:
            return None
        query = urlencode({"reservation": attribute["value"], "store": "shopify"})
        return f"{self.console_base}/checkout?{query}"

    def site(self, platform: str) -> Callable[[dict[str, Any], Callable[..., Any]], Iterator[bytes] | list[bytes]]:
        """A fake as a WSGI app: its API and its checkout pages (Shopify's invoice sending the shopper on to the
        console's checkout; WooCommerce's claim link, checkout and order received, devstack/woo_checkout.py)."""
        api = self.store(platform).wsgi_app

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes] | list[bytes]:
            path = str(environ.get("PATH_INFO", ""))
            method = str(environ.get("REQUEST_METHOD", "GET"))
            if platform == "woocommerce":
                if self.woo_checkout.handles(method, path, str(environ.get("QUERY_STRING") or "")):
                    return self.woo_checkout(environ, start_response)
                return api(environ, start_response)
            if method == "GET" and "/invoices/" in path:
                target = self.checkout_for(path)
                if target is None:
                    start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
                    return [b"This store has no such checkout.\n"]
                start_response("302 Found", [("Location", target), ("Content-Type", "text/plain; charset=utf-8")])
                return [f"Continue to {target}\n".encode()]
            return api(environ, start_response)

        return app
