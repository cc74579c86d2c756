"""Email double opt-in, and the codes that prove a new contact before a channel switch.

A new email place is written unconfirmed, owing one confirmation email, in the tap's own transaction
(`confirm_owed_at`, the sparse index "by-confirm"). The API function has no SES permission (DESIGN §7), so the
tap puts a small message on the jobs queue and the notifier sends the email: it first takes the owed email
(a conditional update only one sender wins), then sends, and gives it back only when the provider provably did
not take it, so a redelivered message sends nothing twice. A tap cut short before its message is finished by the
sweep, which re-sends the message for every confirmation owed for over a minute.

The email's link opens a page with a button (mail scanners open links; only the button's POST confirms). Until
then the notifier passes the place over (`SkipReason.UNCONFIRMED`): the place keeps its `joined_ts`, is never
consumed, and is told about later restocks once confirmed. Confirming while a restock has units nobody eligible
waited for (the product's idle mark) owes that restock a top-up in the same transaction, so the newly confirmed
place is offered one (invariant 7). An unconfirmed place's ttl is EMAIL_CONFIRM_DAYS, so the sweep's stale-place
path removes it, with its uniqueness item, when nobody confirms.

Switching channel on the manage page needs proof of the new contact: a six-digit code sent to it (by the notifier,
the only function that may send), entered on the page. The pending switch lives a short while in the throttle
table under `switch#<contact key>`; the code itself is never stored, only derived from a random nonce with a key
drawn from TOKEN_KEY for this purpose alone.

Every one of these messages is written in the shopper's language from the `messages` catalogues: the
confirmation email in its place's (`Request.lang`), a code in the language its pending switch keeps (`lang`),
else English.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from chalicelib.clock import Clock
from chalicelib.colours import DEFAULT_ACCENT
from chalicelib.i18n import DEFAULT_LANGUAGE
from chalicelib.links import Links
from chalicelib.messages.compose import (
    P_STYLE,
    SMALL,
    button,
    email_document,
    gsm_only,
    sms_shop,
    window_words,
    words,
)
from chalicelib.messages.senders import EMAIL, SMS, Notice, Senders, error_code, maybe_sent
from chalicelib.tables.store import Tables
from chalicelib.tokens import KeySource, current_keys

log = logging.getLogger(__name__)

# One confirmation per place: a repeat tap sends another only after this long, and never more than this many.
RESEND_AFTER_S = 86400
MAX_CONFIRMATIONS = 3
# The sweep re-sends the message of a confirmation owed for over this long (the tap was cut short).
OWED_AFTER_S = 60
OWED_LOOKBACK_DAYS = 2
# Channel-switch codes: how long one works, how many wrong tries end it, and how often a new one may be asked for.
CODE_TTL_S = 900
CODE_ATTEMPTS = 5
CODE_RESEND_AFTER_S = 60


def switch_key(contact_key: str) -> str:
    """The throttle-table key of a person's pending channel switch."""
    return f"switch#{contact_key}"


class CodeKey:
    """Derives a six-digit code from its nonce, so no code is stored; the key is drawn from TOKEN_KEY for one
    purpose alone (a switch's codes by default), so a code of one purpose is never another's.

    TOKEN_KEY is read on every use, as links read it (chalicelib/tokens.py): a code is issued under the newest key
    and matches under any key listed, so during a rotation a code sent by a container that had the old key still
    works in one that has the new, and a rotation reaches a warm container without a restart."""

    def __init__(self, token_keys: KeySource, purpose: bytes = b"bisn switch codes v1") -> None:
        self._source = token_keys
        self._purpose = purpose

    def _key(self, token_key: str) -> bytes:
        return hmac.new(token_key.encode(), self._purpose, hashlib.sha256).digest()

    def _code(self, token_key: str, nonce: str) -> str:
        digest = hmac.new(self._key(token_key), nonce.encode(), hashlib.sha256).digest()
        return f"{int.from_bytes(digest[:8], 'big') % 1_000_000:06d}"

    def code(self, nonce: str) -> str:
        """Six digits, under the newest key."""
        return self._code(current_keys(self._source)[0], nonce)

    def matches(self, nonce: str, typed: str) -> bool:
        """Whether the typed code is this nonce's under any listed key (spaces ignored), in constant time."""
        given = "".join(typed.split())
        held = False
        for token_key in current_keys(self._source):
            # Every key is tried: no early exit whose timing tells which key a code was issued under.
            held = hmac.compare_digest(self._code(token_key, nonce), given) or held
        return held


