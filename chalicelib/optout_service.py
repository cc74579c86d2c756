"""Opt-out everywhere: the unsubscribe link, SMS STOP replies (synced from SNS) and staff opt-outs.

Opting out writes the contact's keyed hash to bisn-optout (capture's transaction and the notifier
both check it, so nobody suppressed is queued or messaged: invariant 3) and then takes the person
off every list through `QueueExits`, which passes any live offer to the next person.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.clock import Clock, Deadline
from chalicelib.contacts import contact_key
from chalicelib.faults import FaultHook, no_faults
from chalicelib.leaving import HOLDING, LEFT, RELEASED, Exit, QueueExits
from chalicelib.tables.base import error_code
from chalicelib.tables.optout import SOURCES, OptoutTable
from chalicelib.tables.throttle import SavedStates, UndoRecords

# A pass reads at most this many pages (of up to 100 numbers) a run; the next run carries on where it stopped.
MAX_PAGES_PER_RUN = 50
# A finished pass starts again after a day: SNS itself refuses to send to a number that replied STOP meanwhile
# (the notifier then passes it over), so the copy here only needs to catch up, not to race.
PASS_EVERY_S = 86_400
SYNC_CURSOR = "cursor#sms-optouts"
CURSOR_TTL_S = 7 * 86_400
# How long an unsubscribe by link can be taken back (chalicelib/shopper/undo.py): long enough to notice a mistaken press,
# short enough that the contact and the lists left are not kept in clear for long.
UNDO_WINDOW_S = 30 * 60


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
class UndoOffer:
    """What an unsubscribe's undo token names: the person, the opt-out's written-at stamp and its undo record's
    nonce, and when the window closes."""

    contact_key: str
    at: int
    nonce: str
    expires_at: int


@dataclass(frozen=True)
class SyncReport:
    """One run of the SMS STOP sync."""

    numbers_seen: int
    newly_suppressed: int
    places_left: int
    pages: int
    pass_done: bool = False  # the pass read the account's last page (or a finished pass is not yet due again)


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
    cursors: SavedStates  # where the STOP sync's pass stopped
    undos: UndoRecords  # what an unsubscribe's undo needs, for its window
    exits: QueueExits
    sns: Any
    clock: Clock
    hash_key: str
    faults: FaultHook = no_faults

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

    def unsubscribe(self, key: str) -> tuple[OptOutResult, UndoOffer | None]:
        """The unsubscribe link: opt out as `opt_out` does, and keep for UNDO_WINDOW_S what putting the person back
        on the lists they left needs (chalicelib/shopper/undo.py). The offer of an undo, or None when there is none to make
        (the contact was suppressed already for another reason, or that unsubscribe's window has passed)."""
        now = self.clock.now()
        newly = self.optout.add(key, "unsubscribe", now)
        # The rows are read before they go: the contact, channel, name and language live only on them.
        places = [p for p in self.exits.places(key) if p.live]
        exits = [self.exits.leave(p, reason="unsubscribe") for p in places]
        result = OptOutResult(newly=newly, exits=exits)
        if not newly:
            return result, self._standing_offer(key, now)
        gone = {e.sku for e in exits if e.outcome in (LEFT, RELEASED)}
        left = [p for p in places if p.sku in gone]
        offer = UndoOffer(key, int(now), secrets.token_hex(16), int(now) + UNDO_WINDOW_S)
        record: dict[str, Any] = {
            "nonce": offer.nonce,
            "at": offer.at,
            "places": {p.sku: {"lang": p.lang, "name": p.name} for p in left},
        }
        if left:
            record |= {"channel": left[0].channel, "contact": left[0].contact}
        self.undos.keep_undo(key, record, offer.expires_at)
        return result, offer

    def _standing_offer(self, key: str, now: float) -> UndoOffer | None:
        """A repeat press: the first press's undo, while that very unsubscribe stands and its window is open."""
        record, kept = self.optout.get(key), self.undos.undo_record(key)
        if not record or not kept or record.get("source") != "unsubscribe" or kept.get("lifted") is not None:
            return None
        at, expires_at = int(record.get("at") or 0), int(kept.get("expires_at") or 0)
        if int(kept.get("at") or -1) != at or expires_at <= now:
            return None
        return UndoOffer(key, at, str(kept["nonce"]), expires_at)

    def sync_sms_optouts(self, deadline: Deadline | None = None, *, max_pages: int = MAX_PAGES_PER_RUN) -> SyncReport:
        """Copy the SNS account's opted-out numbers (STOP replies) into bisn-optout, source 'stop'.

        Called by the minute sweep. A pass reads every page of the account's list once, at most `max_pages` a run
        and never past `deadline`; the page token it stopped at is saved, so the next run carries on and no number
        is ever left unread. A finished pass starts again once PASS_EVERY_S has gone by since it began. Numbers
        already suppressed cost one batched read per page.
        """
        now = self.clock.now()
        state = self.cursors.get(SYNC_CURSOR) or {}
        started = float(state.get("started_at") or 0)
        token: str | None = str(state["token"]) if state.get("token") else None
        if state.get("done") or not state:
            if state and now - started < PASS_EVERY_S:
                return SyncReport(numbers_seen=0, newly_suppressed=0, places_left=0, pages=0, pass_done=True)
            started, token = now, None
        seen = added = left = pages = 0
        done = restarted = False
        while pages < max_pages and not (deadline is not None and deadline.passed()):
            try:
                page = self.sns.list_phone_numbers_opted_out(**({"nextToken": token} if token else {}))
            except ClientError as error:
                # SNS list calls are rate limited per account: the pass waits for the next run, where it stopped.
                if error_code(error) == "Throttled":
                    break
                if token is None or restarted or error_code(error) != "InvalidParameter":
                    raise
                # A saved token SNS no longer takes (it may expire between runs): the pass starts over, once.
                token, started, restarted = None, now, True
                continue
            pages += 1
            numbers = [str(n) for n in page.get("phoneNumbers", []) if n]
            seen += len(numbers)
            page_added, page_left = self._suppress_page(numbers)
            added += page_added
            left += page_left
            # Saved only once every number of the page is suppressed and off its lists: a run cut short reads the
            # same page again and finishes what it began.
            token = page.get("nextToken") or None
            done = token is None
            self.cursors.save(
                SYNC_CURSOR,
                {"token": token, "started_at": int(started), "done": done or None},
                int(now) + CURSOR_TTL_S,
            )
            if done:
                break
        return SyncReport(numbers_seen=seen, newly_suppressed=added, places_left=left, pages=pages, pass_done=done)

    def _suppress_page(self, numbers: list[str]) -> tuple[int, int]:
        """Suppress one page's numbers and take them off every list; (newly suppressed, places left)."""
        added = left = 0
        keys = list(dict.fromkeys(contact_key(sms_match(n), self.hash_key) for n in numbers))
        known = self.optout.leaving_among(keys) if keys else {}
        for key in keys:
            if key in known and not known[key]:
                continue  # suppressed, and its places already left
            # Suppression first, marked as still leaving; cleared once every list is left, so a crash between the
            # two is finished when the page is read again (its token is saved only after the page is done).
            newly = self.optout.add(key, "stop", self.clock.now(), leaving=True)
            self.faults("stop_sync.after_suppress")
            exits = self.exits.leave_all(key, reason="stop")
            self.optout.left(key)
            added += 1 if newly else 0
            left += len(OptOutResult(newly=newly, exits=exits).left)
        return added, left
