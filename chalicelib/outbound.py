"""Events out, moved: audit facts from the audit table's stream onto the events queue, and each event from there
to the shop's webhook receiver (Standard Webhooks) or to Klaviyo, retried with backoff until the dead-letter queue.

No shopper's path and no notifier transaction pays for this: the facts are the ones those transactions already
write, and DynamoDB Streams hands each new one to `EventFeed` once it is written. A fact read twice (the stream's
retry) makes the same event id, so a receiver that de-duplicates on `webhook-id` acts on it once.
Logs name an event by its id and type, never its person.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from chalicelib import events_out, klaviyo
from chalicelib.clock import Clock
from chalicelib.config import Settings
from chalicelib.events_out import KLAVIYO, OutboundEvent, Person
from chalicelib.platforms.base import StoreUnavailable
from chalicelib.platforms.http import HttpResponse, Transport, retry_after_s
from chalicelib.secrets import Secrets
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)

# Standard Webhooks' example schedule after the first attempt (spec/standard-webhooks.md, "Deliverability and
# reliability"), its steps past 10 hours held to 11: SQS counts a message's 12-hour visibility limit from when it
# was received, and the attempt that failed already spent some of it.
MAX_VISIBILITY_S = 39600
BACKOFF_S = (5, 300, 1800, 7200, 18000, 36000, MAX_VISIBILITY_S)
# Attempts in all: the events queue's maxReceiveCount (infra/template.json); after the last, the DLQ.
MAX_ATTEMPTS = len(BACKOFF_S) + 1
# Each wait moves by up to a tenth either way, so receivers that failed together are not all retried together.
JITTER = 0.1
SEND_BATCH = 10  # SendMessageBatch's limit

SENT = "sent"
SUPPRESSED = "suppressed"  # the person opted out: nothing is sent
UNADDRESSED = "unaddressed"  # a Klaviyo event with no profile to belong to (the place is gone): nothing is sent

_deserializer = TypeDeserializer()


class DeliveryFailed(Exception):
    """The destination did not take the event now; the queue brings it back after the backoff."""

    def __init__(self, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


def backoff_s(attempt: int, retry_after: float | None = None, jitter: float = 0.0) -> int:
    """Seconds before attempt `attempt + 1`, after attempt `attempt` (1-based) failed: the schedule's step, at least
    what a 429 or 503 asked for, moved by `jitter` (-1..1) tenths, never past 11 hours. After the last
    attempt, 0: the message goes on to the dead-letter queue at once."""
    if attempt >= MAX_ATTEMPTS:
        return 0
    wait = float(BACKOFF_S[max(attempt, 1) - 1])
    if retry_after is not None:
        wait = max(wait, retry_after)
    wait *= 1 + JITTER * max(-1.0, min(1.0, jitter))
    return int(min(max(wait, 1.0), MAX_VISIBILITY_S))


def events_queue_url(sqs: Any, settings: Settings) -> str:
    """The URL of the events queue (settings.events_queue_name)."""
    return str(sqs.get_queue_url(QueueName=settings.events_queue_name)["QueueUrl"])


def facts_of(records: Iterable[Mapping[str, Any]]) -> Iterable[dict[str, Any]]:
    """The audit facts new in a batch of DynamoDB stream records (facts are only ever inserted)."""
    for record in records:
        image = record.get("dynamodb", {}).get("NewImage")
        if record.get("eventName") == "INSERT" and image:
            yield {k: _deserializer.deserialize(v) for k, v in image.items()}


@dataclass(frozen=True, kw_only=True, eq=False)
class EventFeed:
    """Turns new audit facts into events on the events queue, one message per event and destination."""

    settings: Settings
    sqs: Any

    @cached_property
    def queue_url(self) -> str:
        """The events queue's URL, looked up once per container."""
        return events_queue_url(self.sqs, self.settings)

    def events(self, records: Iterable[Mapping[str, Any]]) -> list[OutboundEvent]:
        """The events a batch of stream records makes for this shop's chosen events and destinations."""
        chosen, destinations = self.settings.outbound_events, self.settings.outbound_destinations
        found: list[OutboundEvent] = []
        for fact in facts_of(records):
            event = events_out.from_fact(fact)
            if event is not None and event.type in chosen:
                # Klaviyo takes no opt-out: its events belong to a profile, and an opt-out names nobody.
                found.extend(
                    replace(event, destination=d)
                    for d in destinations
                    if d != KLAVIYO or event.type in klaviyo.METRIC_NAMES
                )
        return found

    def handle(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Queue the batch's events; how many. A refused send raises: the stream hands the batch over again, and
        the events already queued go again under the same ids."""
        events = self.events(records)
        if not events:
            return 0
        url = self.queue_url
        for start in range(0, len(events), SEND_BATCH):
            batch = events[start : start + SEND_BATCH]
            answer = self.sqs.send_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": e.to_body()} for i, e in enumerate(batch)]
            )
            if answer.get("Failed"):
                raise RuntimeError(f"the events queue refused {len(answer['Failed'])} event(s)")
        return len(events)


@dataclass(frozen=True, kw_only=True, eq=False)
class Outbound:
    """Delivers one event from the events queue: to the shop's Standard Webhooks receiver, or to Klaviyo."""

    settings: Settings
    tables: Tables
    secrets: Secrets
    transport: Transport
    sqs: Any
    clock: Clock
    jitter: Callable[[], float] = field(default=lambda: random.uniform(-1.0, 1.0))

    @cached_property
    def queue_url(self) -> str:
        """The events queue's URL, looked up once per container (a failed delivery sets its next try there)."""
        return events_queue_url(self.sqs, self.settings)

    def handle(self, body: str, *, receipt_handle: str, attempt: int) -> str:
        """Deliver one queued event (attempt `attempt`, 1-based). A failure sets the message's next try by the
        backoff (ChangeMessageVisibility) and raises, so the queue keeps it; after the last, the DLQ has it."""
        event = OutboundEvent.parse(body)
        try:
            outcome = self.deliver(event)
        except DeliveryFailed as failed:
            wait = backoff_s(attempt, failed.retry_after, self.jitter())
            log.warning(
                "event %s (%s) to %s failed: %s; attempt %d, next in %ds",
                *(event.event_id, event.type, event.destination, failed, attempt, wait),
            )
            self.sqs.change_message_visibility(
                QueueUrl=self.queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=wait
            )
            raise
        log.info("event %s (%s) to %s: %s", event.event_id, event.type, event.destination, outcome)
        return outcome

    def deliver(self, event: OutboundEvent) -> str:
        """Send one event once; DeliveryFailed when the destination did not take it."""
        chosen = self.settings.outbound_event_fields
        person: Person | None = None
        if events_out.about_a_person(event):
            # Read at each attempt: a person who opted out after the event was queued gets nothing.
            if self.tables.optout.suppressed_among([event.contact_key]):
                return SUPPRESSED
            if events_out.needs_person(event, chosen) or event.destination == KLAVIYO:
                person = self._person(event)
        if event.destination == KLAVIYO:
            return self._klaviyo(event, person, chosen)
        return self._webhook(event, person, chosen)

    def _person(self, event: OutboundEvent) -> Person | None:
        """Who the event is about, from their place; None when the place is gone, or is an email place its address
        has not confirmed yet: anyone can type an address, so an unconfirmed one is never handed on."""
        place = self.tables.requests.place_of(event.sku, event.contact_key)
        if place is None or place.unconfirmed:
            return None
        return Person(place.contact, place.channel, place.lang)

    def _webhook(self, event: OutboundEvent, person: Person | None, chosen: tuple[str, ...]) -> str:
        body = events_out.body_text(events_out.payload(event, person, chosen))
        headers = {"content-type": "application/json", **self.signed(event.event_id, body)}
        self._check(self._post(self.settings.outbound_webhook_url, headers, body))
        return SENT

    def signed(self, webhook_id: str, body: str) -> dict[str, str]:
        """The Standard Webhooks headers of one attempt: its own timestamp, signed with each of the secret's values
        (two during a rotation, space separated, so the receiver may hold either)."""
        from standardwebhooks.webhooks import Webhook

        at = datetime.fromtimestamp(int(self.clock.now()), tz=UTC)
        secrets = self.secrets.get_all("OUTBOUND_WEBHOOK_SECRET")
        return {
            "webhook-id": webhook_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": " ".join(Webhook(secret).sign(webhook_id, at, body) for secret in secrets),
        }

    def _klaviyo(self, event: OutboundEvent, person: Person | None, chosen: tuple[str, ...]) -> str:
        document = klaviyo.event_body(event, person, chosen)
        if document is None:
            return UNADDRESSED
        headers = klaviyo.headers(self.secrets.get("KLAVIYO_API_KEY"))
        self._check(self._post(klaviyo.URL, headers, events_out.body_text(document)))
        return SENT

    def _post(self, url: str, headers: Mapping[str, str], body: str) -> HttpResponse:
        try:
            return self.transport.send("POST", url, headers, body.encode())
        except StoreUnavailable as exc:
            raise DeliveryFailed("unreachable") from exc

    @staticmethod
    def _check(response: HttpResponse) -> None:
        """Any 2xx is taken; anything else is a failure to retry (Standard Webhooks, "Delivery success and
        failure"), waiting at least what a 429 or 503 asks."""
        if 200 <= response.status < 300:
            return
        wait = retry_after_s(response, default=0.0) if response.status in (429, 503) else None
        raise DeliveryFailed(f"status {response.status}", retry_after=wait or None)
