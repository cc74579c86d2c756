"""The confirmation link's pages (email double opt-in, chalicelib/confirm.py): GET shows a button, POST confirms.

Each page is in the language the place was asked in; a link that names no place falls back on the browser's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from chalicelib import i18n
from chalicelib.clock import Clock
from chalicelib.messages.senders import EMAIL
from chalicelib.queue.owed import OwedJobs
from chalicelib.shopper.pages import (
    LINK_INCOMPLETE,
    About,
    Page,
    Shop,
    button_form,
    shopper_page,
    shopper_text_page,
    tr,
)
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.catalog import Product
from chalicelib.tables.requests import Request
from chalicelib.tables.store import Tables
from chalicelib.tokens import TokenExpired, TokenInvalid, Tokens


@dataclass(frozen=True, kw_only=True, eq=False)
class ConfirmPages:
    """GET /confirm/{token} (a page with a button; changes nothing) and POST /confirm/{token} (confirms)."""

    tables: Tables
    tokens: Tokens
    owed: OwedJobs
    clock: Clock
    shop: Shop
    request_ttl_days: int
    confirm_days: int

    def _place(self, token: str, lang: str) -> tuple[str, str] | Page:
        try:
            return self.tokens.read_confirm(token, self.confirm_days * 86400 + 86400)
        except TokenExpired:
            return self._page(410, lang, "This link has expired", "Please tap Notify me on the product page again.")
        except TokenInvalid:
            return shopper_text_page(400, LINK_INCOMPLETE, self.shop, lang)

    def _page(
        self,
        status: int,
        lang: str,
        title: str,
        message: str,
        extra: str = "",
        about: About | None = None,
        **fields: str,
    ) -> Page:
        return shopper_page(
            status, tr(lang, title), tr(lang, message, **fields), self.shop, extra, lang=lang, about=about
        )

    def _about(self, sku: str) -> About:
        product = self.tables.catalog.get_cached(sku)
        name = (product.name if product and product.name else sku).strip()
        if product is None:
            return About(name)
        return About(name, product.image_url or "", product.product_url or "")

    def _unconfirmed(self, token: str, accept: str | None) -> Page | Request:
        """The still unconfirmed place a link names, or the page to answer with instead (a bad link, a place gone,
        a place confirmed already)."""
        place = self._place(token, i18n.negotiate(accept=accept))
        if isinstance(place, Page):
            return place
        sku, joined_ts = place
        request = self.tables.requests.get(sku, joined_ts)
        if request is None or not request.live:
            return self._gone(i18n.negotiate(request.lang if request else None, accept=accept))
        if not request.unconfirmed:
            return self._done(sku, i18n.negotiate(request.lang, accept=accept))
        return request

    def form(self, token: str, accept: str | None = None) -> Page:
        """The page the email's link opens: it says what pressing the button does."""
        request = self._unconfirmed(token, accept)
        if isinstance(request, Page):
            return request
        lang = i18n.negotiate(request.lang, accept=accept)
        about = self._about(request.sku)
        return self._page(
            200,
            lang,
            "Confirm your email",
            "Press the button to be emailed when {product} is back in stock at {shop}.",
            button_form(token, tr(lang, "Yes, email me when it is back")),
            about,
            product=about.name,
            shop=self.shop.name,
        )

    def confirm(self, token: str, accept: str | None = None) -> Page:
        """The button: the place may now be told about restocks (and about an open one with units left)."""
        request = self._unconfirmed(token, accept)
        if isinstance(request, Page):
            return request
        sku, joined_ts = request.sku, request.joined_ts
        lang = i18n.negotiate(request.lang, accept=accept)
        now = self.clock.now()
        ttl = int(now) + self.request_ttl_days * 86400
        tx = Tx().add(
            "place", *self.tables.requests.confirm_items(sku, joined_ts, request.contact_key, ttl=ttl, now=now)
        )
        try:
            self.tables.run(tx.without().add("product", self.tables.catalog.not_idle_check(sku)))
        except TransactionCancelled as cancelled:
            if not cancelled.failed("product"):
                current = self.tables.requests.get(sku, joined_ts)
                return self._done(sku, lang) if current is not None and not current.unconfirmed else self._gone(lang)
            old = cancelled.old("product")
            product = Product.from_item(old) if old else None
            restock_ts = str(product.idle_restock_ts) if product and product.idle_restock_ts else ""
            if restock_ts:
                # Units wait for nobody on an open restock: the confirmed place is owed a top-up (invariant 7).
                owe = self.tables.restocks.owe_topup_item(sku, restock_ts, token=f"confirm#{uuid.uuid4().hex}", now=now)
                tx.add("owed job", owe)
            try:
                self.tables.run(tx)
            except TransactionCancelled:
                current = self.tables.requests.get(sku, joined_ts)
                return self._done(sku, lang) if current is not None and not current.unconfirmed else self._gone(lang)
            finally:
                if restock_ts:
                    self.owed.send(sku, restock_ts, now)
        self.tables.audit.record(sku, "confirmed", now, contact_key=request.contact_key, channel=EMAIL)
        return self._done(sku, lang)

    def _done(self, sku: str, lang: str) -> Page:
        about = self._about(sku)
        return self._page(
            200,
            lang,
            "You are on the list",
            "Thank you. We will email you when {product} is back in stock at {shop}.",
            about=about,
            product=about.name,
            shop=self.shop.name,
        )

    def _gone(self, lang: str) -> Page:
        return self._page(
            410,
            lang,
            "This request is no longer on the list",
            "It was not confirmed in time, or it was removed. Tap Notify me on the product page to ask again.",
        )
