"""SES feedback: bounce, complaint and delivery events, read from the feedback queue.

Every email goes out under the stage's SES configuration set, whose event destination publishes bounce,
complaint and delivery events to an SNS topic; the feedback queue is subscribed to that topic, so each
queue message is an SNS notification whose `Message` is one SES event record (JSON in a string).

- A permanent (hard) bounce or a complaint suppresses the address through the opt-out path
  (`OptoutService.opt_out`, source `bounce` or `complaint`): from then on capture refuses it and the
  notifier skips it (invariant 3), and `QueueExits` takes the person off every list.
- A transient (soft) or undetermined bounce is counted and recorded as a fact; it suppresses nothing.
- A delivery is counted.

SQS delivers at least once: each (event, recipient) is remembered for a week in the same transaction as
its fact, so a redelivered message is counted once, and opting out again changes nothing. A message that
cannot be read is logged (without the address) and dropped: retrying it would never make it readable.
Addresses appear only as keyed hashes (`contact_key`), never in logs or rows.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.utils import parseaddr
from enum import StrEnum
from typing import Any

from chalicelib.clock import Clock
from chalicelib.contacts import match_keys, normalise_contact
from chalicelib.errors import BadRequest
from chalicelib.metrics import Metrics, MetricsFactory
from chalicelib.optout_service import OptoutService
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)

# How long an event is remembered: longer than the feedback queue keeps a message (4 days).
MEMORY_S = 7 * 86400
# The audit partition for facts about email feedback (they concern a contact, not a product).
AUDIT_PARTITION = "#email-feedback"

# Metrics (EMF, chalicelib/metrics.py).
HARD_BOUNCES = "EmailHardBounces"
SOFT_BOUNCES = "EmailSoftBounces"
COMPLAINTS = "EmailComplaints"
DELIVERIES = "EmailDeliveries"
DROPPED = "FeedbackDropped"  # unreadable messages, logged and dropped
REPEATED = "FeedbackRepeated"  # events seen before (SQS redelivery)


class Verdict(StrEnum):
    """What one event means for its recipients."""

    HARD_BOUNCE = "hard_bounce"
    SOFT_BOUNCE = "soft_bounce"
    COMPLAINT = "complaint"
    DELIVERY = "delivery"
    IGNORED = "ignored"  # an event type the destination is not set up for; nothing to do


METRIC = {
    Verdict.HARD_BOUNCE: HARD_BOUNCES,
    Verdict.SOFT_BOUNCE: SOFT_BOUNCES,
    Verdict.COMPLAINT: COMPLAINTS,
    Verdict.DELIVERY: DELIVERIES,
}
# The opt-out source a verdict suppresses with (chalicelib/tables/optout.py SOURCES).
SUPPRESSES = {Verdict.HARD_BOUNCE: "bounce", Verdict.COMPLAINT: "complaint"}


class MalformedEvent(ValueError):
    """A queue message that is not an SNS notification carrying an SES event record we can read."""


@dataclass(frozen=True)
class SesEvent:
    """The parts of one SES event record this app acts on."""

    event_type: str  # Bounce, Complaint, Delivery (or another type, ignored)
    message_id: str  # SES's id of the email the event is about (mail.messageId)
    recipients: tuple[str, ...] = ()
    bounce_type: str = ""  # Permanent, Transient or Undetermined
    bounce_subtype: str = ""
    feedback_id: str = ""

    @property
    def verdict(self) -> Verdict:
        """A permanent bounce and a complaint suppress; other bounces are soft; deliveries are counted."""
        if self.event_type == "Bounce":
            return Verdict.HARD_BOUNCE if self.bounce_type == "Permanent" else Verdict.SOFT_BOUNCE
        if self.event_type == "Complaint":
            return Verdict.COMPLAINT
        if self.event_type == "Delivery":
            return Verdict.DELIVERY
        return Verdict.IGNORED


# The event types acted on, each read by one rule: SES's object for it (its refusals name it so) and the list in it
# that names the recipients.
RECIPIENTS = {
    "Bounce": ("bounce", "bouncedRecipients"),
    "Complaint": ("complaint", "complainedRecipients"),
    "Delivery": ("delivery", "recipients"),
}


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise MalformedEvent(f"{what} is not a JSON object")
    return value


def _text(record: Mapping[str, Any], name: str, what: str) -> str:
    value = record.get(name)
    if not isinstance(value, str) or not value:
        raise MalformedEvent(f"{what} has no {name}")
    return value


def _addresses(items: Any, what: str) -> tuple[str, ...]:
    """Recipient addresses from a list of strings (delivery) or of objects with `emailAddress` (bounce, complaint)."""
    if not isinstance(items, list) or not items:
        raise MalformedEvent(f"{what} names no recipients")
    found = []
    for item in items:
        address = item.get("emailAddress") if isinstance(item, dict) else item
        if not isinstance(address, str) or not address:
            raise MalformedEvent(f"{what} has a recipient without an address")
        found.append(address)
    return tuple(found)


def parse_event(record: Mapping[str, Any]) -> SesEvent:
    """One SES event record (the JSON SES publishes to SNS), as the parts acted on."""
    # Event publishing names the type `eventType`; an identity's own feedback notifications name it
    # `notificationType`. Both carry the same bounce, complaint and delivery objects.
    event_type = record.get("eventType", record.get("notificationType"))
    if not isinstance(event_type, str) or not event_type:
        raise MalformedEvent("the event record has no eventType")
    mail = _object(record.get("mail"), "mail")
    message_id = _text(mail, "messageId", "mail")
    if event_type not in RECIPIENTS:
        return SesEvent(event_type, message_id)
    what, listed = RECIPIENTS[event_type]
    details = _object(record.get(what), what)
    recipients = _addresses(details.get(listed), what)
    if event_type == "Delivery":
        return SesEvent(event_type, message_id, recipients)
    feedback_id = str(details.get("feedbackId") or "")
    if event_type == "Complaint":
        return SesEvent(event_type, message_id, recipients, feedback_id=feedback_id)
    return SesEvent(
        event_type,
        message_id,
        recipients,
        bounce_type=_text(details, "bounceType", "bounce"),
        bounce_subtype=str(details.get("bounceSubType") or ""),
        feedback_id=feedback_id,
    )


def parse_message(body: str) -> SesEvent:
    """The SES event inside one queue message: an SNS notification whose `Message` is the record as JSON text."""
    try:
        envelope = _object(json.loads(body), "the message")
        if envelope.get("Type") != "Notification":
            raise MalformedEvent("the message is not an SNS notification")
        message = envelope.get("Message")
        if not isinstance(message, str):
            raise MalformedEvent("the notification has no Message")
        return parse_event(_object(json.loads(message), "the event record"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise MalformedEvent(f"not JSON: {error.__class__.__name__}") from error


def recipient_key(address: str, hash_key: str) -> str:
    """The keyed hash a reported recipient is known by: the same form capture matches email contacts by."""
    return recipient_keys(address, hash_key)[0]


def recipient_keys(address: str, hash_key: str) -> tuple[str, ...]:
    """Every keyed hash a reported recipient's places and suppressions may be stored under: its mailbox's, and the
    one its exact spelling had before mailboxes were matched (places from then still carry it)."""
    # A recipient may come as `Name <address>`; the address SES sent to is what counts.
    plain = parseaddr(address)[1] or address
    return match_keys(normalise_contact("email", plain, ""), hash_key)


@dataclass
class FeedbackReport:
    """What one batch of queue messages did: each outcome counted by name (SMS feedback counts its own the same
    way, chalicelib/sms_feedback.py)."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, what: str) -> None:
        """Count one outcome."""
        self.counts[what] = self.counts.get(what, 0) + 1


