"""Builds the app's services from settings, once per process; tests and the local stack inject their own.

Each service's module is imported when that service is first built, not when the app loads: one function's
cold start (the sweep's, say) then never compiles and runs the modules only another function uses.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from chalicelib.aws import Aws
from chalicelib.clock import Clock, SystemClock
from chalicelib.config import ConfigError, Settings, load_settings
from chalicelib.faults import FaultHook, no_faults

if TYPE_CHECKING:
    from chalicelib.admin.api import AdminApi
    from chalicelib.admin.auth import Fetch
    from chalicelib.admin.contacts import ContactSupport, StaffAudit
    from chalicelib.admin.operations import Operations
    from chalicelib.alerts import StaffAlerts
    from chalicelib.capture import CaptureService
    from chalicelib.catalog_sync import CatalogSync
    from chalicelib.confirm import MessageSender
    from chalicelib.counters import UnitMoves
    from chalicelib.detect import DetectService
    from chalicelib.feedback import FeedbackService
    from chalicelib.holds import HoldsService
    from chalicelib.importer import ImportService
    from chalicelib.leaving import QueueExits
    from chalicelib.links import Links
    from chalicelib.manage import ManageService
    from chalicelib.messages.copywriter import Copywriter
    from chalicelib.messages.email_caps import EmailSends
    from chalicelib.messages.senders import Senders
    from chalicelib.messages.sms_caps import SmsSends
    from chalicelib.metrics import MetricsFactory
    from chalicelib.notifier import Notifier
    from chalicelib.optout_service import OptoutService
    from chalicelib.orders import OrdersService
    from chalicelib.outbound import EventFeed, Outbound
    from chalicelib.platforms.base import Store, WebhookReader
    from chalicelib.platforms.http import Transport
    from chalicelib.platforms.shopify import ShopifyConnector
    from chalicelib.platforms.woocommerce import WooCommerceConnector
    from chalicelib.queue.jobs import JobQueue
    from chalicelib.queue.messages import MessageBus
    from chalicelib.queue.owed import OwedJobs
    from chalicelib.reconcile import ReconcileService
    from chalicelib.reminders import LapseReminders
    from chalicelib.secrets import Secrets
    from chalicelib.shopper.confirm_pages import ConfirmPages
    from chalicelib.shopper.optin import OptIns, OptInSender
    from chalicelib.shopper.pages import Shop
    from chalicelib.shopper.resubscribe import ProofRequests, ProofSender, Resubscribe
    from chalicelib.shopper.selfservice import SelfService
    from chalicelib.shopper.undo import UnsubscribeUndo
    from chalicelib.sms_feedback import SmsFeedbackService
    from chalicelib.store_holds import StoreHolds
    from chalicelib.store_webhooks import StoreWebhooks
    from chalicelib.support_desk import SupportDesk
    from chalicelib.sweep import SweepService
    from chalicelib.tables.store import Tables
    from chalicelib.tokens import Tokens
    from chalicelib.unknown_skus import UnknownSkus


class Services:
    """Everything the entry points use, built lazily so a cold start pays only for what it touches."""

    def __init__(
        self,
        settings: Settings,
        *,
        aws: Aws | None = None,
        clock: Clock | None = None,
        faults: FaultHook = no_faults,
        model: Any | None = None,
        senders: Senders | None = None,
        transport: Transport | None = None,
        jwks_fetch: Fetch | None = None,
    ) -> None:
        self.settings = settings
        self.aws = aws or Aws(settings.aws_region, sends_concurrency=settings.sends_concurrency)
        self.clock: Clock = clock or SystemClock()
        self.faults = faults
        # A Converse-shaped client the caller brings (the local stack's and the tests' fake model).
        self.model = model
        # Senders the caller brings (the bench's and the tests' slow or failing doubles), else SNS and SES.
        self._senders = senders
        # How connectors reach the store (the local stack's and the tests' in-process fakes), else urllib.
        self._transport = transport
        # How the dashboard reads the staff pool's signing keys (the tests' in-process emulator), else urllib.
        self._jwks_fetch = jwks_fetch

    @cached_property
    def secrets(self) -> Secrets:
        """The stage's secrets."""
        from chalicelib.secrets import Secrets

        client = self.aws.secretsmanager if self.settings.secret_refs else None
        return Secrets(self.settings, client)

    @cached_property
    def hash_key(self) -> str:
        """Key of the keyed hash that stands for a contact in audit and opt-out rows."""
        return self.secrets.get("CONTACT_HASH_KEY")

    def token_keys(self) -> list[str]:
        """TOKEN_KEY's keys, newest first (two during a rotation); read through the secrets cache."""
        return self.secrets.get_all("TOKEN_KEY")

    @cached_property
    def tokens(self) -> Tokens:
        """Signs reserve, unsubscribe and manage links with the newest TOKEN_KEY, verifies them with any."""
        from chalicelib.tokens import Tokens

        return Tokens(self.token_keys)

    def webhook_secrets(self) -> list[str]:
        """The webhook secrets currently accepted (two during a rotation); read through the secrets cache."""
        return self.secrets.get_all("WEBHOOK_SECRET")

    @cached_property
    def tables(self) -> Tables:
        """The seven tables, and the client their transactions go through."""
        from chalicelib.tables.store import Tables

        return Tables(self.aws, self.settings.table_name, audit_retention_days=self.settings.audit_retention_days)

    @cached_property
    def alerts(self) -> StaffAlerts:
        """The staff alert topic."""
        from chalicelib.alerts import StaffAlerts

        return StaffAlerts(self.aws.sns, self.settings.alert_topic_arn)

    @cached_property
    def unknown_skus(self) -> UnknownSkus:
        """Taps on SKUs the catalogue does not know, and the staff digest of them once per window."""
        from chalicelib.unknown_skus import UnknownSkus

        return UnknownSkus(
            counters=self.tables.rate_counters,
            digests=self.tables.digests,
            alerts=self.alerts,
            window_s=self.settings.unknown_sku_window_s,
            threshold=self.settings.unknown_sku_alert_threshold,
        )

    @cached_property
    def jobs(self) -> JobQueue:
        """The notifier's job queue."""
        from chalicelib.queue.jobs import JobQueue

        return JobQueue(self.aws.sqs, self.settings.jobs_queue_name)

    @cached_property
    def owed(self) -> OwedJobs:
        """Sends the notifier job a restock owes (detection, capture, and the sweep's re-send)."""
        from chalicelib.queue.owed import OwedJobs

        return OwedJobs(restocks=self.tables.restocks, jobs=self.jobs, faults=self.faults)

    @cached_property
    def metrics(self) -> MetricsFactory:
        """Per-invocation EMF metrics in the stage's namespace."""
        from chalicelib.metrics import MetricsFactory

        settings = self.settings
        return MetricsFactory(settings.metrics_namespace, settings.service_name, enabled=settings.metrics_enabled)

    @cached_property
    def bedrock(self) -> Any | None:
        """The model client for copy: none with COPY_MODE=template, else the one passed in, else Bedrock.

        COPY_MODE=fake (the local stage) has no client of its own: the local stack and the tests pass the fake.
        """
        mode = self.settings.copy_mode
        if mode == "template":
            return None
        if self.model is not None:
            return self.model
        if mode == "fake":
            raise ConfigError("COPY_MODE=fake needs the model client passed to Services (devstack/fake_model.py)")
        return self.aws.bedrock_runtime

    @cached_property
    def copywriter(self) -> Copywriter:
        """One restock's message copy, written once and cached on the restock."""
        from chalicelib.messages.copywriter import Copywriter

        return Copywriter(settings=self.settings, restocks=self.tables.restocks, links=self.links, bedrock=self.bedrock)

    @cached_property
    def senders(self) -> Senders:
        """SMS (SNS) and email (SES v2), each at this notifier's share of the account's rate.

        Built on the first job of a container, which reads the account's SES sending rate once (GetAccount)."""
        from chalicelib.config import NOTIFIER_MAX_CONCURRENCY
        from chalicelib.messages.senders import EmailSender, Senders, SmsSender, per_function_rate, ses_max_send_rate

        if self._senders is not None:
            return self._senders
        return Senders(
            SmsSender(self.aws.sns_sends, self.settings.sms_origination_number),
            EmailSender(self.aws.sesv2_sends, self.settings.ses_from, self.settings.ses_configuration_set),
            sms_per_second=per_function_rate(self.settings.sms_per_second, None, NOTIFIER_MAX_CONCURRENCY),
            email_per_second=per_function_rate(
                self.settings.email_per_second, ses_max_send_rate(self.aws.sesv2), NOTIFIER_MAX_CONCURRENCY
            ),
        )

    @cached_property
    def notifier(self) -> Notifier:
        """The notifier job handler."""
        from chalicelib.notifier import Notifier

        return Notifier(
            settings=self.settings,
            tables=self.tables,
            moves=self.moves,
            jobs=self.jobs,
            owed=self.owed,
            links=self.links,
            copywriter=self.copywriter,
            senders=self.senders,
            metrics=self.metrics,
            clock=self.clock,
            faults=self.faults,
        )

    @cached_property
    def capture(self) -> CaptureService:
        """Notify-me capture."""
        from chalicelib.capture import CaptureService

        return CaptureService(
            settings=self.settings,
            tables=self.tables,
            unknown_skus=self.unknown_skus,
            owed=self.owed,
            clock=self.clock,
            hash_key=self.hash_key,
            send_message=self.jobs.send,
            on_suppressed=self.proof_requests.ask,
            email_sends=self.email_sends,
        )

    @cached_property
    def imports(self) -> ImportService:
        """Importing a waiting list another app exported (`bisn import`, the dashboard's import), through capture."""
        from chalicelib.importer import ImportService

        return ImportService(
            settings=self.settings, tables=self.tables, capture=self.capture, clock=self.clock, hash_key=self.hash_key
        )

    @cached_property
    def proof_requests(self) -> ProofRequests:
        """A tap for a suppressed contact: the one proof message that may answer it (opting back in)."""
        from chalicelib.shopper.resubscribe import ProofRequests

        return ProofRequests(
            tables=self.tables,
            send_message=self.jobs.send,
            sms_sends=self.sms_sends,
            email_sends=self.email_sends,
        )

    @cached_property
    def proofs(self) -> ProofSender:
        """The notifier's side of opting back in: a re-subscribe email or code, sent once."""
        from chalicelib.messages.compose import brand_of
        from chalicelib.shopper.resubscribe import ProofCodes, ProofSender

        return ProofSender(
            tables=self.tables,
            links=self.links,
            senders=self.senders,
            codes=ProofCodes(self.token_keys),
            clock=self.clock,
            shop_name=self.settings.shop_name,
            brand=brand_of(self.settings),
        )

    @cached_property
    def resubscribe(self) -> Resubscribe:
        """GET/POST /resubscribe/{id} and POST /notify-me/code: a proof coming back lifts the opt-out and joins."""
        from chalicelib.shopper.resubscribe import ProofCodes, Resubscribe

        return Resubscribe(
            tables=self.tables,
            capture=self.capture,
            codes=ProofCodes(self.token_keys),
            clock=self.clock,
            shop=self.shop,
            hash_key=self.hash_key,
            default_region=self.settings.default_phone_region,
            rate_limit_per_minute=self.settings.rate_limit_per_minute,
        )

    @cached_property
    def messages(self) -> MessageSender:
        """The notifier's other work: a place's confirmation email, a channel switch's code."""
        from chalicelib.confirm import CodeKey, MessageSender

        return MessageSender(
            tables=self.tables,
            links=self.links,
            senders=self.senders,
            codes=CodeKey(self.token_keys),
            clock=self.clock,
            shop_name=self.settings.shop_name,
            confirm_days=self.settings.email_confirm_days,
        )

    @cached_property
    def lapse_reminders(self) -> LapseReminders:
        """The notifier's sending of an offer's one reminder before it lapses."""
        from chalicelib.messages.compose import brand_of
        from chalicelib.reminders import LapseReminders, ReminderPolicy

        return LapseReminders(
            tables=self.tables,
            links=self.links,
            senders=self.senders,
            clock=self.clock,
            policy=ReminderPolicy.of(self.settings),
            shop_name=self.settings.shop_name,
            brand=brand_of(self.settings),
            sms_two_way=self.settings.sms_two_way,
        )

    @cached_property
    def message_bus(self) -> MessageBus:
        """Where each message on the jobs queue goes: a restock job to the notifier, an owed confirmation email or
        switch code to chalicelib/confirm.py, a re-subscribe email or code to chalicelib/shopper/resubscribe.py, an opt-in
        link staff started to chalicelib/shopper/optin.py. Each handler builds its service only when a message needs it."""
        from chalicelib.queue.messages import (
            ConfirmEmail,
            Job,
            LapseReminder,
            MessageBus,
            OptinLink,
            ResubscribeProof,
            SwitchCode,
        )

        return MessageBus(
            handlers={
                Job: lambda job, remaining_ms: self.notifier.handle(job, remaining_ms),
                ConfirmEmail: lambda m, _: self.messages.send_confirmation(m.sku, m.joined_ts),
                SwitchCode: lambda m, _: self.messages.send_code(m.key, m.nonce),
                ResubscribeProof: lambda m, _: self.proofs.handle(m.key),
                OptinLink: lambda m, _: self.optin_links.handle(m.key, m.nonce),
                LapseReminder: lambda m, _: self.lapse_reminders.send(m.token_id),
            }
        )

    def handle_message(self, body: str, remaining_ms: Callable[[], int]) -> object:
        """One message from the jobs queue, handled where it belongs; BadRequest for a malformed body."""
        from chalicelib.queue.messages import parse

        return self.message_bus.handle(parse(body), remaining_ms)

    @cached_property
    def shop(self) -> Shop:
        """The shop's name and look on every page a shopper's link opens."""
        from chalicelib.shopper.pages import Shop

        return Shop.of(self.settings)

    @cached_property
    def confirm_pages(self) -> ConfirmPages:
        """GET/POST /confirm/{token}: email double opt-in."""
        from chalicelib.shopper.confirm_pages import ConfirmPages

        return ConfirmPages(
            tables=self.tables,
            tokens=self.tokens,
            owed=self.owed,
            clock=self.clock,
            shop=self.shop,
            request_ttl_days=self.settings.request_ttl_days,
            confirm_days=self.settings.email_confirm_days,
        )

    @cached_property
    def detector(self) -> DetectService:
        """Restock detection: POST /webhooks/inventory, and the sweep's re-enqueue of stuck restocks."""
        from chalicelib.detect import DetectService

        return DetectService(
            tables=self.tables,
            moves=self.moves,
            owed=self.owed,
            clock=self.clock,
            secrets=self.webhook_secrets,
            faults=self.faults,
        )

    @cached_property
    def catalog_sync(self) -> CatalogSync:
        """Catalogue sync from CATALOG_URL (a stage without one reports that and changes nothing)."""
        from chalicelib.catalog_sync import CatalogSync, FeedReader

        url = self.settings.catalog_url
        reader = FeedReader(url, self.catalog_token) if url else None
        platform = self.settings.platform
        store = {"shopify": self.shopify, "woocommerce": self.woocommerce}.get(platform)
        return CatalogSync(
            catalog=self.tables.catalog,
            cursors=self.tables.saved_states,
            reader=reader,
            clock=self.clock,
            threshold_changed=self.detector.reconsider,
            store=store,
            metrics=self.metrics,
        )

    @cached_property
    def reconcile(self) -> ReconcileService:
        """The store's levels of the SKUs waited for, read every few minutes and fed to restock detection."""
        from chalicelib.platforms.levels import LevelReader, StockFeed, feed_fetcher
        from chalicelib.reconcile import ReconcileService

        reader: LevelReader | None = None
        platform = self.settings.platform
        if platform == "shopify" and self.shopify is not None:
            from chalicelib.platforms.shopify_levels import ShopifyLevels

            reader = ShopifyLevels(self.shopify)
        elif platform == "woocommerce" and self.woocommerce is not None:
            from chalicelib.platforms.woocommerce_levels import WooCommerceLevels

            reader = WooCommerceLevels(self.woocommerce)
        elif platform == "generic" and self.settings.stock_feed_url:
            reader = StockFeed(self.settings.stock_feed_url, feed_fetcher(self.catalog_token))
        return ReconcileService(
            tables=self.tables, detector=self.detector, reader=reader, clock=self.clock, metrics=self.metrics
        )

    def catalog_token(self) -> str | None:
        """The catalogue feed's bearer token, when the stage configures one; read through the secrets cache."""
        settings = self.settings
        if "CATALOG_TOKEN" in settings.secret_values or "CATALOG_TOKEN" in settings.secret_refs:
            return self.secrets.get("CATALOG_TOKEN")
        return None

    # --- The store platform (chalicelib/platforms): PLATFORM's store, and the webhook dialects accepted.

    def _secret_set(self, name: str) -> bool:
        return name in self.settings.secret_values or name in self.settings.secret_refs

    @cached_property
    def transport(self) -> Transport:
        """How connectors reach a store."""
        if self._transport is not None:
            return self._transport
        from chalicelib.platforms.http import UrllibTransport

        return UrllibTransport()

    @cached_property
    def shopify(self) -> ShopifyConnector | None:
        """The Shopify connector, when the stage has a Shopify webhook secret (its dialect is then accepted)."""
        if not self._secret_set("SHOPIFY_WEBHOOK_SECRET"):
            return None
        from chalicelib.platforms.shopify import ShopifyConnector
        from chalicelib.platforms.shopify_auth import AccessTokens, ClientCredentialsToken, StaticToken

        domain = self.settings.shopify_shop_domain
        tokens: AccessTokens = StaticToken(lambda: self.secrets.get("SHOPIFY_ACCESS_TOKEN"))
        if self.settings.shopify_client_id:
            # Built once with the connector, so every call this container makes shares one renewed token.
            tokens = ClientCredentialsToken(
                shop_domain=domain,
                client_id=self.settings.shopify_client_id,
                client_secret=lambda: self.secrets.get("SHOPIFY_CLIENT_SECRET"),
                transport=self.transport,
                clock=self.clock.now,
            )
        return ShopifyConnector(
            shop_domain=domain,
            tokens=tokens,
            webhook_secrets=lambda: self.secrets.get_all("SHOPIFY_WEBHOOK_SECRET"),
            transport=self.transport,
            location_ids=self.settings.shopify_location_ids,
        )

    @cached_property
    def woocommerce(self) -> WooCommerceConnector | None:
        """The WooCommerce connector, when the stage has a WooCommerce webhook secret."""
        if not self._secret_set("WOOCOMMERCE_WEBHOOK_SECRET"):
            return None
        from chalicelib.platforms.woocommerce import WooCommerceConnector

        return WooCommerceConnector(
            store_url=self.settings.woocommerce_store_url,
            consumer_key=lambda: self.secrets.get("WOOCOMMERCE_CONSUMER_KEY"),
            consumer_secret=lambda: self.secrets.get("WOOCOMMERCE_CONSUMER_SECRET"),
            webhook_secrets=lambda: self.secrets.get_all("WOOCOMMERCE_WEBHOOK_SECRET"),
            transport=self.transport,
        )

    @cached_property
    def store(self) -> Store:
        """The store PLATFORM names: where holds are placed and shoppers check out."""
        platform = self.settings.platform
        connector = {"shopify": self.shopify, "woocommerce": self.woocommerce}.get(platform)
        if connector is not None:
            return connector
        if platform != "generic":
            raise ConfigError(f"PLATFORM={platform} needs its webhook secret")
        from chalicelib.platforms.generic import GenericStore

        return GenericStore()

    @cached_property
    def store_holds(self) -> StoreHolds:
        """Holds on the store itself, placed and released exactly once."""
        from chalicelib.store_holds import StoreHolds

        return StoreHolds(
            tables=self.tables,
            store=self.store,
            moves=self.moves,
            clock=self.clock,
            metrics=self.metrics,
            faults=self.faults,
        )

    @cached_property
    def store_webhooks(self) -> StoreWebhooks:
        """POST /webhooks/shopify and /webhooks/woocommerce."""
        from chalicelib.store_webhooks import StoreWebhooks

        readers: dict[str, WebhookReader] = {}
        if self.shopify is not None:
            readers["shopify"] = self.shopify
        if self.woocommerce is not None:
            readers["woocommerce"] = self.woocommerce
        return StoreWebhooks(
            readers=readers,
            detector=self.detector,
            orders=self.orders,
            catalog=self.catalog_sync,
            memory=self.tables.seen_events,
            states=self.tables.saved_states,
            clock=self.clock,
        )

    @cached_property
    def moves(self) -> UnitMoves:
        """DESIGN §4's counter moves for existing offer rows (hold, lapse, expiry, conversion)."""
        from chalicelib.counters import UnitMoves

        return UnitMoves(tables=self.tables)

    @cached_property
    def holds(self) -> HoldsService:
        """Reserve links: GET (and HEAD) /reserve/{token} look, POST holds."""
        from chalicelib.holds import HoldsService

        return HoldsService(
            tokens=self.tokens,
            tables=self.tables,
            moves=self.moves,
            store_holds=self.store_holds,
            clock=self.clock,
            faults=self.faults,
        )

    @cached_property
    def orders(self) -> OrdersService:
        """The orders webhook: POST /webhooks/orders."""
        from chalicelib.orders import OrdersService

        return OrdersService(
            tables=self.tables,
            moves=self.moves,
            clock=self.clock,
            webhook_secrets=self.webhook_secrets,
            faults=self.faults,
        )

    @cached_property
    def sweep(self) -> SweepService:
        """The every-minute sweep."""
        from chalicelib.reminders import ReminderPolicy
        from chalicelib.sweep import SweepService

        return SweepService(
            tables=self.tables,
            moves=self.moves,
            exits=self.exits,
            jobs=self.jobs,
            detector=self.detector,
            unknown_skus=self.unknown_skus,
            optouts=self.optouts,
            store_holds=self.store_holds,
            clock=self.clock,
            reminders=ReminderPolicy.of(self.settings),
            faults=self.faults,
        )

    # --- Opt-out everywhere and the shopper's own pages.

    @cached_property
    def links(self) -> Links:
        """Absolute reserve, unsubscribe and manage links."""
        from chalicelib.links import Links

        return Links(self.settings.public_base_url, self.tokens)

    @cached_property
    def exits(self) -> QueueExits:
        """Leaving lists: every opt-out, 'leave this list' and erasure goes through here."""
        from chalicelib.leaving import QueueExits

        return QueueExits(tables=self.tables, moves=self.moves, jobs=self.jobs, clock=self.clock, faults=self.faults)

    @cached_property
    def optouts(self) -> OptoutService:
        """Opting out (unsubscribe link, SMS STOP sync, staff) and leaving every list."""
        from chalicelib.optout_service import OptoutService

        return OptoutService(
            optout=self.tables.optout,
            cursors=self.tables.saved_states,
            undos=self.tables.undo_records,
            exits=self.exits,
            sns=self.aws.sns,
            clock=self.clock,
            hash_key=self.hash_key,
            faults=self.faults,
        )

    @cached_property
    def event_feed(self) -> EventFeed:
        """New audit facts from the audit table's stream, queued as outbound events (docs/EVENTS.md)."""
        from chalicelib.outbound import EventFeed

        return EventFeed(settings=self.settings, sqs=self.aws.sqs)

    @cached_property
    def outbound(self) -> Outbound:
        """Each outbound event delivered to the shop's webhook receiver or Klaviyo, retried with backoff."""
        from chalicelib.outbound import Outbound

        return Outbound(
            settings=self.settings,
            tables=self.tables,
            secrets=self.secrets,
            transport=self.outbound_transport,
            sqs=self.aws.sqs,
            clock=self.clock,
        )

    @cached_property
    def outbound_transport(self) -> Transport:
        """How events reach the shop's receiver and Klaviyo: the caller's transport (the tests' receiver), else
        urllib with a 15-second timeout, the shortest Standard Webhooks recommends giving a receiver."""
        if self._transport is not None:
            return self._transport
        from chalicelib.platforms.http import UrllibTransport

        return UrllibTransport(timeout_s=15.0)

    @cached_property
    def feedback(self) -> FeedbackService:
        """SES bounce, complaint and delivery events from the feedback queue."""
        from chalicelib.feedback import FeedbackService

        return FeedbackService(
            tables=self.tables, optouts=self.optouts, metrics=self.metrics, clock=self.clock, hash_key=self.hash_key
        )

    @cached_property
    def sms_feedback(self) -> SmsFeedbackService:
        """SNS's SMS delivery failures, from the delivery status log group's subscription filter."""
        from chalicelib.sms_feedback import SmsFeedbackService

        return SmsFeedbackService(
            tables=self.tables, optouts=self.optouts, metrics=self.metrics, clock=self.clock, hash_key=self.hash_key
        )

    @cached_property
    def manage(self) -> ManageService:
        """A shopper's own requests behind their manage link."""
        from chalicelib.confirm import CodeKey
        from chalicelib.manage import FormGuard, ManageService

        return ManageService(
            tables=self.tables,
            exits=self.exits,
            tokens=self.tokens,
            guard=FormGuard(self.token_keys),
            clock=self.clock,
            hash_key=self.hash_key,
            default_region=self.settings.default_phone_region,
            codes=CodeKey(self.token_keys),
            send_message=self.jobs.send,
            # The link lives as long as the places it shows: a place lapses after REQUEST_TTL_DAYS untouched.
            link_max_age_s=self.settings.request_ttl_days * 86400,
            sms_allowed_countries=self.settings.sms_allowed_countries,
            places_per_number=self.settings.places_per_number,
            sms_sends=self.sms_sends,
            email_sends=self.email_sends,
        )

    @cached_property
    def email_sends(self) -> EmailSends:
        """The caps every email a stranger can make us send (confirmations, re-subscribe emails, codes) is charged to,
        whichever request asked for it."""
        from chalicelib.messages.email_caps import EmailSends

        return EmailSends(tables=self.tables, settings=self.settings, hash_key=self.hash_key, metrics=self.metrics)

    @cached_property
    def sms_sends(self) -> SmsSends:
        """The caps every code SMS is charged to, whichever request asked for it."""
        from chalicelib.messages.sms_caps import SmsSends

        return SmsSends(tables=self.tables, settings=self.settings, hash_key=self.hash_key, metrics=self.metrics)

    @cached_property
    def self_service(self) -> SelfService:
        """GET/POST /unsubscribe/{token} and /me/{token}."""
        from chalicelib.shopper.selfservice import SelfService

        return SelfService(
            shop=self.shop,
            tokens=self.tokens,
            optouts=self.optouts,
            manage=self.manage,
            catalog=self.tables.catalog,
            clock=self.clock,
            undo=self.unsubscribe_undo,
        )

    @cached_property
    def unsubscribe_undo(self) -> UnsubscribeUndo:
        """POST /unsubscribe/undo/{token}: taking back an unsubscribe by link inside its window."""
        from chalicelib.shopper.undo import UnsubscribeUndo

        return UnsubscribeUndo(
            tables=self.tables,
            capture=self.capture,
            clock=self.clock,
            hash_key=self.hash_key,
            default_region=self.settings.default_phone_region,
        )

    # --- The shop's dashboard (/admin/api): staff sign-in, its read models and audited support actions.

    @cached_property
    def desk(self) -> SupportDesk:
        """The support desk (the `bisn` CLI's, and the dashboard's Support and Operations actions): explain, queue,
        demand, opt-outs, export, forget, DLQ redrive."""
        from chalicelib.support_desk import SupportDesk

        return SupportDesk(
            settings=self.settings,
            tables=self.tables,
            exits=self.exits,
            optouts=self.optouts,
            sns=self.aws.sns,
            sqs=self.aws.sqs,
            clock=self.clock,
            hash_key=self.hash_key,
        )

    @cached_property
    def staff_audit(self) -> StaffAudit:
        """Audits each staff action with who did it."""
        from chalicelib.admin.contacts import StaffAudit

        return StaffAudit(audit=self.tables.audit, clock=self.clock)

    def _contact_support(self) -> ContactSupport:
        from chalicelib.admin.contacts import ContactSupport

        return ContactSupport(desk=self.desk, staff_audit=self.staff_audit, optins=self.optins)

    @cached_property
    def optins(self) -> OptIns:
        """Opting back in: a link staff give the person; only its button lifts the opt-out."""
        from chalicelib.shopper.optin import OptIns

        return OptIns(
            tables=self.tables,
            tokens=self.tokens,
            links=self.links,
            clock=self.clock,
            shop=self.shop,
            send_message=self.jobs.send,
            sms_sends=self.sms_sends,
        )

    @cached_property
    def optin_links(self) -> OptInSender:
        """The notifier's side of an opt-in staff started: its link, sent once to the person's own contact."""
        from chalicelib.messages.compose import brand_of
        from chalicelib.shopper.optin import OptInSender

        return OptInSender(
            tables=self.tables,
            links=self.links,
            senders=self.senders,
            clock=self.clock,
            shop_name=self.settings.shop_name,
            brand=brand_of(self.settings),
        )

    def _operations(self) -> Operations:
        from chalicelib.admin.operations import Operations

        return Operations(
            settings=self.settings,
            sqs=self.aws.sqs,
            cloudwatch=self.aws.cloudwatch,
            sns=self.aws.sns,
            desk=self.desk,
            clock=self.clock,
            store_checks=getattr(self.store, "check_store", None),
        )

    @cached_property
    def admin(self) -> AdminApi:
        """The dashboard's JSON API; its token verifier reads the pool's keys once per container."""
        from chalicelib.admin.api import AdminApi
        from chalicelib.admin.auth import StaffGroups, TokenVerifier, urllib_fetch
        from chalicelib.admin.dashboard import Dashboard
        from chalicelib.admin.signin import SignIn

        settings = self.settings
        jwks_url = settings.admin_jwks_url
        fetch = self._jwks_fetch or urllib_fetch
        verifier = TokenVerifier(
            region=settings.aws_region,
            pool_id=settings.admin_user_pool_id or f"{settings.aws_region}_none",
            client_id=settings.admin_client_id,
            # The local stage reads the emulator's copy of the keys; a deployed stage the issuer's own.
            fetch=(lambda _url: fetch(jwks_url)) if jwks_url else fetch,
            now=self.clock.now,
            enabled=bool(settings.admin_user_pool_id),
        )
        return AdminApi(
            verifier=verifier,
            groups=StaffGroups(cognito=self.aws.cognito_idp, pool_id=settings.admin_user_pool_id)
            if settings.admin_user_pool_id
            else None,
            sign_in=SignIn(cognito=self.aws.cognito_idp, client_id=settings.admin_client_id, verifier=verifier),
            dashboard=Dashboard(tables=self.tables),
            contacts=self._contact_support(),
            operations=self._operations(),
            staff_audit=self.staff_audit,
            clock=self.clock,
            imports=self.imports,
            import_max_bytes=settings.import_max_bytes,
        )

    @cached_property
    def page_origin(self) -> str:
        """The only origin the shopper pages' forms may be sent from (the manage page's, a reserve link's tap)."""
        return origin_of(self.settings.public_base_url)


def origin_of(url: str) -> str:
    """The scheme://host[:port] of a URL (the only origin the manage page's forms may come from)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


_current: Services | None = None


def current() -> Services:
    """The process's services, built from the environment on first use."""
    global _current
    if _current is None:
        _current = Services(load_settings())
    return _current


def install(services: Services | None) -> None:
    """Replace the process's services (tests, the local stack); None rebuilds from the environment."""
    global _current
    _current = services