def code_sms(shop_name: str, code: str, lang: str = DEFAULT_LANGUAGE) -> str:
    """A switch code's SMS in the shopper's language: the shop's name as the notices print it (GSM-7,
    shortened), the whole folded to GSM-7, so one segment, never UCS-2."""
    text = words(lang)(
        "{shop}: your code is {code}. It works for {window}. Ignore this if you did not ask.",
        shop=sms_shop(shop_name),
        code=code,
        window=window_words(CODE_TTL_S, lang),
    )
    return gsm_only(text)


def code_email(shop_name: str, code: str, to: str, lang: str = DEFAULT_LANGUAGE) -> Notice:
    """A switch code's email in the shopper's language."""
    t = words(lang)
    window = window_words(CODE_TTL_S, lang)
    paragraphs = [
        t("Hello,"),
        t(
            "Someone asked {shop} to send back-in-stock messages to this address instead. If it was you, enter "
            "this code on the page you came from: {code}",
            shop=shop_name,
            code=code,
        ),
        t("It works for {window}. If it was not you, ignore this email: nothing changes.", window=window),
    ]
    subject = t("Your code for {shop}", shop=shop_name)
    rows = [f'<p class="fg" style="{P_STYLE}">{html.escape(p)}</p>' for p in paragraphs]
    return Notice(
        channel=EMAIL,
        to=to,
        subject=subject,
        text="\n\n".join(paragraphs) + "\n",
        html=email_document(lang, subject, rows),
    )


@dataclass(frozen=True, kw_only=True, eq=False)
class MessageSender:
    """The notifier's side: sends owed confirmation emails and switch codes, each exactly once."""

    tables: Tables
    links: Links
    senders: Senders
    codes: CodeKey
    clock: Clock
    shop_name: str
    confirm_days: int

    def _send(self, notice: Notice, contact_key: str, give_back: Callable[[], None]) -> bool:
        def still_allowed() -> None:
            if self.tables.optout.get(contact_key) is not None:
                raise PermissionError("suppressed")  # invariant 3: nothing to a suppressed contact

        try:
            self.senders.send(notice, just_before=still_allowed)
        except PermissionError:
            return False
        except Exception as error:
            if maybe_sent(error):
                # The provider may have taken it: never sent twice; the shopper can ask again later.
                log.warning("a %s message's answer was lost (%s); not resent", notice.channel, error_code(error))
                return True
            give_back()
            raise
        return True

    def send_confirmation(self, sku: str, joined_ts: str) -> bool:
        """Send a place's owed confirmation email (nothing when none is owed: a redelivery, or already sent)."""
        now = self.clock.now()
        place = self.tables.requests.claim_confirmation(sku, joined_ts, now=now)
        if place is None or place.channel != EMAIL or not place.contact:
            return False
        if self.tables.optout.get(place.contact_key) is not None:
            return False
        product = self.tables.catalog.get_cached(sku)
        name = (product.name if product and product.name else sku).strip()
        version = self.tables.optout.manage_version(place.contact_key)
        notice = confirmation_email(
            lang=place.lang,
            shop=self.shop_name,
            product=name,
            to=place.contact,
            greeting_name=place.name,
            confirm_url=self.links.confirm(sku, joined_ts),
            manage_url=self.links.manage(place.contact_key, version),
            unsubscribe_url=self.links.unsubscribe(place.contact_key),
            days=self.confirm_days,
        )
        sent_at = int(place.confirm_sent_at or int(now))

        def give_back() -> None:
            self.tables.requests.release_confirmation(sku, joined_ts, sent_at=sent_at, now=now)

        sent = self._send(notice, place.contact_key, give_back)
        if sent:
            self.tables.audit.record(sku, "confirmation_sent", now, contact_key=place.contact_key, channel=EMAIL)
        return sent

    def send_code(self, contact_key: str, nonce: str) -> bool:
        """Send a pending switch's code to the new contact (once per nonce)."""
        pending = self.tables.pending_steps.claim_switch_code(switch_key(contact_key), nonce, self.clock.now())
        if pending is None:
            return False
        channel, to, new_key = str(pending["channel"]), str(pending["contact"]), str(pending["new_key"])
        code = self.codes.code(nonce)
        # The language of the page that asked for the switch, when the pending switch keeps it; else English.
        lang = str(pending.get("lang") or DEFAULT_LANGUAGE)
        if channel == SMS:
            notice = Notice(channel=SMS, to=to, text=code_sms(self.shop_name, code, lang))
        else:
            notice = code_email(self.shop_name, code, to, lang)

        def give_back() -> None:
            self.tables.pending_steps.release_switch_code(switch_key(contact_key), nonce)

        return self._send(notice, new_key, give_back)


