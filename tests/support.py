"""Test helpers shared by the suites: crash injection, sample product data, the queue, the app's test client.

Restocks, places and offers are written by tests/builders.py; stage settings come from infra/stages.py."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REGION = "eu-west-2"


class InjectedCrash(RuntimeError):
    """Stands for a Lambda dying at a named point."""


class CrashAt:
    """A fault hook that crashes the first `times` times a named point is reached."""

    def __init__(self, point: str, times: int = 1) -> None:
        self.point = point
        self.remaining = times
        self.seen: list[str] = []

    def __call__(self, point: str) -> None:
        self.seen.append(point)
        if point == self.point and self.remaining > 0:
            self.remaining -= 1
            raise InjectedCrash(point)


def deadline_after(looks: int) -> Any:
    """A scheduled run's deadline that lets `looks` looks at it pass, and has passed from the next one on (its
    clock moves one second a look), so a test stops a run at a chosen step."""
    from chalicelib.clock import Deadline

    ticks = iter(range(10**9))
    return Deadline(looks + 0.5, monotonic=lambda: float(next(ticks)))


CHAIR: dict[str, Any] = {
    "name": "Walnut dining chair",
    "threshold": 1,
    "hold_window_s": 900,
    "offer_window_s": 3600,
    "voice": "warm and plain",
    "checkout_url": "https://shop.example/checkout?sku={sku}&reservation={reservation_id}",
}


def rebuilt(services: Any, *, settings: Any = None, faults: Any = None, senders: Any = None, model: Any = None) -> Any:
    """The same emulator and clock, built afresh with other settings, a crash point, senders or model.

    Services are built once and keep their collaborators, so a test that wants a fault or a sender double
    asks for new ones here rather than changing what may already have been built."""
    from chalicelib.faults import no_faults
    from chalicelib.wiring import Services
    from devstack.fake_model import FakeBedrock

    return Services(
        settings or services.settings,
        aws=services.aws,
        clock=services.clock,
        faults=faults or no_faults,
        model=model or FakeBedrock(),
        senders=senders,
    )


def queued_bodies(services: Any) -> list[str]:
    """Every message body waiting on the notifier's queue, taken off it (oldest first as far as SQS allows)."""
    bodies = []
    while True:
        page = services.aws.sqs.receive_message(QueueUrl=services.jobs.url, MaxNumberOfMessages=10)
        messages = page.get("Messages", [])
        if not messages:
            return bodies
        for message in messages:
            bodies.append(message["Body"])
            services.aws.sqs.delete_message(QueueUrl=services.jobs.url, ReceiptHandle=message["ReceiptHandle"])


def queued_jobs(services: Any) -> list[Any]:
    """Every restock job waiting on the notifier's queue, taken off it (the messages that owe one send each, on the
    same queue, are taken off and left out)."""
    from chalicelib.queue.messages import Job, parse

    return [message for message in map(parse, queued_bodies(services)) if isinstance(message, Job)]


def queued_messages(services: Any) -> list[Any]:
    """Every message waiting on the notifier's queue that owes one send (a confirmation email, a switch code, a
    re-subscribe message, an opt-in link), taken off it (restock jobs too). Parsed as the notifier parses them
    (chalicelib/queue/messages.py)."""
    from chalicelib.queue.messages import Job, parse

    return [message for message in map(parse, queued_bodies(services)) if not isinstance(message, Job)]


@contextmanager
def installed(services: Any) -> Iterator[None]:
    """`services` as the process's services (what the entry points use) for the block, then none again."""
    from chalicelib import wiring

    wiring.install(services)
    try:
        yield
    finally:
        wiring.install(None)


@contextmanager
def app_client(services: Any) -> Iterator[Any]:
    """chalice.test.Client on the app, with `services` installed for its lifetime."""
    from unittest import mock

    import chalice.test
    from chalice.test import Client

    from app import app
    from devstack import greedy_routes

    # `/{proxy+}` matched as API Gateway matches it, so unknown paths reach the app's dead-end route.
    greedy_routes.install()
    base = chalice.test.LambdaContext

    def context(*args: Any, **kwargs: Any) -> Any:
        # chalice.test's invoke gives every function Lambda's default 3 s, not the lambda_timeout of
        # .chalice/config.json (30 s, 60 s for the notifier); the scheduled jobs stop by the time they have left.
        kwargs.setdefault("max_runtime_ms", 60_000 if args and args[0] == "notifier" else 30_000)
        return base(*args, **kwargs)

    with (
        installed(services),
        mock.patch.object(chalice.test, "LambdaContext", context),
        Client(app, stage_name="local", project_dir=str(ROOT)) as client,
    ):
        yield client


FORM_ACTION = re.compile(r'<form id="go" method="post" action="([^"]*)">')


def tap_link(client: Any, token: str) -> Any:
    """A shopper taps a reserve link as a browser does: the page opens (holding nothing) and its script sends
    its form at once. The form's answer, or the page itself when it has no form (an expired link, say)."""
    opened = client.http.get(f"/reserve/{token}")
    form = FORM_ACTION.search(opened.body.decode()) if opened.status_code == 200 else None
    if form is None:
        return opened
    action = html.unescape(form.group(1))
    # The browser posts the form from our own page, which sends no Referer, so its Origin is "null".
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": "null", "Sec-Fetch-Site": "same-origin"}
    return client.http.post(f"/reserve/{action}", headers=headers, body=b"")


def stored(services: Any) -> dict[str, list[str]]:
    """Every item of every table, table by table, in a stable order: equal before and after means nothing was
    written."""
    dynamodb = services.aws.dynamodb
    pages = dynamodb.meta.client.get_paginator("scan")
    return {
        name: sorted(repr(sorted(item.items())) for page in pages.paginate(TableName=name) for item in page["Items"])
        for name in dynamodb.meta.client.list_tables()["TableNames"]
    }


def emitted(out: str, metric: str) -> int:
    """How much of `metric` the EMF documents printed in `out` count."""
    total = 0
    for line in out.splitlines():
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if isinstance(document, dict) and "_aws" in document:
            value = document.get(metric, 0)
            total += int(sum(value) if isinstance(value, list) else value)
    return total
