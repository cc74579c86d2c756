"""Lazily built, cached boto3 clients, so nothing touches AWS at import time and moto can stand in."""

from __future__ import annotations

import threading
from functools import cached_property
from typing import Any, Literal

import boto3
from botocore.config import Config

# boto3-stubs type Session.client by the service's literal name, so the names this app uses are spelled out.
ClientService = Literal["sqs", "sns", "sesv2", "secretsmanager", "cognito-idp", "cloudwatch"]


class _Client:
    """A client of `service`, built on an Aws's first use of the attribute and then kept on it (as cached_property
    does); `sending` for the notices' own clients, which never retry on their own."""

    def __init__(self, service: ClientService, *, sending: bool = False) -> None:
        self.service: ClientService = service
        self.sending = sending
        self.name: str = service

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, aws: Aws | None, owner: type | None = None) -> Any:
        if aws is None:
            return self
        client = aws._sending_client(self.service) if self.sending else aws._client(self.service)
        # The instance's own attribute is found before this (non-data) descriptor from now on.
        aws.__dict__[self.name] = client
        return client


class Aws:
    """One region's boto3 clients, each built on first use and then reused."""

    sqs = _Client("sqs")
    sns = _Client("sns")  # SMS and staff alerts
    sesv2 = _Client("sesv2")  # email
    sns_sends = _Client("sns", sending=True)  # notices by SMS
    sesv2_sends = _Client("sesv2", sending=True)  # notices by email
    cognito_idp = _Client("cognito-idp")  # the dashboard's staff sign-in
    cloudwatch = _Client("cloudwatch")  # the dashboard's alarms and monthly send figures
    secretsmanager = _Client("secretsmanager")  # webhook secrets, token and hashing keys

    def __init__(
        self, region: str, session: boto3.session.Session | None = None, *, sends_concurrency: int = 10
    ) -> None:
        self.region = region
        self.sends_concurrency = sends_concurrency  # the notifier's send threads, which share the sending clients
        self._session = session
        self._lock = threading.Lock()
        self._local = threading.local()
        # Standard retries absorb throttling; a short connect timeout keeps the API snappy when AWS is slow.
        self._config = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=3, read_timeout=10)

    @cached_property
    def session(self) -> boto3.session.Session:
        """The boto3 session every client comes from."""
        return self._session or boto3.session.Session(region_name=self.region)

    def _client(self, service: ClientService) -> Any:
        with self._lock:
            return self.session.client(service, region_name=self.region, config=self._config)

    @property
    def dynamodb(self) -> Any:
        """This thread's DynamoDB resource (tables take and return plain Python values).

        boto3 resources are not thread-safe: the condition builder behind Key()/Attr() numbers its
        placeholders in shared state, so two threads building expressions at once can send a request
        whose names do not match its values. Each thread gets its own resource; clients stay shared.
        """
        resource = getattr(self._local, "dynamodb", None)
        if resource is None:
            with self._lock:
                resource = self.session.resource("dynamodb", region_name=self.region, config=self._config)
            self._local.dynamodb = resource
        return resource

    def table(self, name: str) -> Any:
        """A DynamoDB Table by full name, safe to share between threads (each uses its own resource)."""
        return ThreadTable(self, name)

    def _sending_client(self, service: ClientService) -> Any:
        # One attempt per call: an SMS or email whose answer was lost may have been sent, and botocore would
        # send it again on a read timeout. The senders retry only answers that prove nothing was sent.
        # Adaptive mode adds botocore's client-side rate limiting, which slows this container's calls down
        # when the provider throttles (boto3's retries guide), even with one attempt per call. One pooled
        # connection per send thread, so no send waits for a connection another thread holds.
        config = self._config.merge(
            Config(
                retries={"mode": "adaptive", "total_max_attempts": 1},
                max_pool_connections=max(10, self.sends_concurrency),
            )
        )
        with self._lock:
            return self.session.client(service, region_name=self.region, config=config)

    @cached_property
    def bedrock_runtime(self) -> Any:
        """Bedrock runtime client (one Converse call per restock)."""
        # A template stands in when the model fails, so fail fast rather than spend the notifier's time retrying.
        config = self._config.merge(Config(retries={"mode": "standard", "max_attempts": 2}, read_timeout=8))
        with self._lock:
            return self.session.client("bedrock-runtime", region_name=self.region, config=config)


class ThreadTable:
    """A DynamoDB Table that resolves to the calling thread's own resource on every use."""

    def __init__(self, aws: Aws, name: str) -> None:
        self._aws = aws
        self.name = name

    def _table(self) -> Any:
        tables = self._aws._local.__dict__.setdefault("tables", {})
        table = tables.get(self.name)
        if table is None:
            table = tables[self.name] = self._aws.dynamodb.Table(self.name)
        return table

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._table(), attribute)
