"""The app's services on a fresh in-process emulator (moto), provisioned from infra/template.json, counted."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parseaddr
from typing import Any

from bench.calls import CallLog
from infra.stages import stage_env

REGION = "eu-west-2"
PLENTY_MS = 60_000


def bench_env(stage: str, **overrides: str) -> dict[str, str]:
    """A stage's environment from .chalice/config.json, as the function would see it, with overrides."""
    env = stage_env(stage)
    env.update(overrides)
    env["AWS_DEFAULT_REGION"] = REGION
    return env


@dataclass
class Stack:
    """Services on the emulator, the test clock they read, and the log of their AWS calls."""

    services: Any
    clock: Any
    log: CallLog
    sqs: Any  # the Lambda service's own view of the queue (not counted: the trigger polls, not the code)

    def measure(self, action: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
        """Run `action` and return its result with the calls it made."""
        self.log.reset()
        result = action()
        return result, self.log.snapshot()

    def signed(self, text: str) -> dict[str, str]:
        """Standard Webhooks headers for a body, as the shop platform signs it."""
        from chalicelib.webhooks import sign

        secret = self.services.webhook_secrets()[0]
        return {"content-type": "application/json", **sign(secret, text, f"msg_{uuid.uuid4().hex}")}

    def inventory(self, sku: str, available: int) -> Any:
        """One signed inventory webhook through restock detection."""
        text = json.dumps({"sku": sku, "available": available})
        return self.services.detector.handle(text.encode(), self.signed(text))

    def deliver_jobs(self, remaining_ms: Callable[[], int] | None = None) -> int:
        """Hand every queued message to its handler as the SQS trigger would; how many were handled."""
        url = self.sqs.get_queue_url(QueueName=self.services.settings.jobs_queue_name)["QueueUrl"]
        handled = 0
        while True:
            messages = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1).get("Messages", [])
            if not messages:
                return handled
            self.services.handle_message(messages[0]["Body"], remaining_ms or (lambda: PLENTY_MS))
            self.sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
            handled += 1


@contextmanager
def stack(stage_overrides: dict[str, str] | None = None, *, senders: Any = None) -> Iterator[Stack]:
    """A fresh emulator with every resource of infra/template.json and the local stage's services.

    `senders` stands in for SNS and SES (the throughput run's sender double)."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ["AWS_DEFAULT_REGION"] = REGION
    import boto3
    from moto import mock_aws

    from chalicelib.aws import Aws
    from chalicelib.config import settings_from_env
    from chalicelib.wiring import Services
    from devstack import moto_patches
    from devstack.clocks import FixedClock
    from devstack.fake_model import model_for
    from devstack.provision import provision

    # Faithful always; `make bench` adds the speed patches itself (bench/__main__.py), the tests never do.
    moto_patches.install(fidelity=True)
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        provision(session)
        sqs = session.client("sqs", region_name=REGION)
        settings = settings_from_env(bench_env("local", **(stage_overrides or {})))
        log = CallLog(settings.name_prefix)
        # Registered before the services build a client, so every client they build carries the hook.
        log.register(session)
        services = Services(
            settings,
            aws=Aws(REGION, session=session),
            clock=FixedClock(float(int(time.time()))),
            model=model_for(settings),
            senders=senders,
        )
        domain = parseaddr(settings.ses_from)[1].split("@", 1)[1]
        services.aws.sesv2.create_email_identity(EmailIdentity=domain)
        yield Stack(services, services.clock, log, sqs)


PRODUCT: dict[str, Any] = {
    "name": "Walnut dining chair",
    "threshold": 1,
    "hold_window_s": 900,
    "offer_window_s": 3600,
    "voice": "warm and plain",
    "checkout_url": "https://shop.example/checkout?sku={sku}&reservation={reservation_id}",
}


def waiting_list(s: Stack, sku: str, people: int, *, email_every: int = 2) -> None:
    """`people` waiting places written as capture writes them (uniqueness item + request), in batches."""
    from chalicelib.clock import iso
    from chalicelib.contacts import contact_key
    from chalicelib.tables.requests import Request

    services, now = s.services, s.clock.now() - people
    with services.tables.requests.table.batch_writer() as batch:
        for i in range(people):
            contact = f"shopper{i}@example.com" if i % email_every == 0 else f"+4474009{i:05d}"
            items = services.tables.requests.join_items(
                Request.waiting(
                    sku=sku,
                    joined_ts=f"{iso(now + i)}#{i:06x}",
                    channel="email" if "@" in contact else "sms",
                    contact=contact,
                    contact_key=contact_key(contact, services.hash_key),
                    name="",
                    ttl=int(now) + 90 * 86400,
                    now=now,
                )
            )
            for item in items:
                batch.put_item(Item=item["Put"]["Item"])
