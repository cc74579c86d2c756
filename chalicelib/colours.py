"""The shop's accent colour and the contrast rules every page and email draws it by.

Contrast is WCAG 2.2's: the relative luminance of an sRGB colour (0.2126 R + 0.7152 G + 0.0722 B, each channel
linearised with the 0.04045 threshold the definition has used since May 2021) and the ratio
(lighter + 0.05) / (darker + 0.05), from 1:1 to 21:1. Body text and links need AA's 4.5:1.
"""

from __future__ import annotations

import re

# The accent of a shop that names none (SHOP_ACCENT), and of a page or email given one that is not #rrggbb.
DEFAULT_ACCENT = "#1f2937"
AA = 4.5  # WCAG AA for body text
_HEX = re.compile(r"#[0-9a-fA-F]{6}")


def is_colour(value: str) -> bool:
    """True for a colour written #rrggbb, the one form an accent is accepted in."""
    return _HEX.fullmatch(value) is not None


def accent_or_default(accent: str) -> str:
    """The accent lower-cased when it is #rrggbb, else DEFAULT_ACCENT: it is written into CSS and HTML attributes,
    so nothing else may pass."""
    return accent.lower() if is_colour(accent) else DEFAULT_ACCENT


def relative_luminance(colour: str) -> float:
    """WCAG 2.2 relative luminance of a #rrggbb colour: 0 for black, 1 for white."""

    def linear(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours, in either order (1 to 21)."""
    lighter, darker = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def readable_on(background: str, first: str, second: str) -> str:
    """Of two text colours, the one that contrasts more with the background (the first on a tie)."""
    return first if contrast(background, first) >= contrast(background, second) else second


def link_colour(accent: str, background: str, text: str) -> str:
    """Links take the accent where it reads on the background (AA); else the text colour, so a pale or a dark
    accent never makes a link unreadable."""
    return accent if contrast(accent, background) >= AA else text
