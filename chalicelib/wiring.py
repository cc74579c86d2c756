"""Builds the app's services from settings, once per process; tests and the local stack inject their own."""

from __future__ import annotations

from functools import cached_property

from chalicelib.alerts import StaffAlerts
from chalicelib.aws import Aws
from chalicelib.capture import CaptureService
from chalicelib.clock import Clock, SystemClock
from chalicelib.config import Settings, load_settings
from chalicelib.faults import FaultHook, no_faults
from chalicelib.jobs import JobQueue
from chalicelib.secrets import Secrets
from chalicelib.tables.audit import AuditTable
from chalicelib.tables.catalog import CatalogTable
from chalicelib.tables.optout import OptoutTable
from chalicelib.tables.requests import RequestsTable
from chalicelib.tables.reservations import ReservationsTable
from chalicelib.tables.restocks import RestocksTable
from chalicelib.tables.throttle import ThrottleTable
from chalicelib.tokens import Tokens


class Services:
    """Everything the entry points use, built lazily so a cold start pays only for what it touches."""

    def __init__(
        self,
        settings: Settings,
        aws: Aws | None = None,
        clock: Clock | None = None,
        faults: FaultHook = no_faults,
    ) -> None:
        self.settings = settings
        self.aws = aws or Aws(settings.aws_region)
        self.clock: Clock = clock or SystemClock()
        self.faults = faults

    @cached_property
    def secrets(self) -> Secrets:
        """The stage's secrets."""
        client = self.aws.secretsmanager if self.settings.secret_refs else None
        return Secrets(self.settings, client)

    @cached_property
    def hash_key(self) -> str:
        """Key of the keyed hash that stands for a contact in audit and opt-out rows."""
        return self.secrets.get("CONTACT_HASH_KEY")

    @cached_property
    def tokens(self) -> Tokens:
        """Signs and verifies reserve, unsubscribe and manage links."""
        return Tokens(self.secrets.get("TOKEN_KEY"))

    def webhook_secrets(self) -> list[str]:
        """The webhook secrets currently accepted (two during a rotation); read through the secrets cache."""
        return self.secrets.get_all("WEBHOOK_SECRET")

    @cached_property
    def catalog(self) -> CatalogTable:
        """bisn-catalog."""
        return CatalogTable(self.aws.table(self.settings.table_name("catalog")))

    @cached_property
    def requests(self) -> RequestsTable:
        """bisn-requests."""
        return RequestsTable(self.aws.table(self.settings.table_name("requests")))

    @cached_property
    def restocks(self) -> RestocksTable:
        """bisn-restocks."""
        return RestocksTable(self.aws.table(self.settings.table_name("restocks")))

    @cached_property
    def reservations(self) -> ReservationsTable:
        """bisn-reservations."""
        return ReservationsTable(self.aws.table(self.settings.table_name("reservations")))

    @cached_property
    def optout(self) -> OptoutTable:
        """bisn-optout."""
        return OptoutTable(self.aws.table(self.settings.table_name("optout")))

    @cached_property
    def throttle(self) -> ThrottleTable:
        """bisn-throttle."""
        return ThrottleTable(self.aws.table(self.settings.table_name("throttle")))

    @cached_property
    def audit(self) -> AuditTable:
        """bisn-audit."""
        return AuditTable(self.aws.table(self.settings.table_name("audit")))

    @cached_property
    def alerts(self) -> StaffAlerts:
        """The staff alert topic."""
        return StaffAlerts(self.aws.sns, self.settings.alert_topic_arn)

    @cached_property
    def jobs(self) -> JobQueue:
        """The notifier's job queue."""
        return JobQueue(self.aws.sqs, self.settings.jobs_queue_name)

    @cached_property
    def capture(self) -> CaptureService:
        """Notify-me capture."""
        return CaptureService(
            settings=self.settings,
            catalog=self.catalog,
            requests=self.requests,
            optout=self.optout,
            throttle=self.throttle,
            audit=self.audit,
            alerts=self.alerts,
            clock=self.clock,
            hash_key=self.hash_key,
        )


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
