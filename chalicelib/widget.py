"""The embeddable Notify-me widget, served as a static script."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

WIDGET_PATH = Path(__file__).parent / "static" / "widget.js"


@lru_cache(maxsize=1)
def widget_source() -> str:
    """The widget's JavaScript, read once per Lambda instance."""
    return WIDGET_PATH.read_text(encoding="utf-8")
