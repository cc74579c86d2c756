"""Opting back in: a person who opted out asks the shop's support to hear from it again.

A suppressed contact is never messaged (invariant 3), so the shop sends nothing: staff start an opt-in on the
dashboard and get a link to give the person in the conversation they started (their email to support, say). The
link opens a page with a button (scanners open links; only the button's POST acts), and only that button lifts
the opt-out: staff alone can never opt anyone in. Each opt-in is pending in the throttle table under
`optin#<contact key>` with a nonce the link carries; a newer opt-in, use, or OPTIN_DAYS end it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from chalice import Response

from chalicelib import i18n
from chalicelib.clock import Clock, iso
from chalicelib.errors import Conflict, RateLimited
from chalicelib.links import Links
from chalicelib.pages import LINK_INCOMPLETE, Shop, button_form, page, text_page, tr
from chalicelib.tables.store import Tables
from chalicelib.tokens import TokenExpired, TokenInvalid, Tokens

OPTIN_DAYS = 7  # how long an opt-in link works
OPTIN_EVERY_S = 3600  # at most one new link per person an hour
# The audit partition of person-wide facts of opting back in (a SKU never starts with '@').
OPTIN_PARTITION = "@optin"


def optin_key(contact_key: str) -> str:
    """The throttle-table key of a person's pending opt-in."""
    return f"optin#{contact_key}"


@dataclass(frozen=True, kw_only=True, eq=False)
class OptIns:
    """Start an opt-in (staff), and the link's page and button (the person)."""

    tables: Tables
    tokens: Tokens
    links: Links
    clock: Clock
    shop: Shop

    def start(self, contact_key: str) -> dict[str, Any]:
        """A fresh opt-in link for an opted-out person; Conflict when they are not opted out."""
        opted = self.tables.optout.get(contact_key)
        if opted is None:
            raise Conflict("They are not opted out: there is nothing to opt back into.", code="not_opted_out")
        now = self.clock.now()
        nonce = secrets.token_urlsafe(12)
        started = self.tables.throttle.start_optin(
            optin_key(contact_key), nonce=nonce, now=now, ttl_s=OPTIN_DAYS * 86400, every_s=OPTIN_EVERY_S
        )
        if not started:
            raise RateLimited("An opt-in link was made for them within the hour; give them that one.", OPTIN_EVERY_S)
        self.tables.audit.record(OPTIN_PARTITION, "optin_started", now, contact_key=contact_key)
        expires = iso(now + OPTIN_DAYS * 86400)[:19] + "Z"
        return {
            "status": "confirmation_link",
            "link": self.links.optin(contact_key, nonce),
            "expires_at": expires,
            "sms_stop": opted.get("source") == "stop",
        }

    # --- The person's side: GET /optin/{token} shows a button, POST /optin/{token} opts them back in.

    # The person is known only by a keyed hash here, so the page is in the language their browser asks for.

    def _page(self, status: int, lang: str, title: str, message: str, extra: str = "", **fields: object) -> Response:
        return page(status, tr(lang, title), tr(lang, message, **fields), self.shop, extra, lang=lang)

    def _read(self, token: str, lang: str) -> tuple[str, str] | Response:
        try:
            return self.tokens.read_optin(token, OPTIN_DAYS * 86400)
        except TokenExpired:
            return self._expired(lang)
        except TokenInvalid:
            return text_page(400, LINK_INCOMPLETE, self.shop, lang)

    def _expired(self, lang: str) -> Response:
        return self._page(
            410,
            lang,
            "This link no longer works",
            "It was used, replaced by a newer one, or is over {days} days old. Ask {shop} again.",
            days=i18n.number(OPTIN_DAYS, lang),
            shop=self.shop.name,
        )

    def form(self, token: str, accept: str | None = None) -> Response:
        """The page the link opens: what the button does. Changes nothing."""
        lang = i18n.negotiate(accept=accept)
        read = self._read(token, lang)
        if isinstance(read, Response):
            return read
        key, nonce = read
        if not self.tables.throttle.pending_optin(optin_key(key), nonce, self.clock.now()):
            return self._expired(lang)
        return self._page(
            200,
            lang,
            "Hear from us again?",
            "You asked {shop} to stop messaging you. Press the button to allow back-in-stock messages again (you "
            "then tap Notify me on the products you want).",
            button_form(token, tr(lang, "Yes, send me messages again")),
            shop=self.shop.name,
        )

    def confirm(self, token: str, accept: str | None = None) -> Response:
        """The button: the opt-out is lifted, once."""
        lang = i18n.negotiate(accept=accept)
        read = self._read(token, lang)
        if isinstance(read, Response):
            return read
        key, nonce = read
        now = self.clock.now()
        # The pending opt-in is used first: a crash before the opt-out goes leaves the person opted out (the safe
        # side), and staff can make them a new link.
        if not self.tables.throttle.take_optin(optin_key(key), nonce, now):
            return self._expired(lang)
        self.tables.optout.remove(key)
        self.tables.audit.record(OPTIN_PARTITION, "optin", now, contact_key=key)
        return self._page(
            200,
            lang,
            "You can hear from us again",
            "Thank you. Tap Notify me on a product at {shop} to be told when it is back.",
            shop=self.shop.name,
        )

    def refused(self, accept: str | None = None) -> Response:
        """A button press sent from another website's page: nothing changes."""
        lang = i18n.negotiate(accept=accept)
        return self._page(403, lang, "Please use the button on the page", "Open the link again.")
