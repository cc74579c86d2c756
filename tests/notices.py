"""Test helpers for the notifier: restocks and queues written per the shared contract, the emulator's outbox,
a deterministic Lambda deadline, a job pump, and an SNS client that fails on demand."""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parseaddr
from typing import Any

from botocore.exceptions import ClientError
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends
from moto.sns.models import sns_backends

from chalicelib.clock import iso
from chalicelib.contacts import contact_key
from chalicelib.detect import restock_id_for, restock_ts_for
from chalicelib.jobs import Job
from chalicelib.notifier import Outcome
from chalicelib.tables.base import transact
from chalicelib.wiring import Services
from tests.support import REGION

PLENTY_MS = 60_000


def add_restock(
    services: Services, sku: str, units: int, now: float, *, webhook_id: str = "wh_1", state: str = "queued"
) -> Job:
    """A restock exactly as detection opens it (its ids and table moves), and the job detection sends for it."""
    restock_id = restock_id_for(sku, webhook_id)
    restock_ts = restock_ts_for(now, restock_id)
    opened = services.restocks.open_item(
        sku=sku,
        restock_ts=restock_ts,
        restock_id=restock_id,
        webhook_id=webhook_id,
        units=units,
        level_before=0,
        level_after=units,
        threshold=1,
        now=now,
    )
    transact(services.restocks.table.meta.client, [opened])
    if state == "queued":
        assert services.restocks.mark_enqueued(sku, restock_ts, token=webhook_id, now=now)
    elif state == "closed":
        seen = services.restocks.get(sku, restock_ts) or {}
        closed = services.restocks.close_item(sku, restock_ts, seen=seen, available=units, offerable=units, now=now)
        transact(services.restocks.table.meta.client, [closed])
    return Job(sku, restock_id, restock_ts)


def match_form(contact: str) -> str:
    """The form a contact is recognised by (emails lower-cased), as capture hashes it."""
    return contact.lower() if "@" in contact else contact


def key_of(services: Services, contact: str) -> str:
    """The keyed hash that stands for a contact in rows and audit facts."""
    return contact_key(match_form(contact), services.hash_key)


def request_items(
    services: Services, sku: str, contact: str, joined_ts: str, now: float, *, name: str = ""
) -> list[dict[str, Any]]:
    """The items capture writes for one new place (uniqueness item, request), from the table class itself."""
    return services.requests.join_items(
        sku=sku,
        joined_ts=joined_ts,
        channel="email" if "@" in contact else "sms",
        contact=contact,
        contact_key=key_of(services, contact),
        name=name,
        ttl=int(now) + 90 * 86400,
        now=now,
    )


def add_request(
    services: Services, sku: str, contact: str, joined_ts: str, now: float, *, name: str = "", **fields: Any
) -> dict[str, Any]:
    """One waiting place, written as capture writes it; `fields` then set state or history directly."""
    transact(services.requests.table.meta.client, request_items(services, sku, contact, joined_ts, now, name=name))
    if fields:
        names = {f"#f{i}": k for i, k in enumerate(fields)}
        values = {f":f{i}": v for i, v in enumerate(fields.values())}
        services.requests.table.update_item(
            Key={"sku": sku, "joined_ts": joined_ts},
            UpdateExpression="SET " + ", ".join(f"#f{i} = :f{i}" for i in range(len(fields))),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
    return services.requests.get(sku, joined_ts) or {}


def add_many_requests(services: Services, sku: str, count: int, now: float) -> list[str]:
    """`count` waiting SMS places, one second apart, written in batches; returns their numbers in queue order."""
    numbers = []
    with services.requests.table.batch_writer() as batch:
        for i in range(count):
            number = f"+4477009{i:05d}"
            for item in request_items(services, sku, number, f"{iso(now + i)}#{i:06x}", now):
                batch.put_item(Item=item["Put"]["Item"])
            numbers.append(number)
    return numbers


def joined(i: int, now: float, suffix: str = "000000") -> str:
    """A join stamp i seconds after `now`."""
    return f"{iso(now + i)}#{suffix}"


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
        job = Job.from_json(message["Body"])
        try:
            outcome = services.notifier.handle(job, Budget(looks) if looks is not None else plenty)
        except Exception as exc:
            deliveries.append(Delivery(job, None, exc))
            continue
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        deliveries.append(Delivery(job, outcome, None))
    raise AssertionError(f"the queue did not drain in {limit} deliveries")


class FlakySns:
    """An SNS client that refuses to publish to some numbers a given number of times, then publishes for real."""

    def __init__(self, real: Any, failures: dict[str, int]) -> None:
        self.real = real
        self.failures = dict(failures)
        self.refused: list[str] = []

    def publish(self, **kwargs: Any) -> dict[str, Any]:
        number = kwargs.get("PhoneNumber", "")
        if self.failures.get(number, 0) > 0:
            self.failures[number] -= 1
            self.refused.append(number)
            raise ClientError({"Error": {"Code": "InternalError", "Message": "try again"}}, "Publish")
        return dict(self.real.publish(**kwargs))
