"""Opting back in: a person who opted out asks the shop's support to hear from it again.

Staff start an opt-in on the dashboard; the shop sends its link to the person's own contact (by the notifier, the
only function that may send, as every other message), and never shows it to staff: whoever starts one, only the
owner of the contact can use it. The link opens a page with a button (scanners open links; only the button's POST
acts), and only that button lifts the opt-out. It is the one message besides a tap's proof message
(chalicelib/shopper/resubscribe.py) a suppressed contact can be sent, and only where that proof may go: after an opt-out
of the person's own choice (PROOF_SOURCES), never after a hard bounce, a complaint or an invalid number, where
sending harms the sender (409 `not_their_choice`). Each opt-in is pending in the throttle table under
`optin#<contact key>` with a nonce the link carries, where its message goes and who started it; a newer opt-in,
use, or OPTIN_DAYS end it, and the fact of its use names who started it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib import i18n
from chalicelib.clock import Clock, iso
from chalicelib.contacts import Contact
from chalicelib.errors import Conflict, RateLimited
from chalicelib.links import Links
from chalicelib.messages.compose import Brand, sms_shop
from chalicelib.messages.senders import SMS, Notice, Senders
from chalicelib.messages.sms import to_gsm
from chalicelib.messages.sms_caps import SmsSends
from chalicelib.queue.messages import Message, OptinLink
from chalicelib.shopper.pages import LINK_INCOMPLETE, Page, Shop, button_form, shopper_page, shopper_text_page, tr
from chalicelib.shopper.resubscribe import DOMAIN, PROOF_SOURCES, SENT, link_email, send_while_own_choice
from chalicelib.tables.store import Tables
from chalicelib.tokens import TokenExpired, TokenInvalid, Tokens

OPTIN_DAYS = 7  # how long an opt-in link works
OPTIN_EVERY_S = 3600  # at most one new link per person an hour
# The audit partition of person-wide facts of opting back in (a SKU never starts with '@').
OPTIN_PARTITION = "@optin"


def optin_key(contact_key: str) -> str:
    """The throttle-table key of a person's pending opt-in."""
    return f"optin#{contact_key}"


@dataclass(frozen=True)
class _Link:
    """What an opt-in link names, and the language its pages are in."""

    lang: str
    key: str
    nonce: str


