"""The whole story in a real browser: the local stack started as `python -m devstack` on free ports, and
headless Chromium (Debian's package) driven by Playwright, tapping and clicking as a person would.

Screenshots of every step go to artifacts/screenshots/. The browser comes from tests/browser/conftest.py, which
skips these tests and says why when Chromium or Playwright is missing.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.browser

ARTIFACTS = ROOT / "artifacts"
SHOTS = ARTIFACTS / "screenshots"
THROW = "WW-THROW-OAT"
BOARD = "WW-BOARD-WALNUT"
WAIT_MS = 20_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


class RunningStack:
    """`python -m devstack` in its own process group, its output in artifacts/devstack-browser.log."""

    def __init__(self) -> None:
        self.moto_port, self.api_port, self.console_port = free_port(), free_port(), free_port()
        self.console = f"http://127.0.0.1:{self.console_port}"
        self.api = f"http://127.0.0.1:{self.api_port}"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.log_path = ARTIFACTS / "devstack-browser.log"
        self._log = self.log_path.open("w")
        command = [
            sys.executable,
            "-m",
            "devstack",
            "--moto-port",
            str(self.moto_port),
            "--api-port",
            str(self.api_port),
            "--console-port",
            str(self.console_port),
        ]
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ)
        )

    def log_tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-40:])

    def wait_until_up(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the stack exited with code {self.process.returncode}:\n{self.log_tail()}")
            try:
                if get_json(self.console + "/api/status")["api"] == "up":
                    return
            except OSError:
                pass
            time.sleep(0.3)
        pytest.fail(f"the stack did not come up within {timeout_s:.0f} s:\n{self.log_tail()}")

    def interrupt(self, timeout_s: float = 30) -> int:
        """Ctrl-C, as a developer would press it; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout_s)
        finally:
            self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self._log.close()


@pytest.fixture(scope="module")
def stack(browser: Any) -> Iterator[RunningStack]:
    """The real local stack on free ports (started only once the browser is known to be there)."""
    running = RunningStack()
    try:
        running.wait_until_up()
        yield running
    finally:
        running.close()


@pytest.fixture
def page(browser: Any, stack: RunningStack) -> Iterator[Any]:
    """A fresh browser tab; console errors are collected so a test can assert there were none."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    tab.errors = []  # type: ignore[attr-defined]
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))  # type: ignore[attr-defined]
    yield tab
    context.close()


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def tap_notify_me(page: Any, stack: RunningStack, shopper: str, sku: str) -> str:
    """Shop as `shopper` on the storefront and tap Notify me on `sku`; returns what the widget said."""
    page.goto(stack.console + "/")
    page.select_option("#shop-as", shopper)
    widget = page.locator(f'[data-bisn-sku="{sku}"]')
    widget.get_by_role("button", name="Notify me").click()
    page.wait_for_selector(f'[data-bisn-sku="{sku}"][data-bisn-result]')
    assert widget.get_attribute("data-bisn-result") == "queued", widget.inner_text()
    return widget.locator(".bisn-status").inner_text()


def test_a_tap_from_the_widget_appears_in_the_queue(page: Any, stack: RunningStack) -> None:
    said = tap_notify_me(page, stack, "alan", BOARD)
    assert "number 1 in line" in said
    shot(page, "00-storefront-tap")

    page.goto(f"{stack.console}/queue?sku={BOARD}")
    row = page.locator("#queue-table tbody tr", has_text="+4479•••••456")
    row.wait_for()

    assert row.get_attribute("data-state") == "waiting"
    assert row.locator("td").first.inner_text() == "1"
    shot(page, "00-queue-after-tap")
    assert page.errors == []


def test_journey_from_notify_me_to_a_converted_order(page: Any, stack: RunningStack) -> None:
    # 1. Two shoppers ask to be told: Ada by SMS, then Grace by email.
    assert "number 1 in line" in tap_notify_me(page, stack, "ada", THROW)
    assert "number 2 in line" in tap_notify_me(page, stack, "grace", THROW)
    shot(page, "01-storefront-two-shoppers-waiting")

    # 2. Two units come back: the platform's signed inventory webhook, from the controls.
    page.goto(stack.console + "/controls")
    page.select_option("#restock-sku", THROW)
    page.fill("#restock-available", "2")
    page.get_by_role("button", name="Send restock").click()
    page.locator("#restock-result", has_text="API answered").wait_for()
    assert "API answered 202" in page.inner_text("#restock-result")
    shot(page, "02-controls-restock-sent")

    # 3. The pump hands the job to the notifier: both notices appear in the outbox.
    page.goto(f"{stack.console}/outbox?sku={THROW}")
    sms = page.locator('li[data-channel="sms"]', has_text="+447400123456")
    email = page.locator('li[data-channel="email"]', has_text="grace@example.com")
    sms.wait_for()
    email.wait_for()
    assert email.locator("iframe.email-frame").count() == 1
    assert email.locator('a[data-link="unsubscribe"]').count() == 1
    shot(page, "03-outbox-notices")

    # 4. Ada taps the reserve link in her SMS: a unit is held and the API redirects to the shop's checkout.
    sms.locator('a[data-link="reserve"]').first.click()
    page.wait_for_url("**/checkout?**")
    assert "One unit is held for you" in page.inner_text("#hold-state")
    shot(page, "04-checkout-unit-held")

    # 5. She places the order: the checkout sends the shop's signed orders webhook.
    page.get_by_role("button", name="Place order").click()
    page.wait_for_selector('#hold-state[data-state="converted"]')
    assert "answered 200" in page.inner_text("#checkout-result")
    shot(page, "05-checkout-order-placed")

    # 6. The queue shows her converted, Grace still offered, and counters that add up.
    page.goto(f"{stack.console}/queue?sku={THROW}")
    page.wait_for_selector('#queue-table tr[data-state="converted"]')
    page.wait_for_selector('#counter-checks[data-balanced="yes"]')
    counters = {
        name: page.inner_text(f"#{name}")
        for name in ("units-total", "units-available", "units-offerable", "offers-live", "offers-sold")
    }
    assert counters == {
        "units-total": "2",
        "units-available": "1",
        "units-offerable": "0",
        "offers-live": "1",
        "offers-sold": "1",
    }
    states = page.locator("#queue-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.state)")
    assert states == ["converted", "offered"]
    assert page.locator("#counter-checks li.bad").count() == 0
    shot(page, "06-queue-converted-counters-add-up")

    # 7. The audit timeline tells the same story.
    page.goto(f"{stack.console}/audit?sku={THROW}")
    page.wait_for_selector('li[data-kind="conversion"]')
    kinds = page.locator("#timeline li").evaluate_all("items => items.map(i => i.dataset.kind)")
    for kind in ("restock_detected", "notice_sent", "hold", "conversion"):
        assert kind in kinds
    shot(page, "07-audit-timeline")
    assert page.errors == []


def test_ctrl_c_stops_the_whole_stack_cleanly(stack: RunningStack) -> None:
    assert stack.interrupt() == 0
    for port in (stack.moto_port, stack.api_port, stack.console_port):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"something still listens on {port}"
