"""The reminder before an offer lapses, through the functions as AWS runs them: a shopper taps Notify me, is told
of a restock, gets one reminder ten minutes before the offer would lapse, holds the unit from it, and hears nothing
more about that offer."""

from __future__ import annotations

import re

import pytest
from chalice.test import Client

from chalicelib.queue.messages import to_body
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock
from tests.flows.test_notifier_flow import deliver, tap
from tests.notices import email_outbox, verify_sender
from tests.support import CHAIR, queued_bodies, tap_link

REMINDER = "Still want Walnut dining chair? It goes to the next person in 10 minutes"


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    """A shop that turned the reminder on (email only, the setting's first step; 10 minutes before, the default)."""
    return {**env, "LAPSE_REMINDER": "email"}


def sweep(client: Client) -> dict[str, int]:
    event = client.events.generate_cw_event("aws.events", "Scheduled Event", {}, [])
    return dict(client.lambda_.invoke("sweep", event).payload)


def deliver_all(client: Client, services: Services) -> None:
    """Every message waiting on the jobs queue, handed to the notifier function as its SQS trigger would."""
    for body in queued_bodies(services):
        deliver(client, body)


def test_offer_then_one_reminder_email_then_a_hold_from_it_and_nothing_more(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    verify_sender(services)
    tap(client, chair, "email", "grace@example.com", "Grace")
    deliver(client, to_body(add_restock(services, chair, 1, clock.now())))
    [notice] = [m for m in email_outbox() if "/r/" in m.body]

    clock.advance(CHAIR["offer_window_s"] - 600)
    assert sweep(client)["reminders_queued"] == 1
    deliver_all(client, services)
    [reminder] = [m for m in email_outbox() if m.subject == REMINDER]
    assert reminder.destinations == {"ToAddresses": ["grace@example.com"]}
    token_id = re.findall(r"/r/([A-Za-z0-9_-]+)", reminder.body)[0]
    assert token_id in notice.body  # the very link the notice carried

    assert tap_link(client, services.tokens.reserve(token_id)).status_code == 303  # held from the reminder
    sent = len(email_outbox())
    clock.advance(60)
    assert sweep(client)["reminders_queued"] == 0
    deliver_all(client, services)
    assert len(email_outbox()) == sent
