"""Capture: a Notify-me tap becomes one honest place in a SKU's waiting list."""

from __future__ import annotations

import logging
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from chalicelib.clock import Clock
from chalicelib.config import Settings
from chalicelib.confirm import MAX_CONFIRMATIONS, RESEND_AFTER_S
from chalicelib.contacts import Contact, check_sms_number, contact_key, match_keys, normalise_contact
from chalicelib.errors import (
    BadRequest,
    Busy,
    Conflict,
    Discontinued,
    DomainError,
    OnBackorder,
    RateLimited,
    UnknownSku,
)
from chalicelib.events_out import JOINED
from chalicelib.i18n import DEFAULT_LANGUAGE, negotiate, text
from chalicelib.messages.email_caps import EmailCaps, EmailSends, only_caps_refused
from chalicelib.messages.senders import EMAIL
from chalicelib.messages.sms_caps import (
    SmsCaps,
    add_caps,
    sms_caps,
    source_key,
    source_rate_key,
    taps_refused,
)
from chalicelib.place_caps import PlaceCaps, add_place_caps, place_caps, place_caps_refused
from chalicelib.queue.messages import ConfirmEmail, Message
from chalicelib.queue.owed import OwedJobs
from chalicelib.shopper.widget import PREORDER_NOTE
from chalicelib.tables.base import TransactionCancelled, Tx, TxItem
from chalicelib.tables.catalog import PREORDER, WaitingShard, shard_for
from chalicelib.tables.requests import Request, UniqueItem, new_joined_ts
from chalicelib.tables.store import Tables
from chalicelib.unknown_skus import UnknownSkus

log = logging.getLogger(__name__)

# Shards a tap tries after its own is at its share of the cap, each after one read of the shards: more than one
# only when other taps fill the shard it picked at the same moment.
SHARD_TRIES = 3

SKU_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}$")
MAX_NAME_LEN = 40
# A first name or a short full name: letters of any script, spaces, apostrophes and hyphens. No digits or dots,
# so a name can never carry a link, a price or a code into anything the shop shows or sends.
NAME_PUNCTUATION = " '’-"


@dataclass(frozen=True)
class NotifyMe:
    """A parsed, validated tap."""

    sku: str
    contact: Contact
    name: str
    lang: str = DEFAULT_LANGUAGE  # the shopper's language (chalicelib/i18n.py), for everything they are sent


@dataclass(frozen=True)
class CaptureOutcome:
    """What capture decided: 'queued', 'already_queued' or 'acknowledged'.

    Only the audit and the tests see the difference: the HTTP answer is the same for all three (app.py), so a
    caller who types someone else's contact learns nothing about that person (README, docs/openapi.yaml).
    """

    status: str
    joined_ts: str | None = None
    channel: str = ""
    confirm_email: bool = False  # the answer asks the shopper to confirm from their inbox (email, double opt-in)
    ticket: int | None = None  # the line's ticket a new place took (chalicelib/line.py)


def _text(data: Mapping[str, Any], field: str, *, required: bool, max_len: int) -> str:
    value = data.get(field)
    if value is None or value == "":
        if required:
            raise BadRequest(f"{field} is required.", code="missing_field")
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"{field} must be a string.", code="invalid_field")
    value = value.strip()
    if required and not value:
        raise BadRequest(f"{field} is required.", code="missing_field")
    if len(value) > max_len:
        raise BadRequest(f"{field} must be at most {max_len} characters.", code="field_too_long")
    return value


def parse_sku(value: Any) -> str:
    """A SKU as sent by a shop: short, printable, no spaces."""
    if value is None or value == "":
        raise BadRequest("sku is required.", code="missing_field")
    if not isinstance(value, str):
        raise BadRequest("sku must be a string.", code="invalid_field")
    if len(value) > 64:
        raise BadRequest("sku must be at most 64 characters.", code="field_too_long")
    if not SKU_PATTERN.match(value):
        raise BadRequest("sku may hold letters, digits and . _ : / - only.", code="invalid_sku")
    return value


def name_ok(name: str) -> bool:
    """True when a name holds letters, spaces, apostrophes and hyphens only, however its accents were typed."""
    return all(c.isalpha() or c in NAME_PUNCTUATION for c in unicodedata.normalize("NFC", name))


def parse_name(value: Any) -> str:
    """The name a tap gives, in NFC, or '' for none."""
    # Composed first: macOS and some keyboards send "Nándor" as an a and a combining accent, and a combining accent
    # is no letter; its length is counted as composed too, as the person sees it.
    if isinstance(value, str):
        value = unicodedata.normalize("NFC", value)
    name = _text({"name": value}, "name", required=False, max_len=MAX_NAME_LEN)
    if not name_ok(name):
        raise BadRequest("name may hold letters, spaces, apostrophes and hyphens only.", code="invalid_field")
    return name


