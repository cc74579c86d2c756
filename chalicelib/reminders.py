"""The one reminder before an unused offer lapses: "your unit goes to the next person in 10 minutes".

Optional per shop (LAPSE_REMINDER: off, email, or email+sms; chalicelib/config.py). An offer owed one is written due
for the sweep LAPSE_REMINDER_MINUTES before its end instead of at it (`remind_before_s`, decided when the offer is
made). The sweep (chalicelib/sweep.py) puts a `LapseReminder` message on the jobs queue, then marks the row queued
and due at the offer's end again; a crash between the two sends the message again next minute, which the claim
below makes harmless. The API and sweep functions may not send (DESIGN §7): the notifier takes the message here.

Exactly once (invariant 6): the notifier first takes the reminder with a conditional write on the offer row (still
offered, not past its end, not taken before: `ReservationsTable.claim_reminder`), then sends, and gives it back only
when the provider provably did not take it; a lost answer is never resent (`senders.maybe_sent`). Right before the
provider call it reads again, strongly consistent, the suppression list (invariant 3), the offer (held, lapsed or
ended: nothing) and its place (left or switched: nothing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from chalicelib.clock import Clock
from chalicelib.config import LAPSE_REMINDERS, Settings
from chalicelib.links import Links
from chalicelib.messages.compose import Brand, compose_reminder_email, compose_reminder_sms, facts_for, window_words
from chalicelib.messages.senders import SMS, Notice, Senders, error_code, maybe_sent
from chalicelib.tables.requests import RequestState
from chalicelib.tables.reservations import Offer, OfferState
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ReminderPolicy:
    """Which offers get a reminder, and how long before they end: the shop's LAPSE_REMINDER settings."""

    channels: tuple[str, ...] = ()
    lead_s: int = 600

    @classmethod
    def of(cls, settings: Settings) -> ReminderPolicy:
        """The policy the stage's settings give."""
        return cls(channels=LAPSE_REMINDERS[settings.lapse_reminder], lead_s=settings.lapse_reminder_minutes * 60)

    def remind_before_s(self, channel: str, offer_window_s: int) -> int:
        """How long before its end an offer of this channel and window is reminded; 0 for no reminder (the channel
        is not turned on, or the window is no longer than the lead: the reminder would come with the notice)."""
        if channel not in self.channels or offer_window_s <= self.lead_s:
            return 0
        return self.lead_s

    def reminds(self, channel: str) -> bool:
        """Whether an offer of this channel is reminded now (the setting may have changed since it was made)."""
        return channel in self.channels


class Withheld(Exception):
    """The reminder must not go: the contact opted out, or the offer is no longer the place's live offer."""


@dataclass(frozen=True, kw_only=True, eq=False)
class LapseReminders:
    """The notifier's side: sends an offer's owed reminder, at most once."""

    tables: Tables
    links: Links
    senders: Senders
    clock: Clock
    policy: ReminderPolicy
    shop_name: str
    brand: Brand
    sms_two_way: bool

    def send(self, token_id: str) -> bool:
        """Send offer `token_id` its reminder; False when none goes (not owed any more, taken already, withheld)."""
        now = self.clock.now()
        offer = self.tables.reservations.claim_reminder(token_id, now)
        if offer is None or not self.policy.reminds(offer.channel):
            return False
        place = self.tables.requests.get(offer.sku, offer.request_joined_ts)
        if place is None or not place.contact:
            return False
        product = self.tables.catalog.get_cached(offer.sku)
        if product is None:
            return False
        facts = facts_for(product, self.shop_name, offer.lang, self.brand)
        window = window_words(int(offer.offer_expires_at or now) - int(now), facts.lang)
        person = self.tables.optout.person_links(offer.contact_key)
        reserve_url = self.links.reserve(token_id)
        notice: Notice
        if offer.channel == SMS:
            manage_url = self.links.manage_in_sms(offer.contact_key, person.version, person.link_id)
            text = compose_reminder_sms(facts, window, reserve_url, manage_url, two_way=self.sms_two_way)
            notice = Notice(channel=SMS, to=place.contact, text=text)
        else:
            notice = compose_reminder_email(
                facts,
                window,
                to=place.contact,
                name=place.name,
                reserve_url=reserve_url,
                manage_url=self.links.manage(offer.contact_key, person.version),
                unsubscribe_url=self.links.unsubscribe(offer.contact_key),
            )
        try:
            message_id = self.senders.send(notice, just_before=lambda: self._still_owed(offer))
        except Withheld as why:
            log.info("a lapse reminder was withheld: %s", why)
            return False
        except Exception as error:
            if maybe_sent(error):
                # The provider may have taken it: never sent twice (the offer's own notice stands either way).
                log.warning("a lapse reminder's answer was lost (%s); not resent", error_code(error))
                return True
            self.tables.reservations.release_reminder(token_id, int(now))
            raise
        self.tables.audit.record(
            offer.sku,
            "reminder_sent",
            now,
            restock_id=offer.restock_id,
            token_id=token_id,
            contact_key=offer.contact_key,
            channel=offer.channel,
            message_id=message_id,
        )
        return True

    def _still_owed(self, offer: Offer) -> None:
        """The last look before the provider call (strongly consistent reads): raises Withheld when the contact
        opted out (invariant 3), the offer was held, lapsed or ended, or its place left or moved on."""
        if self.tables.optout.get(offer.contact_key) is not None:
            raise Withheld("opted out")
        row = self.tables.reservations.get(offer.token_id)
        if row is None or row.state != OfferState.OFFERED or (row.offer_expires_at or 0) <= self.clock.now():
            raise Withheld("the offer was held or has ended")
        place = self.tables.requests.get(offer.sku, offer.request_joined_ts)
        if (
            place is None
            or place.state != RequestState.OFFERED
            or place.offer_token != offer.token_id
            or place.contact_key != offer.contact_key
            or place.leave_requested
        ):
            raise Withheld("the place left or moved on")
