"""Email double opt-in: one confirmation per place, nothing sent before it, a scanner-safe link, and expiry."""

from __future__ import annotations

import json
import re
from typing import Any

from chalice.test import Client

from chalicelib.notifier import SkipReason
from chalicelib.queue.messages import ConfirmEmail
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock
from tests.notices import drain, email_outbox, verify_sender
from tests.support import queued_messages

JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def tap(client: Client, sku: str, contact: str) -> Any:
    body = json.dumps({"sku": sku, "channel": "email", "contact": contact})
    return client.http.post("/notify-me", headers=JSON, body=body)


def confirm_path(message: Any) -> str:
    found = re.search(r'href="http://127\.0\.0\.1:8000(/confirm/[^"]+)"', str(message.body))
    assert found, message.body
    return found.group(1)


def test_the_first_tap_sends_one_confirmation_and_a_repeat_tap_sends_none(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    verify_sender(services)
    assert tap(client, chair, "ada@example.com").json_body["confirm_email"] is True
    [message] = queued_messages(services)
    assert services.message_bus.handle(message, lambda: 60_000) is True
    assert services.message_bus.handle(message, lambda: 60_000) is False, "a redelivered message sends nothing twice"
    clock.advance(3600)
    tap(client, chair, "Ada@Example.com")
    assert queued_messages(services) == [], "a repeat tap within the window owes no second email"
    [sent] = email_outbox()
    assert "/confirm/" in str(sent.body) and "/me/" in str(sent.body)


def test_nothing_is_sent_before_confirmation_and_a_confirmed_place_gets_the_open_restock(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    verify_sender(services)
    tap(client, chair, "ada@example.com")
    drain(services)  # the confirmation email goes
    [confirmation] = email_outbox()
    job = add_restock(services, chair, 1, clock.now())
    services.tables.catalog.upsert(chair, {"open_restock_ts": job.restock_ts})  # as detection opens it
    services.jobs.send(job)
    [delivery] = drain(services)
    assert delivery.outcome is not None and delivery.outcome.notices == 0
    assert delivery.outcome.skipped == {SkipReason.UNCONFIRMED: 1}
    assert len(email_outbox()) == 1, "no restock notice to an unconfirmed address"
    [place] = services.tables.requests.queue(chair)
    assert place.state == "waiting" and place.unconfirmed, "the place is kept, not consumed"

    path = confirm_path(confirmation)
    page = client.http.get(path)  # a mail scanner opening the link changes nothing
    assert page.status_code == 200 and '<form method="post"' in page.body.decode()
    assert services.tables.requests.get(chair, place.joined_ts).unconfirmed
    done = client.http.post(path, headers=FORM, body="")
    assert done.status_code == 200 and "You are on the list" in done.body.decode()
    confirmed = services.tables.requests.get(chair, place.joined_ts)
    assert confirmed is not None and not confirmed.unconfirmed
    # The restock's unit waited for nobody: confirming owed it a top-up, and the place is told now.
    drain(services)
    assert len(email_outbox()) == 2
    assert services.tables.requests.get(chair, place.joined_ts).state == "offered"


def test_an_unconfirmed_place_expires_with_the_sweep(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    tap(client, chair, "ada@example.com")
    [place] = services.tables.requests.queue(chair)
    clock.advance(services.settings.email_confirm_days * 86400)
    services.sweep.run()
    assert list(services.tables.requests.queue(chair)) == []
    assert services.tables.catalog.waiting(chair) == 0
    # Its confirmation link now says so honestly.
    path = f"/confirm/{services.tokens.confirm(chair, place.joined_ts)}"
    assert client.http.get(path).status_code == 410


def test_the_sweep_sends_a_confirmation_a_tap_left_owed(services: Services, clock: FixedClock, chair: str) -> None:
    unconfirmed = services.capture.capture("ip", {"sku": chair, "channel": "email", "contact": "ada@example.com"})
    queued_messages(services)  # the message is lost
    clock.advance(120)
    assert services.sweep.run()["confirmations_requeued"] == 1
    [message] = queued_messages(services)
    assert message == ConfirmEmail(chair, str(unconfirmed.joined_ts))


def test_a_tap_in_german_gets_its_confirmation_and_its_notice_in_german(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    verify_sender(services)
    body = json.dumps({"sku": chair, "channel": "email", "contact": "ada@example.com", "lang": "de"})
    client.http.post("/notify-me", headers=JSON, body=body)
    drain(services)
    [confirmation] = email_outbox()
    assert confirmation.subject.startswith("Bitte bestätigen:")
    assert '<html lang="de"' in str(confirmation.body) and "Ja, benachrichtigen Sie mich" in str(confirmation.body)
    client.http.post(confirm_path(confirmation), headers=FORM, body="")
    job = add_restock(services, chair, 1, clock.now())
    services.jobs.send(job)
    drain(services)
    notice = email_outbox()[-1]
    assert notice.subject.endswith("ist wieder vorrätig")
    assert '<html lang="de"' in str(notice.body) and "Link gültig für 1 Stunde." in str(notice.body)
    assert "Benachrichtigungen verwalten" in str(notice.body) and "Manage your alerts" not in str(notice.body)
