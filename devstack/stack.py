"""The local stack's engine: runs the app's queue and schedule entry points as Lambda would, and calls the
API as a shop platform would (signed webhooks). The console and the background pump both drive it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parseaddr
from pathlib import Path
from typing import Any, Protocol

from botocore.config import Config

from chalicelib.clock import Clock, SystemClock, iso
from chalicelib.errors import BadRequest, Conflict
from chalicelib.outbound import DeliveryFailed
from chalicelib.tables.base import plain
from chalicelib.webhooks import sign
from chalicelib.wiring import Services
from devstack.stage import ACCOUNT_ID, lambda_timeout_s
from devstack.stores import PLATFORMS, LocalStores
from infra.pin_stage import EVENT_FACTS

log = logging.getLogger("devstack")

Handler = Callable[[dict[str, Any], Any], Any]
INVENTORY_WEBHOOK = "/webhooks/inventory"
ORDERS_WEBHOOK = "/webhooks/orders"
PLATFORM_WEBHOOK = "/webhooks/{platform}"


class NotAvailable(Exception):
    """The app does not have this capability yet (its entry point has not been written)."""


class SharedOffset:
    """The stack clock's offset in a small file, so the API process keeps the same time as the console."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._last = 0.0

    def write(self, offset_s: float) -> None:
        """Publish a new offset (atomically: a reader sees the old value or the new one)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps({"offset_s": offset_s}))
        os.replace(partial, self.path)

    def read(self) -> float:
        """The current offset; 0 before any was published. The file is tiny, so it is read every time."""
        try:
            self._last = float(json.loads(self.path.read_text())["offset_s"])
        except FileNotFoundError:
            return 0.0
        except (OSError, ValueError, KeyError, TypeError):
            pass  # keep the last good value
        return self._last


class SharedPlatform:
    """The active store platform in a small file, so the API process switches when the console does."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._last = ""

    def write(self, platform: str) -> None:
        """Publish the platform (atomically)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps({"platform": platform}))
        os.replace(partial, self.path)

    def read(self) -> str:
        """The platform last published; '' before any was."""
        try:
            self._last = str(json.loads(self.path.read_text())["platform"])
        except FileNotFoundError:
            return ""
        except (OSError, ValueError, KeyError, TypeError):
            pass  # keep the last good value
        return self._last


class SharedClock:
    """The API process's clock: the wall clock plus the offset the console last published."""

    def __init__(self, offset: SharedOffset) -> None:
        self.offset = offset

    def now(self) -> float:
        """The stack's current time in Unix seconds."""
        return time.time() + self.offset.read()


class ConsoleClock:
    """The stack's clock: the wall clock (or any base clock) plus an offset the console can advance.

    The notifier and sweep run in the console's process on this clock, and the API process follows its
    offset through `share`; `pinned` lets one sweep run "as if at" a chosen moment without moving the
    clock for anything else.
    """

    def __init__(self, base: Clock | None = None, share: SharedOffset | None = None) -> None:
        self.base: Clock = base or SystemClock()
        self.share = share
        self.offset_s = 0.0
        self._pinned: float | None = None
        if share is not None:
            share.write(0.0)

    def now(self) -> float:
        """The stack's current time in Unix seconds."""
        if self._pinned is not None:
            return self._pinned
        return self.base.now() + self.offset_s

    def advance(self, seconds: float) -> None:
        """Move the stack's time forward (for the API process too)."""
        self.offset_s += seconds
        if self.share is not None:
            self.share.write(self.offset_s)

    @contextmanager
    def pinned(self, at: float) -> Iterator[None]:
        """Hold the clock at one moment for the duration of the block."""
        previous = self._pinned
        self._pinned = at
        try:
            yield
        finally:
            self._pinned = previous


@dataclass(frozen=True)
class ApiAnswer:
    """What the API said: status, body (parsed JSON when it was JSON) and headers."""

    status: int
    body: Any
    headers: Mapping[str, str]


class Api(Protocol):
    """Something that sends an HTTP request to the app's API."""

    def request(
        self, method: str, path: str, body: str | None = None, headers: Mapping[str, str] | None = None
    ) -> ApiAnswer:
        """Send one request and return the answer (redirects are not followed)."""
        ...


