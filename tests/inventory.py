"""Inventory webhooks as a shop platform sends them, for the detection tests."""

from __future__ import annotations

import json
import uuid
from typing import Any

from chalicelib.detect import DetectOutcome
from chalicelib.webhooks import sign
from chalicelib.wiring import Services


def body(sku: str, available: Any, occurred_at: str | None = None) -> str:
    """The JSON body of an inventory webhook."""
    payload: dict[str, Any] = {"sku": sku, "available": available}
    if occurred_at is not None:
        payload["occurred_at"] = occurred_at
    return json.dumps(payload)


def signed(
    services: Services,
    text: str,
    *,
    webhook_id: str | None = None,
    at: float | None = None,
    secret: str | None = None,
) -> dict[str, str]:
    """Standard Webhooks headers for `text`, signed with the stage's first secret at the services' clock."""
    return {
        "Content-Type": "application/json",
        **sign(
            secret or services.webhook_secrets()[0],
            text,
            webhook_id or f"msg_{uuid.uuid4().hex}",
            services.clock.now() if at is None else at,
        ),
    }


def deliver(
    services: Services,
    sku: str,
    available: Any,
    *,
    webhook_id: str | None = None,
    occurred_at: str | None = None,
    at: float | None = None,
) -> DetectOutcome:
    """Send one signed inventory webhook through the detector (the service layer, as the route does)."""
    text = body(sku, available, occurred_at)
    return services.detector.handle(text.encode(), signed(services, text, webhook_id=webhook_id, at=at))


def queued(services: Services) -> list[dict[str, Any]]:
    """Every job on the notifier's queue, received (and deleted) from SQS."""
    sqs = services.aws.sqs
    jobs: list[dict[str, Any]] = []
    while True:
        page = sqs.receive_message(QueueUrl=services.jobs.url, MaxNumberOfMessages=10)
        messages = page.get("Messages", [])
        if not messages:
            return jobs
        for message in messages:
            jobs.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=services.jobs.url, ReceiptHandle=message["ReceiptHandle"])


def restocks(services: Services, sku: str) -> list[dict[str, Any]]:
    """Every restock of a SKU, oldest first."""
    from boto3.dynamodb.conditions import Key

    return list(
        services.tables.restocks.table.query(KeyConditionExpression=Key("sku").eq(sku), ConsistentRead=True)["Items"]
    )
