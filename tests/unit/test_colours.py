"""The one contrast rule (WCAG 2.2) and the one accent rule that pages, emails and the settings share."""

from __future__ import annotations

import pytest

from chalicelib.colours import (
    DEFAULT_ACCENT,
    accent_or_default,
    contrast,
    is_colour,
    link_colour,
    readable_on,
    relative_luminance,
)
from chalicelib.config import ConfigError, Settings, settings_from_env
from chalicelib.messages import compose
from chalicelib.shopper import pages
from infra.stages import stage_env

LOCAL = {**stage_env("local"), "AWS_DEFAULT_REGION": "eu-west-2"}


@pytest.mark.parametrize(
    ("a", "b", "ratio"),
    [
        ("#000000", "#ffffff", 21.0),  # the largest ratio there is
        ("#ffffff", "#ffffff", 1.0),
        ("#767676", "#ffffff", 4.54),  # the lightest grey that passes AA on white
        ("#777777", "#ffffff", 4.48),  # one step lighter fails it
        ("#ff0000", "#ffffff", 4.00),
        ("#0000ff", "#ffffff", 8.59),
    ],
)
def test_known_contrast_ratios_in_either_order(a: str, b: str, ratio: float) -> None:
    assert contrast(a, b) == pytest.approx(ratio, abs=0.005)
    assert contrast(b, a) == contrast(a, b)


def test_luminance_runs_from_black_to_white_and_uses_the_04045_threshold() -> None:
    assert relative_luminance("#000000") == 0.0
    assert relative_luminance("#ffffff") == pytest.approx(1.0)
    # 10/255 lies below the threshold, so it is linear: (10/255)/12.92 for every channel, weights summing to 1.
    assert relative_luminance("#0a0a0a") == pytest.approx(10 / 255 / 12.92)


def test_the_readable_colour_and_the_link_colour() -> None:
    assert readable_on("#ffcc00", "#000000", "#ffffff") == "#000000"
    assert readable_on("#1f2937", "#000000", "#ffffff") == "#ffffff"
    assert link_colour("#1f2937", "#ffffff", "#111827") == "#1f2937"
    assert link_colour("#ffcc00", "#ffffff", "#111827") == "#111827", "a pale accent gives links the text colour"


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("#7A4B2A", "#7a4b2a"),
        ("#1f2937", "#1f2937"),
        ("red", DEFAULT_ACCENT),
        ("#fff", DEFAULT_ACCENT),
        ("", DEFAULT_ACCENT),
    ],
)
def test_an_accent_is_used_only_when_it_is_rrggbb(given: str, used: str) -> None:
    assert is_colour(given) == (used != DEFAULT_ACCENT or given == DEFAULT_ACCENT)
    assert accent_or_default(given) == used
    assert pages.Shop("S", accent=given).accent == given, "kept as given; drawn through accent_or_default"
    assert f"--accent:{used};" in pages.style(given)
    email = compose.button("https://x.example/", "Go", compose.accent_or_default(given))
    assert f"background:{used}" in email


def test_pages_emails_and_the_settings_share_one_default_accent() -> None:
    assert pages.Shop("S").accent == compose.Brand().accent == Settings.shop_accent == DEFAULT_ACCENT
    assert settings_from_env({**LOCAL, "SHOP_ACCENT": ""}).shop_accent == DEFAULT_ACCENT
    assert settings_from_env({**LOCAL, "SHOP_ACCENT": "#ABCDEF"}).shop_accent == "#abcdef"
    with pytest.raises(ConfigError, match="SHOP_ACCENT"):
        settings_from_env({**LOCAL, "SHOP_ACCENT": "navy"})
