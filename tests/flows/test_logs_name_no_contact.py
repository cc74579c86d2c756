"""No log line names a contact: every line written while shoppers join, are told, tap, buy, leave and are
explained to support is read back, and none may hold an email address or a phone number.

The lines are the app's JSON lines as a function writes them (chalicelib/logs.py: the Powertools handler on the
`chalicelib` logger), at DEBUG so nothing a stage could turn on escapes the check, and every record any other
logger passes on at WARNING or above (what Lambda's own handler would print).
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from chalice.test import Client

from chalicelib import logs
from chalicelib.messages.senders import EmailSender, Senders, SmsSender
from chalicelib.queue.messages import to_body
from chalicelib.webhooks import sign
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock
from tests.flows.test_manage_flow import form_for, me, post
from tests.flows.test_support_cli import ok
from tests.notices import FlakySns, drain, verify_sender
from tests.support import app_client, rebuilt, tap_link

JSON = {"Content-Type": "application/json"}
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
PHONE = re.compile(r"\+\s*\d(?:[\s-]?\d){7,}")
EMAIL_CONTACT = "Grace.Hopper@Example.com"
PHONE_CONTACTS = ["07400 123456", "07400 654321"]


class Lines:
    """Everything logged while it is installed: the app's JSON lines, and other loggers' warnings."""

    def __init__(self) -> None:
        self.app = io.StringIO()
        self.other: list[str] = []

    def all(self) -> list[str]:
        return self.app.getvalue().splitlines() + self.other


class _Others(logging.Handler):
    def __init__(self, lines: Lines) -> None:
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.other.append(f"{record.name}: {self.format(record)}")


@pytest.fixture
def lines() -> Iterator[Lines]:
    logs.configure()
    app_logger = logging.getLogger(logs.APP_LOGGER)
    # pytest hangs its own capture handlers on non-propagating loggers too: take the app's JSON one.
    [handler] = [h for h in app_logger.handlers if isinstance(h.formatter, LambdaPowertoolsFormatter)]
    assert isinstance(handler, logging.StreamHandler)
    captured = Lines()
    others = _Others(captured)
    level = app_logger.level
    stream = handler.setStream(captured.app)
    app_logger.setLevel(logging.DEBUG)
    logging.getLogger().addHandler(others)
    try:
        yield captured
    finally:
        logging.getLogger().removeHandler(others)
        app_logger.setLevel(level)
        handler.setStream(stream)


def tap(client: Client, sku: str, channel: str, contact: str) -> Any:
    body = {"sku": sku, "channel": channel, "contact": contact, "name": "Grace"}
    return client.http.post("/notify-me", headers=JSON, body=json.dumps(body))


def deliver(client: Client, body: str) -> Any:
    return client.lambda_.invoke("notifier", client.events.generate_sqs_event([body], queue_name="bisn-jobs"))


def refusing(services: Services, number: str) -> Services:
    """The services with an SMS provider that refuses `number` once (the notifier logs the failed send)."""
    flaky = FlakySns(services.aws.sns, {number: 1})
    email = EmailSender(services.aws.sesv2, services.settings.ses_from)
    return rebuilt(services, senders=Senders(SmsSender(flaky), email, sms_per_second=50, email_per_second=50))


def test_no_log_line_names_a_contact(lines: Lines, services: Services, clock: FixedClock, chair: str) -> None:
    verify_sender(services)
    shop = refusing(services, "+447400123456")
    with app_client(shop) as client:
        # Capture: new places, a repeat tap, and taps refused for a bad contact.
        assert tap(client, chair, "email", EMAIL_CONTACT).status_code == 202
        for number in PHONE_CONTACTS:
            clock.advance(1)
            assert tap(client, chair, "sms", number).status_code == 202
        assert tap(client, chair, "email", EMAIL_CONTACT).status_code == 202
        assert tap(client, chair, "sms", "+44 7400 12").status_code == 400
        assert tap(client, "NO-SUCH-SKU", "email", EMAIL_CONTACT).status_code in (202, 404)

        # The notifier: a restock for two, one send refused (rolled back, retried), then a top-up.
        job = add_restock(shop, chair, 2, clock.now())
        with pytest.raises(RuntimeError):
            deliver(client, to_body(job))
        deliver(client, to_body(job))
        drain(shop)

        # Reserve: a tap, a second tap, a forged link; then the order for the hold.
        offers = [r for r in shop.tables.reservations.table.scan()["Items"] if r["restock_id"] == job.restock_id]
        assert offers
        token_id = str(offers[0]["token_id"])
        for _ in range(2):
            assert tap_link(client, shop.tokens.reserve(token_id)).status_code == 303
        assert client.http.get("/reserve/not-a-token").status_code == 400
        body = json.dumps({"reservation_id": token_id, "order_id": "1001"})
        headers = sign(shop.webhook_secrets()[0], body, "msg_order_1")
        response = client.http.post("/webhooks/orders", headers={**JSON, **headers}, body=body.encode())
        assert response.status_code == 200

        # Leave from the shopper's own page, for someone still waiting.
        waiting = [r for r in shop.tables.requests.queue(chair) if r.state == "waiting"]
        assert waiting
        url = me(shop, waiting[0])
        assert post(client, url, form_for(client.http.get(url).body, "leave", chair)).status_code in (200, 303)

        # The minute sweep, after every window has passed.
        clock.advance(3 * 24 * 3600)
        shop.sweep.run()

    # Support explains a place.
    for contact in (EMAIL_CONTACT, PHONE_CONTACTS[0]):
        ok(shop, "explain", chair, contact)

    written = lines.all()
    assert any("notifier job done" in line for line in written), "the capture saw nothing"
    leaks = [line for line in written if EMAIL.search(line) or PHONE.search(line)]
    assert not leaks, "log lines name a contact:\n" + "\n".join(leaks)
    digits = [re.sub(r"\D", "", number)[1:] for number in PHONE_CONTACTS]  # the national number without its 0
    assert not [line for line in written if any(d in re.sub(r"\D", "", line) for d in digits)]
    # An offer's id is its reserve link's key (/r/{id}): a log reader must not be able to hold a unit with it.
    ids = {token_id, *(str(r["token_id"]) for r in shop.tables.reservations.table.scan()["Items"])}
    assert ids and not [line for line in written if any(i in line for i in ids)]


def test_notifier_lines_carry_the_restock_the_job_and_the_message(
    lines: Lines, services: Services, clock: FixedClock, chair: str
) -> None:
    verify_sender(services)
    with app_client(services) as client:
        tap(client, chair, "sms", PHONE_CONTACTS[0])
        job = add_restock(services, chair, 1, clock.now())
        deliver(client, to_body(job))

    [done] = [json.loads(line) for line in lines.app.getvalue().splitlines() if "notifier job done" in line]
    assert done["restock_id"] == job.restock_id and done["sku"] == chair and done["job_kind"] == job.kind
    assert done["message_id"] and done["level"] == "INFO" and done["name"] == "chalicelib.notifier"
    assert done["service"]


def test_correlation_ids_last_only_for_their_block(lines: Lines) -> None:
    log = logging.getLogger("chalicelib.holds")
    with logs.correlated(token_id="tok_1"):
        log.error("inside")
    log.error("after")

    inside, after = (json.loads(line) for line in lines.app.getvalue().splitlines())
    assert inside["token_id"] == "tok_1" and "token_id" not in after
