"""Opting back in from a tap: a contact who opted out and taps Notify me again is never silently dropped, and
never re-added without proof that the tap was theirs.

The tap's answer is the one every tap gets (202 received): a caller who types someone else's contact learns
nothing. The truth goes to the contact itself, as one proof message, the only message a suppressed contact can
ever be sent (the one exception to invariant 3, docs/SHOPPER.md "Opting back in"):

- an email address gets a re-subscribe email whose link (`/resubscribe/{id}`, a random 128-bit id, LINK_DAYS)
  opens a page with a button; only the button's POST lifts the opt-out and joins the list, in one transaction;
- a number gets a six-digit code by SMS (CODE_TTL_S, CODE_ATTEMPTS tries, of which one client address may make at
  most CODE_TRIES_PER_SOURCE in a window), which the widget sends back to `POST /notify-me/code`; the right code
  lifts the opt-out and joins the list, in one transaction.

A proof message goes only for an opt-out of the person's own choice (PROOF_SOURCES: the unsubscribe link, staff
on their request, an SMS STOP), never after a hard bounce, a complaint or an invalid number, where sending harms
the sender. A number that replied STOP is opted out at SNS too, which refuses the send: then nothing goes, and
the number comes back by replying START (UNSTOP) where the shop's number takes replies, or by staff's opt-in link
(chalicelib/shopper/optin.py). Each contact gets at most one proof message a day and three in 30 days, and an SMS tap is
counted against its number's and block's hourly caps before it gets here (chalicelib/capture.py).

Exactly once: the tap writes the pending proof (its message owed: the sparse index "by-owed") with its cap and
an audit fact in one transaction, then puts a message on the jobs queue; the notifier (the only function that
may send) takes the owed message once, sends it, and gives it back only when the provider provably did not take
it. A tap cut short before its message is finished by the sweep, which re-sends every message owed for over
PROOF_OWED_AFTER_S (chalicelib/queue/jobs.py). The code itself is never stored: it is derived from the pending proof's random nonce with a key
drawn from TOKEN_KEY for this purpose alone.
"""

from __future__ import annotations

import html
import logging
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib import i18n
from chalicelib.capture import CaptureService, NotifyMe, NotProven, parse_lang, parse_sku
from chalicelib.clock import Clock
from chalicelib.colours import accent_or_default
from chalicelib.confirm import CodeKey
from chalicelib.contacts import contact_key, match_keys, normalise_contact
from chalicelib.errors import BadRequest, DomainError, RateLimited
from chalicelib.links import Links
from chalicelib.messages.compose import P_STYLE, SMALL, Brand, button, email_document, shop_header, sms_shop
from chalicelib.messages.email_caps import EmailSends
from chalicelib.messages.senders import EMAIL, SMS, Notice, Senders, error_code, maybe_sent, refused_recipient
from chalicelib.messages.sms import to_gsm
from chalicelib.messages.sms_caps import SmsSends
from chalicelib.queue.messages import Message, ResubscribeProof
from chalicelib.shopper.pages import Page, Shop, button_form, shopper_page
from chalicelib.tables.base import TransactionCancelled, Tx, TxItem
from chalicelib.tables.optout import resubscribe_code_key, resubscribe_link_key
from chalicelib.tables.store import Tables
from chalicelib.tokens import KeySource
from chalicelib.web.errors import error_status

log = logging.getLogger(__name__)

DOMAIN = "resubscribe"
# The opt-outs a person chose, which their own proof may lift. Never "bounce", "complaint" or "invalid_number".
PROOF_SOURCES = ("unsubscribe", "admin", "stop")
PROOF_EVERY_S = 86400  # at most one proof message per contact a day...
PROOF_WINDOW_S = 30 * 86400  # ...and three (RateCounters.proof_cap_item) in any 30 days
LINK_DAYS = 7  # how long a re-subscribe email's link works
CODE_TTL_S = 900  # how long a code works
CODE_ATTEMPTS = 5  # tries at one code, and tries per number in CODE_TTL_S
# Tries one client address has at one number in CODE_TTL_S. A code lives CODE_TTL_S, so it spans at most two of
# these windows: one address makes at most 2 × 2 = 4 tries at it, fewer than CODE_ATTEMPTS, and can never use up
# the code of the person it typed; they still have a try left from their own phone.
CODE_TRIES_PER_SOURCE = 2
# Tries one client address has in an hour at all numbers together, so guessing cannot be spread over many people.
CODE_TRIES_PER_SOURCE_PER_HOUR = 10
CODE_PATTERN = re.compile(r"^[0-9 ]{1,12}$")
LINK_ID = re.compile(r"^[0-9a-f]{32}$")


