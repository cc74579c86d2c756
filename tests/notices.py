"""Test helpers for the notifier: the emulator's outbox, a deterministic Lambda deadline, a job pump, and an SNS
client that fails on demand (restocks and places are written by tests/builders.py)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from email.utils import parseaddr
from typing import Any

from botocore.exceptions import ClientError
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends
from moto.sns.models import sns_backends

from chalicelib.notifier import Outcome
from chalicelib.queue.messages import Job, parse
from chalicelib.wiring import Services
from tests.support import CHAIR, REGION

PLENTY_MS = 60_000


# --- What the emulator accepted.


def sms_outbox() -> list[tuple[str, str]]:
    """Every SMS SNS accepted, as (E.164 number, text), oldest first."""
    return list(sns_backends[DEFAULT_ACCOUNT_ID][REGION].sms_messages.values())


def email_outbox() -> list[Any]:
    """Every email SES accepted (moto keeps source, destinations, subject and one body part: the HTML)."""
    return list(ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages)


def verify_sender(services: Services) -> None:
    """Verify the stage's From domain in the emulator's SES, as the shop does once in the SES console."""
    domain = parseaddr(services.settings.ses_from)[1].split("@", 1)[1]
    services.aws.sesv2.create_email_identity(EmailIdentity=domain)


# --- Time and delivery.


class Budget:
    """A Lambda's remaining time that runs out after `looks` reads: a deadline tests can place exactly."""

    def __init__(self, looks: int) -> None:
        self.looks = looks

    def __call__(self) -> int:
        if self.looks <= 0:
            return 0
        self.looks -= 1
        return PLENTY_MS


def plenty() -> int:
    """A Lambda with all the time it needs."""
    return PLENTY_MS


@dataclass
class Delivery:
    """One job taken off the queue and what handling it did."""

    job: Job
    outcome: Outcome | None
    error: Exception | None


def drain(services: Services, *, looks: int | None = None, limit: int = 500) -> list[Delivery]:
    """Deliver every job on the notifier's queue, as the Lambda event source would, until it is empty.

    A job that raises stays on the queue (it comes back at once: the test queue has no visibility delay).
    """
    sqs, url = services.aws.sqs, services.jobs.url
    deliveries: list[Delivery] = []
    for _ in range(limit):
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=0).get("Messages", [])
        if not messages:
            return deliveries
        message = messages[0]
        job = parse(message["Body"])
        if not isinstance(job, Job):
            # A message that owes one send (chalicelib/queue/messages.py), handled as the Lambda does.
            services.message_bus.handle(job, plenty)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            continue
        try:
            outcome = services.message_bus.handle(job, Budget(looks) if looks is not None else plenty)
        except Exception as exc:
            deliveries.append(Delivery(job, None, exc))
            continue
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        deliveries.append(Delivery(job, outcome, None))
    raise AssertionError(f"the queue did not drain in {limit} deliveries")


# SNS Publish's answers, with their codes from botocore's SNS service model (botocore/data/sns/*/service-2.json):
# AuthorizationErrorException (403) is our account's problem, never the recipient's, and fails the job; the
# message of an InvalidParameterException for a number SNS cannot send to is the one SNS gives.
NOT_AUTHORISED = ("AuthorizationError", "User is not authorized to perform: SNS:Publish")
BAD_NUMBER = ("InvalidParameter", "Invalid parameter: PhoneNumber Reason: the number is not valid to publish to")
OPTED_OUT = ("OptedOut", "Phone number is opted out")  # OptedOutException
THROTTLED = ("Throttled", "Rate exceeded")  # ThrottledException (429)


class FlakySns:
    """An SNS client that refuses to publish to some numbers a given number of times (with `answer`, a code and
    message above), then publishes for real."""

    def __init__(self, real: Any, failures: dict[str, int], answer: tuple[str, str] = NOT_AUTHORISED) -> None:
        self.real = real
        self.failures = dict(failures)
        self.answer = answer
        self.refused: list[str] = []
        self._lock = threading.Lock()

    def publish(self, **kwargs: Any) -> dict[str, Any]:
        number = kwargs.get("PhoneNumber", "")
        with self._lock:
            refuse = self.failures.get(number, 0) > 0
            if refuse:
                self.failures[number] -= 1
                self.refused.append(number)
        if refuse:
            code, message = self.answer
            raise ClientError({"Error": {"Code": code, "Message": message}}, "Publish")
        return dict(self.real.publish(**kwargs))


def selling_the_chair(services: Services, sku: str) -> Services:
    """A shop selling the chair under `sku`, with its From address verified in SES."""
    services.tables.catalog.upsert(sku, dict(CHAIR))
    verify_sender(services)
    return services


def waiting_by_sms(services: Services, sku: str, now: float, count: int, start: int = 0) -> list[str]:
    """`count` shoppers waiting for `sku` by SMS, one second apart; returns their numbers in queue order."""
    from tests.builders import add_request, joined

    numbers = []
    for i in range(start, start + count):
        number = f"+4474009{i:05d}"
        add_request(services, sku, number, joined(i, now), now)
        numbers.append(number)
    return numbers


def told() -> list[str]:
    """The numbers sent an SMS, in the order they were sent."""
    return [number for number, _ in sms_outbox()]


CONFIRM_LINK = re.compile(r'href="https?://[^/"]+(/confirm/[^"]+)"')


def confirm_by_email(client: Any, services: Services, address: str) -> None:
    """The shopper at `address` presses the button behind their confirmation email (email double opt-in): the
    notifier sends the email owed, and the page's form is posted as the browser does."""
    drain(services)
    links = [
        found.group(1)
        for message in email_outbox()
        if address.lower() in [d.lower() for d in getattr(message, "destinations", {}).get("ToAddresses", [])]
        for found in [CONFIRM_LINK.search(str(message.body))]
        if found
    ]
    assert links, f"no confirmation email reached {address}"
    done = client.http.post(links[-1], headers={"Content-Type": "application/x-www-form-urlencoded"}, body="")
    assert done.status_code == 200, done.body


def two_lists(services: Services, now: float, *, first: str, then: str) -> Services:
    """A shop selling the chair (`CHAIR_SKU`) and a lamp (`LAMP_SKU`): `first` waits for both, ahead of `then`
    waiting for the chair (the feedback suites' shop: one contact the provider turns away, one it reaches)."""
    from tests.builders import add_request, joined

    services.tables.catalog.upsert(CHAIR_SKU, dict(CHAIR))
    services.tables.catalog.upsert(LAMP_SKU, {**CHAIR, "name": "Brass lamp"})
    verify_sender(services)
    add_request(services, CHAIR_SKU, first, joined(0, now), now)
    add_request(services, LAMP_SKU, first, joined(1, now), now)
    add_request(services, CHAIR_SKU, then, joined(2, now), now)
    return services


CHAIR_SKU = "CHAIR-WALNUT"
LAMP_SKU = "LAMP-BRASS"
