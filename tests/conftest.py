"""Fixtures: every test that touches AWS gets the emulator as newly provisioned from infra/template.json."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from chalice.test import Client

from chalicelib import i18n
from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.wiring import Services
from devstack import moto_patches
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from infra.stages import stage_env
from tests.emulator import ProvisionedEmulator
from tests.reliability import tally
from tests.support import CHAIR, REGION, app_client

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ["AWS_DEFAULT_REGION"] = REGION
# The correctness suite runs on the emulator made faithful, with only the speed patches that change how moto
# moves data, never how it parses or checks an expression (devstack/moto_patches/).
moto_patches.install(fidelity=True, speed=False, bookkeeping=True)
# A string the code shows a shopper must be in its domain's template, so it cannot go untranslated.
i18n.set_strict(True)


@pytest.fixture
def env() -> dict[str, str]:
    """The local stage's environment, as the app would see it."""
    return {**stage_env("local"), "AWS_DEFAULT_REGION": REGION}


@pytest.fixture(scope="session")
def provisioned_emulator() -> ProvisionedEmulator:
    """This process's emulator, provisioned from infra/template.json once (tests/emulator.py)."""
    return ProvisionedEmulator()


@pytest.fixture
def session(provisioned_emulator: ProvisionedEmulator) -> Iterator[boto3.session.Session]:
    """A boto3 session on the emulator as newly provisioned with every resource of infra/template.json."""
    with provisioned_emulator.fresh() as session:
        yield session


@pytest.fixture
def clock() -> FixedClock:
    """A clock that moves only when a test says so, starting at the real time (webhooks check it)."""
    return FixedClock(float(int(time.time())))


@pytest.fixture
def services(session: boto3.session.Session, clock: FixedClock, env: dict[str, str]) -> Services:
    """The app's services wired to the emulator and the test clock."""
    return Services(settings_from_env(env), aws=Aws(REGION, session=session), clock=clock, model=FakeBedrock())


@pytest.fixture
def client(services: Services) -> Iterator[Client]:
    """chalice.test.Client on the app with the test services installed."""
    with app_client(services) as test_client:
        yield test_client


@pytest.fixture
def chair(services: Services) -> str:
    """A sold-out product in the catalogue."""
    services.tables.catalog.upsert("CHAIR-WALNUT", dict(CHAIR))
    return "CHAIR-WALNUT"


# The modules whose tests run for seconds each (the storms, the power cuts, the fuzzers, the bench at tiny sizes):
# their tests start first, so that the run ends on short tests and no core waits idle while another finishes a
# long one. `make test` lists the 20 slowest tests at its end; a module that joins them belongs here.
LONG_RUNNING = (
    "tests/reliability/test_storms.py",
    "tests/integration/test_bench_quick.py",
    "tests/reliability/test_crashes.py",
    "tests/reliability/test_fuzz.py",
    "tests/integration/test_holds_properties.py",
    "tests/reliability/test_store_storms.py",
    "tests/integration/test_notifier_large.py",
    "tests/integration/test_notifier.py",
    "tests/integration/test_email_caps.py",
    "tests/integration/test_catalog_sync.py",
    "tests/integration/test_deploy_template.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long-running modules' tests first, in the order above; every other test after them, as collected."""
    rank = {module: place for place, module in enumerate(LONG_RUNNING)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


# The reliability suite's summary line (tests/reliability/tally.py). Here, not in tests/reliability/conftest.py:
# an xdist controller collects nothing, so it loads only this conftest, and it is the process that prints.


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its counts over (xdist sends `workeroutput` to the controller after this hook)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        tally.hand_over(workeroutput)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: pytest would refuse it as unknown without xdist installed
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller: a worker is done; add its counts to the line."""
    tally.take_in(getattr(node, "workeroutput", {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line of what the reliability suite tried in this run (the figures docs/RELIABILITY.md quotes)."""
    line = tally.summary()
    if line:
        terminalreporter.write_line(line)