def parse_lang(value: Any, accept_language: str | None = None) -> str:
    """The language a tap asks for: its `lang` (the page's, else the browser's), else the Accept-Language header's,
    else English. A tag we do not serve is no error (a browser may send any); a non-string is."""
    if value is not None and not isinstance(value, str):
        raise BadRequest("lang must be a language tag such as en or de-AT.", code="invalid_field")
    return negotiate(value, accept=accept_language)


def parse_notify_me(data: Any, default_region: str, accept_language: str | None = None) -> NotifyMe:
    """Validate and normalise a Notify-me body (pure: no AWS)."""
    if not isinstance(data, Mapping):
        raise BadRequest("The body must be a JSON object.", code="invalid_body")
    sku = parse_sku(data.get("sku"))
    channel = _text(data, "channel", required=True, max_len=10).lower()
    raw_contact = _text(data, "contact", required=True, max_len=254)
    name = parse_name(data.get("name"))
    lang = parse_lang(data.get("lang"), accept_language)
    return NotifyMe(sku=sku, contact=normalise_contact(channel, raw_contact, default_region), name=name, lang=lang)


@dataclass(frozen=True)
class NewPlace:
    """A new place as a tap writes it: who, where in line (`joined_ts`, the line's `ticket`), on which waiting shard,
    and whether it waits for its address to confirm it (`unconfirmed`) owing that confirmation email (`owes`)."""

    sku: str
    joined_ts: str
    channel: str
    contact: str
    contact_key: str
    name: str
    lang: str
    ttl: int
    now: float
    unconfirmed: bool
    owes: bool
    ticket: int | None  # None: an imported place, which takes no ticket (chalicelib/line.py)
    burnt_before: int
    # One shard of the product's waiting count, the same for this person at every tap (docs/SCALE.md).
    waiting_shard: int
    inserted_before: int = 0  # places imports put in the line before the ticket was taken (chalicelib/line.py)
    consent_source: str = ""  # an imported place's consent, as its file named it (docs/IMPORT.md)

    @property
    def owes_confirmation(self) -> bool:
        """Whether the place is written owing a confirmation email."""
        return self.unconfirmed and self.owes

    def row(self, told: str | None = None) -> Request:
        """The place as stored (never told about `told`, a restock an earlier place of this person's was told of)."""
        return Request.waiting(
            sku=self.sku,
            joined_ts=self.joined_ts,
            channel=self.channel,
            contact=self.contact,
            contact_key=self.contact_key,
            ttl=self.ttl,
            now=self.now,
            name=self.name,
            lang=self.lang,
            told=told,
            unconfirmed=self.unconfirmed,
            owes=self.owes,
            ticket=self.ticket,
            burnt_before=self.burnt_before,
            waiting_shard=self.waiting_shard,
            inserted_before=self.inserted_before,
            consent_source=self.consent_source or None,
        )

    def under(self, key: str) -> NewPlace:
        """The same place under another contact key (and that key's shard): the key an older place is stored by."""
        return replace(self, contact_key=key, waiting_shard=shard_for(key))


@dataclass
class LineTicket:
    """The SKU line's ticket a tap took (chalicelib/line.py), and whether the new place it made keeps it."""

    number: int
    burnt_before: int
    inserted_before: int = 0
    kept: bool = False

    def settle(self, outcome: CaptureOutcome) -> CaptureOutcome:
        """`outcome`, noting whether it is the new place that holds this ticket (any other hands it back)."""
        self.kept = outcome.status == "queued" and outcome.ticket == self.number
        return outcome


def _refused_any(cancelled: TransactionCancelled, *names: str) -> bool:
    """Whether any of the named items the transaction held refused it (a name it did not hold is not refused)."""
    return any(cancelled.has(name) and cancelled.failed(name) for name in names)


class NotProven(Exception):
    """A proven join (`CaptureService.join_proven`) was refused by its proof: `part` names the item that failed,
    "optout" (the suppression is not one the person may lift, or is gone) or "proof" (used or expired)."""

    def __init__(self, part: str, record: dict[str, Any] | None = None) -> None:
        super().__init__(part)
        self.part = part
        self.record = record


# Told about a tap for a suppressed contact: (the tap, its contact key, the opt-out record, now, the keyed hash of
# the client address or None). Answers it with a proof message where one may go (chalicelib/shopper/resubscribe.py); the
# tap's HTTP answer is the same either way.
SuppressedTap = Callable[[NotifyMe, str, dict[str, Any] | None, float, str | None], object]


