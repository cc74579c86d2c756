"""What every browser test shares: Debian's headless Chromium, driven by Playwright.

`make test-browser` installs Chromium when missing; without it (or without Playwright) the tests skip and say why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
