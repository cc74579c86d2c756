"""What every browser test shares: Debian's headless Chromium, driven by Playwright, and the local stack on free
ports (tests/browser/running.py) with a fresh tab for each test.

`make test-browser` installs Chromium when missing; without it (or without Playwright) the tests skip and say why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import axe
from tests.browser.running import RunningStack, new_tab

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from Debian's package, driven by Playwright; skips when either is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(
            "Playwright for Python is not installed: run `make test-browser` (it installs requirements-dev.txt)"
        )
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: `make test-browser` installs Debian's chromium and chromium-driver "
            "(apt-get install -y chromium chromium-driver), which needs root or sudo"
        )
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def stack(browser: Any, request: pytest.FixtureRequest) -> Iterator[RunningStack]:
    """The real local stack on free ports, one per test module (started only once the browser is known to be
    there); its output goes to artifacts/devstack-browser.log, or devstack-browser-<module>.log for the others."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    running = RunningStack("devstack-browser.log" if module == "journey" else f"devstack-browser-{module}.log")
    try:
        running.wait_until_up()
        yield running
    finally:
        running.close()


@pytest.fixture
def page(browser: Any, stack: RunningStack) -> Iterator[Any]:
    """A fresh browser tab; page errors are collected so a test can assert there were none."""
    yield from new_tab(browser)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Every axe-core audit of the run and what it found, in the run's output whether the tests passed or not."""
    lines = axe.summary()
    if lines:
        terminalreporter.section("accessibility (axe-core)")
        for line in lines:
            terminalreporter.write_line(line)