def _decode(raw: bytes, content_type: str) -> Any:
    text = raw.decode("utf-8", errors="replace")
    if "json" in content_type.lower():
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class HttpApi:
    """The API served by `chalice local`, over HTTP."""

    def __init__(self, base_url: str, timeout_s: float = 15.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(_NoRedirect)

    def request(
        self, method: str, path: str, body: str | None = None, headers: Mapping[str, str] | None = None
    ) -> ApiAnswer:
        """Send one request; an HTTP error status is an answer, not an exception."""
        data = body.encode("utf-8") if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=dict(headers or {}))
        try:
            with self._opener.open(req, timeout=self.timeout_s) as response:
                raw, status, hdrs = response.read(), response.status, dict(response.headers)
        except urllib.error.HTTPError as error:
            raw, status, hdrs = error.read(), error.code, dict(error.headers or {})
        return ApiAnswer(status, _decode(raw, hdrs.get("Content-Type", "")), hdrs)

    def is_up(self) -> bool:
        """True when the API answers at all."""
        try:
            return self.request("GET", "/widget.js").status == 200
        except OSError:
            return False


class InProcessApi:
    """The app in this process through chalice.test.Client (tests; one thread at a time)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def request(
        self, method: str, path: str, body: str | None = None, headers: Mapping[str, str] | None = None
    ) -> ApiAnswer:
        """Send one request through the test client."""
        response = self.client.http.request(method, path, headers=dict(headers or {}), body=(body or "").encode())
        content_type = response.headers.get("Content-Type", "") or response.headers.get("content-type", "")
        return ApiAnswer(response.status_code, _decode(response.body or b"", content_type), dict(response.headers))


def app_entry_point(name: str) -> Handler | None:
    """The app's event handler of that name (an `on_sqs_message` or `schedule` function), or None until it exists."""
    from chalice.app import EventSourceHandler

    import app as app_module

    handler = getattr(app_module, name, None)
    return handler if isinstance(handler, EventSourceHandler) else None


def app_has_route(path: str, method: str) -> bool:
    """True when the app declares this route and method."""
    from app import app

    entry = app.routes.get(path)
    return entry is not None and method.upper() in entry


class LocalContext:
    """The parts of a Lambda context a handler may read, with a real deadline."""

    def __init__(self, function_name: str, timeout_s: float, region: str) -> None:
        self.function_name = f"bisn-local-{function_name}"
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{self.function_name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "devstack"
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before this invocation's timeout."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def scheduled_event(at: float, region: str, rule: str) -> dict[str, Any]:
    """An EventBridge 'Scheduled Event' for a moment."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT_ID,
        "time": datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:events:{region}:{ACCOUNT_ID}:rule/{rule}"],
        "detail": {},
    }


def sqs_event(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """The Lambda event SQS delivers for one received message (batch size 1)."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": dict(message.get("Attributes", {})),
                "messageAttributes": dict(message.get("MessageAttributes", {})),
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
        ]
    }


def _failed_items(result: Any) -> set[str]:
    """Message ids a handler reported as failed (partial batch responses)."""
    if isinstance(result, dict):
        return {str(f.get("itemIdentifier")) for f in result.get("batchItemFailures", []) if isinstance(f, dict)}
    return set()


def _is_event_fact(record: Mapping[str, Any]) -> bool:
    """The deployed trigger's filter (infra/pin_stage.py): inserted facts of the kinds that can be events."""
    kind = record.get("dynamodb", {}).get("NewImage", {}).get("kind", {}).get("S")
    return record.get("eventName") == "INSERT" and kind in EVENT_FACTS


def verify_sender(services: Services) -> str:
    """Verify the shop's sending address in the emulator's SES, as a shop does once in its account."""
    _, address = parseaddr(services.settings.ses_from)
    ses = services.aws.sesv2
    with suppress(ses.exceptions.AlreadyExistsException):
        ses.create_email_identity(EmailIdentity=address)
    return address


