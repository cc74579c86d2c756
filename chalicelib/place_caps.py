"""Caps on new places per email domain and per client address an hour (a bot taking a whole drop).

Matching by mailbox (chalicelib/contacts.py) stops one inbox from taking many places; these stop many inboxes one
script controls. Both counters live in bisn-throttle beside the SMS caps (chalicelib/messages/sms_caps.py), are charged in
the transaction that writes the place (a repeat tap or a refused one costs nothing), and expire by TTL:

- per email domain: PLACES_PER_DOMAIN_PER_HOUR for a shop's or a person's own domain, and the much higher
  PLACES_PER_FREEMAIL_DOMAIN_PER_HOUR for the big free-mail providers, where a whole drop's shoppers may be
  (`pdom#<domain hash>#<hour>`);
- per client address: PLACES_PER_SOURCE_PER_HOUR, every channel (`psrc#<address hash>#<hour>`).

Every key names a keyed hash, never a domain or an address.
"""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.config import Settings
from chalicelib.contacts import PLUS_ADDRESSING_DOMAINS, Contact, contact_key
from chalicelib.errors import RateLimited
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.throttle import RateCounters

DOMAIN_PLACES = "domain places"
SOURCE_PLACES = "source places"
CAP_NAMES = (DOMAIN_PLACES, SOURCE_PLACES)

# Free-mail domains big enough that many real shoppers of one shop share them. The list need not be complete: a
# domain missing from it only gets the smaller cap, which a real drop reaches only from one company's staff.
# Every provider that honours plus-addressing (chalicelib/contacts.py) is one of them.
FREEMAIL_DOMAINS = PLUS_ADDRESSING_DOMAINS | frozenset(
    {
        "yahoo.com",
        "yahoo.co.uk",
        "yahoo.fr",
        "yahoo.de",
        "ymail.com",
        "aol.com",
        "gmx.de",
        "gmx.net",
        "gmx.com",
        "web.de",
        "t-online.de",
        "orange.fr",
        "free.fr",
        "laposte.net",
        "libero.it",
        "btinternet.com",
        "mail.ru",
        "yandex.ru",
        "qq.com",
        "163.com",
        "naver.com",
        "zoho.com",
    }
)


@dataclass(frozen=True)
class PlaceCaps:
    """The counters one new place is charged to; keys are keyed hashes."""

    domain_key: str | None  # None for a phone number
    domain_limit: int
    source_key: str
    source_limit: int
    expires: int
    retry_after: int  # seconds to the end of the hour


def email_domain(contact: Contact) -> str | None:
    """The domain of an email contact's mailbox (googlemail.com counted as gmail.com); None for a number."""
    if contact.channel != "email":
        return None
    return contact.match.rpartition("@")[2]


def place_caps(contact: Contact, source_hash: str, settings: Settings, hash_key: str, now: float) -> PlaceCaps:
    """The counters of a new place for `contact` asked from the client address hashed as `source_hash`."""
    hour = int(now // 3600)
    domain = email_domain(contact)
    freemail = domain in FREEMAIL_DOMAINS
    return PlaceCaps(
        domain_key=f"pdom#{contact_key(f'domain:{domain}', hash_key)}#{hour}" if domain else None,
        domain_limit=settings.places_per_freemail_domain_per_hour if freemail else settings.places_per_domain_per_hour,
        source_key=f"psrc#{source_hash}#{hour}",
        source_limit=settings.places_per_source_per_hour,
        expires=(hour + 1) * 3600 + 60,
        retry_after=int((hour + 1) * 3600 - now) or 1,
    )


def add_place_caps(tx: Tx, counters: RateCounters, caps: PlaceCaps) -> Tx:
    """Add one new place to `tx`'s domain and client-address counters (each name always present, maybe empty)."""
    domain = [counters.charge_item(caps.domain_key, caps.domain_limit, caps.expires)] if caps.domain_key else []
    tx.add(DOMAIN_PLACES, *domain)
    return tx.add(SOURCE_PLACES, counters.charge_item(caps.source_key, caps.source_limit, caps.expires))


def place_caps_refused(cancelled: TransactionCancelled, caps: PlaceCaps) -> None:
    """Raise RateLimited (429) naming the cap when the transaction failed on one of them."""
    if cancelled.failed(SOURCE_PLACES):
        raise RateLimited(
            "Too many sign-ups from this address this hour; try again later.",
            caps.retry_after,
            code="source_places_limited",
        )
    if cancelled.failed(DOMAIN_PLACES):
        raise RateLimited(
            "Too many sign-ups with addresses at this email domain this hour; try again later.",
            caps.retry_after,
            code="domain_places_limited",
        )
