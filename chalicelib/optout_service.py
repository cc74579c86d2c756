"""Opt-out everywhere: the unsubscribe link, SMS STOP replies (synced from SNS) and staff opt-outs.

Opting out writes the contact's keyed hash to bisn-optout (capture's transaction and the notifier
both check it, so nobody suppressed is queued or messaged: invariant 3) and then takes the person
off every list through `QueueExits`, which passes any live offer to the next person.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chalicelib.clock import Clock
from chalicelib.contacts import contact_key
from chalicelib.leaving import HOLDING, Exit, QueueExits
from chalicelib.tables.optout import SOURCES, OptoutTable

MAX_SYNC_PAGES = 200  # 200 pages of up to 100 numbers each minute; far beyond a shop's opt-outs


@dataclass(frozen=True)
class OptOutResult:
    """What opting one contact out did."""

    newly: bool  # False when the contact had already opted out (the first reason is kept)
    exits: list[Exit] = field(default_factory=list)

    @property
    def left(self) -> list[Exit]:
        """Places that are gone (including those whose live offer went to the next person)."""
        return [e for e in self.exits if e.outcome not in (HOLDING,)]

    @property
    def holding(self) -> list[Exit]:
        """Units the shopper already holds: theirs to buy until the hold expires."""
        return [e for e in self.exits if e.outcome == HOLDING]


@dataclass(frozen=True)
class SyncReport:
    """One run of the SMS STOP sync."""

    numbers_seen: int
    newly_suppressed: int
    places_left: int
    pages: int


def sms_match(number: str) -> str:
    """The form an SNS opted-out number is matched by: E.164, as capture stores phone numbers."""
    # Imported here, not at the top: a cold start pays for it only on the paths that use it.
    import phonenumbers

    try:
        parsed = phonenumbers.parse(number, None)
    except phonenumbers.NumberParseException:
        return number.strip()
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


@dataclass(frozen=True, kw_only=True, eq=False)
class OptoutService:
    """Suppresses contacts and takes them off every list."""

    optout: OptoutTable
    exits: QueueExits
    sns: Any
    clock: Clock
    hash_key: str

    def opt_out(self, key: str, source: str) -> OptOutResult:
        """Suppress one contact (by keyed hash) and take them off every list; safe to repeat."""
        if source not in SOURCES:
            raise ValueError(f"unknown opt-out source {source!r}")
        # Suppression first: from this moment capture refuses them and the notifier skips them, so a
        # crash before the lists are cleared can never lead to a message (invariant 3).
        newly = self.optout.add(key, source, self.clock.now())
        # Always walk the lists, even when already suppressed: a repeat click finishes an earlier,
        # interrupted opt-out instead of trusting that it completed.
        exits = self.exits.leave_all(key, reason=source)
        return OptOutResult(newly=newly, exits=exits)

    def sync_sms_optouts(self, *, max_pages: int = MAX_SYNC_PAGES) -> SyncReport:
        """Copy the SNS account's opted-out numbers (STOP replies) into bisn-optout, source 'stop'.

        Called by the minute sweep. Numbers already suppressed cost one batched read per page.
        """
        seen = added = left = pages = 0
        token: str | None = None
        while pages < max_pages:
            page = self.sns.list_phone_numbers_opted_out(**({"nextToken": token} if token else {}))
            pages += 1
            numbers = [str(n) for n in page.get("phoneNumbers", []) if n]
            seen += len(numbers)
            keys = list(dict.fromkeys(contact_key(sms_match(n), self.hash_key) for n in numbers))
            known = self.optout.suppressed_among(keys) if keys else set()
            for key in keys:
                if key in known:
                    continue
                result = self.opt_out(key, "stop")
                added += 1 if result.newly else 0
                left += len(result.left)
            token = page.get("nextToken") or None
            if not token:
                break
        return SyncReport(numbers_seen=seen, newly_suppressed=added, places_left=left, pages=pages)
