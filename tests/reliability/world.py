"""One shop on the emulator, driven through the service layer as the platform, shoppers and AWS would drive it.

The reliability tests build a `World`, inject a fault plan, and play a journey: shoppers join, stock
returns, the notifier tells the front of the line, links are tapped, an order is placed, somebody leaves,
time passes, the sweep settles. Every entry point is reached the way production reaches it (a signed
webhook, a redelivered SQS message, a tapped link), and a step that crashes is followed by what would
follow it in production: the platform's retry, SQS's redelivery, the shopper's second tap, the next sweep.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import parseaddr
from typing import Any

import boto3
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends
from moto.sns.models import sns_backends

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.contacts import contact_key
from chalicelib.link_ids import is_link_id
from chalicelib.queue.messages import Job, parse
from chalicelib.tables.base import query_all
from chalicelib.webhooks import sign
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from devstack.fake_shopify import FakeShopify
from devstack.fake_woocommerce import FakeWooCommerce
from tests.platforms import WOO_URL, platform_env
from tests.support import CHAIR, REGION, InjectedCrash

PLENTY_MS = 60_000
# A platform world sells this product of the fakes' demo catalogue (synced from the store, so it has store ids).
STORE_SKU = "WW-THROW-OAT"
PLATFORMS = ("shopify", "woocommerce")
# What a platform world sets on its product: the generic journey's windows and threshold.
STORE_PRODUCT = {k: CHAIR[k] for k in ("threshold", "hold_window_s", "offer_window_s", "voice")}
RESERVE_LINK = re.compile(r"/(?:reserve|r)/([A-Za-z0-9_.\-]+)")


class PowerCut(Exception):
    """Stands for the Lambda dying before its next AWS call: nothing after it reaches AWS."""


class FaultPlan:
    """The services' fault hook: records every named point reached, and crashes where the plan says.

    Two kinds of crash: at a named fault point of the code (`crash_at`), or before the k-th AWS call of
    the next step (`cut_before_call`, counted by a botocore event hook on the session), after which every
    call fails until the crash is over, as for a process that died.
    """

    def __init__(self) -> None:
        self.points_seen: list[str] = []
        self.crashes: list[str] = []
        self._point: str | None = None
        self._cut_at: int | None = None
        self._calls = 0
        self._dead = False
        self._lock = threading.Lock()
        # Another invocation's work, run when the step reaches a moment (`meanwhile`): (moment, work, step's thread).
        self._meanwhile: tuple[str, Callable[[], Any], int] | None = None
        self._paused = False

    # --- named fault points (chalicelib/faults.py)

    def __call__(self, point: str) -> None:
        with self._lock:
            if self._paused:
                return  # another invocation's work, run meanwhile: the crash and the record are the step's own
            self.points_seen.append(point)
            if point == self._point:
                self._point = None
                self.crashes.append(point)
                raise InjectedCrash(point)
        self._run_meanwhile(point)

    # --- another invocation at work while the step waits at one moment

    def meanwhile(self, moment: str, work: Callable[[], Any]) -> None:
        """When the next step reaches `moment` (a named fault point, or "before <Operation>": its first call of that
        AWS operation from its own thread), `work` runs to its end first, as another Lambda would between two of
        the step's calls. The step's own thread only: its send threads' order varies from run to run."""
        with self._lock:
            self._meanwhile = (moment, work, threading.get_ident())

    def _run_meanwhile(self, moment: str) -> None:
        with self._lock:
            armed = self._meanwhile
            if self._paused or armed is None or armed[0] != moment or armed[2] != threading.get_ident():
                return
            self._meanwhile, self._paused = None, True
        try:
            armed[1]()
        finally:
            with self._lock:
                self._paused = False

    def crash_at(self, point: str) -> None:
        """Crash the first time the named point is reached."""
        self._point = point

    # --- a power cut before an AWS call

    def cut_before_call(self, k: int) -> None:
        """Let k-1 AWS calls through from now on, then fail the k-th and every later one."""
        with self._lock:
            self._cut_at, self._calls, self._dead = k, 0, False

    def restore(self) -> None:
        """The crashed process is gone; the next one (the retry) runs normally."""
        with self._lock:
            self._cut_at, self._dead = None, False

    def disarm(self) -> None:
        """Forget a crash (or other work meanwhile) armed but never reached: the step it was meant for is over."""
        with self._lock:
            self._point, self._cut_at, self._dead, self._meanwhile = None, None, False, None

    def reset(self) -> None:
        """Forget everything seen, as a plan made anew."""
        self.disarm()
        with self._lock:
            self.points_seen.clear()
            self.crashes.clear()
            self._calls = 0

    @property
    def armed(self) -> bool:
        """Whether a crash (or other work meanwhile) is still waiting to happen."""
        return self._point is not None or self._cut_at is not None or self._meanwhile is not None

    @property
    def calls(self) -> int:
        """AWS calls seen since the last cut was armed."""
        return self._calls

    def before_call(self, model: Any, **_: Any) -> None:
        """botocore `before-call` handler."""
        self._run_meanwhile(f"before {model.name}")
        with self._lock:
            if self._paused:
                return  # the calls of work run meanwhile are neither counted for the step nor cut
            self._calls += 1
            if self._cut_at is None:
                return
            if self._dead or self._calls >= self._cut_at:
                if not self._dead:
                    self.crashes.append(f"call {self._calls}: {model.service_model.service_name}.{model.name}")
                self._dead = True
                raise PowerCut(f"power cut before {model.name}")


