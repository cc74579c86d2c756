"""The Operations tab: dead letters (and their redrive), failed and refused sends, alarms, SMS spend, and the
store's own set-up on a platform that can check it (WooCommerce: its key, stock management, stock hooks, webhooks).

Four AWS calls a view: SQS GetQueueUrl + GetQueueAttributes per dead-letter queue, one CloudWatch GetMetricData
for the month's send failures, refusals and SMS spend, one DescribeAlarms, and SNS GetSMSAttributes for the
spend limit (field names from botocore's sqs, cloudwatch and sns models).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.clock import Clock
from chalicelib.config import Settings
from chalicelib.errors import BadRequest
from chalicelib.events_out import OutboundEvent
from chalicelib.metrics import NOTICES_UNDELIVERABLE, SEND_FAILURES
from chalicelib.support_desk import SupportDesk
from chalicelib.tables.base import error_code

# AWS/SNS publishes the month's SMS spend so far (no dimensions), in USD.
SMS_SPEND_METRIC = "SMSMonthToDateSpentUSD"


def _month_start(now: float) -> datetime:
    moment = datetime.fromtimestamp(now, tz=UTC)
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True, kw_only=True, eq=False)
class Operations:
    """Reads the stage's queues, metrics and alarms; redrives the job queue's dead letters."""

    settings: Settings
    sqs: Any
    cloudwatch: Any
    sns: Any
    desk: SupportDesk
    clock: Clock
    # The platform's store check (WooCommerceConnector.check_store), read on every view: None where there is none.
    store_checks: Callable[[], Mapping[str, Any]] | None = None

    @property
    def dead_letter_queues(self) -> tuple[str, ...]:
        """The job queue's DLQ, the SES feedback queue's, and the outbound events queue's."""
        settings = self.settings
        return (settings.dlq_name, f"{settings.feedback_queue_name}-dlq", settings.events_dlq_name)

    def _depth(self, name: str) -> int | None:
        try:
            url = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        except ClientError as exc:
            if error_code(exc) in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
                return None
            raise
        attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        return int(attributes.get("Attributes", {}).get("ApproximateNumberOfMessages", 0))

    def _metrics(self) -> dict[str, float]:
        now = self.clock.now()
        service = [{"Name": "service", "Value": self.settings.service_name}]
        own = self.settings.metrics_namespace

        def query(ident: str, namespace: str, name: str, stat: str, dimensions: list[dict[str, str]]) -> dict:
            metric = {"Namespace": namespace, "MetricName": name, "Dimensions": dimensions}
            return {"Id": ident, "MetricStat": {"Metric": metric, "Period": 86400, "Stat": stat}}

        answer = self.cloudwatch.get_metric_data(
            MetricDataQueries=[
                query("failed", own, SEND_FAILURES, "Sum", service),
                query("refused", own, NOTICES_UNDELIVERABLE, "Sum", service),
                query("spend", "AWS/SNS", SMS_SPEND_METRIC, "Maximum", []),
            ],
            StartTime=_month_start(now),
            EndTime=datetime.fromtimestamp(now, tz=UTC),
        )
        values: dict[str, float] = {}
        for result in answer.get("MetricDataResults", []):
            points = [float(v) for v in result.get("Values", [])]
            values[str(result["Id"])] = (max(points) if result["Id"] == "spend" else sum(points)) if points else 0.0
        return values

    def _spend_limit(self) -> float | None:
        raw = (
            self.sns.get_sms_attributes(attributes=["MonthlySpendLimit"]).get("attributes", {}).get("MonthlySpendLimit")
        )
        return float(raw) if raw not in (None, "") else None

    def view(self) -> dict[str, Any]:
        """The tab's figures."""
        metrics = self._metrics()
        alarms = self.cloudwatch.describe_alarms(AlarmNamePrefix=f"{self.settings.name_prefix}-", MaxRecords=100)
        return {
            "queues": [{"name": name, "dlq_depth": self._depth(name)} for name in self.dead_letter_queues],
            "sends_failed": int(metrics.get("failed", 0)),
            "undeliverable": int(metrics.get("refused", 0)),
            "alarms": [
                {"name": str(a["AlarmName"]), "state": str(a["StateValue"])} for a in alarms.get("MetricAlarms", [])
            ],
            "sms_spend": {"month_usd": round(metrics.get("spend", 0.0), 2), "limit_usd": self._spend_limit()},
            "store": dict(self.store_checks()) if self.store_checks is not None else None,
        }

    def redrive(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Move the job queue's dead letters back to it (the desk's `bisn dlq redrive`), or the outbound events'
        back to the events queue."""
        settings = self.settings
        if data.get("queue") not in (settings.dlq_name, settings.events_dlq_name):
            raise BadRequest(
                f"Only `{settings.dlq_name}` and `{settings.events_dlq_name}` can be redriven from here.",
                code="invalid_queue",
            )
        events = data.get("queue") == settings.events_dlq_name
        report = self.desk.dlq_redrive(emulated=settings.stage == "local", events=events)
        # StartMessageMoveTask moves every message it found in the background; by hand, each one is counted.
        moved = report.moved if report.moved is not None else report.waiting_before
        return {"moved": moved, "method": report.method}

    def dead_events(self) -> dict[str, Any]:
        """The outbound events waiting in their dead-letter queue: how many, and up to 10 of them (a look that leaves
        them there: received with no visibility timeout, never deleted). An event names its type, product, time and
        destination, never its person."""
        url = self.sqs.get_queue_url(QueueName=self.settings.events_dlq_name)["QueueUrl"]
        page = self.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["SentTimestamp"],
        )
        listed: list[dict[str, Any]] = []
        for message in page.get("Messages", []):
            try:
                event = OutboundEvent.parse(message["Body"])
            except BadRequest:
                listed.append({"event_id": None, "readable": False})
                continue
            sent_ms = int(message.get("Attributes", {}).get("SentTimestamp", 0))
            listed.append(
                {
                    "event_id": event.event_id,
                    "readable": True,
                    "type": event.type,
                    "sku": event.sku,
                    "occurred": event.occurred,
                    "destination": event.destination,
                    "queued_at": int(sent_ms / 1000) if sent_ms else None,
                }
            )
        waiting = self._depth(self.settings.events_dlq_name) or 0
        return {"queue": self.settings.events_dlq_name, "waiting": waiting, "events": listed}
