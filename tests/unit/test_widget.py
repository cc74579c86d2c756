"""The widget as served: the shop's look and every language's strings written in, and small enough to embed."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from chalicelib import i18n
from chalicelib.config import Settings, settings_from_env
from chalicelib.shopper import widget
from chalicelib.shopper.widget import (
    STRINGS,
    WIDGET_PATH,
    build,
    home_regions,
    phone_example,
    script_config,
    widget_source,
)
from infra.stages import stage_env
from tests.support import REGION

# "Under 10 KB gzipped including styles and all five languages' strings": a size guard, not a timing test.
MAX_GZIPPED = 10 * 1024


def local_settings() -> Settings:
    return settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": REGION})


def config_of(script: str) -> dict[str, object]:
    """The configuration object the served script carries."""
    found = re.search(r"var C=(\{.*?\});", script)
    assert found, "the served script has no configuration"
    return dict(json.loads(found.group(1)))


@pytest.mark.parametrize("level", [9, 6])
def test_the_served_script_stays_under_10_kb_gzipped(level: int) -> None:
    served = widget_source(local_settings()).encode()
    assert len(gzip.compress(served, compresslevel=level)) < MAX_GZIPPED


def test_the_script_carries_every_language_from_the_catalogues() -> None:
    config = script_config("#7a4b2a", "", "GB")
    strings, keys = config["strings"], config["keys"]
    assert isinstance(strings, dict) and keys == list(STRINGS)
    assert set(strings) == set(i18n.LANGUAGES)
    for lang in i18n.LANGUAGES:
        # A list in the order of the keys, which are written once.
        assert strings[lang] == [i18n.text("widget", lang)(msgid) for msgid in STRINGS.values()]
    assert strings["de"][keys.index("open")] == "Benachrichtigen, wenn verfügbar"
    assert strings["en"][keys.index("open")] == "Notify me when available"


def test_the_shops_accent_and_consent_line_are_written_in() -> None:
    settings = replace(local_settings(), shop_accent="#0a5c36", widget_consent="Walnut & Wool texts only about this.")
    config = config_of(widget_source(settings))
    assert config["accent"] == "#0a5c36"
    assert config["consent"] == "Walnut & Wool texts only about this."
    assert config_of(widget_source(local_settings()))["consent"] == ""


@pytest.mark.parametrize(("region", "example"), [("GB", "+44 7400 123456"), ("DE", "+49 1512 3456789")])
def test_the_phone_hint_uses_the_default_regions_example_mobile(region: str, example: str) -> None:
    # libphonenumber's metadata example mobile numbers (PhoneNumberMetadata.xml, <mobile><exampleNumber>).
    assert phone_example(region) == example
    assert config_of(build("#1f2937", "", region, allowed=(region,)))["regions"] == [[region, example[1:3], example]]


def test_the_script_knows_every_country_we_text_the_shops_own_first() -> None:
    config = config_of(build("#1f2937", "", "DE", allowed=("AT", "DE")))
    # libphonenumber's calling codes and example mobiles (PhoneNumberMetadata.xml).
    assert config["regions"] == [["DE", "49", "+49 1512 3456789"], ["AT", "43", "+43 664 123456"]]
    # A shop whose own country is not among those it texts lists only those it texts.
    assert config_of(build("#1f2937", "", "GB", allowed=("IE",)))["regions"] == [["IE", "353", "+353 85 012 3456"]]


@pytest.mark.parametrize(
    ("tags", "lang", "regions"),
    [
        (["de", "de-AT", "en-GB"], "de", ("AT", "GB", "DE")),
        (["en"], "en", ()),  # English alone names no country
        (["nl_BE"], "nl", ("BE", "NL")),
        (["es-419", "zh-Hant-TW"], "es", ("TW", "ES")),  # a numeric region and a script are no country
    ],
)
def test_a_shoppers_countries_are_read_from_their_language_tags(
    tags: list[str], lang: str, regions: tuple[str, ...]
) -> None:
    assert home_regions(tags, lang) == regions


def test_the_script_is_built_once_per_process() -> None:
    settings = local_settings()
    assert widget_source(settings) is widget_source(settings)


def test_a_configuration_cannot_end_the_script_early() -> None:
    script = build("#1f2937", "</script><script>alert(1)</script>\u2028", "GB")
    assert "</script>" not in script
    assert "\u2028" not in script
    assert config_of(script)["consent"] == "</script><script>alert(1)</script>\u2028"


def test_the_source_keeps_its_placeholder_and_the_built_script_runs() -> None:
    assert "/*bisn-config*/" in WIDGET_PATH.read_text(encoding="utf-8")
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the browser tests run the script instead")
    script = build("#1f2937", "", "GB")
    # Parsing it as a function body is enough: the browser tests run it on real pages.
    subprocess.run(
        [node, "-e", "new Function(require('fs').readFileSync(0, 'utf8'))"], input=script, text=True, check=True
    )


def test_a_comment_after_code_is_refused_since_lines_are_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lines are joined after { ; and , so a comment ending a line of code would swallow the next line.
    source = WIDGET_PATH.read_text(encoding="utf-8").replace('"use strict";', '"use strict"; // strict')
    (tmp_path / "widget.js").write_text(source, encoding="utf-8")
    monkeypatch.setattr(widget, "WIDGET_PATH", tmp_path / "widget.js")
    with pytest.raises(RuntimeError, match="comment after code"):
        build("#1f2937", "", "GB")