CRASHES = (InjectedCrash, PowerCut)


def fake_store(platform: str, clock: FixedClock) -> Any:
    """devstack's in-memory store for a platform, on the test clock, with nothing in stock."""
    if platform == "shopify":
        return FakeShopify(now=clock.now)
    if platform == "woocommerce":
        return FakeWooCommerce(store_url=WOO_URL, clock=clock.now)
    raise ValueError(platform)


@dataclass
class Shopper:
    """One person on the list."""

    contact: str
    channel: str
    key: str
    joined_ts: str = ""


# The caps against SMS pumping, the hourly caps on new places per email domain and client address, and the re-offer
# cap, set out of the way of worlds that tap a few numbers many
# times or race many taps at once: each is tried on its own (tests/integration/test_sms_pumping.py,
# tests/integration/test_reoffer_limit.py); the re-offer cap deliberately leaves units unoffered.
OUT_OF_THE_WAY = {
    "TAPS_PER_NUMBER_PER_HOUR": "100000",
    "TAPS_PER_PREFIX_PER_HOUR": "100000",
    "PLACES_PER_NUMBER": "100000",
    "PLACES_PER_DOMAIN_PER_HOUR": "100000",
    "PLACES_PER_FREEMAIL_DOMAIN_PER_HOUR": "100000",
    "PLACES_PER_SOURCE_PER_HOUR": "100000",
    "REOFFER_LAPSE_LIMIT": "100000",
}


