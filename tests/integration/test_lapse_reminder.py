"""The reminder before an offer lapses, on the emulator: made due by the notifier's offer, queued by the sweep, sent
by the notifier once per offer, and never after a hold, an opt-out, or the offer's end."""

from __future__ import annotations

from dataclasses import replace

import pytest
from botocore.exceptions import ReadTimeoutError

from chalicelib.messages.senders import EmailSender, Notice, Senders, SmsSender
from chalicelib.queue.messages import LapseReminder, parse
from chalicelib.tables.requests import Request
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_request, add_restock, joined, key_of
from tests.notices import drain, email_outbox, plenty, selling_the_chair, sms_outbox
from tests.support import CHAIR, queued_bodies, rebuilt

SKU = "CHAIR-WALNUT"
LEAD_S = 600
REMINDER_AT = CHAIR["offer_window_s"] - LEAD_S  # seconds after the notice


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    """A shop that turned reminders on for email and SMS, 10 minutes before an offer lapses (the default)."""
    return {**env, "LAPSE_REMINDER": "email+sms", "SMS_PER_SECOND": "1000", "EMAIL_PER_SECOND": "1000"}


def offered(shop: Services, clock: FixedClock, *contacts: str) -> list[Request]:
    """These shoppers waiting in this order, each told about a restock of as many units by the notifier."""
    now = clock.now()
    for i, contact in enumerate(contacts):
        add_request(shop, SKU, contact, joined(i, now), now, name="Ada" if "@" in contact else "")
    job = add_restock(shop, SKU, len(contacts), now)
    assert shop.notifier.handle(job, plenty).notices == len(contacts)
    places = [shop.tables.requests.get(SKU, joined(i, now)) for i in range(len(contacts))]
    assert all(p is not None and p.offer_token for p in places)
    return [p for p in places if p is not None]


def reminders(shop: Services) -> tuple[list[str], list[str]]:
    """The reminder emails' recipients and the reminder SMS's numbers the emulator accepted so far."""
    emails = [m.destinations["ToAddresses"][0] for m in email_outbox() if "next person" in m.subject]
    sms = [number for number, text in sms_outbox() if "next person" in text]
    return emails, sms


def test_each_offer_gets_one_reminder_ten_minutes_before_it_lapses_however_often_it_is_queued(
    services: Services, clock: FixedClock
) -> None:
    shop = selling_the_chair(services, SKU)
    ada, bob = offered(shop, clock, "ada@example.com", "+447400800001")
    rows = [shop.tables.reservations.get(p.offer_token or "") for p in (ada, bob)]
    assert all(r is not None and r.due_at == (r.offer_expires_at or 0) - LEAD_S for r in rows)

    clock.advance(REMINDER_AT - 1)
    assert shop.sweep.run()["reminders_queued"] == 0
    clock.advance(1)
    assert shop.sweep.run()["reminders_queued"] == 2
    assert shop.sweep.run()["reminders_queued"] == 0  # queued once: the rows are due at their end again
    # A sweep cut short after queueing, before it marked the rows, queues the same reminders again.
    for place in (ada, bob):
        shop.jobs.send(LapseReminder(place.offer_token or ""))
    drain(shop)

    assert reminders(shop) == (["ada@example.com"], ["+447400800001"])
    [email] = [m for m in email_outbox() if "next person" in m.subject]
    assert email.subject == "Still want Walnut dining chair? It goes to the next person in 10 minutes"
    assert f"{shop.settings.public_base_url}/r/{ada.offer_token}" in email.body
    shop.jobs.send(LapseReminder(ada.offer_token or ""))  # a redelivery sends nothing
    drain(shop)
    assert reminders(shop) == (["ada@example.com"], ["+447400800001"])
    facts = [f for f in shop.tables.audit.for_sku(SKU) if f["kind"] == "reminder_sent"]
    assert sorted(str(f["token_id"]) for f in facts) == sorted([ada.offer_token, bob.offer_token])

    clock.advance(LEAD_S)  # and the offers still lapse at their end
    assert shop.sweep.run()["lapsed"] == 2


def test_no_reminder_after_a_hold_an_opt_out_or_the_offers_end(services: Services, clock: FixedClock) -> None:
    shop = selling_the_chair(services, SKU)
    held, opted, late = offered(shop, clock, "held@example.com", "opted@example.com", "late@example.com")
    clock.advance(REMINDER_AT)
    assert shop.sweep.run()["reminders_queued"] == 3
    queued = {message.token_id: message for message in queued_messages(shop)}
    assert set(queued) == {held.offer_token, opted.offer_token, late.offer_token}
    # Between the queueing and the send: one shopper holds the unit, one opts out.
    shop.holds.reserve(shop.tokens.reserve(held.offer_token or ""))
    shop.tables.optout.add(key_of(shop, "opted@example.com"), "unsubscribe", clock.now())
    assert [shop.message_bus.handle(queued[p.offer_token or ""], plenty) for p in (held, opted)] == [False, False]
    # The last message arrives after the offer ended (a queue backlog): too late to remind.
    clock.advance(LEAD_S)
    assert shop.message_bus.handle(queued[late.offer_token or ""], plenty) is False
    assert reminders(shop) == ([], [])


def queued_messages(shop: Services) -> list[LapseReminder]:
    """The reminders waiting on the jobs queue, taken off it."""
    return [m for m in map(parse, queued_bodies(shop)) if isinstance(m, LapseReminder)]


def test_only_email_offers_are_reminded_unless_the_shop_turns_sms_on(services: Services, clock: FixedClock) -> None:
    email_only = rebuilt(services, settings=replace(services.settings, lapse_reminder="email"))
    shop = selling_the_chair(email_only, SKU)
    _, bob = offered(shop, clock, "ada@example.com", "+447400800001")
    bob_row = shop.tables.reservations.get(bob.offer_token or "")
    assert bob_row is not None and bob_row.due_at == bob_row.offer_expires_at  # never due for a reminder
    clock.advance(REMINDER_AT)
    assert shop.sweep.run()["reminders_queued"] == 1
    drain(shop)
    assert reminders(shop) == (["ada@example.com"], [])


class LostAnswer(EmailSender):
    """SES took the email but its answer never came back (a read timeout)."""

    def send(self, notice: Notice) -> str:
        super().send(notice)
        raise ReadTimeoutError(endpoint_url="https://email.eu-west-2.amazonaws.com")


def test_a_reminder_whose_answer_was_lost_is_never_sent_again(services: Services, clock: FixedClock) -> None:
    shop = selling_the_chair(services, SKU)
    [ada] = offered(shop, clock, "ada@example.com")
    email = LostAnswer(shop.aws.sesv2, shop.settings.ses_from)
    senders = Senders(SmsSender(shop.aws.sns), email, sms_per_second=50, email_per_second=50)
    lost = rebuilt(shop, senders=senders)
    clock.advance(REMINDER_AT)
    assert lost.sweep.run()["reminders_queued"] == 1
    drain(lost)  # taken, sent, its answer lost: not resent, and the message is done
    shop.jobs.send(LapseReminder(ada.offer_token or ""))
    drain(shop)
    assert reminders(shop) == (["ada@example.com"], [])