def cap_key(contact_key_: str) -> str:
    """The throttle-table key of a contact's proof-message cap."""
    return f"proof#{contact_key_}"


class ProofCodes(CodeKey):
    """Derives a re-subscribe code from its nonce, with a key of its own (never a switch's)."""

    def __init__(self, token_keys: KeySource) -> None:
        super().__init__(token_keys, b"bisn resubscribe codes v1")


# --- The tap's side (the API function): a tap for a suppressed contact.


@dataclass(frozen=True, kw_only=True, eq=False)
class ProofRequests:
    """Answers a tap for a suppressed contact with a proof message, where one may go (CaptureService.on_suppressed)."""

    tables: Tables
    send_message: Callable[[Message], object]  # puts a message on the jobs queue
    # A code SMS also counts against the shop's daily ceiling of codes (its tap was charged to the number's, block's
    # and address's caps already, chalicelib/capture.py).
    sms_sends: SmsSends
    # A re-subscribe email counts against the email caps per address, per client address and shop-wide
    # (chalicelib/messages/email_caps.py), with every confirmation email; None leaves only the contact's proof cap.
    email_sends: EmailSends | None = None

    def ask(
        self, tap: NotifyMe, key: str, record: dict[str, Any] | None, now: float, client: str | None = None
    ) -> bool:
        """Record a pending proof and owe its message; True when one is now owed. Nothing when the opt-out was not
        the person's choice, or the contact's cap (or, for an email, an email cap) is reached. `client` is the
        keyed hash of the client address that tapped."""
        record = record if record is not None else self.tables.optout.get(key)
        source = str((record or {}).get("source") or "")
        channel = tap.contact.channel
        if source not in PROOF_SOURCES:
            # A bounce, a complaint or an invalid number: sending there harms the sender, so nothing goes.
            self.tables.audit.record(
                tap.sku, "resubscribe_refused", now, contact_key=key, channel=channel, reason=source or "gone"
            )
            return False
        fields: dict[str, Any] = {
            "k": key,
            "sku": tap.sku,
            "channel": channel,
            "to": tap.contact.address,
            "name": tap.name,
            "lang": tap.lang,
        }
        if channel == EMAIL:
            proof_key, ttl_s = resubscribe_link_key(secrets.token_hex(16)), LINK_DAYS * 86400
        else:
            proof_key, ttl_s = resubscribe_code_key(key), CODE_TTL_S
            fields["nonce"] = secrets.token_urlsafe(12)
        tx = (
            Tx()
            .add(
                "cap",
                self.tables.rate_counters.proof_cap_item(
                    cap_key(key), now, every_s=PROOF_EVERY_S, window_s=PROOF_WINDOW_S
                ),
            )
            .add("proof", self.tables.optout.pending_proof_item(proof_key, fields, now=now, ttl_s=ttl_s))
            .add(
                "audit",
                self.tables.audit.record_item(tap.sku, "resubscribe_asked", now, contact_key=key, channel=channel),
            )
        )
        if channel == SMS:
            tx.join(self.sms_sends.ceiling_item(now))
        elif self.email_sends is not None:
            tx.join(self.email_sends.items(self.email_sends.caps(tap.contact.match, now, client)))
        try:
            self.tables.run(tx)
        except TransactionCancelled as cancelled:
            if cancelled.failed("cap") or cancelled.failed("proof"):
                log.info(
                    "a proof message was asked for within its contact's cap; none sent", extra={"channel": channel}
                )
                return False
            if tx.has("ceiling") and self.sms_sends.ceiling_refused(cancelled, now):
                # The tap's answer stays the one every tap gets: a 429 here would tell a stranger this number opted
                # out. The contact may tap again tomorrow.
                log.warning("the shop's daily ceiling of code SMS is reached; no re-subscribe code sent")
                return False
            if self.email_sends is not None and self.email_sends.refused(cancelled, "re-subscribe") is not None:
                # As past the SMS ceiling: the tap's answer stays the one every tap gets, so it says nothing about
                # the address; the contact may tap again tomorrow.
                return False
            raise
        try:
            self.send_message(ResubscribeProof(proof_key))
        except Exception:
            # The message stays owed on the proof: the sweep sends it after a minute.
            log.warning("could not queue a proof message; the sweep will", exc_info=True)
        return True


