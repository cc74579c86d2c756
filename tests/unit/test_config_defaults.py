"""Each setting's default is written once, in chalicelib/config.py's Settings, and every doc that names a default
says the same number."""

from __future__ import annotations

import re
from typing import Any

import pytest

from chalicelib.config import Settings, settings_from_env
from infra.stages import stage_env
from tests.support import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# "| `NAME` | ... (default 20) ..." in a settings table, or "`NAME` (default 400)" / "`NAME` (7)" in prose.
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]+)` \|[^|]*?\(default ([0-9][0-9,]*)[);]", re.M)
PROSE = re.compile(r"`([A-Z][A-Z0-9_]+)` \((?:default )?([0-9][0-9,]*)\)")


def stated_defaults() -> list[tuple[str, str, int]]:
    """(doc, setting, number) for every default a doc states for a setting of Settings."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for pattern in (ROW, PROSE):
            for name, number in pattern.findall(text):
                if name.lower() in Settings.__dataclass_fields__:
                    found.append((doc.name, name, int(number.replace(",", ""))))
    return sorted(set(found))


def built_without(name: str) -> Any:
    """The local stage's settings with `name` left unset, so its default applies."""
    env = {**stage_env("local"), "AWS_DEFAULT_REGION": "eu-west-2"}
    env.pop(name, None)
    return getattr(settings_from_env(env), name.lower())


def test_the_docs_state_the_defaults_of_the_limits_a_shop_tunes() -> None:
    named = {name for _, name, _ in stated_defaults()}
    assert {"PLACES_PER_NUMBER", "AUDIT_RETENTION_DAYS", "MAX_WAITING_PER_SKU", "EMAIL_CONFIRM_DAYS"} <= named


@pytest.mark.parametrize(("doc", "name", "number"), stated_defaults())
def test_a_default_a_doc_states_is_the_one_the_code_applies(doc: str, name: str, number: int) -> None:
    assert built_without(name) == number, f"{doc} says {name} defaults to {number}"
    field = Settings.__dataclass_fields__[name.lower()]
    assert field.default == number, f"Settings.{name.lower()} is where {name}'s default is written"
