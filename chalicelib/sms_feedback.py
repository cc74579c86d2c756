"""SMS delivery failures: SNS's delivery status logs, delivered by a CloudWatch Logs subscription.

SNS writes one JSON record per SMS published to a phone number whose delivery failed into the account's log group
`sns/<region>/<account-id>/DirectPublishToPhoneNumber/Failure`, once delivery status logging is on (the
account-level SMS attributes DeliveryStatusIAMRole and DeliveryStatusSuccessSamplingRate, set at deploy by
`python -m infra.sms_spend`, docs/DEPLOY.md). A subscription filter on that group invokes this function with the
`awslogs` payload: base64 of gzip of a JSON document whose `logEvents` each carry one record as `message`.

Each record (SNS Developer Guide, "Amazon SNS SMS delivery monitoring with CloudWatch metrics and logs") names
`notification.messageId`, `delivery.destination` (the number), `delivery.providerResponse` and `status`. The
failure reasons SNS documents there are classified here:

- a number that can never take an SMS from us ("Invalid phone number"; "Phone number is opted out", the account's
  own opt-out list) is suppressed through the opt-out path (`OptoutService.opt_out`), so capture refuses it and the
  notifier skips it from then on (invariant 3), and it leaves every list;
- every other reason may pass (an unreachable phone, a carrier's block, a price cap, an unknown error) and is
  only counted and recorded as a fact.

Lambda may invoke twice for one batch (an asynchronous invocation is retried after an error): each message id is
remembered for a week in the same transaction as its fact, so a repeat is counted once. Numbers appear only as
keyed hashes (`contact_key`), never in logs or rows.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import logging
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.clock import Clock
from chalicelib.contacts import contact_key
from chalicelib.feedback import FeedbackReport
from chalicelib.metrics import SMS_DELIVERY_FAILURES, MetricsFactory
from chalicelib.optout_service import OptoutService, sms_match
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)

MEMORY_S = 7 * 86400  # longer than Lambda keeps retrying an asynchronous invocation (6 hours)
AUDIT_PARTITION = "#sms-feedback"  # facts about SMS delivery concern a number, not a product

# The documented providerResponse values that mean the number will never take an SMS from this account, with the
# opt-out source each is recorded under (chalicelib/tables/optout.py SOURCES). Only these suppress.
PERMANENT = {
    "Invalid phone number": "invalid_number",
    "Phone number is opted out": "stop",
}


class MalformedLogs(ValueError):
    """The invocation's payload, or one record in it, is not what a subscription filter delivers from SNS."""


@dataclass(frozen=True)
class SmsFailure:
    """One SMS that SNS could not deliver, as the parts acted on."""

    message_id: str
    destination: str
    provider_response: str

    @property
    def suppresses(self) -> str | None:
        """The opt-out source when the failure is permanent for the number, else None."""
        return PERMANENT.get(self.provider_response)


def log_messages(event: Mapping[str, Any]) -> list[str]:
    """The `message` of every log event in a subscription filter's invocation (none for a CONTROL_MESSAGE, which
    CloudWatch Logs sends to check that the destination is reachable)."""
    try:
        data = event["awslogs"]["data"]
        document = json.loads(gzip.decompress(base64.b64decode(data, validate=True)))
    except (KeyError, TypeError, binascii.Error, OSError, EOFError, zlib.error, ValueError) as error:
        raise MalformedLogs(f"not an awslogs payload: {error.__class__.__name__}") from error
    if not isinstance(document, dict):
        raise MalformedLogs("the awslogs document is not a JSON object")
    if document.get("messageType") != "DATA_MESSAGE":
        return []
    events = document.get("logEvents")
    if not isinstance(events, list):
        raise MalformedLogs("the awslogs document has no logEvents")
    return [str(item.get("message", "")) for item in events if isinstance(item, dict)]


