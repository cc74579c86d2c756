"""One provisioned emulator per test process, handed to each test exactly as it stood when provisioning finished.

Provisioning infra/template.json (tables, queues, topics, subscriptions, the SES configuration set) through the
API costs about a third of a second of CPU, and boto3 clients on a new session read their service models from
disk again: together most of a flows or integration test's time. Here each process provisions once and keeps a
copy of what that left in moto's backends; before each test, moto starts empty (as `mock_aws()` does) and the
copy is put back, which takes a few milliseconds. After the test, moto is stopped and emptied as `mock_aws()`
leaves it, so tests that start their own `mock_aws()`, or a moto server, between ours find nothing of ours.
"""

from __future__ import annotations

import copy
import copyreg
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import botocore.session
from botocore.hooks import HierarchicalEmitter
from botocore.loaders import create_loader
from moto import mock_aws
from moto.core.base_backend import BackendDict

from devstack.provision import provision
from tests.support import REGION

# moto's SQS queue guards its messages with a Condition: locks cannot be copied, and a copy must never share the
# lock of the saved state it came from, so each copy gets new ones.
_NEW_LOCKS: dict[type, Any] = {
    threading.Condition: threading.Condition,
    type(threading.RLock()): threading.RLock,
    type(threading.Lock()): threading.Lock,
}


def _copy(state: Any) -> Any:
    """A deep copy of moto state, with new locks in place of the originals."""
    before = {kind: copyreg.dispatch_table.get(kind) for kind in _NEW_LOCKS}
    for kind, new in _NEW_LOCKS.items():
        copyreg.dispatch_table[kind] = lambda _lock, new=new: (new, ())
    try:
        return copy.deepcopy(state)
    finally:
        for kind, reducer in before.items():
            if reducer is None:
                copyreg.dispatch_table.pop(kind, None)
            else:
                copyreg.dispatch_table[kind] = reducer


class ProvisionedEmulator:
    """moto, provisioned once; `fresh()` hands out a session on it as newly provisioned for each test."""

    def __init__(self) -> None:
        self._mock = mock_aws()
        # boto3 sessions share one model loader: each test still gets its own session (its own event hooks, which
        # the reliability World registers), without parsing every service's JSON model again.
        self._loader = create_loader()
        # A new botocore session registers its ~130 built-in event handlers one by one, checking each handler's
        # signature: about half the cost of a test's set-up. They are registered once here, and each session
        # starts from its own copy of them, as botocore gives each client its own copy of its session's handlers.
        self._builtin_hooks = HierarchicalEmitter()
        botocore.session.Session(event_hooks=self._builtin_hooks)
        self._mock.start()
        try:
            provision(self.new_session())
            # Copied all at once: one backend holds another (SES v2 sends through SES), and each copy must hold
            # the copy of the other that is put back, not a copy of its own.
            made = [
                ((backends, account, region), backend)
                for backends in BackendDict._instances
                for account, region, backend in backends.iter_backends()
            ]
            self._places = [place for place, _ in made]
            self._saved = _copy([backend for _, backend in made])
        finally:
            self._mock.stop()

    def _core_session(self) -> botocore.session.Session:
        core = botocore.session.Session(event_hooks=copy.copy(self._builtin_hooks), include_builtin_handlers=False)
        core.register_component("data_loader", self._loader)
        return core

    def new_session(self) -> boto3.session.Session:
        """A boto3 session of its own on the shared model loader."""
        session = boto3.session.Session(region_name=REGION, botocore_session=self._core_session())
        # boto3 adds its resource models' folder to the loader for every new session: once is enough.
        self._loader.search_paths[:] = dict.fromkeys(self._loader.search_paths)
        return session

    @contextmanager
    def fresh(self) -> Iterator[boto3.session.Session]:
        """The emulator as provisioning left it, for the block; emptied again after it."""
        self._mock.start()  # every moto backend starts empty
        try:
            for (backends, account, region), backend in zip(self._places, _copy(self._saved), strict=True):
                backends[account][region] = backend
            yield self.new_session()
        finally:
            self._mock.stop()
