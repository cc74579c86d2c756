"""The app's seven tables and the one client their transactions go through."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from chalicelib.tables.base import Tx

if TYPE_CHECKING:
    from chalicelib.aws import Aws
    from chalicelib.tables.audit import AuditTable
    from chalicelib.tables.catalog import CatalogTable
    from chalicelib.tables.optout import OptoutTable
    from chalicelib.tables.requests import RequestsTable
    from chalicelib.tables.reservations import ReservationsTable
    from chalicelib.tables.restocks import RestocksTable
    from chalicelib.tables.throttle import (
        Digests,
        LineTickets,
        PendingSteps,
        RateCounters,
        SavedStates,
        SeenEvents,
        UndoRecords,
    )


class Tables:
    """Every table object, built on first use (a cold start pays only for the tables it touches).

    Services take this one object instead of the five to seven tables they write together, and run their
    transactions through `run`, never through a table's own client.
    """

    def __init__(self, aws: Aws, full_name: Callable[[str], str], *, audit_retention_days: int) -> None:
        self._aws = aws
        self._full_name = full_name
        self._audit_retention_s = audit_retention_days * 86400

    @property
    def client(self) -> Any:
        """The DynamoDB client of this thread's resource, for `TransactWriteItems`.

        It must be a resource's client, not a plain `boto3.client("dynamodb")`: only there does boto3
        serialise the plain Python values the tables' items hold into DynamoDB's typed form (and back in a
        cancellation's old images). Each thread has its own resource (see `Aws.dynamodb`).
        """
        return self._aws.dynamodb.meta.client

    def run(self, tx: Tx) -> None:
        """Run one named transaction (a cancellation is raised with its names, see `Tx.run`)."""
        tx.run(self.client)

    def _table(self, short: str) -> Any:
        return self._aws.table(self._full_name(short))

    def whole(self, short: str) -> Any:
        """The boto3 table `bisn-<short>` with every item of every role in it, for tools that read it all (a scan)."""
        return self._table(short)

    @cached_property
    def catalog(self) -> CatalogTable:
        """bisn-catalog."""
        from chalicelib.tables.catalog import CatalogTable

        return CatalogTable(self._table("catalog"))

    @cached_property
    def requests(self) -> RequestsTable:
        """bisn-requests."""
        from chalicelib.tables.requests import RequestsTable

        return RequestsTable(self._table("requests"))

    @cached_property
    def restocks(self) -> RestocksTable:
        """bisn-restocks."""
        from chalicelib.tables.restocks import RestocksTable

        return RestocksTable(self._table("restocks"))

    @cached_property
    def reservations(self) -> ReservationsTable:
        """bisn-reservations."""
        from chalicelib.tables.reservations import ReservationsTable

        return ReservationsTable(self._table("reservations"))

    @cached_property
    def optout(self) -> OptoutTable:
        """bisn-optout."""
        from chalicelib.tables.optout import OptoutTable

        return OptoutTable(self._table("optout"))

    # bisn-throttle's roles, each over the same table (chalicelib/tables/throttle.py).

    @cached_property
    def rate_counters(self) -> RateCounters:
        """bisn-throttle's windowed counters: rate limits and sending caps."""
        from chalicelib.tables.throttle import RateCounters

        return RateCounters(self._table("throttle"))

    @cached_property
    def seen_events(self) -> SeenEvents:
        """bisn-throttle's remembered webhook, SES event and SMS failure ids."""
        from chalicelib.tables.throttle import SeenEvents

        return SeenEvents(self._table("throttle"))

    @cached_property
    def digests(self) -> Digests:
        """bisn-throttle's unknown-SKU digests."""
        from chalicelib.tables.throttle import Digests

        return Digests(self._table("throttle"))

    @cached_property
    def pending_steps(self) -> PendingSteps:
        """bisn-throttle's pending channel switches (their codes) and opt-ins (their links)."""
        from chalicelib.tables.throttle import PendingSteps

        return PendingSteps(self._table("throttle"))

    @cached_property
    def saved_states(self) -> SavedStates:
        """bisn-throttle's states kept between runs (sync cursors, order links)."""
        from chalicelib.tables.throttle import SavedStates

        return SavedStates(self._table("throttle"))

    @cached_property
    def line_tickets(self) -> LineTickets:
        """bisn-throttle's line tickets per SKU."""
        from chalicelib.tables.throttle import LineTickets

        return LineTickets(self._table("throttle"))

    @cached_property
    def undo_records(self) -> UndoRecords:
        """bisn-throttle's undo records of unsubscribes."""
        from chalicelib.tables.throttle import UndoRecords

        return UndoRecords(self._table("throttle"))

    @cached_property
    def audit(self) -> AuditTable:
        """bisn-audit."""
        from chalicelib.tables.audit import AuditTable

        return AuditTable(self._table("audit"), retention_s=self._audit_retention_s)