# --- The notifier's side: the one proof message, sent once.


def proof_email(
    *,
    shop: str,
    product: str,
    to: str,
    name: str,
    lang: str,
    link: str,
    unsubscribe_url: str,
    brand: Brand,
) -> Notice:
    """The re-subscribe email, in the tap's language."""
    t = i18n.text(DOMAIN, lang)
    paragraphs = [
        t("Hello {name},", name=name) if name else t("Hello,"),
        t("You unsubscribed from {shop}'s messages earlier.", shop=shop),
        t("Someone (we hope you) asked to be told when {product} is back in stock.", product=product),
        t("To turn messages back on and join the list, open this link and press the button:"),
        link,
        t("If it was not you, ignore this email: nothing changes, and your messages stay off."),
    ]
    return link_email(lang=lang, to=to, shop=shop, paragraphs=paragraphs, unsubscribe_url=unsubscribe_url, brand=brand)


def link_email(*, lang: str, to: str, shop: str, paragraphs: list[str], unsubscribe_url: str, brand: Brand) -> Notice:
    """An email asking to turn the shop's messages back on, whose next-to-last paragraph is its link (a button in the
    HTML part). Re-subscribe proofs and staff-started opt-ins are both this shape (their paragraphs given translated).
    It wears the shop's look as its restock notices do (chalicelib/messages/compose.py): the logo or name at the top, linking
    to the shop, the button in the shop's accent, the card that reads in light and dark."""
    t = i18n.text(DOMAIN, lang)
    subject, label = t("Turn {shop} messages back on?", shop=shop), t("Turn messages back on")
    *before, link, after = paragraphs
    safe = {k: html.escape(v, quote=True) for k, v in (("link", link), ("unsubscribe", unsubscribe_url))}
    unsubscribe = t("Unsubscribe")
    rows = [
        shop_header(shop, brand),
        *(f'<p class="fg" style="{P_STYLE}">{html.escape(p)}</p>' for p in before),
        button(safe["link"], html.escape(label), accent_or_default(brand.accent)),
        f'<p class="fg" style="{P_STYLE};margin-top:16px">{html.escape(after)}</p>',
        '<hr style="border:0;border-top:1px solid #e5e7eb;margin:24px 0 16px">'
        f'<p class="muted" style="{SMALL}"><a href="{safe["unsubscribe"]}" style="color:#4b5563">'
        f"{html.escape(unsubscribe)}</a></p>",
    ]
    return Notice(
        channel=EMAIL,
        to=to,
        subject=subject,
        text="\n\n".join(paragraphs) + f"\n\n--\n{unsubscribe}: {unsubscribe_url}\n",
        html=email_document(lang, subject, rows),
        unsubscribe_url=unsubscribe_url,
    )


def code_sms(shop: str, code: str, lang: str) -> str:
    """The code SMS: the shop's name first, GSM-7 only, in the tap's language."""
    t = i18n.text(DOMAIN, lang)
    message = t(
        "{shop}: your code to turn messages back on is {code}. It works for {minutes} minutes. Not you? Ignore this.",
        shop=sms_shop(shop),
        code=code,
        minutes=CODE_TTL_S // 60,
    )
    return to_gsm(message)


# What became of a message asking a person to turn messages back on (`send_while_own_choice`).
SENT, CHANGED, PROVIDER = "sent", "changed", "provider"


def send_while_own_choice(
    senders: Senders,
    tables: Tables,
    key: str,
    notice: Notice,
    *,
    what: str,
    told: Callable[[str], None],
    release: Callable[[], None],
) -> bool:
    """Send a message asking the person `key` to turn messages back on (a re-subscribe proof, a staff-started opt-in)
    only while their opt-out is still of their own choice, read just before the send. True when it went, or may
    have (a lost answer is never sent again). `told` records SENT, CHANGED (lifted meanwhile, or a bounce or
    complaint arrived) or PROVIDER (an SNS-opted-out number, or an address SES will not take: never, ever sent);
    a send that provably did not go is `release`d, owed again, and raised."""

    def still_own_choice() -> None:
        record = tables.optout.get(key)
        if record is None or record.get("source") not in PROOF_SOURCES:
            raise PermissionError("not an opt-out of the person's own choice")

    try:
        senders.send(notice, just_before=still_own_choice)
    except PermissionError:
        told(CHANGED)
        return False
    except Exception as error:
        if refused_recipient(notice.channel, error):
            told(PROVIDER)
            return False
        if maybe_sent(error):
            log.warning("%s's answer was lost (%s); not resent", what, error_code(error))
            told(SENT)
            return True
        release()
        raise
    told(SENT)
    return True


