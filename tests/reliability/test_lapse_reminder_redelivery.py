"""Invariant 6 for the reminder before an offer lapses: its message delivered twice, one after the other or to two
notifier invocations at the same moment, sends one reminder per offer, none to an offer held meanwhile, and the
invariant checker finds each offer reminded at most once and never after its hold or its end."""

from __future__ import annotations

import pytest

from chalicelib.queue.messages import LapseReminder, parse
from tests.reliability.invariants import Tables, assert_invariants
from tests.reliability.test_redelivery import queue_of, twice
from tests.reliability.world import World, outbox_texts


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    """A shop that turned the reminder on for email and SMS (10 minutes before an offer lapses)."""
    return {**env, "LAPSE_REMINDER": "email+sms"}


def queued_reminders(w: World) -> list[LapseReminder]:
    """Every reminder waiting on the jobs queue, taken off it."""
    found: list[LapseReminder] = []
    while messages := w.sqs.receive_message(QueueUrl=w.queue_url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            w.sqs.delete_message(QueueUrl=w.queue_url, ReceiptHandle=message["ReceiptHandle"])
            if isinstance(reminder := parse(message["Body"]), LapseReminder):
                found.append(reminder)
    return found


@pytest.mark.parametrize("at_once", [False, True], ids=["again", "at-once"])
def test_a_redelivered_reminder_sends_one_per_live_offer(world: World, at_once: bool) -> None:
    queue_of(world, 3)
    world.inventory(3)
    world.pump()
    notices = len(outbox_texts())
    world.clock.advance(3600 - 600)
    assert world.services.sweep.run()["reminders_queued"] == 3
    reminders = queued_reminders(world)
    held, *live = reminders
    world.reserve(held.token_id)
    sent = [twice(world, lambda s, m=m: s.message_bus.handle(m, lambda: 60_000), at_once=at_once) for m in reminders]
    assert [sorted(pair) for pair in sent] == [[False, False], [False, True], [False, True]]
    assert len(outbox_texts()) == notices + len(live)
    assert len(Tables.read(world.services).facts("reminder_sent")) == len(live)
    assert all("next person" in text for text in outbox_texts()[notices:])  # SMS places: reminded by SMS
    world.settle()
    assert_invariants(world.services)