class Stack:
    """Delivers jobs to the notifier, fires the sweep, and signs calls to the API, all on the stack's clock."""

    def __init__(
        self,
        services: Services,
        clock: ConsoleClock,
        api: Api,
        *,
        entry_point: Callable[[str], Handler | None] = app_entry_point,
        route_exists: Callable[[str, str], bool] = app_has_route,
        retry_after_s: int = 30,
        stores: LocalStores | None = None,
        shared_platform: SharedPlatform | None = None,
    ) -> None:
        self.services = services
        # The fake Shopify and WooCommerce (devstack/stores.py), and where the API process learns the platform.
        self.stores = stores
        if stores is not None:
            stores.deliver = self.deliver_order_webhook
        self.shared_platform = shared_platform
        if shared_platform is not None:
            shared_platform.write(services.settings.platform)
        self.clock = clock
        self.api = api
        self.entry_point = entry_point
        self.route_exists = route_exists
        # A failed job becomes visible again after this long (the deployed queue waits its full
        # visibility timeout; locally a retry, and after five failures the DLQ, should be seen quickly).
        self.retry_after_s = retry_after_s
        self.lock = threading.RLock()
        self.api_state = "starting"
        self._queue_arn: str | None = None
        # Each shard of the audit table's stream and the iterator of its first record not yet fed, as Lambda's
        # event source mapping keeps them; None until the first round of events.
        self._shard_iterators: dict[str, str] | None = None
        self._streams_client: Any = None

    @property
    def region(self) -> str:
        """The stack's AWS region."""
        return self.services.settings.aws_region

    # --- what the app can do so far

    def capabilities(self) -> dict[str, bool]:
        """Which entry points exist in the app, by what the console needs them for."""
        return {
            "notify_me": self.route_exists("/notify-me", "POST"),
            "inventory_webhook": self.route_exists(INVENTORY_WEBHOOK, "POST"),
            "reserve": self.route_exists("/reserve/{token}", "POST"),
            "orders_webhook": self.route_exists(ORDERS_WEBHOOK, "POST"),
            "unsubscribe": self.route_exists("/unsubscribe/{token}", "GET"),
            "notifier": self.entry_point("notifier") is not None,
            "sweep": self.entry_point("sweep") is not None,
        }

    # --- the job queue

    def _queue_url(self) -> str:
        return self.services.jobs.url

    def _arn(self) -> str:
        if self._queue_arn is None:
            attributes = self.services.aws.sqs.get_queue_attributes(
                QueueUrl=self._queue_url(), AttributeNames=["QueueArn"]
            )
            self._queue_arn = str(attributes["Attributes"]["QueueArn"])
        return self._queue_arn

    def queue_depths(self) -> dict[str, int]:
        """Jobs waiting, in flight, and dead-lettered."""
        sqs = self.services.aws.sqs
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        jobs = sqs.get_queue_attributes(QueueUrl=self._queue_url(), AttributeNames=names)["Attributes"]
        dlq_url = sqs.get_queue_url(QueueName=self.services.settings.dlq_name)["QueueUrl"]
        dlq = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=names[:1])["Attributes"]
        return {
            "pending": int(jobs.get(names[0], 0)),
            "in_flight": int(jobs.get(names[1], 0)),
            "dead_lettered": int(dlq.get(names[0], 0)),
        }

    def run_notifier(self, max_jobs: int = 500) -> dict[str, Any]:
        """Deliver every job waiting on the queue to the notifier, one at a time, as SQS would."""
        handler = self.entry_point("notifier")
        if handler is None:
            return {
                "processed": 0,
                "available": False,
                "message": "The app has no notifier yet, so jobs stay on the queue.",
            }
        processed = failed = 0
        sqs = self.services.aws.sqs
        with self.lock:
            while processed + failed < max_jobs:
                received = sqs.receive_message(
                    QueueUrl=self._queue_url(),
                    MaxNumberOfMessages=1,
                    WaitTimeSeconds=0,
                    VisibilityTimeout=self.retry_after_s,
                    AttributeNames=["All"],
                    MessageAttributeNames=["All"],
                )
                messages = received.get("Messages", [])
                if not messages:
                    break
                for message in messages:
                    if self._deliver(handler, message):
                        processed += 1
                    else:
                        failed += 1
        return {"processed": processed, "failed": failed, "available": True}

    def _deliver(self, handler: Handler, message: Mapping[str, Any]) -> bool:
        context = LocalContext("notifier", lambda_timeout_s("notifier"), self.region)
        try:
            result = handler(sqs_event(message, self._arn(), self.region), context)
        except Exception:
            receives = message.get("Attributes", {}).get("ApproximateReceiveCount", "?")
            # Left on the queue: SQS redelivers it, and its redrive policy moves it to the DLQ after 5 tries.
            log.exception("notifier failed on job %s (receive %s); it will be retried", message["MessageId"], receives)
            return False
        if message["MessageId"] in _failed_items(result):
            log.warning("notifier reported job %s as failed; it will be retried", message["MessageId"])
            return False
        self.services.aws.sqs.delete_message(QueueUrl=self._queue_url(), ReceiptHandle=message["ReceiptHandle"])
        return True

    # --- the sweep

    def run_sweep(self, now: float | None = None) -> dict[str, Any]:
        """Run the sweep once, on the stack's clock or as if at `now` (Unix seconds)."""
        handler = self.entry_point("sweep")
        if handler is None:
            return {"processed": 0, "available": False, "message": "The app has no sweep yet."}
        with self.lock:
            at = self.clock.now() if now is None else float(now)
            due_before = len(self.services.tables.reservations.due(at, limit=1000))
            context = LocalContext("sweep", lambda_timeout_s("sweep"), self.region)
            with self.clock.pinned(at) if now is not None else nullcontext():
                result = handler(scheduled_event(at, self.region, "bisn-local-sweep"), context)
            due_after = len(self.services.tables.reservations.due(at, limit=1000))
        answer: dict[str, Any] = {"processed": max(0, due_before - due_after), "available": True, "now": at}
        if isinstance(result, dict):
            answer["result"] = plain(result)
        return answer

    def run_scheduled(self, name: str) -> Any:
        """Fire one of the app's scheduled handlers on the stack's clock; NotAvailable when it has none."""
        handler = self.entry_point(name)
        if handler is None:
            raise NotAvailable(f"The app has no {name} handler yet.")
        with self.lock:
            context = LocalContext(name, lambda_timeout_s(name), self.region)
            return handler(scheduled_event(self.clock.now(), self.region, f"bisn-local-{name}"), context)

    # --- events out (docs/EVENTS.md)

    def run_events(self, max_messages: int = 100) -> dict[str, Any]:
        """Do what the deployed stage's events_feed and outbound triggers do, once: feed the audit stream's new
        facts to the events feed, then deliver each event waiting on the events queue. Nothing runs unless the
        stage sends events (OUTBOUND_EVENTS)."""
        if not self.services.settings.outbound_events:
            return {"queued": 0, "sent": 0, "failed": 0, "available": False}
        with self.lock:
            queued = self._feed_events()
            sent, failed = self._deliver_events(max_messages)
        return {"queued": queued, "sent": sent, "failed": failed, "available": True}

    def _streams(self) -> Any:
        """The DynamoDB Streams client, built on first use and kept (the pump asks every round)."""
        if self._streams_client is None:
            # botocore sends DescribeStream and the rest to an account-based endpoint (<account>.streams-ddb...)
            # that moto 5.2.5 does not route; the regional endpoint is the same service.
            config = Config(account_id_endpoint_mode="disabled")
            self._streams_client = self.services.aws.session.client(
                "dynamodbstreams", region_name=self.region, config=config
            )
        return self._streams_client

    def _iterators(self, streams: Any) -> dict[str, str]:
        """Each shard's iterator, from the oldest record (TRIM_HORIZON) the first time."""
        if self._shard_iterators is None:
            table = self.services.settings.table_name("audit")
            described = self.services.aws.dynamodb.meta.client.describe_table(TableName=table)["Table"]
            arn = described.get("LatestStreamArn")
            if not arn:
                raise RuntimeError(f"{table} has no stream, so no event can be fed (is it provisioned?)")
            shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
            self._shard_iterators = {
                shard["ShardId"]: streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
                for shard in shards
            }
        return self._shard_iterators

    def _feed_events(self) -> int:
        """Hand each shard's new records, filtered as the deployed trigger is, to the events feed; a shard moves on
        only once the feed took its batch (a failed batch is handed over again next round, as Lambda does)."""
        streams = self._streams()
        iterators = self._iterators(streams)
        queued = 0
        for shard, iterator in list(iterators.items()):
            answer = streams.get_records(ShardIterator=iterator, Limit=100)
            records = [r for r in answer.get("Records", []) if _is_event_fact(r)]
            if records:
                queued += self.services.event_feed.handle(records)
            if answer.get("NextShardIterator"):
                iterators[shard] = answer["NextShardIterator"]
            else:
                del iterators[shard]  # a closed shard, read to its end
        return queued

    def _deliver_events(self, max_messages: int) -> tuple[int, int]:
        """Deliver each visible event as the SQS trigger does (batch size 1): deleted once outbound returns; a
        raise leaves it on the queue, visible again when outbound's backoff (or the queue's timeout) says."""
        sqs = self.services.aws.sqs
        url = sqs.get_queue_url(QueueName=self.services.settings.events_queue_name)["QueueUrl"]
        sent = failed = 0
        while sent + failed < max_messages:
            received = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=0, MessageSystemAttributeNames=["All"]
            )
            messages = received.get("Messages", [])
            if not messages:
                break
            message = messages[0]
            attempt = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
            try:
                self.services.outbound.handle(message["Body"], receipt_handle=message["ReceiptHandle"], attempt=attempt)
            except DeliveryFailed:
                failed += 1  # outbound logged it and set its next try
                continue
            except Exception:
                log.exception("event message %s failed (attempt %d); it will be retried", message["MessageId"], attempt)
                failed += 1
                continue
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            sent += 1
        return sent, failed

    # --- calls a shop platform makes

    def _webhook(self, path: str, payload: dict[str, Any]) -> tuple[str, ApiAnswer]:
        body = json.dumps(payload, separators=(",", ":"))
        webhook_id = f"msg_{uuid.uuid4().hex}"
        secret = self.services.webhook_secrets()[0]
        headers = {"Content-Type": "application/json", **sign(secret, body, webhook_id)}
        return webhook_id, self.api.request("POST", path, body, headers)

    @property
    def platform(self) -> str:
        """The store platform the app runs on now (PLATFORM): generic, shopify or woocommerce."""
        return self.services.settings.platform

    def platforms(self) -> list[str]:
        """The platforms the console can switch to: generic, and each fake store the stack runs."""
        return list(PLATFORMS) if self.stores is not None else ["generic"]

    def switch_platform(self, platform: str) -> dict[str, Any]:
        """Rebuild the app's services with PLATFORM changed, here and in the API process, and sync the catalogue
        from that platform's store (the feed on generic). Returns the catalogue sync's report."""
        if platform not in self.platforms():
            raise BadRequest(
                f"platform must be one of {', '.join(self.platforms())}, got {platform!r}.", code="invalid_field"
            )
        from dataclasses import replace

        from chalicelib import wiring

        with self.lock:
            old = self.services
            services = Services(
                replace(old.settings, platform=platform),
                aws=old.aws,
                clock=old.clock,
                faults=old.faults,
                model=old.model,
                transport=old.transport if self.stores is not None else None,
            )
            self.services = services
            wiring.install(services)
            report = self.run_scheduled("catalog_sync") if self.entry_point("catalog_sync") else None
            if self.shared_platform is not None:
                self.shared_platform.write(platform)
        log.info("the app now runs on the %s platform", platform)
        return {"platform": platform, "catalog_sync": plain(report) if isinstance(report, dict) else None}

    def _store_webhook(self, request: tuple[bytes, dict[str, str]]) -> tuple[str, dict[str, Any], ApiAnswer]:
        body, headers = request
        webhook_id = headers.get("X-Shopify-Webhook-Id") or headers.get("X-WC-Webhook-Delivery-ID") or ""
        path = PLATFORM_WEBHOOK.format(platform=self.platform)
        answer = self.api.request("POST", path, body.decode("utf-8"), headers)
        return webhook_id, json.loads(body), answer

    def deliver_order_webhook(self, request: tuple[bytes, dict[str, str]]) -> int:
        """An order webhook the fake WooCommerce sends by itself (its own checkout took the order), to its route;
        the API's status."""
        body, headers = request
        with self.lock:
            answer = self.api.request("POST", PLATFORM_WEBHOOK.format(platform="woocommerce"), body.decode(), headers)
        return answer.status

    def store_counts(self, sku: str) -> dict[str, int]:
        """The active store's own available and reserved units of a SKU (Conflict on generic: no store of ours)."""
        if self.stores is None or self.platform == "generic":
            raise Conflict(
                "The generic platform has no store of ours to ask: holds live only in our tables.", code="no_store"
            )
        return self.stores.counts(self.platform, sku)

    def restock(self, sku: str, available: int) -> tuple[str, dict[str, Any], ApiAnswer]:
        """Set a SKU's stock as the shop does on its platform, and deliver the signed webhook the platform sends:
        Standard Webhooks to /webhooks/inventory on generic, the store's own to /webhooks/shopify or woocommerce."""
        if self.stores is not None and self.platform != "generic":
            with self.lock:
                return self._store_webhook(self.stores.restock(self.platform, sku, available))
        if not self.route_exists(INVENTORY_WEBHOOK, "POST"):
            raise NotAvailable("The API has no inventory webhook yet, so a restock cannot be detected.")
        # The event happens on the stack clock, as joins, holds and the sweep do, so a restock after "advance the
        # clock" comes after the places taken since (and `explain` agrees). The signature's timestamp stays real
        # time: signatures are checked against the wall clock (the 5-minute window), not the stack's.
        payload = {"sku": sku, "available": available, "occurred_at": iso(self.clock.now())}
        webhook_id, answer = self._webhook(INVENTORY_WEBHOOK, payload)
        return webhook_id, payload, answer

    def place_order(self, reservation_id: str, order_id: str | None = None) -> tuple[str, dict[str, Any], ApiAnswer]:
        """The shopper pays for a held unit: the shop's signed orders webhook on generic; on a store, the fake
        completes the draft order (Shopify) or pays the order (WooCommerce) and every webhook it sends for that is
        delivered (on Shopify the draft order's draft_orders/update too); the answer is the order webhook's."""
        if self.stores is not None and self.platform != "generic":
            row = self.services.tables.reservations.get(reservation_id)
            ref = row.store_ref if row is not None else None
            if not ref:
                raise Conflict(
                    f"Reservation {reservation_id!r} holds nothing on the {self.platform} store: tap its reserve "
                    "link first.",
                    code="no_store_hold",
                )
            with self.lock:
                try:
                    *before, order = self.stores.pay(self.platform, str(ref))
                except (KeyError, ValueError) as exc:
                    message = f"The {self.platform} store cannot take payment for it: {exc}"
                    raise Conflict(message, code="not_payable") from exc
                for request in before:
                    self._store_webhook(request)
                return self._store_webhook(order)
        if not self.route_exists(ORDERS_WEBHOOK, "POST"):
            raise NotAvailable("The API has no orders webhook yet, so an order cannot be recorded.")
        payload = {"reservation_id": reservation_id, "order_id": order_id or f"demo-{uuid.uuid4().hex[:10]}"}
        webhook_id, answer = self._webhook(ORDERS_WEBHOOK, payload)
        return webhook_id, payload, answer

    def advance_clock(self, minutes: float) -> float:
        """Move the stack's clock forward; returns the new time."""
        with self.lock:
            self.clock.advance(minutes * 60)
            return self.clock.now()