def confirmation_email(
    *,
    shop: str,
    product: str,
    to: str,
    greeting_name: str,
    confirm_url: str,
    manage_url: str,
    unsubscribe_url: str,
    days: int,
    lang: str = DEFAULT_LANGUAGE,
) -> Notice:
    """The one confirmation email of a place, in the language the shopper tapped in."""
    t = words(lang)
    greeting = t("Hi {name},", name=greeting_name) if greeting_name else t("Hello,")
    days_words = t.plural("{n} day", "{n} days", days)
    asked = t(
        "Someone (we hope you) asked {shop} to email this address when {product} is back in stock.",
        shop=shop,
        product=product,
    )
    how = t("To confirm, open this link and press the button:")
    ignore = t(
        "If it was not you, ignore this email: we will not email you about it, and the request is deleted "
        "after {days}.",
        days=days_words,
    )
    manage, unsubscribe = t("Manage your alerts"), t("Unsubscribe")
    text = "\n\n".join([greeting, asked, how, confirm_url, ignore])
    text += f"\n\n--\n{manage}: {manage_url}\n{unsubscribe}: {unsubscribe_url}\n"
    safe = {k: html.escape(v, quote=True) for k, v in (("c", confirm_url), ("m", manage_url), ("u", unsubscribe_url))}
    subject = t("Please confirm: {product} back-in-stock email from {shop}", product=product, shop=shop)
    rows = [
        *(f'<p class="fg" style="{P_STYLE}">{html.escape(p)}</p>' for p in (greeting, asked, how)),
        button(safe["c"], html.escape(t("Yes, email me when it is back")), DEFAULT_ACCENT),
        f'<p class="fg" style="{P_STYLE};margin-top:16px">{html.escape(ignore)}</p>',
        '<hr style="border:0;border-top:1px solid #e5e7eb;margin:24px 0 16px">'
        f'<p class="muted" style="{SMALL}"><a href="{safe["m"]}" style="color:#4b5563">{html.escape(manage)}</a>'
        f' &middot; <a href="{safe["u"]}" style="color:#4b5563">{html.escape(unsubscribe)}</a></p>',
    ]
    return Notice(
        channel=EMAIL,
        to=to,
        subject=subject,
        text=text,
        html=email_document(lang, subject, rows),
        unsubscribe_url=unsubscribe_url,
    )


def new_nonce() -> str:
    """A random nonce for one switch code."""
    return secrets.token_urlsafe(12)
