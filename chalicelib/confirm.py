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
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib.clock import Clock
from chalicelib.compose import sms_shop
from chalicelib.errors import BadRequest
from chalicelib.links import Links
from chalicelib.senders import EMAIL, SMS, Notice, Senders, error_code, maybe_sent
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)

CONFIRM_KIND = "confirm"
CODE_KIND = "code"
MESSAGE_KINDS = (CONFIRM_KIND, CODE_KIND)
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


def confirm_message(sku: str, joined_ts: str) -> str:
    """The jobs-queue message that asks the notifier to send one place's owed confirmation email."""
    return json.dumps({"kind": CONFIRM_KIND, "sku": sku, "joined_ts": joined_ts}, separators=(",", ":"))


def code_message(contact_key: str, nonce: str) -> str:
    """The jobs-queue message that asks the notifier to send a channel-switch code."""
    return json.dumps({"kind": CODE_KIND, "key": contact_key, "nonce": nonce}, separators=(",", ":"))


def message_of(body: str) -> dict[str, str] | None:
    """A confirmation or code message, or None when the body is something else (a restock job)."""
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("kind") not in MESSAGE_KINDS:
        return None
    fields = ("sku", "joined_ts") if data["kind"] == CONFIRM_KIND else ("key", "nonce")
    if not all(isinstance(data.get(f), str) and data.get(f) for f in fields):
        raise BadRequest(f"a {data['kind']} message needs {', '.join(fields)}", code="invalid_job")
    return {k: str(data[k]) for k in ("kind", *fields)}


def switch_key(contact_key: str) -> str:
    """The throttle-table key of a person's pending channel switch."""
    return f"switch#{contact_key}"


class CodeKey:
    """Derives a switch code from its nonce; the key is drawn from TOKEN_KEY for this purpose alone."""

    def __init__(self, token_key: str) -> None:
        self._key = hmac.new(token_key.encode(), b"bisn switch codes v1", hashlib.sha256).digest()

    def code(self, nonce: str) -> str:
        """Six digits."""
        digest = hmac.new(self._key, nonce.encode(), hashlib.sha256).digest()
        return f"{int.from_bytes(digest[:8], 'big') % 1_000_000:06d}"

    def matches(self, nonce: str, typed: str) -> bool:
        """Whether the typed code is this nonce's (spaces ignored), in constant time."""
        return hmac.compare_digest(self.code(nonce), "".join(typed.split()))


def code_sms(shop_name: str, code: str) -> str:
    """A switch code's SMS: the shop's name as the notices print it (GSM-7, shortened), so one segment, never
    UCS-2."""
    minutes = CODE_TTL_S // 60
    return (
        f"{sms_shop(shop_name)}: your code is {code}. It works for {minutes} minutes. Ignore this if you did not ask."
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

    def handle(self, message: dict[str, str]) -> bool:
        """Send what the message asks for, if still owed; True when something was sent."""
        if message["kind"] == CONFIRM_KIND:
            return self.send_confirmation(message["sku"], message["joined_ts"])
        return self.send_code(message["key"], message["nonce"])

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
        pending = self.tables.throttle.claim_switch_code(switch_key(contact_key), nonce, self.clock.now())
        if pending is None:
            return False
        channel, to, new_key = str(pending["channel"]), str(pending["contact"]), str(pending["new_key"])
        code = self.codes.code(nonce)
        minutes = CODE_TTL_S // 60
        if channel == SMS:
            notice = Notice(channel=SMS, to=to, text=code_sms(self.shop_name, code))
        else:
            text = (
                f"Hello,\n\nSomeone asked {self.shop_name} to send back-in-stock messages to this address instead. "
                f"If it was you, enter this code on the page you came from: {code}\n\nIt works for {minutes} minutes. "
                "If it was not you, ignore this email: nothing changes.\n"
            )
            body = "".join(f"<p>{html.escape(p)}</p>" for p in text.strip().split("\n\n"))
            notice = Notice(channel=EMAIL, to=to, subject=f"Your code for {self.shop_name}", text=text, html=body)

        def give_back() -> None:
            self.tables.throttle.release_switch_code(switch_key(contact_key), nonce)

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
) -> Notice:
    """The one confirmation email of a place."""
    greeting = f"Hi {greeting_name}," if greeting_name else "Hello,"
    days_words = f"{days} day" + ("s" if days != 1 else "")
    paragraphs = [
        greeting,
        f"Someone (we hope you) asked {shop} to email this address when {product} is back in stock.",
        "To confirm, open this link and press the button:",
        confirm_url,
        f"If it was not you, ignore this email: we will not email you about it, and the request is deleted "
        f"after {days_words}.",
    ]
    text = "\n\n".join(paragraphs) + f"\n\n--\nManage your alerts: {manage_url}\nUnsubscribe: {unsubscribe_url}\n"
    safe = {k: html.escape(v, quote=True) for k, v in (("c", confirm_url), ("m", manage_url), ("u", unsubscribe_url))}
    body_html = (
        '<!doctype html><html><body style="font-family:sans-serif;line-height:1.5;color:#111827">'
        + "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs[:3])
        + f'<p><a href="{safe["c"]}">Yes, email me when it is back</a></p>'
        + f"<p>{html.escape(paragraphs[4])}</p>"
        + f'<hr><p style="font-size:12px;color:#6b7280"><a href="{safe["m"]}">Manage your alerts</a> · '
        + f'<a href="{safe["u"]}">Unsubscribe</a></p></body></html>'
    )
    return Notice(
        channel=EMAIL,
        to=to,
        subject=f"Please confirm: {product} back-in-stock email from {shop}",
        text=text,
        html=body_html,
        unsubscribe_url=unsubscribe_url,
    )


def new_nonce() -> str:
    """A random nonce for one switch code."""
    return secrets.token_urlsafe(12)
