"""Two restocks at once under one account's SES sending quota: do the notifiers share it without being throttled?

Two products each have 300 shoppers waiting by email and come back in stock together, so two notifier jobs run at
the same time, as the SQS trigger allows (NOTIFIER_MAX_CONCURRENCY invocations, each with its own clients and
its own rate limiter). The account's SES quota is 14 emails a second (GetAccount's SendQuota.MaxSendRate): SES is
the emulator behind a gate that enforces that rate for the whole account, as a token bucket holding one second's
worth, and answers a send above it with SES v2's TooManyRequestsException, sending nothing.

Everything else is the app as deployed: the services build their senders themselves (`Services.senders`: GetAccount
read once per invocation, `per_function_rate` dividing the quota between the invocations, the real `RateLimiter`,
the senders' back-off after a throttle), and each job runs against a 60-second Lambda deadline. Time is real:
the run takes as long as sending 600 emails at the quota does (at least 600 / 14 ≈ 43 s), nothing is skipped.
"""

from __future__ import annotations

import threading
import time
from functools import cached_property
from typing import Any

from botocore.exceptions import ClientError

from bench.stack import PRODUCT, Stack, stack, waiting_list

ACCOUNT_MAX_SEND_RATE = 14.0  # SES's quota for a new production account in many regions, emails per second
PEOPLE_PER_PRODUCT = 300
PRODUCTS = ("CHAIR-WALNUT", "LAMP-BRASS")
LAMBDA_TIMEOUT_S = 60  # the notifier's lambda_timeout in .chalice/config.json


class SesQuota:
    """An SES v2 client behind the account's sending rate: shared by every notifier invocation, as the quota is."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._tokens = rate
        self._last = time.monotonic()
        self._lock = threading.Lock()
        self.accepted = 0
        self.throttled = 0

    def admit(self) -> bool:
        """Take one send from the account's bucket; False when the send is over the rate."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.rate, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens < 1:
                self.throttled += 1
                return False
            self._tokens -= 1
            self.accepted += 1
            return True


class GatedSes:
    """One invocation's SES v2 client: GetAccount reports the quota, SendEmail passes the gate or is refused."""

    def __init__(self, real: Any, quota: SesQuota) -> None:
        self._real = real
        self._quota = quota

    def get_account(self) -> dict[str, Any]:
        """GetAccount's SendQuota (botocore data/sesv2/…/service-2.json: Max24HourSend, MaxSendRate, SentLast24Hours)."""
        quota = {"Max24HourSend": 50_000.0, "MaxSendRate": self._quota.rate, "SentLast24Hours": 0.0}
        return {"SendQuota": quota, "ProductionAccessEnabled": True, "SendingEnabled": True}

    def send_email(self, **kwargs: Any) -> dict[str, Any]:
        """SendEmail, refused over the account's rate (TooManyRequestsException, HTTP 429, one of SendEmail's errors)."""
        if not self._quota.admit():
            raise ClientError(
                {
                    "Error": {"Code": "TooManyRequestsException", "Message": "Maximum sending rate exceeded."},
                    "ResponseMetadata": {
                        "HTTPStatusCode": 429,
                        "RequestId": "",
                        "HostId": "",
                        "HTTPHeaders": {},
                        "RetryAttempts": 0,
                    },
                },
                "SendEmail",
            )
        return dict(self._real.send_email(**kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _gated_aws(region: str, session: Any, quota: SesQuota, sends_concurrency: int) -> Any:
    """The app's Aws with both SES clients (GetAccount's and the sending one) behind the account's quota."""
    from chalicelib.aws import Aws

    class GatedAws(Aws):
        @cached_property
        def sesv2(self) -> Any:
            return GatedSes(super().sesv2, quota)

        @cached_property
        def sesv2_sends(self) -> Any:
            return GatedSes(super().sesv2_sends, quota)

    return GatedAws(region, session, sends_concurrency=sends_concurrency)


def _invocation_services(s: Stack, quota: SesQuota) -> Any:
    """The services one notifier invocation builds: its own clients and senders, the stack's tables and clock."""
    from chalicelib.wiring import Services
    from devstack.fake_model import model_for

    settings = s.services.settings
    aws = _gated_aws(s.services.aws.region, s.services.aws.session, quota, settings.sends_concurrency)
    return Services(settings, aws=aws, clock=s.clock, model=model_for(settings))


def _trigger(s: Stack, services: Any, url: str, handled: list[str], failures: list[str]) -> None:
    """One of the trigger's concurrent invocations: take a job, run it against a fresh deadline, until none is left."""
    from chalicelib.queue.messages import Job, parse

    while True:
        messages = s.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1).get("Messages", [])
        if not messages:
            return
        deadline = time.monotonic() + LAMBDA_TIMEOUT_S
        message = parse(messages[0]["Body"])
        try:
            services.message_bus.handle(message, lambda deadline=deadline: int((deadline - time.monotonic()) * 1000))
        except Exception as error:  # the job fails and SQS would hand it out again; counted, not hidden
            failures.append(type(error).__name__)
            continue
        s.sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
        handled.append(message.kind if isinstance(message, Job) else message.KIND)


def two_restocks_at_once(people_per_product: int = PEOPLE_PER_PRODUCT) -> dict[str, Any]:
    """Two restocks (300 people each) notified together by the trigger's concurrent invocations under one SES quota."""
    from chalicelib.config import NOTIFIER_MAX_CONCURRENCY
    from chalicelib.messages.senders import per_function_rate
    from infra.stages import stage_env

    prod = stage_env("prod")
    overrides = {k: prod[k] for k in ("SENDS_CONCURRENCY", "EMAIL_PER_SECOND", "SMS_PER_SECOND")}
    quota = SesQuota(ACCOUNT_MAX_SEND_RATE)
    with stack({**overrides, "EMAIL_DOUBLE_OPT_IN": "false"}) as s:
        for sku in PRODUCTS:
            s.services.tables.catalog.upsert(sku, dict(PRODUCT))
            waiting_list(s, sku, people_per_product, email_every=1)
        url = s.sqs.get_queue_url(QueueName=s.services.settings.jobs_queue_name)["QueueUrl"]
        for sku in PRODUCTS:
            s.inventory(sku, people_per_product)
        handled: list[str] = []
        failures: list[str] = []
        invocations = [_invocation_services(s, quota) for _ in range(NOTIFIER_MAX_CONCURRENCY)]
        started = time.perf_counter()
        threads = [
            threading.Thread(target=_trigger, args=(s, services, url, handled, failures)) for services in invocations
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
        notices = sum(
            1
            for sku in PRODUCTS
            for fact in s.services.tables.audit.for_sku(sku)
            if fact["kind"] == "notice_sent" and fact.get("channel") == "email"
        )
    people = people_per_product * len(PRODUCTS)
    return {
        "people": people,
        "invocations": NOTIFIER_MAX_CONCURRENCY,
        "account_max_send_rate": ACCOUNT_MAX_SEND_RATE,
        # What each invocation's email limiter was built with (Services.senders: the same function, the same inputs).
        "per_invocation_rate": per_function_rate(
            float(prod["EMAIL_PER_SECOND"]), ACCOUNT_MAX_SEND_RATE, NOTIFIER_MAX_CONCURRENCY
        ),
        "sent": quota.accepted,
        "notices_recorded": notices,
        "throttle_errors": quota.throttled,
        "jobs": len(handled),
        "job_failures": len(failures),
        "seconds": seconds,
        "floor_seconds": people / ACCOUNT_MAX_SEND_RATE,
    }