class Pump(threading.Thread):
    """Delivers jobs to the notifier as they arrive, fires the sweep every minute, and, when the stage sends events
    out, feeds the audit stream to the events feed and delivers the events queue, until stopped."""

    def __init__(self, stack: Stack, poll_s: float = 1.0, sweep_every_s: float = 60.0) -> None:
        super().__init__(name="devstack-pump", daemon=True)
        self.stack = stack
        self.poll_s = poll_s
        self.sweep_every_s = sweep_every_s
        self._stop_event = threading.Event()

    def run(self) -> None:
        """Poll until stopped; a failure is logged and the pump goes on."""
        next_sweep = time.monotonic() + self.sweep_every_s
        while not self._stop_event.is_set():
            try:
                result = self.stack.run_notifier()
                if result.get("processed"):
                    log.info("notifier: delivered %d job(s)", result["processed"])
                events = self.stack.run_events()
                if events.get("sent") or events.get("failed"):
                    log.info("events out: %d sent, %d to retry", events["sent"], events["failed"])
                if time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + self.sweep_every_s
                    swept = self.stack.run_sweep()
                    if swept.get("processed"):
                        log.info("sweep: %d offer(s) or hold(s) came due", swept["processed"])
            except Exception:
                log.exception("the background pump hit an error; it carries on")
            self._stop_event.wait(self.poll_s)

    def stop(self) -> None:
        """Stop after the current round."""
        self._stop_event.set()
        self.join(timeout=30)