def parse_record(message: str) -> SmsFailure | None:
    """One delivery status record; None when it is not a failure (a success sampled into the same group)."""
    try:
        record = json.loads(message)
    except (json.JSONDecodeError, RecursionError) as error:
        raise MalformedLogs(f"the record is not JSON: {error.__class__.__name__}") from error
    if not isinstance(record, dict):
        raise MalformedLogs("the record is not a JSON object")
    if record.get("status") != "FAILURE":
        return None
    notification, delivery = record.get("notification"), record.get("delivery")
    if not isinstance(notification, dict) or not isinstance(delivery, dict):
        raise MalformedLogs("the record has no notification or delivery object")
    parts = (notification.get("messageId"), delivery.get("destination"), delivery.get("providerResponse"))
    if not all(isinstance(part, str) and part for part in parts):
        raise MalformedLogs("the record lacks its messageId, destination or providerResponse")
    message_id, destination, response = (str(part) for part in parts)
    return SmsFailure(message_id, destination, response)


@dataclass
class SmsFeedbackReport(FeedbackReport):
    """What one invocation did: outcomes counted as for SES feedback, and the metrics written."""

    metrics: dict[str, float] = field(default_factory=dict)  # what was written to CloudWatch


@dataclass(frozen=True, kw_only=True, eq=False)
class SmsFeedbackService:
    """Turns SNS's SMS delivery failures into suppressions, facts and a metric."""

    tables: Tables
    optouts: OptoutService
    metrics: MetricsFactory
    clock: Clock
    hash_key: str

    def handle(self, event: Mapping[str, Any]) -> SmsFeedbackReport:
        """Act on each record of one invocation; an AWS error raises, so Lambda invokes again."""
        metrics = self.metrics.start()
        report = SmsFeedbackReport()
        try:
            for failure in self._failures(event, report):
                self._failure(failure, report)
        finally:
            failed = report.counts.get("permanent", 0) + report.counts.get("transient", 0)
            if failed:
                metrics.count(SMS_DELIVERY_FAILURES, failed)
            report.metrics = dict(metrics.flush())
        return report

    def _failures(self, event: Mapping[str, Any], report: SmsFeedbackReport) -> Iterator[SmsFailure]:
        try:
            messages = log_messages(event)
        except MalformedLogs as error:
            _dropped("payload", error, report)
            return
        for message in messages:
            try:
                failure = parse_record(message)
            except MalformedLogs as error:
                _dropped("record", error, report)
                continue
            if failure is None:
                report.add("ignored")
                continue
            yield failure

    def _failure(self, failure: SmsFailure, report: SmsFeedbackReport) -> None:
        now = self.clock.now()
        key = contact_key(sms_match(failure.destination), self.hash_key)
        source = failure.suppresses
        if source is not None:
            # Suppress first, and every time: a repeat finishes an opt-out a crash interrupted (it walks the lists
            # again) and changes nothing otherwise; the first source recorded is kept.
            self.optouts.opt_out(key, source)
        tx = (
            Tx()
            .add("memory", self.tables.seen_events.remember_item(f"sms#{failure.message_id}", int(now) + MEMORY_S))
            .add(
                "fact",
                self.tables.audit.record_item(
                    AUDIT_PARTITION,
                    "sms_failed",
                    now,
                    contact_key=key,
                    sns_message_id=failure.message_id,
                    provider_response=failure.provider_response,
                    suppressed=source is not None,
                ),
            )
        )
        try:
            self.tables.run(tx)
        except TransactionCancelled as cancelled:
            if not cancelled.failed("memory"):
                raise
            report.add("repeated")
            return
        outcome = "permanent" if source is not None else "transient"
        log.info("SMS %s not delivered (%s): %s", failure.message_id, failure.provider_response, outcome)
        report.add(outcome)


def _dropped(what: str, error: MalformedLogs, report: SmsFeedbackReport) -> None:
    """An unreadable payload or record: reading it again would never make it readable, so it is said and
    dropped. The reason only is logged: a record holds a phone number."""
    log.warning("SMS delivery status %s dropped: %s", what, error)
    report.add("dropped")
