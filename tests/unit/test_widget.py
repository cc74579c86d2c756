"""The widget as served: the shop's look and every language's strings written in, and small enough to embed."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from dataclasses import replace

import pytest

from chalicelib import i18n
from chalicelib.config import Settings, settings_from_env
from chalicelib.widget import STRINGS, WIDGET_PATH, build, phone_example, script_config, widget_source
from infra.stages import stage_env
from tests.support import REGION

# "Under 10 KB gzipped including styles and all five languages' strings": a size guard, not a timing test.
MAX_GZIPPED = 10 * 1024


def local_settings() -> Settings:
    return settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": REGION})


def config_of(script: str) -> dict[str, object]:
    """The configuration object the served script carries."""
    found = re.search(r"var C=(\{.*?\});\n", script)
    assert found, "the served script has no configuration"
    return dict(json.loads(found.group(1)))


@pytest.mark.parametrize("level", [9, 6])
def test_the_served_script_stays_under_10_kb_gzipped(level: int) -> None:
    served = widget_source(local_settings()).encode()
    assert len(gzip.compress(served, compresslevel=level)) < MAX_GZIPPED


def test_the_script_carries_every_language_from_the_catalogues() -> None:
    strings = script_config("#7a4b2a", "", "GB")["strings"]
    assert isinstance(strings, dict)
    assert set(strings) == set(i18n.LANGUAGES)
    for lang in i18n.LANGUAGES:
        assert strings[lang] == {key: i18n.text("widget", lang)(msgid) for key, msgid in STRINGS.items()}
    assert strings["de"]["open"] == "Benachrichtigen, wenn verfügbar"
    assert strings["en"]["open"] == "Notify me when available"


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
    assert config_of(build("#1f2937", "", region))["example"] == example


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
