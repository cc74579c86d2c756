"""The local stack for the browser tests: `python -m devstack` on free ports in its own process group, a fresh tab,
and screenshots. The fixtures (`stack`, `page`) are in tests/browser/conftest.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import ROOT

ARTIFACTS = ROOT / "artifacts"
SHOTS = ARTIFACTS / "screenshots"
WAIT_MS = 20_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


class RunningStack:
    """`python -m devstack` in its own process group, its output in artifacts/ (devstack-browser.log by default)."""

    def __init__(self, log_name: str = "devstack-browser.log") -> None:
        self.moto_port, self.api_port, self.console_port = free_port(), free_port(), free_port()
        self.woocommerce_port, self.shopify_port = free_port(), free_port()
        self.console = f"http://127.0.0.1:{self.console_port}"
        self.api = f"http://127.0.0.1:{self.api_port}"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.log_path = ARTIFACTS / log_name
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
            "--woocommerce-port",
            str(self.woocommerce_port),
            "--shopify-port",
            str(self.shopify_port),
        ]
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ)
        )

    @property
    def ports(self) -> tuple[int, ...]:
        """Every port the stack listens on."""
        return (self.moto_port, self.api_port, self.console_port, self.woocommerce_port, self.shopify_port)

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

    def close(self, timeout_s: float = 60) -> None:
        """Stop the stack as its runner expects (SIGTERM): the API runs in a session of its own, which a kill of
        this process group would leave running. A stack that does not stop in time is killed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._log.close()


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def new_tab(browser: Any) -> Iterator[Any]:
    """A fresh browser tab; page errors are collected in `tab.errors` so a test can assert there were none."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    tab.errors = []  # type: ignore[attr-defined]
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))  # type: ignore[attr-defined]
    yield tab
    context.close()


def tap_notify_me(page: Any, stack: RunningStack, shopper: str, sku: str) -> str:
    """Shop as `shopper` on the storefront and tap Notify me on `sku`; returns what the widget said."""
    page.goto(stack.console + "/")
    page.select_option("#shop-as", shopper)
    widget = page.locator(f'[data-bisn-sku="{sku}"]')
    widget.get_by_role("button", name="Notify me when available").click()
    widget.get_by_role("button", name="Notify me", exact=True).click()
    page.wait_for_selector(f'[data-bisn-sku="{sku}"][data-bisn-result]')
    assert widget.get_attribute("data-bisn-result") == "received", widget.inner_text()
    return widget.locator(".bisn-status").inner_text()


def confirm_from_inbox(page: Any, stack: RunningStack, address: str) -> None:
    """The shopper at `address` opens their confirmation email in the console's outbox, follows its link and presses
    the button on the page it opens (email double opt-in): from then on they are told about restocks."""
    page.goto(f"{stack.console}/outbox?contact={urllib.parse.quote(address)}")
    email = page.locator('li[data-kind="confirmation"]', has_text=address).first
    email.wait_for()
    assert email.locator("iframe.email-frame").count() == 1
    email.locator('a[data-link="confirm"]').first.click()
    page.get_by_role("button", name="Yes, email me when it is back").click()
    page.get_by_text("You are on the list").wait_for()


def scan_then_tap(page: Any, link: Any, scanned: Any, lands: str = "**/checkout?**") -> None:
    """Scanners open a reserve link first: one fetches it (GET and HEAD, running no script), and one opens it in a
    browser that runs its scripts, as a sandbox that "detonates" links does; `scanned()` checks that held nothing.
    Then the shopper taps it and presses the page's button (nothing is held before the press), with no
    Content-Security-Policy complaint, and the browser lands on the checkout (`lands`: the console's, or a store's
    own)."""
    href = link.get_attribute("href")
    for probe in (page.request.get(href, max_redirects=0), page.request.head(href, max_redirects=0)):
        assert probe.status == 200, probe.status
    scanned()
    sandbox = page.context.browser.new_context()
    detonated = sandbox.new_page()
    detonated.goto(href, wait_until="load")
    detonated.wait_for_timeout(1000)
    assert "/checkout" not in detonated.url, detonated.url
    sandbox.close()
    scanned()
    refused: list[str] = []
    page.on(
        "console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None
    )
    link.click()
    page.locator("form#go button").wait_for()
    scanned()
    page.locator("form#go button").click()
    page.wait_for_url(lands)
    assert refused == []