@dataclass(frozen=True, kw_only=True, eq=False)
class FeedbackService:
    """Turns SES feedback into suppressions, facts and metrics."""

    tables: Tables
    optouts: OptoutService
    metrics: MetricsFactory
    clock: Clock
    hash_key: str

    def handle(self, bodies: Iterable[str]) -> FeedbackReport:
        """Act on each queue message; an AWS error raises, so SQS delivers the messages again."""
        metrics = self.metrics.start()
        report = FeedbackReport()
        try:
            for body in bodies:
                self._message(body, metrics, report)
        finally:
            metrics.flush()
        return report

    def _message(self, body: str, metrics: Metrics, report: FeedbackReport) -> None:
        try:
            event = parse_message(body)
        except MalformedEvent as error:
            # The reason only: the body may hold an address.
            log.warning("SES feedback message dropped: %s", error)
            metrics.count(DROPPED)
            report.add("dropped")
            return
        verdict = event.verdict
        if verdict == Verdict.IGNORED:
            report.add("ignored")
            return
        for address in event.recipients:
            try:
                keys = recipient_keys(address, self.hash_key)
            except BadRequest:
                log.warning("SES %s event for message %s names an unreadable recipient", verdict, event.message_id)
                metrics.count(DROPPED)
                report.add("dropped")
                continue
            self._recipient(event, verdict, keys, metrics, report)

    def _recipient(
        self, event: SesEvent, verdict: Verdict, keys: tuple[str, ...], metrics: Metrics, report: FeedbackReport
    ) -> None:
        now = self.clock.now()
        key = keys[0]
        source = SUPPRESSES.get(verdict)
        if source is not None:
            # Suppress first, and every time: a redelivery finishes an opt-out a crash interrupted (it walks the
            # lists again) and changes nothing otherwise; the first source recorded is kept. Under every key the
            # address's places may carry, so a place from before mailboxes were matched leaves its lists too.
            for each in keys:
                self.optouts.opt_out(each, source)
        memory = self.tables.seen_events.remember_item(
            f"ses#{event.event_type}#{event.message_id}#{key}", int(now) + MEMORY_S
        )
        tx = Tx().add("memory", memory)
        if verdict != Verdict.DELIVERY:
            fact = self.tables.audit.record_item(
                AUDIT_PARTITION,
                f"email_{verdict}",
                now,
                contact_key=key,
                ses_message_id=event.message_id,
                feedback_id=event.feedback_id,
                bounce_type=event.bounce_type,
                bounce_subtype=event.bounce_subtype,
                suppressed=source is not None,
            )
            tx.add("fact", fact)
        try:
            self.tables.run(tx)
        except TransactionCancelled as cancelled:
            if not cancelled.failed("memory"):
                raise
            metrics.count(REPEATED)
            report.add("repeated")
            return
        metrics.count(METRIC[verdict])
        report.add(str(verdict))
