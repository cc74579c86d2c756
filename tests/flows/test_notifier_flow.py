"""Shoppers join through the API; a restock job reaches the notifier function as SQS delivers it."""

from __future__ import annotations

import html
import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from chalice.test import Client

from chalicelib import wiring
from chalicelib.errors import BadRequest
from chalicelib.notifier import UnknownRestock
from chalicelib.queue.messages import Job, parse, to_body
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock
from tests.notices import confirm_by_email, drain, email_outbox, sms_outbox, verify_sender
from tests.support import queued_jobs, stored

JSON = {"Content-Type": "application/json"}


def tap(client: Client, sku: str, channel: str, contact: str, name: str = "") -> None:
    body = {"sku": sku, "channel": channel, "contact": contact, "name": name}
    response = client.http.post("/notify-me", headers=JSON, body=json.dumps(body))
    assert response.status_code == 202, response.body
    if channel == "email":
        confirm_by_email(client, wiring.current(), contact)


def deliver(client: Client, body: str) -> Any:
    """What the Lambda event source does with one message of the jobs queue."""
    return client.lambda_.invoke("notifier", client.events.generate_sqs_event([body], queue_name="bisn-jobs"))


def test_a_restock_job_tells_the_front_of_the_queue_by_sms_and_email(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    verify_sender(services)
    tap(client, chair, "email", "Grace@Example.com", "Grace")
    clock.advance(1)
    tap(client, chair, "sms", "07400 123456")
    clock.advance(1)
    tap(client, chair, "sms", "07400 654321")
    job = add_restock(services, chair, 2, services.clock.now())

    deliver(client, to_body(job))
    drain(services)  # a slow emulator may have left the rest to a continuation job

    [email] = [m for m in email_outbox() if "/r/" in m.body]  # the notice; the confirmation came first
    assert email.destinations == {"ToAddresses": ["Grace@example.com"]}  # the domain is normalised
    assert "Hi Grace," in email.body and "/r/" in email.body and "/unsubscribe/" in email.body
    [(number, text)] = sms_outbox()
    assert number == "+447400123456"
    assert (
        "/r/" in text and "/m/" in text and "Link valid for" in text and "\nStop texts: " in text and "STOP" not in text
    )
    restock = services.tables.restocks.get(chair, job.restock_ts)
    assert restock.units_offerable == 0
    waiting = [r.state for r in services.tables.requests.queue(chair)]
    assert waiting == ["offered", "offered", "waiting"]


def test_opening_every_link_a_message_carries_changes_nothing(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    """Mail and chat scanners open every link (GET, sometimes HEAD) before the shopper does."""
    verify_sender(services)
    tap(client, chair, "email", "grace@example.com", "Grace")
    clock.advance(1)
    tap(client, chair, "sms", "07400 123456")
    deliver(client, to_body(add_restock(services, chair, 2, services.clock.now())))
    drain(services)
    # Every email (the address's confirmation, then its notice) and the SMS.
    emails, [(_, text)] = email_outbox(), sms_outbox()
    bodies = "\n".join(html.unescape(email.body) for email in emails)
    base = services.settings.public_base_url
    found = re.findall(r"https?://[^\s\"'<>]+", bodies + "\n" + text)
    paths = sorted({urlsplit(url).path for url in found if url.startswith(base)})
    # Short reserve links (SMS and email) and the SMS's short manage link; the rest signed.
    assert {p.split("/")[1] for p in paths} == {"confirm", "r", "unsubscribe", "me", "m"}, paths
    queued_jobs(services)  # taken off the queue: any job from here on was sent by opening a link
    before, sent = stored(services), len(email_outbox()) + len(sms_outbox())
    for path in paths:
        assert client.http.get(path).status_code == 200, path
        assert (client.http.head(path).status_code, client.http.head(path).body) == (200, b""), path
    assert stored(services) == before
    assert queued_jobs(services) == [] and len(email_outbox()) + len(sms_outbox()) == sent


def test_a_malformed_job_fails_the_invocation_so_it_is_never_silently_dropped(client: Client) -> None:
    with pytest.raises(BadRequest):
        deliver(client, "not a job")
    with pytest.raises(BadRequest):
        deliver(client, json.dumps({"sku": "CHAIR-WALNUT", "kind": "restock"}))


def test_a_job_that_keeps_failing_reaches_the_dead_letter_queue_intact_after_five_receives(
    client: Client, services: Services, chair: str
) -> None:
    sqs = services.aws.sqs
    job = Job(chair, "rs_0123456789abcdef01234567", "2026-01-01T00:00:00.000000Z#01234567")
    services.jobs.send(job)
    failures = 0
    for _ in range(10):
        messages = sqs.receive_message(QueueUrl=services.jobs.url, VisibilityTimeout=0).get("Messages", [])
        if not messages:
            break
        with pytest.raises(UnknownRestock):
            deliver(client, messages[0]["Body"])
        failures += 1

    assert failures == 5
    dlq = sqs.get_queue_url(QueueName=services.settings.dlq_name)["QueueUrl"]
    [parked] = sqs.receive_message(QueueUrl=dlq).get("Messages", [])
    assert parse(parked["Body"]) == job
