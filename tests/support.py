"""Test helpers shared by the suites: crash injection, a local-stage environment, sample data."""

from __future__ import annotations

import uuid
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


CHAIR: dict[str, Any] = {
    "name": "Walnut dining chair",
    "threshold": 1,
    "hold_window_s": 900,
    "offer_window_s": 3600,
    "voice": "warm and plain",
    "checkout_url": "https://shop.example/checkout?sku={sku}&reservation={reservation_id}",
}


# --- Restocks, places and offers written exactly as detection, capture and the notifier write them.


def restock_key(sku: str, webhook_id: str, event_ts: float) -> tuple[str, str]:
    """(restock_id, restock_ts) exactly as detection derives them."""
    from chalicelib.detect import restock_id_for, restock_ts_for

    restock_id = restock_id_for(sku, webhook_id)
    return restock_id, restock_ts_for(event_ts, restock_id)


def put_restock(services: Any, sku: str, units: int, now: float, *, webhook_id: str = "wh_restock") -> dict[str, Any]:
    """A queued restock of `units` units, both counters full."""
    restock_id, restock_ts = restock_key(sku, webhook_id, now)
    item = {
        "sku": sku,
        "restock_ts": restock_ts,
        "restock_id": restock_id,
        "webhook_id": webhook_id,
        "units_total": units,
        "units_available": units,
        "units_offerable": units,
        "state": "queued",
        "created_at": int(now),
        "level_before": 0,
        "level_after": units,
    }
    services.restocks.table.put_item(Item=item)
    return item


def join_request(services: Any, sku: str, contact: str, now: float, *, ttl: int | None = None) -> dict[str, Any]:
    """A waiting place for `contact`, counted in the catalogue's waiting_count, as capture writes it."""
    from chalicelib.contacts import contact_key
    from chalicelib.tables.base import transact
    from chalicelib.tables.requests import new_joined_ts

    fields: dict[str, Any] = {
        "sku": sku,
        "joined_ts": new_joined_ts(now),
        "channel": "sms",
        "contact": contact,
        "contact_key": contact_key(contact, services.hash_key),
        "name": "",
        "ttl": ttl if ttl is not None else int(now) + 90 * 86400,
        "now": now,
    }
    items = [services.catalog.join_item(sku), *services.requests.join_items(**fields)]
    transact(services.requests.table.meta.client, items)
    return services.requests.get(sku, fields["joined_ts"])


def make_offer(
    services: Any, restock: dict[str, Any], request: dict[str, Any], now: float, *, offer_window_s: int = 3600
) -> str:
    """Offer one unit to `request`: exactly the notifier's transaction. Returns the offer's token_id."""
    from chalicelib.tables.base import transact

    token_id = uuid.uuid4().hex
    sku, restock_ts = restock["sku"], restock["restock_ts"]
    transact(
        services.restocks.table.meta.client,
        [
            services.restocks.take_offers_item(sku, restock_ts, 1),
            services.reservations.offer_put_item(
                token_id=token_id,
                sku=sku,
                restock_ts=restock_ts,
                restock_id=restock["restock_id"],
                request_joined_ts=request["joined_ts"],
                contact_key=request["contact_key"],
                channel=request["channel"],
                now=now,
                offer_window_s=offer_window_s,
            ),
            services.requests.mark_offered_item(
                sku, request["joined_ts"], restock_id=restock["restock_id"], token_id=token_id
            ),
        ],
    )
    return token_id


def queued_jobs(services: Any) -> list[Any]:
    """Every job waiting on the notifier's queue, taken off it (oldest first as far as SQS allows)."""
    from chalicelib.jobs import Job

    jobs = []
    while True:
        page = services.aws.sqs.receive_message(QueueUrl=services.jobs.url, MaxNumberOfMessages=10)
        messages = page.get("Messages", [])
        if not messages:
            return jobs
        for message in messages:
            jobs.append(Job.from_json(message["Body"]))
            services.aws.sqs.delete_message(QueueUrl=services.jobs.url, ReceiptHandle=message["ReceiptHandle"])


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
    from chalice.test import Client

    from app import app

    with installed(services), Client(app, stage_name="local", project_dir=str(ROOT)) as client:
        yield client