@dataclass(frozen=True, kw_only=True, eq=False)
class OptIns:
    """Start an opt-in (staff), and the link's page and button (the person)."""

    tables: Tables
    tokens: Tokens
    links: Links
    clock: Clock
    shop: Shop
    send_message: Callable[[Message], object]  # puts a message on the jobs queue (the link, for the notifier to send)
    # A link by SMS counts against the shop's daily ceiling of SMS that are not notices (chalicelib/messages/sms_caps.py).
    sms_sends: SmsSends | None = None

    def start(
        self,
        contact: Contact,
        contact_key: str,
        *,
        started_by: Mapping[str, str],
        lang: str | None = None,
        also: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """Send the person a fresh opt-in link; Conflict when they are not opted out, or opted out by a bounce, a
        complaint or an invalid number. `started_by` names the staff member (email, sub), kept for the fact of the
        link's use. `also` are the contact's other keys (an email's spelling from before mailboxes were matched):
        their opt-outs are checked and lifted with `contact_key`'s, so none is left to suppress the address. The
        answer never carries the link."""
        records = {key: self.tables.optout.get(key) for key in (contact_key, *also)}
        opted = records[contact_key]
        if opted is None:
            raise Conflict("They are not opted out: there is nothing to opt back into.", code="not_opted_out")
        for record in (r for r in records.values() if r is not None):
            source = str(record.get("source") or "")
            if source not in PROOF_SOURCES:
                raise Conflict(
                    f"Their opt-out came from {source.replace('_', ' ') or 'the provider'}, not from them: sending "
                    "there harms the shop's sender, so they cannot be opted back in. They can tap Notify me with "
                    "another contact.",
                    code="not_their_choice",
                )
        source = str(opted.get("source") or "")
        now = self.clock.now()
        nonce = secrets.token_urlsafe(12)
        started = self.tables.pending_steps.start_optin(
            optin_key(contact_key),
            nonce=nonce,
            now=now,
            ttl_s=OPTIN_DAYS * 86400,
            every_s=OPTIN_EVERY_S,
            channel=contact.channel,
            contact=contact.address,
            lang=i18n.negotiate(lang),
            started_by=dict(started_by),
            also=[key for key in also if records[key] is not None],
        )
        if not started:
            raise RateLimited("An opt-in link was sent to them within the hour.", OPTIN_EVERY_S)
        if contact.channel == SMS and self.sms_sends is not None:
            try:
                self.sms_sends.charge_ceiling(now)
            except RateLimited:
                # No link goes, so none may be pending: staff can start it again tomorrow.
                self.tables.pending_steps.take_optin(optin_key(contact_key), nonce, now)
                raise
        self.tables.audit.record(
            OPTIN_PARTITION,
            "optin_started",
            now,
            contact_key=contact_key,
            channel=contact.channel,
            started_by=str(started_by.get("email") or ""),
        )
        self.send_message(OptinLink(contact_key, nonce))
        return {
            "status": "link_sent",
            "channel": contact.channel,
            "expires_at": iso(now + OPTIN_DAYS * 86400)[:19] + "Z",
            "sms_stop": contact.channel == SMS and source == "stop",
        }

    # --- The person's side: GET /optin/{token} shows a button, POST /optin/{token} opts them back in.

    # The person is known only by a keyed hash here, so the page is in the language their browser asks for.

    def _page(self, status: int, lang: str, title: str, message: str, extra: str = "", **fields: object) -> Page:
        return shopper_page(status, tr(lang, title), tr(lang, message, **fields), self.shop, extra, lang=lang)

    def _read(self, token: str, accept: str | None) -> _Link | Page:
        """The link's person and nonce in the browser's language, or the page that says why the link cannot work."""
        lang = i18n.negotiate(accept=accept)
        try:
            key, nonce = self.tokens.read_optin(token, OPTIN_DAYS * 86400)
        except TokenExpired:
            return self._expired(lang)
        except TokenInvalid:
            return shopper_text_page(400, LINK_INCOMPLETE, self.shop, lang)
        return _Link(lang, key, nonce)

    def _expired(self, lang: str) -> Page:
        return self._page(
            410,
            lang,
            "This link no longer works",
            "It was used, replaced by a newer one, or is over {days} days old. Ask {shop} again.",
            days=i18n.number(OPTIN_DAYS, lang),
            shop=self.shop.name,
        )

    def form(self, token: str, accept: str | None = None) -> Page:
        """The page the link opens: what the button does. Changes nothing."""
        link = self._read(token, accept)
        if isinstance(link, Page):
            return link
        lang = link.lang
        if not self.tables.pending_steps.pending_optin(optin_key(link.key), link.nonce, self.clock.now()):
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

    def confirm(self, token: str, accept: str | None = None) -> Page:
        """The button: the opt-out is lifted, once."""
        link = self._read(token, accept)
        if isinstance(link, Page):
            return link
        lang, key, nonce = link.lang, link.key, link.nonce
        now = self.clock.now()
        # The pending opt-in is used first: a crash before the opt-out goes leaves the person opted out (the safe
        # side), and staff can make them a new link.
        taken = self.tables.pending_steps.take_optin(optin_key(key), nonce, now)
        if taken is None:
            return self._expired(lang)
        self.tables.optout.remove(key)
        for older in taken.get("also") or []:
            self.tables.optout.remove(str(older))
        started_by = taken.get("started_by")
        by: dict[str, Any] = started_by if isinstance(started_by, dict) else {}
        self.tables.audit.record(
            OPTIN_PARTITION,
            "optin",
            now,
            contact_key=key,
            started_by=str(by.get("email") or ""),
            started_by_sub=str(by.get("sub") or ""),
        )
        return self._page(
            200,
            lang,
            "You can hear from us again",
            "Thank you. Tap Notify me on a product at {shop} to be told when it is back.",
            shop=self.shop.name,
        )

    def refused(self, accept: str | None = None) -> Page:
        """A button press sent from another website's page: nothing changes."""
        lang = i18n.negotiate(accept=accept)
        return self._page(403, lang, "Please use the button on the page", "Open the link again.")


# --- The notifier's side: the link, sent once to the person's own contact.


def optin_email(*, shop: str, to: str, lang: str, link: str, unsubscribe_url: str, brand: Brand) -> Notice:
    """The email that carries a staff-started opt-in's link, in the language staff chose (else English)."""
    t = i18n.text(DOMAIN, lang)
    paragraphs = [
        t("Hello,"),
        t("You unsubscribed from {shop}'s messages earlier.", shop=shop),
        t("We were asked to turn them back on for you. If that was you, open this link and press the button:"),
        link,
        t("If it was not you, ignore this email: nothing changes, and your messages stay off."),
    ]
    return link_email(lang=lang, to=to, shop=shop, paragraphs=paragraphs, unsubscribe_url=unsubscribe_url, brand=brand)


def optin_sms(*, shop: str, lang: str, link: str) -> str:
    """The SMS that carries a staff-started opt-in's link: the shop's name first, GSM-7 only."""
    t = i18n.text(DOMAIN, lang)
    message = t(
        "{shop}: we were asked to turn our messages back on for you. If that was you, open {link} and press the "
        "button. Not you? Ignore this.",
        shop=sms_shop(shop),
        link=link,
    )
    return to_gsm(message)


@dataclass(frozen=True, kw_only=True, eq=False)
class OptInSender:
    """Sends a pending opt-in's link (the notifier runs it), exactly once."""

    tables: Tables
    links: Links
    senders: Senders
    clock: Clock
    shop_name: str
    brand: Brand  # the shop's look for the email (chalicelib/messages/compose.py brand_of)

    def handle(self, contact_key: str, nonce: str) -> bool:
        """Send the link if it is still owed; True when it went."""
        now = self.clock.now()
        pending = self.tables.pending_steps.claim_optin_message(optin_key(contact_key), nonce, now)
        if pending is None:
            return False  # a redelivery, or replaced, used or expired meanwhile
        channel, to = str(pending["channel"]), str(pending["contact"])
        lang = str(pending.get("lang") or i18n.DEFAULT_LANGUAGE)
        link = self.links.optin(contact_key, nonce)
        if channel == SMS:
            notice = Notice(channel=SMS, to=to, text=optin_sms(shop=self.shop_name, lang=lang, link=link))
        else:
            unsubscribe = self.links.unsubscribe(contact_key)
            notice = optin_email(
                shop=self.shop_name, to=to, lang=lang, link=link, unsubscribe_url=unsubscribe, brand=self.brand
            )

        def told(outcome: str) -> None:
            kind, reason = ("optin_link_sent", "") if outcome == SENT else ("optin_refused", outcome)
            self.tables.audit.record(
                OPTIN_PARTITION, kind, now, contact_key=contact_key, channel=channel, reason=reason
            )

        return send_while_own_choice(
            self.senders,
            self.tables,
            contact_key,
            notice,
            what="an opt-in link",
            told=told,
            release=lambda: self.tables.pending_steps.release_optin_message(optin_key(contact_key), nonce),
        )
