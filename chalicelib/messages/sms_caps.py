"""The caps every SMS a request can make us send is charged to (SMS pumping, docs/SECURITY.md).

A tap (chalicelib/capture.py), a channel switch's code (chalicelib/manage.py) and a re-subscribe code
(chalicelib/shopper/resubscribe.py) share one set of counters in bisn-throttle, so whichever door a script uses it spends
the same budget:

- per client address: RATE_LIMIT_PER_MINUTE requests a minute (`tap#<address hash>#<minute>`);
- per number: TAPS_PER_NUMBER_PER_HOUR (`tapn#<number hash>#<hour>`);
- per number block (the number less its last 4 digits): TAPS_PER_PREFIX_PER_HOUR (`tapp#<block hash>#<hour>`);
- per number, new places: PLACES_PER_NUMBER per REQUEST_TTL_DAYS (`places#<number hash>#<window>`);
- shop-wide: NON_NOTICE_SMS_PER_DAY SMS that are not restock notices (codes, staff's opt-in links) per UTC day
  (`smsday#<day>`).

Every key names a keyed hash, never a number or an address.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from chalicelib.config import Settings
from chalicelib.contacts import contact_key, sms_prefix
from chalicelib.errors import RateLimited
from chalicelib.metrics import NON_NOTICE_SMS_REFUSED, MetricsFactory
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.store import Tables
from chalicelib.tables.throttle import RateCounters

log = logging.getLogger(__name__)

DAY_S = 86400


@dataclass(frozen=True)
class SmsCaps:
    """The throttle counters an SMS to one number is charged to: keys are keyed hashes, never a number."""

    number_key: str  # requests for this number this hour
    prefix_key: str  # requests for numbers of this block (the number less its last 4 digits) this hour
    places_key: str  # new places this number took in this window
    hour_expires: int
    places_expires: int
    retry_after: int  # seconds to the end of the hour


def places_key(e164: str, hash_key: str, now: float, window_days: int) -> tuple[str, int]:
    """The throttle key counting the places a number took in the current window, and when it expires."""
    window_s = window_days * DAY_S
    window = int(now // window_s)
    number = contact_key(f"sms:{e164}", hash_key)
    return f"places#{number}#{window}", (window + 1) * window_s + 60


def sms_caps(e164: str, hash_key: str, now: float, places_window_days: int) -> SmsCaps:
    """The counters of one number at `now`; each costs the same whatever the lists' lengths."""
    hour = int(now // 3600)
    number = contact_key(f"sms:{e164}", hash_key)
    prefix = contact_key(f"prefix:{sms_prefix(e164)}", hash_key)
    places, places_expires = places_key(e164, hash_key, now, places_window_days)
    return SmsCaps(
        number_key=f"tapn#{number}#{hour}",
        prefix_key=f"tapp#{prefix}#{hour}",
        places_key=places,
        hour_expires=(hour + 1) * 3600 + 60,
        places_expires=places_expires,
        retry_after=int((hour + 1) * 3600 - now) or 1,
    )


def source_key(source: str, hash_key: str) -> str:
    """A client address as the counters and the audit keep it: a keyed hash."""
    return contact_key(f"ip:{source}", hash_key)


def source_rate_key(source_hash: str, now: float) -> tuple[str, int, int]:
    """The per-address counter of this minute: (key, when it expires, seconds to the next minute)."""
    minute = int(now // 60)
    return f"tap#{source_hash}#{minute}", (minute + 1) * 60 + 60, int((minute + 1) * 60 - now) or 1


def add_source(tx: Tx, counters: RateCounters, source_hash: str, now: float, limit: int) -> Tx:
    """Add one request from a client address to `tx`, under the name "rate"."""
    key, expires, _ = source_rate_key(source_hash, now)
    return tx.add("rate", counters.charge_item(key, limit, expires))


def add_caps(tx: Tx, counters: RateCounters, caps: SmsCaps | None, limits: Settings, *, taps: bool, place: bool) -> Tx:
    """Add a number's counters to `tx`: one request this hour (number and block), and one new place."""
    if caps is None:
        return tx
    if taps:
        tx.add("number taps", counters.charge_item(caps.number_key, limits.taps_per_number_per_hour, caps.hour_expires))
        tx.add("prefix taps", counters.charge_item(caps.prefix_key, limits.taps_per_prefix_per_hour, caps.hour_expires))
    if place:
        tx.add("places", counters.charge_item(caps.places_key, limits.places_per_number, caps.places_expires))
    return tx


def source_refused(cancelled: TransactionCancelled, now: float) -> None:
    """Raise RateLimited when the transaction failed on the client address's counter."""
    if cancelled.failed("rate"):
        raise RateLimited("Too many requests from this address; try again in a minute.", source_rate_key("", now)[2])


def taps_refused(cancelled: TransactionCancelled, caps: SmsCaps | None) -> None:
    """Raise RateLimited when the transaction failed on a counter of the number or its block."""
    if caps is None:
        return
    if cancelled.failed("number taps"):
        raise RateLimited(
            "Too many requests for this number this hour; try again later.",
            caps.retry_after,
            code="number_rate_limited",
        )
    if cancelled.failed("prefix taps"):
        raise RateLimited(
            "Too many requests for numbers like this one this hour; try again later, or choose email.",
            caps.retry_after,
            code="prefix_rate_limited",
        )


def day_key(now: float) -> tuple[str, int, int]:
    """The shop-wide counter of this UTC day: (key, when it expires, seconds to midnight)."""
    day = int(now // DAY_S)
    return f"smsday#{day}", (day + 1) * DAY_S + 3600, int((day + 1) * DAY_S - now) or 1


@dataclass(frozen=True, kw_only=True, eq=False)
class SmsSends:
    """Charges an SMS that is not a restock notice (a code) before anything is owed or queued for it.

    Notices are bounded by units in stock; a code is bounded only by requests, so each one is counted against the
    same per-address and per-number caps as a tap, and all of them against a shop-wide daily ceiling, whatever
    door asked for it. A refusal past the ceiling is counted in NON_NOTICE_SMS_REFUSED (an alarm watches it).
    """

    tables: Tables
    settings: Settings
    hash_key: str
    metrics: MetricsFactory

    def ceiling_item(self, now: float) -> Tx:
        """The shop-wide daily counter, under the name "ceiling", for a caller's own transaction."""
        key, expires, _ = day_key(now)
        return Tx().add(
            "ceiling", self.tables.rate_counters.charge_item(key, self.settings.non_notice_sms_per_day, expires)
        )

    def ceiling_refused(self, cancelled: TransactionCancelled, now: float) -> bool:
        """True (and counted in the metric) when the transaction failed on the shop-wide ceiling."""
        if not cancelled.failed("ceiling"):
            return False
        log.warning("a code SMS was refused: the shop sent NON_NOTICE_SMS_PER_DAY of them today")
        buffer = self.metrics.start()
        buffer.count(NON_NOTICE_SMS_REFUSED)
        buffer.flush()
        return True

    def charge(self, e164: str, now: float, *, source: str | None = None) -> None:
        """Count one code SMS to `e164` (asked for from client address `source`) against the caps, all or none;
        RateLimited (429) naming the cap that refused it."""
        caps = sms_caps(e164, self.hash_key, now, self.settings.request_ttl_days)
        tx = Tx()
        if source is not None:
            add_source(
                tx,
                self.tables.rate_counters,
                source_key(source, self.hash_key),
                now,
                self.settings.rate_limit_per_minute,
            )
        add_caps(tx, self.tables.rate_counters, caps, self.settings, taps=True, place=False).join(
            self.ceiling_item(now)
        )
        try:
            self.tables.run(tx)
        except TransactionCancelled as cancelled:
            if tx.has("rate"):
                source_refused(cancelled, now)
            taps_refused(cancelled, caps)
            if self.ceiling_refused(cancelled, now):
                raise past_ceiling(now) from None
            raise

    def charge_ceiling(self, now: float) -> None:
        """Count one SMS that is not a notice against the shop-wide ceiling alone (a staff member's opt-in link:
        staff are signed in, so no address or number caps); RateLimited (429) past it."""
        tx = self.ceiling_item(now)
        try:
            self.tables.run(tx)
        except TransactionCancelled as cancelled:
            if self.ceiling_refused(cancelled, now):
                raise past_ceiling(now) from None
            raise


def past_ceiling(now: float) -> RateLimited:
    """The refusal of an SMS past the shop-wide daily ceiling, with the seconds to midnight UTC."""
    return RateLimited(
        "We have sent as many codes by SMS today as we send in a day. Please try again tomorrow, or keep email.",
        day_key(now)[2],
        code="sms_daily_limit",
    )
