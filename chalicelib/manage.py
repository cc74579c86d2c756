"""A shopper's own requests, without an account: their place in each line, leaving, switching channel.

The manage link names the person: in an SMS by a short random id looked up in the opt-out table (`/m/{id}`,
chalicelib/manage_ids.py), in an email by the keyed hash of their contact and their link version, signed with
TOKEN_KEY (`/me/{token}`); both routes take both forms. Whoever holds the link may look and change; the link is sent only to the person (in a
notice or a confirmation email, never in an answer to a tap). Signing out everywhere raises the version, and
every older link is refused. Switching to a new contact needs a code sent to it (chalicelib/confirm.py).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from chalicelib.clock import Clock
from chalicelib.confirm import (
    CODE_ATTEMPTS,
    CODE_RESEND_AFTER_S,
    CODE_TTL_S,
    CodeKey,
    new_nonce,
    switch_key,
)
from chalicelib.contacts import CHANNELS, check_sms_number, contact_key, mask, match_keys, normalise_contact
from chalicelib.errors import BadRequest, Conflict, DomainError, FormRefused
from chalicelib.leaving import Exit, QueueExits
from chalicelib.line import PlaceInLine, read_place
from chalicelib.link_ids import is_link_id
from chalicelib.manage_ids import ManageIds
from chalicelib.messages.email_caps import EmailSends
from chalicelib.messages.sms_caps import SmsSends, places_key, source_key
from chalicelib.queue.messages import Message, SwitchCode
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.catalog import CatalogTable
from chalicelib.tables.requests import ACTIVE_STATES, Request, RequestState, UniqueItem
from chalicelib.tables.store import Tables
from chalicelib.tokens import KeySource, TokenRevoked, Tokens, current_keys

FORM_WINDOW_S = 3600  # a form token is good for the hour it was issued in and the next one
ACTIONS = ("leave", "switch", "code", "stop", "signout")


class FormGuard:
    """CSRF protection for the manage page's forms.

    The page lives at a tokenised URL and uses no cookies, so SameSite cookies protect nothing here,
    and the URL itself can leak (browser history, a forwarded email, a Referer header). A cross-site
    page that knows the URL could still make the shopper's browser POST to it. So each form carries
    a token only our own page can produce:

        form_token = "<window>.<HMAC-SHA256(derived key, 'manage-form|<contact_key>|<action>|<window>')>"

    where `window` is the hour of issue and the key is derived from TOKEN_KEY for this purpose alone
    (it can sign nothing else). A token is bound to the person named by the manage link and to one
    action, and expires after one to two hours; a cross-site attacker cannot read our page (same-origin
    policy), so cannot learn it. As defence in depth the POST is also refused when the browser says it
    came from another origin (`Origin`, `Sec-Fetch-Site`), and pages forbid framing (clickjacking)
    and send no Referer.
    """

    def __init__(self, token_key: KeySource, window_s: int = FORM_WINDOW_S) -> None:
        # TOKEN_KEY's keys newest first (several during a rotation): issue with the newest, accept any.
        self._source = token_key
        self.window_s = window_s

    def _derived(self) -> list[bytes]:
        return [
            hmac.new(k.encode(), b"bisn manage-page form tokens v1", hashlib.sha256).digest()
            for k in current_keys(self._source)
        ]

    @staticmethod
    def _mac(derived: bytes, key: str, action: str, window: int) -> str:
        message = f"manage-form|{key}|{action}|{window}".encode()
        return hmac.new(derived, message, hashlib.sha256).hexdigest()[:32]

    def issue(self, key: str, action: str, now: float) -> str:
        """A form token for one person, one action, valid from now for at least one window."""
        window = int(now // self.window_s)
        return f"{window}.{self._mac(self._derived()[0], key, action, window)}"

    def check(self, key: str, action: str, token: str, now: float) -> None:
        """Raise FormRefused unless the token was issued for this person and action, recently."""
        window_text, _, mac = (token or "").partition(".")
        if not window_text.isdigit() or not mac:
            raise FormRefused("This form is not from your page. Open your link again and retry.")
        window = int(window_text)
        current = int(now // self.window_s)
        if window not in (current, current - 1):
            raise FormRefused("This page was open too long. Reload it and try again.", code="form_expired")
        if not any(hmac.compare_digest(mac, self._mac(d, key, action, window)) for d in self._derived()):
            raise FormRefused("This form is not from your page. Open your link again and retry.")


CONFIRM_FIRST = (
    "Please confirm your email address first: press the button in the email we sent you, then you can change how we "
    "tell you."
)


class NotConfirmed(Conflict):
    """A switch asked for before the person confirmed their email address (double opt-in)."""

    code = "not_confirmed"


@dataclass(frozen=True)
class Place:
    """One product a shopper waits for, as their page shows it."""

    sku: str
    name: str
    state: str
    place: PlaceInLine  # where it stands, exact or a range (chalicelib/line.py)
    joined_ts: str
    channel: str
    contact: str  # masked
    offer_expires_at: int | None = None
    hold_expires_at: int | None = None
    offer_token: str | None = None  # the live offer or hold's row id (its reserve link goes on to checkout)
    lang: str = "en"  # the language the shopper tapped in
    unconfirmed: bool = False  # an email place whose address has not confirmed it yet (double opt-in)


@dataclass(frozen=True)
class ManageView:
    """Everything the manage page shows."""

    contact_key: str
    places: list[Place]
    opted_out: bool
    channel: str | None  # the channel their notices go by, when they wait for anything
    contact: str | None  # masked

    @property
    def lang(self) -> str | None:
        """The language of the place joined most recently (None when there is none)."""
        return max(self.places, key=lambda p: p.joined_ts).lang if self.places else None

    @property
    def confirmed(self) -> bool:
        """Whether the contact proved itself on at least one place (an SMS place needs no confirming)."""
        return any(not p.unconfirmed for p in self.places)

    @property
    def other_channel(self) -> str | None:
        """The channel they can switch to."""
        if self.channel is None:
            return None
        return next(c for c in CHANNELS if c != self.channel)


@dataclass(frozen=True)
class SwitchResult:
    """What a channel switch did, place by place."""

    new_key: str
    channel: str
    contact: str  # masked
    moved: list[str] = field(default_factory=list)  # SKUs now notified on the new contact
    merged: list[str] = field(default_factory=list)  # SKUs where the new contact already waited: the better place kept
    unchanged: list[str] = field(default_factory=list)  # SKUs left as they were (see the page)


@dataclass(frozen=True, kw_only=True, eq=False)
class ManageService:
    """Reads and changes one person's requests on their behalf."""

    tables: Tables
    exits: QueueExits
    tokens: Tokens
    guard: FormGuard
    clock: Clock
    hash_key: str
    default_region: str
    codes: CodeKey
    send_message: Callable[[Message], object]  # puts a message on the jobs queue (a switch code)
    link_max_age_s: int  # a manage link lives as long as the places it shows
    # Every code SMS is charged to the caps a tap is, and to the shop's daily ceiling (chalicelib/messages/sms_caps.py).
    sms_sends: SmsSends
    # Every code email is charged to the email caps per address, per client address and shop-wide, with the
    # confirmation and re-subscribe emails taps ask for (chalicelib/messages/email_caps.py); None leaves it uncapped.
    email_sends: EmailSends | None = None
    # SMS pumping guards, as at capture: where SMS may go (None: the default region only), and how many places
    # one number may take in a window (REQUEST_TTL_DAYS long).
    sms_allowed_countries: tuple[str, ...] | None = None
    places_per_number: int

    @cached_property
    def manage_ids(self) -> ManageIds:
        """The short manage ids an SMS carries, read with the same lifetime as a signed manage link."""
        return ManageIds(optout=self.tables.optout, lifetime_s=self.link_max_age_s)

    def read_token(self, token: str) -> str:
        """The contact key a manage link names (a short id or a signed token); TokenInvalid, TokenExpired or
        TokenRevoked otherwise."""
        if is_link_id(token):
            return self.manage_ids.read(token, self.clock.now())
        signed = self.tokens.read_manage(token, self.link_max_age_s)
        if signed.version < self.tables.optout.manage_version(signed.value):
            raise TokenRevoked("signed before the person signed out everywhere")
        return signed.value

    def link_token(self, key: str) -> str:
        """A manage token for this person at their current version."""
        return self.tokens.manage(key, self.tables.optout.manage_version(key))

    def sign_out(self, key: str) -> None:
        """Refuse every manage link this person was sent so far; the next message carries a new one."""
        self.tables.optout.bump_manage_version(key, self.clock.now())

    def pending_switch(self, key: str) -> str | None:
        """The masked contact a code was sent to, while the switch waits for it."""
        pending = self.tables.pending_steps.pending_switch(switch_key(key), self.clock.now())
        return mask(str(pending["contact"])) if pending else None

    def view(self, key: str) -> ManageView:
        """The person's live places, each with its current place in line (two reads a place, whatever the list's
        length: chalicelib/line.py)."""
        places: list[Place] = []
        for request in self.exits.places(key):
            state = str(request.state)
            if state not in ACTIVE_STATES:
                continue
            sku, joined_ts = request.sku, request.joined_ts
            offer_expires = hold_expires = None
            if state in (RequestState.OFFERED, RequestState.RESERVED) and request.offer_token:
                row = self.tables.reservations.get(request.offer_token)
                offer_expires = row.offer_expires_at if row else None
                hold_expires = row.hold_expires_at if row else None
            places.append(
                Place(
                    sku=sku,
                    name=product_name(self.tables.catalog, sku),
                    state=state,
                    place=read_place(self.tables, request),
                    joined_ts=joined_ts,
                    channel=request.channel,
                    contact=mask(request.contact),
                    offer_expires_at=offer_expires,
                    hold_expires_at=hold_expires,
                    offer_token=request.offer_token,
                    lang=request.lang,
                    unconfirmed=request.unconfirmed,
                )
            )
        places.sort(key=lambda p: p.joined_ts)
        first = places[0] if places else None
        return ManageView(
            contact_key=key,
            places=places,
            opted_out=self.tables.optout.get(key) is not None,
            channel=first.channel if first else None,
            contact=first.contact if first else None,
        )

    def form_token(self, key: str, action: str) -> str:
        """The CSRF token for one of this person's forms."""
        return self.guard.issue(key, action, self.clock.now())

    def check_form(self, key: str, action: str, form_token: str) -> None:
        """Refuse a form that did not come from this person's recent page."""
        if action not in ACTIONS:
            raise BadRequest("Unknown action.", code="unknown_action")
        self.guard.check(key, action, form_token, self.clock.now())

    def leave(self, key: str, sku: str) -> Exit:
        """Leave one product's list (a held unit stays held until bought or expired)."""
        return self.exits.leave_sku(key, sku, reason="manage")

    def start_switch(self, key: str, raw_contact: str, *, source: str | None = None) -> str:
        """Send a code to the contact to switch to (by the notifier); returns it masked. Nothing moves until the
        code comes back (`finish_switch`): a link that leaked cannot move someone's places onto another contact.
        `source` is the client address asking; a code SMS counts against its caps as a tap does."""
        channel, contact, new_key = self._switch_target(key, raw_contact)
        nonce = new_nonce()
        now = self.clock.now()
        started = self.tables.pending_steps.start_switch(
            switch_key(key),
            nonce=nonce,
            channel=channel,
            contact=contact,
            new_key=new_key,
            now=now,
            ttl_s=CODE_TTL_S,
            every_s=CODE_RESEND_AFTER_S,
        )
        if not started:
            raise BadRequest("We sent a code a moment ago. Please wait a minute before asking again.", code="code_wait")
        try:
            if channel == "sms":
                self.sms_sends.charge(contact, now, source=source)
            elif self.email_sends is not None:
                source_hash = source_key(source, self.hash_key) if source is not None else None
                match = normalise_contact(channel, contact, self.default_region).match
                self.email_sends.charge(match, now, source_hash=source_hash, kind="code")
        except DomainError:
            # No code goes, so none may be waited for: the page offers the switch again.
            self.tables.pending_steps.end_switch(switch_key(key), nonce)
            raise
        self.send_message(SwitchCode(key, nonce))
        return mask(contact)

    def finish_switch(self, key: str, typed: str) -> SwitchResult:
        """Switch once the code sent to the new contact is entered; at most CODE_ATTEMPTS tries per code."""
        pending = self.tables.pending_steps.try_switch_code(switch_key(key), self.clock.now(), CODE_ATTEMPTS)
        if pending is None:
            raise BadRequest(
                "That code has expired or was tried too often. Please ask for a new one.", code="code_expired"
            )
        nonce = str(pending["nonce"])
        if not self.codes.matches(nonce, typed[:20]):
            left = CODE_ATTEMPTS - int(pending.get("attempts") or 0)
            raise BadRequest(f"That code is not right ({left} tries left).", code="wrong_code")
        self.tables.pending_steps.end_switch(switch_key(key), nonce)
        return self.switch(key, str(pending["contact"]), channel=str(pending["channel"]))

    def _switch_target(
        self, key: str, raw_contact: str, channel: str | None = None, *, proven: bool = False
    ) -> tuple[str, str, str]:
        view = self.view(key)
        if view.opted_out:
            raise BadRequest("You have unsubscribed, so there are no notices to switch.", code="opted_out")
        if view.channel is None or view.other_channel is None:
            raise BadRequest(
                "You are not waiting for anything, so there is nothing to switch.", code="nothing_to_switch"
            )
        if not proven and not view.confirmed:
            # Otherwise an address nobody confirmed is a free door to text any number (SMS pumping).
            raise NotConfirmed(CONFIRM_FIRST)
        if channel is not None and channel != view.other_channel:
            raise BadRequest("Your notices changed meanwhile. Please start again.", code="nothing_to_switch")
        channel = view.other_channel
        # An SMS code goes only to a number that passes capture's own checks (a mobile number in a real plan).
        contact = normalise_contact(channel, raw_contact, self.default_region)
        new_key = contact_key(contact.match, self.hash_key)
        if new_key == key:
            raise BadRequest("That is the contact we already use.", code="same_contact")
        if any(self.tables.optout.get(each) is not None for each in match_keys(contact, self.hash_key)):
            # Invariant 3: a suppressed contact is never queued, even by moving a place onto it (nor by a spelling
            # whose opt-out was stored before mailboxes were matched).
            raise BadRequest(
                "That contact asked us not to send it messages, so we cannot switch to it.", code="contact_opted_out"
            )
        if channel == "sms":
            self._check_sms(contact.address, len(view.places), charge=proven)
        return channel, contact.address, new_key

    def switch(self, key: str, address: str, *, channel: str) -> SwitchResult:
        """Send every live place's notices to a proven contact of the other kind; places in line are kept."""
        channel, address, new_key = self._switch_target(key, address, channel, proven=True)
        # The keys the new contact's opt-outs may be stored under besides its own (an email's spelling from before
        # mailboxes were matched): each move checks them too, in its transaction.
        older = match_keys(normalise_contact(channel, address, self.default_region), self.hash_key)[1:]
        view = self.view(key)
        result = SwitchResult(new_key=new_key, channel=channel, contact=mask(address))
        for place in view.places:
            outcome = self._switch_one(key, place, address, new_key, channel, older)
            {"moved": result.moved, "merged": result.merged, "unchanged": result.unchanged}[outcome].append(place.sku)
        return result

    def _check_sms(self, e164: str, places: int, *, charge: bool) -> None:
        """A switch to SMS passes the checks a tap does: a mobile number in an allowed country, and the places it
        brings counted against the number's cap (so joining by email and switching cannot go round it). They are
        counted only once the code proves the number (`charge`): before that the cap is only read, so requests
        nobody proves cost the number's owner none of their places."""
        check_sms_number(e164, self.sms_allowed_countries or (self.default_region,))
        window_days = max(1, self.link_max_age_s // 86400)
        key, expires = places_key(e164, self.hash_key, self.clock.now(), window_days)
        if charge:
            fits = self.tables.rate_counters.charge_many(key, places, self.places_per_number, expires)
        else:
            fits = self.tables.rate_counters.count(key) + places <= self.places_per_number
        if not fits:
            raise BadRequest(
                f"That number would wait for more than {self.places_per_number} products, the most we keep for one "
                "number; leave a list you no longer need first, or keep email.",
                code="too_many_places",
            )

    def _switch_one(
        self, key: str, place: Place, address: str, new_key: str, channel: str, older: tuple[str, ...] = ()
    ) -> str:
        now = self.clock.now()
        for _ in range(3):
            request = self.tables.requests.get(place.sku, place.joined_ts)
            if request is None or request.contact_key != key or not request.live:
                return "unchanged"
            ttl = request.ttl if request.ttl is not None else int(now) + 86400
            theirs = self.tables.requests.unique(place.sku, new_key)
            other = self.tables.requests.place_named(theirs)
            other_live = other is not None and other.live
            try:
                if not other_live:
                    self._move(request, key, address, new_key, channel, ttl, theirs, now, older)
                    return "moved"
                assert other is not None
                return self._merge(request, other, key, address, new_key, channel, ttl, now, older)
            except TransactionCancelled:
                continue  # the place moved (offered, clicked) or the other contact joined meanwhile: look again
        return "unchanged"

    def _switch_items(
        self,
        request: Request,
        key: str,
        address: str,
        new_key: str,
        channel: str,
        now: float,
        theirs: UniqueItem | None = None,
        older: tuple[str, ...] = (),
    ) -> Tx:
        sku, joined_ts = request.sku, request.joined_ts
        told = theirs.told_restock if theirs else None
        # Invariant 3, in the move's own transaction: no place moves onto a contact suppressed under its older key.
        suppressions = [self.tables.optout.not_suppressed_item(each) for each in older]
        return (
            Tx()
            .add("optout legacy", *suppressions)
            .add(
                "place",
                self.tables.requests.switch_contact_item(
                    sku,
                    joined_ts,
                    old_key=key,
                    contact=address,
                    contact_key=new_key,
                    channel=channel,
                    now=now,
                    told=told,
                ),
            )
            # The old contact leaves this place; what it was told about stays remembered for it.
            .add(
                "old unique",
                self.tables.requests.remove_unique_item(
                    sku, key, joined_ts, told=request.last_notified_restock, ttl=request.ttl
                ),
            )
            .add("optout", self.tables.optout.not_suppressed_item(new_key))
            .add(
                "fact",
                self.tables.audit.record_item(
                    sku, "switch", now, contact_key=new_key, previous_key=key, channel=channel
                ),
            )
        )

    def _move(
        self,
        request: Request,
        key: str,
        address: str,
        new_key: str,
        channel: str,
        ttl: int,
        theirs: UniqueItem | None,
        now: float,
        older: tuple[str, ...] = (),
    ) -> None:
        sku, joined_ts = request.sku, request.joined_ts
        tx = self._switch_items(request, key, address, new_key, channel, now, theirs, older)
        tx.add("new unique", self.tables.requests.claim_unique_item(sku, new_key, joined_ts, ttl, replacing=theirs))
        self.tables.run(tx)

    def _merge(
        self,
        request: Request,
        other: Request,
        key: str,
        address: str,
        new_key: str,
        channel: str,
        ttl: int,
        now: float,
        older: tuple[str, ...] = (),
    ) -> str:
        """Both contacts wait for this SKU: keep one place (the one with a live offer, else the earlier)."""
        sku = request.sku
        mine_waiting = request.state == RequestState.WAITING
        theirs_waiting = other.state == RequestState.WAITING
        if not mine_waiting and not theirs_waiting:
            return "unchanged"  # both have a live offer or hold; each runs its course
        keep_mine = (not mine_waiting) or (theirs_waiting and request.joined_ts < other.joined_ts)
        if keep_mine:
            # This place moves onto the new contact; the new contact's later place is given up.
            tx = (
                self._switch_items(request, key, address, new_key, channel, now, older=older)
                .add(
                    "new unique",
                    self.tables.requests.claim_unique_item(
                        sku, new_key, request.joined_ts, ttl, replacing=UniqueItem(sku, new_key, ref=other.joined_ts)
                    ),
                )
                .add(
                    "other place",
                    self.tables.requests.remove_item(
                        sku, other.joined_ts, contact_key=new_key, state=RequestState.WAITING
                    ),
                )
                .add("other shard", self.tables.catalog.leave_item(sku, other.shard))
            )
        else:
            # The new contact's place is better: this one is given up.
            tx = (
                Tx()
                .add(
                    "place",
                    self.tables.requests.remove_item(
                        sku, request.joined_ts, contact_key=key, state=RequestState.WAITING
                    ),
                )
                .add(
                    "old unique",
                    self.tables.requests.remove_unique_item(
                        sku, key, request.joined_ts, told=request.last_notified_restock, ttl=ttl
                    ),
                )
                .add("shard", self.tables.catalog.leave_item(sku, request.shard))
                .add(
                    "fact",
                    self.tables.audit.record_item(
                        sku, "switch", now, contact_key=new_key, previous_key=key, channel=channel
                    ),
                )
            )
        self.tables.run(tx)
        return "merged"


def product_name(catalog: CatalogTable, sku: str) -> str:
    """A product's display name (its SKU when it has left the catalogue)."""
    product = catalog.get_cached(sku)
    return (product.name or sku) if product else sku