@dataclass
class World:
    """One shop: services on the emulator with a test clock and a fault plan, and what happened so far."""

    services: Services
    clock: FixedClock
    faults: FaultPlan
    # Clients built before the fault plan's hook was registered: the test's own reads and SQS's delivery
    # of messages (done by the Lambda service, not by the function) are never cut or counted.
    observer: Any = None
    sqs: Any = None
    session: Any = None
    sku: str = "CHAIR-WALNUT"
    shoppers: list[Shopper] = field(default_factory=list)
    webhooks_sent: int = 0
    retries: int = 0
    log: list[str] = field(default_factory=list)
    # Bodies of the jobs the notifier finished, oldest first (a storm puts copies back, as SQS may).
    handled_jobs: list[str] = field(default_factory=list)
    # devstack's fake Shopify or WooCommerce when the stage sells through one (PLATFORM): levels and orders come
    # as that platform's signed webhooks, and a hold is placed on the store too.
    store: Any = None
    _queue_url: str | None = None

    # --- building

    @classmethod
    def build(
        cls, session: boto3.session.Session, env: dict[str, str], clock: FixedClock, *, platform: str | None = None
    ) -> World:
        """A world on a provisioned emulator session (the conftest `session` fixture); with `platform` ("shopify" or
        "woocommerce") the stage sells through devstack's fake of it, its catalogue synced from the store."""
        faults = FaultPlan()
        observer = session.resource("dynamodb", region_name=REGION)
        sqs = session.client("sqs", region_name=REGION)
        # Registered on the session before the services build their clients, so every client carries it.
        session.events.register("before-call", faults.before_call)
        store = fake_store(platform, clock) if platform else None
        # The world tries the notice mechanics on places that may be told: email double opt-in (a place told only
        # once its address confirms) is tried on its own in tests/flows/test_email_optin_flow.py.
        env = {**env, "EMAIL_DOUBLE_OPT_IN": "false", **OUT_OF_THE_WAY}
        services = Services(
            settings_from_env(platform_env(platform, env) if platform else env),
            aws=Aws(REGION, session=session),
            clock=clock,
            faults=faults,
            model=FakeBedrock(),
            transport=store.transport() if store is not None else None,
        )
        world = cls(services, clock, faults, observer, sqs, session, store=store)
        domain = parseaddr(services.settings.ses_from)[1].split("@", 1)[1]
        services.aws.sesv2.create_email_identity(EmailIdentity=domain)
        world.sync_catalog()
        return world

    def again(self, clock: FixedClock) -> World:
        """A new World on the same emulator session, AWS clients and fault plan (emptied): new services, so
        every cache starts empty, a new clock, no history (building the AWS clients again costs more than a short
        story takes to play). A platform world gets a new store too, with nothing in stock."""
        self.faults.reset()
        store = fake_store(self.platform, clock) if self.store is not None else None
        services = Services(
            self.services.settings,
            aws=self.services.aws,
            clock=clock,
            faults=self.faults,
            model=FakeBedrock(),
            transport=store.transport() if store is not None else None,
        )
        world = World(services, clock, self.faults, self.observer, self.sqs, self.session, sku=self.sku, store=store)
        world.sync_catalog()
        return world

    @property
    def platform(self) -> str:
        """The store the stage sells through: generic, shopify or woocommerce."""
        return str(self.services.settings.platform)

    def sync_catalog(self) -> None:
        """A platform world's catalogue comes from its store (with the store's ids); its product is STORE_SKU."""
        if self.store is None:
            return
        report = self.services.catalog_sync.run()
        assert report.error is None and STORE_SKU in report.created + report.updated, report
        self.sku = STORE_SKU

    def detach(self) -> None:
        """Take the fault plan's hook off the session, so a later World on the same session starts clean."""
        self.faults.disarm()
        self.session.events.unregister("before-call", self.faults.before_call)

    def lambda_services(self) -> Services:
        """The services as another Lambda process would build them: own clients, same emulator, clock and faults.

        Threads that stand for separate invocations each take their own: boto3 clients are shared safely,
        but a DynamoDB resource's condition builder is not, and no two Lambda processes share one anyway.
        """
        return Services(
            self.services.settings,
            aws=Aws(REGION, session=self.session),
            clock=self.clock,
            faults=self.faults,
            model=FakeBedrock(),
        )

    def product(self, sku: str | None = None, **settings: Any) -> str:
        """A sold-out product in the catalogue (on a platform: the synced product, with the same windows)."""
        sku = sku or self.sku
        base = STORE_PRODUCT if self.store is not None else CHAIR
        self.services.tables.catalog.upsert(sku, {**base, **settings})
        return sku

    def key_of(self, contact: str) -> str:
        """The keyed hash that stands for a contact."""
        return contact_key(contact.lower() if "@" in contact else contact, self.services.hash_key)

    # --- the platform's, the shoppers' and AWS's actions, each retried as production would retry it

    def attempt(self, name: str, action: Callable[[], Any], *, retry: Callable[[], Any] | None = None) -> Any:
        """Run one step; if it crashes, the crashed process is gone and the retry runs (once, normally)."""
        try:
            return action()
        except CRASHES as crash:
            self.faults.restore()
            self.retries += 1
            self.log.append(f"{name} crashed ({crash}); retried")
            return (retry or action)()

    def tap(self, contact: str, *, sku: str | None = None, source: str | None = None) -> Any:
        """A shopper taps Notify me (and taps again if the page errored)."""
        channel = "email" if "@" in contact else "sms"
        body = {"sku": sku or self.sku, "channel": channel, "contact": contact}
        source = source or f"198.51.100.{len(self.shoppers) % 250 + 1}"
        outcome = self.attempt("tap", lambda: self.services.capture.capture(source, body))
        if outcome.joined_ts and not any(s.contact == contact for s in self.shoppers):
            self.shoppers.append(Shopper(contact, channel, self.key_of(contact), outcome.joined_ts))
        self.clock.advance(1)
        return outcome

    def inventory(self, available: int, *, webhook_id: str | None = None, sku: str | None = None) -> Any:
        """The platform reports a stock level, signed; it redelivers the same webhook after an error."""
        if self.store is not None:
            return self.store_level(available, sku=sku)
        self.webhooks_sent += 1
        webhook_id = webhook_id or f"msg_inventory_{self.webhooks_sent}"
        text = json.dumps({"sku": sku or self.sku, "available": available})
        return self.attempt("inventory webhook", lambda: self.deliver_inventory(text, webhook_id))

    def deliver_inventory(self, text: str, webhook_id: str, services: Services | None = None) -> Any:
        """One delivery of an inventory webhook."""
        return (services or self.services).detector.handle(text.encode(), self.signed(text, webhook_id))

    def order(self, token_id: str, order_id: str, *, webhook_id: str | None = None) -> Any:
        """The platform reports an order placed on a reservation; it redelivers after an error. On a platform the
        shopper pays the store's own hold (`order_id` is then the store's); None when the store holds nothing yet."""
        if self.store is not None:
            return self.store_pay(token_id)
        text = json.dumps({"reservation_id": token_id, "order_id": order_id})
        webhook_id = webhook_id or f"msg_order_{order_id}"
        return self.attempt("orders webhook", lambda: self.deliver_order(text, webhook_id))

    def deliver_order(self, text: str, webhook_id: str, services: Services | None = None) -> Any:
        """One delivery of an orders webhook."""
        return (services or self.services).orders.receive(text.encode(), self.signed(text, webhook_id))

    # --- a platform world's store (Shopify or WooCommerce)

    def store_level(self, available: int, *, sku: str | None = None) -> Any:
        """The shop sets the storefront's stock; the platform's signed level webhook is delivered (again after an
        error). One second on, so the level is strictly newer than the last one reported."""
        self.clock.advance(1)
        request = self.store_set(available, sku=sku)
        return self.attempt("store level webhook", lambda: self.deliver_store(request))

    def store_set(self, available: int, *, sku: str | None = None) -> tuple[bytes, dict[str, str]]:
        """The shop sets the storefront's stock (Shopify: at its first location); the level webhook the platform
        sends for it, stamped now and not delivered yet."""
        sku = sku or self.sku
        if self.platform == "shopify":
            return self.store.set_available(sku, available)
        return self.store.set_stock(sku, available)

    def store_report(self, *, sku: str | None = None) -> tuple[bytes, dict[str, str]]:
        """The level webhook the platform sends for the storefront's stock as it stands now (Shopify: the first
        location's, where the shop keeps its stock and a draft order reserves it), stamped one second on, so that it
        is strictly newer than any report before it; not delivered yet."""
        self.clock.advance(1)
        sku = sku or self.sku
        if self.platform == "shopify":
            return self.store.level_webhook(sku)
        return self.store.stock_webhook(sku)

    def report_store(self, *, sku: str | None = None) -> Any:
        """The store reports its stock as it stands now; the delivery is made again after an error."""
        request = self.store_report(sku=sku)
        return self.attempt("store level webhook", lambda: self.deliver_store(request))

    def walk_in(self, *, sku: str | None = None) -> bool:
        """Somebody buys a unit on the storefront itself, not through a hold (False when none is available). The
        level webhook it causes is left to `store_report`, to be delivered sooner or later."""
        sku = sku or self.sku
        if self.platform == "shopify":
            level = self.store.levels[(self.store.variant(sku).inventory_item_id, next(iter(self.store.locations)))]
            if level.available <= 0:
                return False
            self.store.set_available(sku, level.available - 1)
            return True
        product = self.store.by_sku(sku)
        if product.stock <= 0:
            return False
        self.store.set_stock(sku, product.stock - 1)
        return True

    def store_pay(self, token_id: str) -> Any:
        """The shopper pays the store's hold of a reservation; the platform's order webhook is delivered."""
        ref = self.row(token_id).get("store_ref")
        if not ref:
            return None
        if self.platform == "shopify":
            request = self.store.complete_draft_order(str(ref))
        else:
            request = self.store.pay_order(int(str(ref)))
        return self.attempt("store order webhook", lambda: self.deliver_store(request))

    def deliver_store(self, request: tuple[bytes, dict[str, str]], services: Services | None = None) -> Any:
        """One delivery of a platform webhook (body and headers as the platform sent them)."""
        body, headers = request
        return (services or self.services).store_webhooks.receive(self.platform, body, headers)

    def signed(self, text: str, webhook_id: str) -> dict[str, str]:
        """Standard Webhooks headers for a body, signed now with the stage's secret.

        Signed at the wall clock's now, not the test clock's: the signature window is checked against the
        wall clock, and a test may have moved its own clock hours ahead.
        """
        secret = self.services.webhook_secrets()[0]
        return {"content-type": "application/json", **sign(secret, text, webhook_id)}

    def reserve(self, token_id: str) -> Any:
        """A shopper taps the link of an offer (and taps again if the page errored)."""
        token = self.services.tokens.reserve(token_id)
        return self.attempt("reserve", lambda: self.services.holds.reserve(token))

    def unsubscribe(self, contact: str) -> Any:
        """A shopper opts out with their unsubscribe link (and presses again if the page errored)."""
        key = self.key_of(contact)
        return self.attempt("unsubscribe", lambda: self.services.optouts.opt_out(key, "unsubscribe"))

    def sweep(self) -> dict[str, int]:
        """The minute's sweep; a sweep that crashes is finished by the next minute's."""

        def next_minute() -> dict[str, int]:
            self.clock.advance(60)
            return self.services.sweep.run()

        return self.attempt("sweep", self.services.sweep.run, retry=next_minute)

    def pump(
        self, *, limit: int = 200, remaining_ms: Callable[[], int] | None = None, services: Services | None = None
    ) -> int:
        """Deliver every job on the queue to the notifier, as the SQS trigger does; a failed job comes back."""
        sqs = self.sqs
        url = self.queue_url
        for handled in range(limit):
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=0)
            if not messages.get("Messages"):
                return handled
            message = messages["Messages"][0]
            bus = (services or self.services).message_bus
            job = parse(message["Body"])
            if not isinstance(job, Job):
                # A message that owes one send (chalicelib/queue/messages.py), handled by the same function.
                bus.handle(job, lambda: PLENTY_MS)
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                continue
            try:
                bus.handle(job, remaining_ms or (lambda: PLENTY_MS))
            except CRASHES as crash:
                # The Lambda died: the trigger does not delete the message, so SQS hands it out again.
                self.faults.restore()
                self.retries += 1
                self.log.append(f"notifier job {job.kind} crashed ({crash}); redelivered")
            else:
                self.handled_jobs.append(message["Body"])
                # Another consumer may have received it meanwhile: then it is delivered again, as SQS would.
                with contextlib.suppress(sqs.exceptions.ReceiptHandleIsInvalid):
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        raise AssertionError(f"the job queue did not drain in {limit} deliveries")

    def settle(self, rounds: int = 3) -> None:
        """Let time pass past every window: sweep, deliver jobs, until nothing is left to do."""
        for _ in range(rounds):
            self.pump()
            self.clock.advance(3601)
            self.sweep()
            self.pump()

    # --- reading the tables

    def offers(self, state: str | None = None, sku: str | None = None) -> list[dict[str, Any]]:
        """Offer/hold rows of the SKU, oldest place first."""
        rows = [r for r in scan(self.table("reservations")) if r["sku"] == (sku or self.sku)]
        if state is not None:
            rows = [r for r in rows if r["state"] == state]
        return sorted(rows, key=lambda r: str(r["request_joined_ts"]))

    def restocks(self, sku: str | None = None) -> list[dict[str, Any]]:
        """Restocks of the SKU, oldest first."""
        from boto3.dynamodb.conditions import Key

        return list(query_all(self.table("restocks"), KeyConditionExpression=Key("sku").eq(sku or self.sku)))

    def jobs_waiting(self) -> int:
        """How many jobs are on the queue."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )
        return int(attributes["Attributes"]["ApproximateNumberOfMessages"])

    @property
    def queue_url(self) -> str:
        """The notifier's queue (looked up once: a queue's URL never changes)."""
        if self._queue_url is None:
            self._queue_url = self.sqs.get_queue_url(QueueName=self.services.settings.jobs_queue_name)["QueueUrl"]
        return self._queue_url

    def row(self, token_id: str) -> dict[str, Any]:
        """One offer/hold row as it stands (empty when there is none)."""
        item = self.table("reservations").get_item(Key={"token_id": token_id}, ConsistentRead=True).get("Item")
        return dict(item or {})

    def table(self, short: str) -> Any:
        """A table as the test reads it (through the observer, never cut)."""
        return self.observer.Table(self.services.settings.table_name(short))

    def sent_tokens(self) -> list[str]:
        """The offer token of every reserve link in every message the emulator accepted (SMS and email)."""
        tokens = []
        for text in outbox_texts():
            # An email carries its link twice (button and text); one message is one notice.
            for link in set(RESERVE_LINK.findall(text)):
                tokens.append(offer_id(self.services, link))
        return tokens


def offer_id(services: Services, link: str) -> str:
    """The offer row a reserve link names: a short link is the row's own id, a signed one carries it."""
    return link if is_link_id(link) else str(services.tokens.read_reserve(link).value)


def scan(table: Any, **options: Any) -> Iterator[dict[str, Any]]:
    """Every item of a table (tests only: the app never scans its hot tables); `options`: a FilterExpression."""
    kwargs: dict[str, Any] = {"ConsistentRead": True, **options}
    while True:
        page = table.scan(**kwargs)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def outbox_texts() -> list[str]:
    """The text of every SMS and email the emulator accepted, oldest first."""
    sms = [str(message) for _number, message, *_ in sns_backends[DEFAULT_ACCOUNT_ID][REGION].sms_messages.values()]
    emails = []
    for sent in ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages:
        body = getattr(sent, "body", "") or getattr(sent, "raw_data", "") or ""
        emails.append(str(body))
    return sms + emails


def outbox_recipients() -> list[str]:
    """Who each accepted SMS and email went to, oldest first."""
    sms = [str(number) for number, *_ in sns_backends[DEFAULT_ACCOUNT_ID][REGION].sms_messages.values()]
    emails = []
    for sent in ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages:
        for address in getattr(sent, "destinations", {}).get("ToAddresses", []):
            emails.append(parseaddr(str(address))[1])
    return sms + emails