@dataclass(frozen=True, kw_only=True, eq=False)
class ProofSender:
    """Sends a pending proof's owed message (the notifier runs it), exactly once."""

    tables: Tables
    links: Links
    senders: Senders
    codes: ProofCodes
    clock: Clock
    shop_name: str
    brand: Brand  # the shop's look for the email (chalicelib/messages/compose.py brand_of)

    def handle(self, proof_key: str) -> bool:
        """Send what the proof owes, if it still owes it; True when it went."""
        now = self.clock.now()
        proof = self.tables.optout.claim_proof(proof_key, now)
        if proof is None:
            return False  # a redelivery, the sweep's second ask, or a proof used or expired meanwhile
        key, sku, channel = str(proof["k"]), str(proof["sku"]), str(proof["channel"])

        def told(outcome: str) -> None:
            kind, reason = ("resubscribe_sent", "") if outcome == SENT else ("resubscribe_refused", outcome)
            self.tables.audit.record(sku, kind, now, contact_key=key, channel=channel, reason=reason)

        return send_while_own_choice(
            self.senders,
            self.tables,
            key,
            self._notice(proof_key, proof),
            what="a proof message",
            told=told,
            release=lambda: self.tables.optout.release_proof(proof_key, float(proof.get("at") or now)),
        )

    def _notice(self, proof_key: str, proof: Mapping[str, Any]) -> Notice:
        lang, to = str(proof.get("lang") or i18n.DEFAULT_LANGUAGE), str(proof["to"])
        if proof["channel"] == SMS:
            return Notice(channel=SMS, to=to, text=code_sms(self.shop_name, self.codes.code(str(proof["nonce"])), lang))
        product = self.tables.catalog.get_cached(str(proof["sku"]))
        name = (product.name if product and product.name else str(proof["sku"])).strip()
        link_id = proof_key.split("#", 1)[1]
        return proof_email(
            shop=self.shop_name,
            product=name,
            to=to,
            name=str(proof.get("name") or ""),
            lang=lang,
            link=f"{self.links.base_url}/resubscribe/{link_id}",
            unsubscribe_url=self.links.unsubscribe(str(proof["k"])),
            brand=self.brand,
        )


# --- The proof coming back (the API function): the email's link, and the code.


@dataclass(frozen=True)
class CodeOutcome:
    """A code that was right: the contact is subscribed again and holds a place ('queued' or 'already_queued')."""

    status: str
    lang: str


@dataclass(frozen=True)
class _LiveProof:
    """A re-subscribe link that can still be used: its proof's key, the proof, and the language it was asked in."""

    key: str
    proof: dict[str, Any]
    lang: str


