"""The caps every email a stranger can make us send is charged to (email bombing, docs/SECURITY.md).

A restock notice is bounded by units in stock; a confirmation email (a new email place, or a repeat tap on an
unconfirmed one), a re-subscribe email (a tap for an address that unsubscribed) and a switch code by email (the
manage page) are bounded only by requests. One place owes one confirmation, but a script can take one place per
product, so each of these emails is also charged to one set of counters in bisn-throttle, whatever door asked:

- per address, across every product: EMAILS_PER_ADDRESS_PER_DAY per UTC day (`mailaddr#<address hash>#<day>`);
- per client address (IP): EMAILS_PER_SOURCE_PER_HOUR (`mailiph#<ip hash>#<hour>`) and EMAILS_PER_SOURCE_PER_DAY
  (`mailipd#<ip hash>#<day>`);
- shop-wide: NON_NOTICE_EMAILS_PER_DAY per UTC day (`mailday#<day>`).

Every key names a keyed hash (HMAC with CONTACT_HASH_KEY), never an address. The counters are conditional ADDs on
the cap (chalicelib/tables/throttle.py), so simultaneous requests never pass it, and each carries a ttl. Every
refusal is counted in NON_NOTICE_EMAIL_REFUSED (an alarm watches it).

Where the email answers a tap (a confirmation, a re-subscribe email) a refusal is silent: the tap's answer is the
one every tap gets, or a stranger would learn whether an address waits or unsubscribed; the place is kept, owing
nothing, and a tap on another day asks again. Where the caller holds the person's manage link (a switch code) the
refusal is a 429 naming the cap.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from chalicelib.config import Settings
from chalicelib.contacts import contact_key
from chalicelib.errors import RateLimited
from chalicelib.messages.sms_caps import DAY_S
from chalicelib.metrics import NON_NOTICE_EMAIL_REFUSED, MetricsFactory
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)

# The names the counters go under in a caller's transaction, in the order a refusal is reported by.
ADDRESS, SOURCE_HOUR, SOURCE_DAY, CEILING = "email address", "email source hour", "email source day", "email ceiling"
CAP_NAMES = (ADDRESS, SOURCE_HOUR, SOURCE_DAY, CEILING)


def only_caps_refused(cancelled: TransactionCancelled, *also: str) -> bool:
    """True when an email cap refused the transaction and nothing else did but the items named in `also` (a
    conflict with another transaction is no refusal by a cap)."""
    present = [name for name in (*CAP_NAMES, *also) if cancelled.has(name)]
    return (
        first_refused(cancelled) is not None and not cancelled.failed_other_than(*present) and not cancelled.conflicted
    )


@dataclass(frozen=True)
class EmailCaps:
    """The throttle counters one email to one address is charged to at one moment."""

    address_key: str  # emails to this address today, across every product
    source_hour_key: str | None  # emails asked for from this client address this hour (None: no client address)
    source_day_key: str | None  # ...and today
    ceiling_key: str  # emails of these kinds the shop sent today
    hour_expires: int
    day_expires: int
    to_hour_end: int  # seconds to the end of the hour
    to_midnight: int  # seconds to midnight UTC


def email_caps(address: str, hash_key: str, now: float, source_hash: str | None = None) -> EmailCaps:
    """The counters of an email to `address` (normalised: case-folded) asked for from the client address whose keyed
    hash is `source_hash`; each is one item, whatever the lists' lengths."""
    hour, day = int(now // 3600), int(now // DAY_S)
    who = contact_key(f"email:{address}", hash_key)
    return EmailCaps(
        address_key=f"mailaddr#{who}#{day}",
        source_hour_key=f"mailiph#{source_hash}#{hour}" if source_hash else None,
        source_day_key=f"mailipd#{source_hash}#{day}" if source_hash else None,
        ceiling_key=f"mailday#{day}",
        hour_expires=(hour + 1) * 3600 + 60,
        day_expires=(day + 1) * DAY_S + 3600,
        to_hour_end=int((hour + 1) * 3600 - now) or 1,
        to_midnight=int((day + 1) * DAY_S - now) or 1,
    )


def first_refused(cancelled: TransactionCancelled) -> str | None:
    """The name of the first email cap the transaction failed on, or None."""
    return next((name for name in CAP_NAMES if cancelled.has(name) and cancelled.failed(name)), None)


def refusal(cap: str, caps: EmailCaps) -> RateLimited:
    """The 429 for an email refused by `cap`, with the seconds until that cap's window ends."""
    if cap == ADDRESS:
        return RateLimited(
            "We have sent this address as many emails as we send one address in a day. Please try again tomorrow.",
            caps.to_midnight,
            code="address_email_limit",
        )
    if cap == SOURCE_HOUR:
        return RateLimited(
            "Too many emails were asked for from this network this hour; try again later.",
            caps.to_hour_end,
            code="source_email_limit",
        )
    if cap == SOURCE_DAY:
        return RateLimited(
            "Too many emails were asked for from this network today; please try again tomorrow.",
            caps.to_midnight,
            code="source_email_limit",
        )
    return RateLimited(
        "We have sent as many of these emails today as we send in a day. Please try again tomorrow.",
        caps.to_midnight,
        code="email_daily_limit",
    )


@dataclass(frozen=True, kw_only=True, eq=False)
class EmailSends:
    """Charges an email that is not a restock notice before anything is owed or queued for it."""

    tables: Tables
    settings: Settings
    hash_key: str
    metrics: MetricsFactory

    def caps(self, address: str, now: float, source_hash: str | None = None) -> EmailCaps:
        """The counters one email to `address` at `now` is charged to."""
        return email_caps(address, self.hash_key, now, source_hash)

    def items(self, caps: EmailCaps) -> Tx:
        """The counters as named items for a caller's own transaction, so the email is charged if and only if what
        owes it commits (a place, a proof, an owed confirmation)."""
        counters, limits = self.tables.rate_counters, self.settings
        tx = Tx().add(
            ADDRESS, counters.charge_item(caps.address_key, limits.emails_per_address_per_day, caps.day_expires)
        )
        if caps.source_hour_key is not None and caps.source_day_key is not None:
            tx.add(
                SOURCE_HOUR,
                counters.charge_item(caps.source_hour_key, limits.emails_per_source_per_hour, caps.hour_expires),
            )
            tx.add(
                SOURCE_DAY,
                counters.charge_item(caps.source_day_key, limits.emails_per_source_per_day, caps.day_expires),
            )
        return tx.add(
            CEILING, counters.charge_item(caps.ceiling_key, limits.non_notice_emails_per_day, caps.day_expires)
        )

    def refused(self, cancelled: TransactionCancelled, kind: str) -> str | None:
        """The cap a transaction holding `items` failed on (counted in the metric, logged without the address), or
        None when no email cap refused it."""
        cap = first_refused(cancelled)
        if cap is None:
            return None
        log.warning("a %s email was refused by its %s cap; none sent", kind, cap)
        buffer = self.metrics.start()
        buffer.count(NON_NOTICE_EMAIL_REFUSED)
        buffer.flush()
        return cap

    def charge(self, address: str, now: float, *, source_hash: str | None = None, kind: str = "code") -> None:
        """Count one email to `address` against every cap on its own, all or none; RateLimited (429) naming the cap
        that refused it."""
        caps = self.caps(address, now, source_hash)
        try:
            self.tables.run(self.items(caps))
        except TransactionCancelled as cancelled:
            cap = self.refused(cancelled, kind)
            if cap is not None:
                raise refusal(cap, caps) from None
            raise