@dataclass(frozen=True, kw_only=True, eq=False)
class CaptureService:
    """Rate limit, validate, check catalogue and opt-out, and join, in as few AWS calls as possible."""

    settings: Settings
    tables: Tables
    unknown_skus: UnknownSkus
    owed: OwedJobs
    clock: Clock
    hash_key: str
    send_message: Callable[[Message], object]  # puts a message on the jobs queue (a place's confirmation email)
    on_suppressed: SuppressedTap | None = None  # a tap for a suppressed contact (opting back in)
    # The caps a confirmation email is charged to (chalicelib/messages/email_caps.py); None sends one for every place.
    email_sends: EmailSends | None = None

    def _rate_key(self, source: str, now: float) -> tuple[str, int, int]:
        return source_rate_key(source, now)

    def _charge(self, source: str, now: float) -> None:
        key, expires, retry_after = self._rate_key(source, now)
        if not self.tables.rate_counters.charge(key, self.settings.rate_limit_per_minute, expires):
            raise RateLimited("Too many requests from this address; try again in a minute.", retry_after)

    def _sms_caps(self, contact: Contact, now: float) -> SmsCaps | None:
        """The counters an SMS tap is charged to; None for email. Each costs the same whatever the list's length."""
        if contact.channel != "sms":
            return None
        return sms_caps(contact.address, self.hash_key, now, self.settings.request_ttl_days)

    def _cap_items(self, tx: Tx, caps: SmsCaps | None, *, taps: bool, place: bool) -> Tx:
        """Add an SMS tap's counters to `tx`: the taps this hour (number and prefix), and one new place."""
        return add_caps(tx, self.tables.rate_counters, caps, self.settings, taps=taps, place=place)

    def _taps_refused(self, cancelled: TransactionCancelled, caps: SmsCaps | None) -> None:
        """Raise RateLimited when the transaction failed on a tap counter of the number or its block."""
        taps_refused(cancelled, caps)

    def _charge_taps(self, caps: SmsCaps | None) -> None:
        """Count a tap the transaction did not commit against its number and block (a repeat, an opt-out)."""
        if caps is None:
            return
        try:
            self.tables.run(self._cap_items(Tx(), caps, taps=True, place=False))
        except TransactionCancelled as cancelled:
            self._taps_refused(cancelled, caps)
            raise

    def _join_item(self, place: NewPlace, quiet: bool) -> TxItem:
        return self.tables.catalog.join_item(
            place.sku, place.waiting_shard, unless_idle=quiet, max_waiting=self.max_waiting
        )

    def _full(self, shard: WaitingShard | None) -> bool:
        """The shard a tap tried counts its share of MAX_WAITING_PER_SKU. A refusal reaches the shopper as "the list
        is full" only after `_join` found every shard at its share, that is the list holding MAX_WAITING_PER_SKU."""
        return shard is not None and not shard.discontinued and not shard.on_backorder and shard.full(self.max_waiting)

    def _product_refused(self, shard: WaitingShard | None) -> DomainError:
        """Why the catalogue refused a new place: discontinued, sold on backorder, the list full (an unknown SKU is
        the caller's)."""
        if shard is not None and shard.on_backorder and not shard.discontinued:
            return OnBackorder(
                "This product can be ordered now, so there is no waiting list for it.",
                offer=shard.on_backorder,
                note="",
            )
        if shard is not None and self._full(shard):
            return Conflict(
                "This product's waiting list is full for now, so it takes no new places; anyone already on it keeps "
                "their place. Please check back later.",
                code="waiting_list_full",
            )
        return Discontinued("This product is no longer sold, so there is no list to join.")

    def capture(self, source: str, data: Any, accept_language: str | None = None) -> CaptureOutcome:
        """Handle one tap end to end; raises a DomainError for anything the caller must fix.

        `source` is the caller's IP address. It is kept only as a keyed hash (in the rate limit's key and the
        audit), like a contact: enough to count taps from one address, nothing to read it back from.
        """
        source = source_key(source, self.hash_key)
        tap = parse_notify_me(data, self.settings.default_phone_region, accept_language)
        if tap.contact.channel == "sms":
            # SMS pumping: only mobile numbers, only in the countries the shop sells to (README "Limits").
            check_sms_number(tap.contact.address, self.settings.sms_allowed_countries)
        with self._line_ticket(tap.sku) as ticket:
            return ticket.settle(self._capture(tap, source, ticket))

    @contextmanager
    def _line_ticket(self, sku: str) -> Iterator[LineTicket]:
        """The line's ticket for a new place, handed back unless a new place keeps it (`LineTicket.settle`)."""
        # The place's ticket first (a plain write no transaction holds), then the clock: tickets then follow the
        # join stamps (chalicelib/line.py).
        line_ttl = int(self.clock.now()) + (self.settings.request_ttl_days + 1) * 86400
        ticket = LineTicket(*self.tables.line_tickets.take_ticket(sku, line_ttl))
        try:
            yield ticket
        except (DomainError, NotProven):
            # Refused before anything was written. Any other failure leaves the ticket alone: a place may hold it,
            # and an unused ticket left counted only widens the bounds, never makes them lie.
            self.tables.line_tickets.return_ticket(sku, ticket.number)
            raise
        if not ticket.kept:
            self.tables.line_tickets.return_ticket(sku, ticket.number)

    def _new_place(
        self, tap: NotifyMe, key: str, now: float, ticket: LineTicket, *, proven: bool = False, owes: bool = True
    ) -> NewPlace:
        """A new place. Email double opt-in: the place is kept from this tap, told nothing until its address
        confirms it, and goes after EMAIL_CONFIRM_DAYS unconfirmed (its ttl until then; chalicelib/confirm.py). A
        `proven` contact (it answered a proof message) is confirmed already. Without `owes` (an email cap refused its
        confirmation) an unconfirmed place owes no email until a later tap asks for one."""
        unconfirmed = self.settings.email_double_opt_in and tap.contact.channel == EMAIL and not proven
        days = self.settings.email_confirm_days if unconfirmed else self.settings.request_ttl_days
        return NewPlace(
            sku=tap.sku,
            joined_ts=new_joined_ts(now, ticket.number),
            channel=tap.contact.channel,
            contact=tap.contact.address,
            contact_key=key,
            name=tap.name,
            lang=tap.lang,
            ttl=int(now) + days * 86400,
            now=now,
            unconfirmed=unconfirmed,
            owes=owes,
            ticket=ticket.number,
            burnt_before=ticket.burnt_before,
            waiting_shard=shard_for(key),
            inserted_before=ticket.inserted_before,
        )

    def _not_suppressed(self, tap: NotifyMe) -> Tx:
        """The opt-out checks of a tap's contact: its mailbox ("optout") and, where the address differs from it, the
        spelling opt-outs were stored by before mailboxes were matched ("optout legacy"): an opt-out from then still
        suppresses exactly the address it was made for (invariant 3)."""
        keys = match_keys(tap.contact, self.hash_key)
        legacy = (self.tables.optout.not_suppressed_item(k) for k in keys[1:])
        return Tx().add("optout", self.tables.optout.not_suppressed_item(keys[0])).add("optout legacy", *legacy)

    def _suppressed_by(self, cancelled: TransactionCancelled) -> str | None:
        """Which opt-out check refused the transaction, if one did."""
        for part in ("optout", "optout legacy"):
            if cancelled.failed(part):
                return part
        return None

    def _email_caps(self, tap: NotifyMe, now: float, source: str | None) -> EmailCaps | None:
        """The counters a confirmation email to `tap`'s address is charged to; None when no caps apply."""
        if self.email_sends is None or tap.contact.channel != EMAIL:
            return None
        return self.email_sends.caps(tap.contact.match, now, source)

    def _email_items(self, email: EmailCaps | None) -> Tx:
        return self.email_sends.items(email) if self.email_sends is not None and email is not None else Tx()

    def _capture(self, tap: NotifyMe, source: str, ticket: LineTicket, *, owes: bool = True) -> CaptureOutcome:
        now = self.clock.now()
        caps = self._sms_caps(tap.contact, now)
        keys = match_keys(tap.contact, self.hash_key)
        new = self._new_place(tap, keys[0], now, ticket, owes=owes)
        rate_key, rate_expires, retry_after = self._rate_key(source, now)
        places = place_caps(tap.contact, source, self.settings, self.hash_key, now)
        # Email bombing: a new place's one confirmation is charged to the address's, the client's and the shop's
        # email caps in the place's own transaction, so only an email that is owed is counted.
        email = self._email_caps(tap, now, source) if new.owes_confirmation else None

        # The steady-state tap is this one transaction: rate limits, catalogue (with the list's length), opt-out,
        # the uniqueness item and, for SMS, the number's caps are all conditions on it, so nothing is read first
        # and nothing half-written.
        def join(place: NewPlace, quiet: bool) -> Tx:
            tx = Tx().add(
                "rate",
                self.tables.rate_counters.charge_item(rate_key, self.settings.rate_limit_per_minute, rate_expires),
            )
            # A new place only: a repeat or a refused tap rolls these back with everything else.
            add_place_caps(tx, self.tables.rate_counters, places)
            return self._cap_items(tx, caps, taps=True, place=True).join(self._first_place(place, quiet, tap, keys))

        try:
            joined = self._join_owing_email(new, join, email)
        except TransactionCancelled as cancelled:
            return self._refused(cancelled, tap, new, source, retry_after, caps, places)
        if not joined:
            # Only the email caps refused: the place is kept, owing no email (nothing was written, so the tap is
            # taken again without them). The answer is the one every tap gets: a refusal here would tell a
            # stranger that this address took no place for this product before.
            return self._capture(tap, source, ticket, owes=False)
        return self._queued(tap, new)

    def _first_place(self, place: NewPlace, quiet: bool, tap: NotifyMe, keys: tuple[str, ...]) -> Tx:
        """A first place's own items, for a tap as for an import: the catalogue's shard (the SKU sold, the list not
        full, its count), the opt-out checks, the uniqueness item and the place, and the check that no place is held
        under an older key."""
        unique, request = self.tables.requests.join_items(place.row())
        return (
            Tx()
            .add("product", self._join_item(place, quiet))
            .join(self._not_suppressed(tap))
            .add("unique", unique)
            .add("request", request)
            .join(self._legacy_place(place.sku, keys))
        )

    def _join_owing_email(self, place: NewPlace, join: Callable[[NewPlace, bool], Tx], email: EmailCaps | None) -> bool:
        """`_join` a tap's new place with its `joined` fact and, when it owes a confirmation, that email's caps.
        False when the email caps alone refused it (nothing was written, and the refusal is counted): the caller
        takes the tap again owing no email."""

        def with_email(place: NewPlace, quiet: bool) -> Tx:
            return join(place, quiet).join(self._email_items(email)).join(self._joined(place))

        try:
            self._join(place, with_email)
        except TransactionCancelled as cancelled:
            if email is not None and self.email_sends is not None and only_caps_refused(cancelled):
                self.email_sends.refused(cancelled, "confirmation")
                return False
            raise
        return True

    def join_imported(self, contact: Contact, place: NewPlace, facts: Tx, *, once: TxItem) -> str:
        """Write one place an import brings (docs/IMPORT.md) as a tap's transaction writes a new one: the catalogue's
        shard (the SKU sold, the list not full, its count), the opt-out checks, the uniqueness item and the place, the
        check for a place under an older key; no rate, tap or email caps (staff bring the file, no request does).
        Returns "queued", or what refused it: "already" (the person holds this SKU's uniqueness item), "suppressed",
        "imported_before" (`once`, the import's memory of this person and SKU, was written by an earlier import), or
        raises the DomainError a tap would get from the catalogue (unknown, discontinued, full) or Busy. A place that
        owes a confirmation email has it asked for, as a tap's does. `facts` (its audit fact) commit with it."""
        tap = NotifyMe(sku=place.sku, contact=contact, name=place.name, lang=place.lang)
        keys = match_keys(contact, self.hash_key)

        def join(place: NewPlace, quiet: bool) -> Tx:
            return self._first_place(place, quiet, tap, keys).add("imported once", once).join(facts)

        try:
            self._join(place, join)
        except TransactionCancelled as cancelled:
            if cancelled.failed("product"):
                refusal = self.refusal_of(cancelled, place.sku)
                if refusal is not None:
                    raise refusal from None
            if self._suppressed_by(cancelled) is not None:
                return "suppressed"
            if _refused_any(cancelled, "unique", "legacy place"):
                return "already"
            if cancelled.failed("imported once"):
                return "imported_before"
            refusal = self.refusal_of(cancelled, place.sku)
            if refusal is not None:
                raise refusal from None
            raise
        self._queued(tap, place)
        return "queued"

    def _joined(self, place: NewPlace) -> Tx:
        """The `joined` fact, written in the place's own transaction only where the shop sends joined events
        (docs/EVENTS.md): otherwise a tap writes nothing more for events out."""
        if JOINED not in self.settings.outbound_events:
            return Tx()
        fact = self.tables.audit.record_item(
            place.sku, "joined", place.now, contact_key=place.contact_key, channel=place.channel
        )
        return Tx().add("fact", fact)

    def _legacy_place(self, sku: str, keys: tuple[str, ...]) -> Tx:
        """A check that the address, spelled as it was typed, holds no place from before taps were matched by
        mailbox ("legacy place"); an empty group when its spelling is its mailbox already."""
        return Tx().add("legacy place", *(self.tables.requests.no_place_item(sku, k) for k in keys[1:]))

    def _confirms(self, tap: NotifyMe) -> bool:
        return self.settings.email_double_opt_in and tap.contact.channel == EMAIL

    def _outcome(self, status: str, tap: NotifyMe, joined_ts: str | None = None) -> CaptureOutcome:
        return CaptureOutcome(status, joined_ts, tap.contact.channel, self._confirms(tap))

    def _queued(self, tap: NotifyMe, place: NewPlace) -> CaptureOutcome:
        """A new place written: when it owes a confirmation email (it was written owing one), ask the notifier to send
        it."""
        if place.owes_confirmation:
            self._ask_confirmation(tap.sku, place.joined_ts)
        return CaptureOutcome("queued", place.joined_ts, tap.contact.channel, self._confirms(tap), place.ticket)

    def _ask_confirmation(self, sku: str, joined_ts: str) -> None:
        try:
            self.send_message(ConfirmEmail(sku, joined_ts))
        except Exception:
            # The email stays owed on the place: the sweep sends its message after a minute.
            log.warning("could not queue a confirmation email; the sweep will", exc_info=True)

    def _join(self, place: NewPlace, join: Callable[[NewPlace, bool], Tx]) -> None:
        """Write a new place (`_join_shard`), counted on the person's own shard while it has room. When that shard
        is at its share of the cap, the place goes to a shard with room (its `waiting_shard`, which the place
        records, so leaving counts it off the same shard), found with one read of the shards whatever the list's
        length. The tap is refused as the list being full only when every shard is at its share."""
        for _ in range(1 + SHARD_TRIES):
            try:
                self._join_shard(place, join)
                return
            except TransactionCancelled as cancelled:
                old = cancelled.old("product", WaitingShard) if cancelled.failed("product") else None
                if old is None or not self._full(old):
                    raise
                room = self.tables.catalog.shard_with_room(place.sku, self.max_waiting)
                if room is None:
                    raise
                place = replace(place, waiting_shard=room)
        # Every shard tried filled up under this tap's feet: the list is all but full and filling fast.
        raise Busy("Many people are joining this list right now; please try again in a few seconds.")

    def _join_shard(self, place: NewPlace, join: Callable[[NewPlace, bool], Tx]) -> None:
        """Write a new place. The catalogue's condition also asks that the open restock has no idle units (units
        nobody eligible waited for when the notifier last looked): then the place is written anyway, together
        with a top-up job owed by that restock, and the job is sent, so a late joiner is never left untold
        (invariant 7). A crash before the send leaves the job owed, and the sweep sends it.

        The notifier marks idle units before its last look at the queue, and the mark is read here in the same
        transaction that writes the place: one of the two always sees the other.
        """
        sku, now = place.sku, place.now
        try:
            self.tables.run(join(place, True))
            return
        except TransactionCancelled as cancelled:
            shard = cancelled.old("product", WaitingShard) if cancelled.failed("product") else None
            if cancelled.failed("product") and shard is None and self.tables.catalog.open_shards(sku):
                # A product stored before waiting shards existed gets them at its first tap, then the tap joins
                # (open_shards is False once they exist, so this happens once).
                self._join_shard(place, join)
                return
            if not shard or not shard.idle_restock_ts or shard.discontinued or shard.on_backorder or self._full(shard):
                raise
        restock_ts = str(shard.idle_restock_ts)
        owe = self.tables.restocks.owe_topup_item(sku, restock_ts, token=f"join#{uuid.uuid4().hex}", now=now)
        try:
            self.tables.run(join(place, False).add("owed job", owe))
        finally:
            # Sent even when the place already existed (a repeat tap after a crash that cut the first short).
            self.owed.send(sku, restock_ts, now)

    def refusal_of(
        self,
        cancelled: TransactionCancelled,
        sku: str,
        *,
        caps: SmsCaps | None = None,
        places: PlaceCaps | None = None,
        retry_after: int = 60,
    ) -> DomainError | None:
        """The error a place's cancelled transaction answers with, from the first of these items that refused it:
        the client address's rate, the number's taps (`caps`), the catalogue (no such product, no longer sold, the
        list full), the sign-up caps (`places`), the number's places; then a conflict with other transactions that
        outlasted the retries (Busy: a hot drop, docs/SCALE.md; an honest "try again" that wrote nothing, never a
        5xx). None when only a part the caller answers itself refused (an opt-out check, the uniqueness item, a place
        stored under an older key, a proof)."""
        if _refused_any(cancelled, "rate"):
            return RateLimited("Too many requests from this address; try again in a minute.", retry_after)
        try:
            taps_refused(cancelled, caps)
        except RateLimited as limited:
            return limited
        if _refused_any(cancelled, "product"):
            shard = cancelled.old("product", WaitingShard)
            return self._product_refused(shard) if shard else UnknownSku(f"We do not sell a product with SKU {sku!r}.")
        try:
            if places is not None:
                place_caps_refused(cancelled, places)
        except RateLimited as limited:
            return limited
        if _refused_any(cancelled, "places"):
            return self._too_many_places()
        if cancelled.conflicted:
            return Busy("Many people are joining this list right now; please try again in a few seconds.")
        return None

    def _refused(
        self,
        cancelled: TransactionCancelled,
        tap: NotifyMe,
        new: NewPlace,
        source: str,
        retry_after: int,
        caps: SmsCaps | None,
        places: PlaceCaps,
    ) -> CaptureOutcome:
        """A tap's refused transaction answered: an error, or the outcome of the part that refused it."""
        key, now = new.contact_key, new.now
        refusal = self.refusal_of(cancelled, tap.sku, caps=caps, places=places, retry_after=retry_after)
        if isinstance(refusal, OnBackorder) and refusal.reason == PREORDER:
            # The widget shows the answer's note as it is, so the shop's pre-order note comes in the tap's language.
            refusal = OnBackorder(refusal.message, offer=PREORDER, note=text("widget", tap.lang)(PREORDER_NOTE))
        if refusal is not None and _refused_any(cancelled, "rate", "number taps", "prefix taps"):
            raise refusal
        # The transaction was rolled back, so this tap has not been counted yet.
        self._charge(source, now)
        self._charge_taps(caps)
        if refusal is not None and cancelled.failed("product"):
            if cancelled.failed("unique") and isinstance(refusal, Conflict):
                # A repeat tap keeps its place on a full list, yet is answered as a newcomer is: the answer
                # must not tell a stranger that the contact they typed is waiting (invariant 9).
                kept = self._repeat(tap, key, new, cancelled.old("unique", UniqueItem), caps, source=source)
                if kept.status == "queued":
                    return kept  # a place freed under this tap's feet took its rejoin
            if isinstance(refusal, UnknownSku):
                self._record_unknown(tap, key, source, now)
            raise refusal
        suppressed_by = self._suppressed_by(cancelled)
        if suppressed_by is not None:
            # Opted out: acknowledged with the same answer as any tap; no place, and at most one proof message to
            # the contact itself (chalicelib/shopper/resubscribe.py), under the key its opt-out is stored by.
            keys = match_keys(tap.contact, self.hash_key)
            suppressed_key = keys[0] if suppressed_by == "optout" else keys[-1]
            return self._suppressed(tap, suppressed_key, cancelled.old(suppressed_by), now, source)
        if cancelled.failed("unique"):
            return self._repeat(tap, key, new, cancelled.old("unique", UniqueItem), caps, source=source)
        if cancelled.failed("legacy place"):
            # The address has a place from before mailboxes were matched: it keeps that place, under the key it was
            # stored by, so asking again never makes a second one (invariant 2).
            legacy = match_keys(tap.contact, self.hash_key)[-1]
            stored = cancelled.old("legacy place", UniqueItem)
            return self._repeat(tap, legacy, new.under(legacy), stored, caps, source=source)
        if refusal is not None:
            raise refusal
        raise RuntimeError(f"capture transaction cancelled unexpectedly: {cancelled}")

    def _too_many_places(self) -> Conflict:
        return Conflict(
            f"This number has joined {self.settings.places_per_number} waiting lists lately, the most we keep for "
            "one number; leave a list you no longer need from your manage link, or choose email.",
            code="too_many_places",
        )

    @property
    def max_waiting(self) -> int:
        """The most places one SKU's list holds at once (MAX_WAITING_PER_SKU)."""
        return self.settings.max_waiting_per_sku

    def _suppressed(
        self, tap: NotifyMe, key: str, record: dict[str, Any] | None, now: float, source: str | None = None
    ) -> CaptureOutcome:
        if self.on_suppressed is not None:
            self.on_suppressed(tap, key, record, now, source)
        return self._outcome("acknowledged", tap)

    def _repeat(
        self,
        tap: NotifyMe,
        key: str,
        new: NewPlace,
        unique: UniqueItem | None,
        caps: SmsCaps | None = None,
        proof: Callable[[], Tx] | None = None,
        *,
        source: str | None = None,
    ) -> CaptureOutcome:
        """A tap (or a proof) for a contact that holds this SKU's uniqueness item: its place kept and refreshed, or,
        when that place is finished, `new` written in its stead at the back of the line."""
        now = new.now
        ref = (unique.ref or "") if unique else ""
        place = self.tables.requests.place_named(unique)
        if proof is not None and place is not None and place.live:
            # Proven while a place still stands (it had not left yet): the proof alone lifts the suppression.
            self._prove(proof())
            return self._outcome("already_queued", tap, ref)
        if place is not None and place.live and place.unconfirmed:
            # Still unconfirmed: its deadline stands; one more confirmation email only after a while, capped.
            if self._owe_confirmation(tap, ref, now, source):
                self._ask_confirmation(tap.sku, ref)
            return self._outcome("already_queued", tap, ref)
        full_ttl = int(now) + self.settings.request_ttl_days * 86400
        refreshed = self.tables.requests.refresh(tap.sku, ref, ttl=full_ttl, now=now) if place is not None else None
        if refreshed is not None:
            return self._outcome("already_queued", tap, ref)
        # The old place is finished (bought, or left: then the item names no place): join again at the back,
        # never to be told again about the restock the old place was told about (exactly once per person).
        told = unique.told_restock if unique else None
        if ref:
            told = place.last_notified_restock if place else None

        # A place taken again owes a confirmation as a new one does, charged the same way.
        email = self._email_caps(tap, now, source) if new.owes_confirmation else None

        def rejoin(place: NewPlace, quiet: bool) -> Tx:
            unique, request = self.tables.requests.rejoin_items(place.row(told), old_ref=ref)
            guard = proof() if proof is not None else self._not_suppressed(tap)
            return self._cap_items(Tx(), caps, taps=False, place=True).join(
                Tx()
                .add("product", self._join_item(place, quiet))
                .add("unique", unique)
                .add("request", request)
                .join(guard)
            )

        try:
            joined = self._join_owing_email(new, rejoin, email)
        except TransactionCancelled as cancelled:
            if proof is not None:
                self._not_proven(cancelled)
            # A proof's own opt-out item was read by _not_proven; only a tap's checks are left to read.
            suppressed_by = self._suppressed_by(cancelled) if proof is None else None
            if suppressed_by is not None:
                return self._suppressed(tap, key, cancelled.old(suppressed_by), now, source)
            if cancelled.failed("unique"):
                # Someone else's simultaneous re-join won; theirs is this person's one place.
                current = self.tables.requests.unique(tap.sku, key)
                return self._outcome("already_queued", tap, (current.ref or "") if current else "")
            refusal = self.refusal_of(cancelled, tap.sku, caps=caps)
            if refusal is None:
                raise
            raise refusal from None
        if not joined:
            # As at a first tap: the place is taken again, owing no email, and the answer stays the same.
            return self._repeat(tap, key, replace(new, owes=False), unique, caps, proof, source=source)
        return self._queued(tap, new)

    def _owe_confirmation(self, tap: NotifyMe, ref: str, now: float, source: str | None) -> bool:
        """Owe one more confirmation email for an unconfirmed place (when its own resend rule allows), charged to the
        email caps in the same transaction; False when the place owes none or a cap refused it (silently: every
        tap's answer is the same)."""
        owe = self.tables.requests.owe_confirmation_item(
            tap.sku, ref, now=now, resend_after_s=RESEND_AFTER_S, cap=MAX_CONFIRMATIONS
        )
        tx = Tx().add("owe", owe).join(self._email_items(self._email_caps(tap, now, source)))
        try:
            self.tables.run(tx)
        except TransactionCancelled as cancelled:
            if cancelled.failed("owe") and not cancelled.failed_other_than("owe"):
                return False  # the place owes one already, or its own resend rule says not yet
            if self.email_sends is not None and only_caps_refused(cancelled, "owe"):
                self.email_sends.refused(cancelled, "confirmation")
                return False
            raise
        return True

    # --- Proven joins: a suppressed contact that answered its proof message (chalicelib/shopper/resubscribe.py).

    def join_proven(self, tap: NotifyMe, proof: Callable[[], Tx]) -> CaptureOutcome:
        """Join `tap`'s list as a tap would, with `proof` in place of the opt-out check: its items (named "optout",
        which lifts the suppression or checks there is none, and "proof", which uses the proof, plus any others)
        commit with the place, or nothing does. Raises NotProven when the proof's items refuse, and the
        DomainErrors a tap would (the list full, the product gone, too many places for a number)."""
        with self._line_ticket(tap.sku) as ticket:
            return ticket.settle(self._join_proven(tap, proof, ticket))

    def _join_proven(self, tap: NotifyMe, proof: Callable[[], Tx], ticket: LineTicket) -> CaptureOutcome:
        now = self.clock.now()
        # The proof message was the tap's: its number's taps were counted then; the new place still counts.
        caps = self._sms_caps(tap.contact, now)
        key = contact_key(tap.contact.match, self.hash_key)
        new = self._new_place(tap, key, now, ticket, proven=True)

        def join(place: NewPlace, quiet: bool) -> Tx:
            unique, request = self.tables.requests.join_items(place.row())
            return self._cap_items(Tx(), caps, taps=False, place=True).join(
                Tx()
                .add("product", self._join_item(place, quiet))
                .add("unique", unique)
                .add("request", request)
                .join(proof())
                .join(self._joined(place))
            )

        try:
            self._join(new, join)
        except TransactionCancelled as cancelled:
            self._not_proven(cancelled)
            if cancelled.failed("unique"):
                return self._repeat(tap, key, new, cancelled.old("unique", UniqueItem), caps, proof)
            refusal = self.refusal_of(cancelled, tap.sku, caps=caps)
            if refusal is None:
                raise
            raise refusal from None
        return self._queued(tap, new)

    def _prove(self, proof: Tx) -> None:
        try:
            self.tables.run(proof)
        except TransactionCancelled as cancelled:
            self._not_proven(cancelled)
            raise

    @staticmethod
    def _not_proven(cancelled: TransactionCancelled) -> None:
        for part in ("proof", "optout"):
            if cancelled.failed(part):
                raise NotProven(part, cancelled.old("optout")) from None

    def _record_unknown(self, tap: NotifyMe, key: str, source: str, now: float) -> None:
        self.tables.audit.record(
            tap.sku, "unknown_sku", now, contact_key=key, channel=tap.contact.channel, source=source
        )
        self.unknown_skus.record(tap.sku, now)