@dataclass(frozen=True, kw_only=True, eq=False)
class Resubscribe:
    """The re-subscribe link's page and button, and the code check."""

    tables: Tables
    capture: CaptureService
    codes: ProofCodes
    clock: Clock
    shop: Shop
    hash_key: str
    default_region: str
    rate_limit_per_minute: int

    def _proof_tx(
        self,
        key: str,
        proof_key: str,
        sku: str,
        channel: str,
        now: float,
        *,
        lift: bool,
        nonce: str | None,
        others: tuple[str, ...] = (),
    ) -> Callable[[], Tx]:
        optout = self.tables.optout
        # Lifted already (staff's opt-in link, another proof): the place still must find no suppression.
        guard = optout.lift_item(key, PROOF_SOURCES) if lift else optout.not_suppressed_item(key)

        def older() -> list[TxItem]:
            # The contact's other keys (an email's mailbox and its spelling from before mailboxes were matched): an
            # opt-out under one is lifted with the proven one, or it would go on suppressing the address; one that
            # is not the person's choice refuses the proof, and none may appear meanwhile.
            return [
                optout.lift_item(other, PROOF_SOURCES) if optout.get(other) else optout.not_suppressed_item(other)
                for other in others
            ]

        def build() -> Tx:
            return (
                Tx()
                .add("optout", guard, *older())
                .add("proof", optout.use_proof_item(proof_key, now, nonce=nonce))
                .add("fact", self.tables.audit.record_item(sku, "resubscribed", now, contact_key=key, channel=channel))
            )

        return build

    def _join(self, tap: NotifyMe, key: str, proof_key: str, now: float, nonce: str | None) -> str | None:
        """Lift and join; the outcome's status, or None when the proof does not stand (used, expired, or the opt-out
        is not one the person may lift)."""
        others = tuple(k for k in match_keys(tap.contact, self.hash_key) if k != key)
        for lift in (True, False):
            proof = self._proof_tx(
                key, proof_key, tap.sku, tap.contact.channel, now, lift=lift, nonce=nonce, others=others
            )
            try:
                return self.capture.join_proven(tap, proof).status
            except NotProven as refused:
                if refused.part != "optout" or not lift or self.tables.optout.get(key) is not None:
                    return None
        return None

    # The email's link.

    def _t(self, lang: str) -> i18n.Text:
        return i18n.text(DOMAIN, lang)

    def _page(self, status: int, lang: str, title: str, message: str, extra_html: str = "") -> Page:
        """Every page of opting back in, in the shopper's language, in the shop's one page frame."""
        return shopper_page(status, title, message, self.shop, extra_html, lang=lang)

    def cross_site(self, accept_language: str | None) -> Page:
        """A button's POST sent from another website's page: nothing changes; the email's link still works."""
        lang = i18n.negotiate(None, accept=accept_language)
        t = self._t(lang)
        return self._page(403, lang, t("Please use the button on the page"), t("Open the link in your email again."))

    def _gone(self, lang: str) -> Page:
        t = self._t(lang)
        return self._page(
            410,
            lang,
            t("This link no longer works"),
            t(
                "It was used already, or it is over {days} days old. Tap Notify me on the product again.",
                days=LINK_DAYS,
            ),
        )

    def _unknown(self) -> Page:
        t = self._t(i18n.DEFAULT_LANGUAGE)
        return self._page(
            404,
            i18n.DEFAULT_LANGUAGE,
            t("We cannot find this link"),
            t("Please open it straight from your email: it may have been cut short when it was copied."),
        )

    def _live(self, link_id: str) -> _LiveProof | Page:
        """The proof an unused, unexpired re-subscribe link names, or the page that says why it cannot be used."""
        if not LINK_ID.match(link_id):
            return self._unknown()
        proof_key = resubscribe_link_key(link_id)
        proof = self.tables.optout.proof(proof_key)
        if proof is None or proof.get("channel") != EMAIL:
            return self._unknown()
        lang = str(proof.get("lang") or i18n.DEFAULT_LANGUAGE)
        if proof.get("used_at") is not None or int(proof.get("expires_at") or 0) <= int(self.clock.now()):
            return self._gone(lang)
        return _LiveProof(proof_key, proof, lang)

    def _product(self, sku: str) -> str:
        product = self.tables.catalog.get_cached(sku)
        return (product.name if product and product.name else sku).strip()

    def form(self, link_id: str) -> Page:
        """The page the link opens: what the button does. Changes nothing (mail scanners open links)."""
        live = self._live(link_id)
        if isinstance(live, Page):
            return live
        proof, lang, t = live.proof, live.lang, self._t(live.lang)
        button = button_form(link_id, t("Turn messages back on"))
        return self._page(
            200,
            lang,
            t("Turn messages back on?"),
            t(
                "You unsubscribed earlier. Press the button to hear from {shop} again and join the list for {product}.",
                shop=self.shop.name,
                product=self._product(str(proof["sku"])),
            ),
            button,
        )

    def confirm(self, link_id: str) -> Page:
        """The button: the opt-out is lifted and the place joins the list, once."""
        live = self._live(link_id)
        if isinstance(live, Page):
            return live
        proof_key, proof, lang, t = live.key, live.proof, live.lang, self._t(live.lang)
        tap = NotifyMe(
            sku=str(proof["sku"]),
            contact=normalise_contact(EMAIL, str(proof["to"]), self.default_region),
            name=str(proof.get("name") or ""),
            lang=lang,
        )
        try:
            status = self._join(tap, str(proof["k"]), proof_key, self.clock.now(), None)
        except DomainError as refused:
            log.info("a proven re-subscribe could not join its list (%s)", refused.code)
            return self._page(
                409,
                lang,
                t("We could not add you to this list"),
                t("Its list is full for now, or the product is no longer sold. Your messages stay off for now."),
            )
        if status is None:
            return self._gone(lang)
        return self._page(
            200,
            lang,
            t("You are back on the list"),
            t("Thank you. We will tell you when {product} is back in stock.", product=self._product(tap.sku)),
        )

    # The code (POST /notify-me/code).

    def check_code(self, source: str, data: Any, accept_language: str | None = None) -> CodeOutcome:
        """Check a number's code; the right one lifts its opt-out and joins the list. BadRequest('wrong_code') for a
        wrong, expired or never-sent code alike (no oracle); RateLimited after too many tries."""
        now = self.clock.now()
        source_key = contact_key(f"ip:{source}", self.hash_key)
        minute = int(now // 60)
        if not self.tables.rate_counters.charge(
            f"codeip#{source_key}#{minute}", self.rate_limit_per_minute, (minute + 1) * 60 + 60
        ):
            raise RateLimited(
                "Too many requests from this address; try again in a minute.", int((minute + 1) * 60 - now) or 1
            )
        if not isinstance(data, Mapping):
            raise BadRequest("The body must be a JSON object.", code="invalid_body")
        sku = parse_sku(data.get("sku"))
        lang = parse_lang(data.get("lang"), accept_language)
        channel, raw, typed = data.get("channel"), data.get("contact"), data.get("code")
        if channel != SMS:
            raise BadRequest("channel must be sms: codes go to phone numbers.", code="invalid_field")
        if not isinstance(raw, str) or not raw.strip() or len(raw) > 40:
            raise BadRequest("contact must be a phone number.", code="invalid_field")
        if not isinstance(typed, str) or not CODE_PATTERN.match(typed):
            raise BadRequest("code must be the six digits from the SMS.", code="invalid_field")
        contact = normalise_contact(SMS, raw, self.default_region)
        key = contact_key(contact.match, self.hash_key)
        window = int(now // CODE_TTL_S)
        hour = int(now // 3600)
        # The address's own tries come first and are spent before the number's: a stranger who guesses runs out of
        # their own tries while the person's code still stands. Counted whether or not a code was sent, like the
        # number's.
        if not self.tables.rate_counters.charge(
            f"codesrc#{source_key}#{key}#{window}", CODE_TRIES_PER_SOURCE, (window + 1) * CODE_TTL_S + 60
        ) or not self.tables.rate_counters.charge(
            f"codesrchour#{source_key}#{hour}", CODE_TRIES_PER_SOURCE_PER_HOUR, (hour + 1) * 3600 + 60
        ):
            raise RateLimited(
                "Too many tries from this address; check the SMS and try again later.",
                int((window + 1) * CODE_TTL_S - now) or 1,
                code="rate_limited",
            )
        # Counted per number whether or not a code was ever sent: the answers never say which.
        if not self.tables.rate_counters.charge(
            f"codetry#{key}#{window}", CODE_ATTEMPTS, (window + 1) * CODE_TTL_S + 60
        ):
            raise RateLimited(
                "Too many tries for this number; ask for a new code later.",
                int((window + 1) * CODE_TTL_S - now) or 1,
                code="rate_limited",
            )
        proof_key = resubscribe_code_key(key)
        proof = self.tables.optout.try_code(proof_key, now, CODE_ATTEMPTS)
        wrong = BadRequest("That code did not work. Check the SMS, or tap Notify me again later.", code="wrong_code")
        if proof is None or proof.get("sku") != sku or not self.codes.matches(str(proof["nonce"]), typed):
            raise wrong
        tap = NotifyMe(sku=sku, contact=contact, name=str(proof.get("name") or ""), lang=str(proof.get("lang") or lang))
        status = self._join(tap, key, proof_key, now, str(proof["nonce"]))
        if status is None:
            raise wrong
        return CodeOutcome(status, tap.lang)

    def code_page(self, outcome: CodeOutcome | DomainError, accept_language: str | None) -> Page:
        """The no-script form's answer: the same outcomes as the JSON, as a page."""
        lang = outcome.lang if isinstance(outcome, CodeOutcome) else i18n.negotiate(None, accept=accept_language)
        t = self._t(lang)
        if isinstance(outcome, CodeOutcome):
            return self._page(
                200,
                lang,
                t("You are back on the list"),
                t("Thank you. We will text you when it is back in stock."),
            )
        if outcome.code == "wrong_code":
            return self._page(400, lang, t("That code did not work"), t("Check the SMS, or tap Notify me again later."))
        if isinstance(outcome, RateLimited):
            return self._page(429, lang, t("Too many tries"), t("Please wait a while before you try again."))
        return self._page(error_status(outcome), lang, t("We could not check this code"), outcome.message)
