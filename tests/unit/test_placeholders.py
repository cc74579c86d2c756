"""`make package STAGE=prod` refuses the sample settings the config ships with, naming each (infra/placeholders.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from infra.placeholders import find, main
from infra.stages import stage_env

ROOT = Path(__file__).resolve().parents[2]
# A stage a shop has filled in: its own names, real-looking secrets and domains.
READY = {
    "STAGE": "prod",
    "NAME_PREFIX": "bisn",
    "PUBLIC_BASE_URL": "https://notify.walnutandwool.co.uk",
    "SHOP_NAME": "Walnut & Wool",
    "CORS_ORIGINS": "https://www.walnutandwool.co.uk,https://walnutandwool.co.uk",
    "ALERT_TOPIC_ARN": "arn:aws:sns:eu-west-2:111122223333:bisn-alerts",  # set from the stack: never refused
    "SES_FROM": "Walnut & Wool <hello@walnutandwool.co.uk>",
    "BEDROCK_MODEL_ID": "global.anthropic.claude-haiku-4-5-20251001-v1:0",
    "WEBHOOK_SECRET_SECRET_ID": "bisn/webhook-secret",
    "TOKEN_KEY_SECRET_ID": "bisn/token-key",
    "CONTACT_HASH_KEY_SECRET_ID": "bisn/contact-hash-key",
    "CATALOG_URL": "https://www.walnutandwool.co.uk/bisn/catalog.json",
}


def test_a_filled_in_stage_has_no_placeholders() -> None:
    assert find(READY) == []


def test_the_shipped_prod_stage_names_each_sample_setting() -> None:
    found = {p.name: p.reason for p in find(stage_env("prod"))}
    assert sorted(found) == ["CATALOG_URL", "CORS_ORIGINS", "PUBLIC_BASE_URL", "SES_FROM", "SHOP_NAME"]
    assert found["SHOP_NAME"].startswith("the sample shop name")
    assert found["SES_FROM"] == "your-shop.example is a reserved example name"


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("SHOP_NAME", "your shop", "the sample shop name"),
        ("SHOP_NAME", " ", "the sample shop name"),
        ("CORS_ORIGINS", "https://www.walnutandwool.co.uk,https://shop.example.com", "shop.example.com is a reserved"),
        ("SES_FROM", "Shop <hi@example.org>", "example.org is a reserved"),
        ("CATALOG_URL", "https://feed.shop.test/catalog.json", "feed.shop.test is a reserved"),
        ("PUBLIC_BASE_URL", "https://api.shop.invalid", "api.shop.invalid is a reserved"),
        ("SMS_ORIGINATION_ARN", "arn:aws:sms-voice:eu-west-2:123456789012:pool/x", "account 123456789012 is an"),
        ("TOKEN_KEY_SECRET_ID", "", "empty: name the Secrets Manager secret"),
        ("TOKEN_KEY", "local-only-token-key-not-for-production", "the local stage's throwaway value"),
    ],
)
def test_each_kind_of_placeholder_is_named(name: str, value: str, reason: str) -> None:
    [found] = find({**READY, name: value})
    assert found.name == name and found.reason.startswith(reason)


def test_a_secret_with_neither_value_nor_secret_id_is_missing() -> None:
    env = {k: v for k, v in READY.items() if k != "CONTACT_HASH_KEY_SECRET_ID"}
    [found] = find(env)
    assert (found.name, found.reason) == ("CONTACT_HASH_KEY_SECRET_ID", "missing: name the Secrets Manager secret")


def test_a_domain_that_only_contains_a_reserved_word_is_not_one() -> None:
    env = {**READY, "CATALOG_URL": "https://example.walnutandwool.co.uk/test/feed.json", "SHOP_NAME": "Your Shoppe"}
    assert find(env) == []


def test_main_names_each_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stage", "prod"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("Stage 'prod' of .chalice/config.json still has 5 placeholder setting(s)")
    assert "  SHOP_NAME = 'Your Shop': the sample shop name; shoppers see it in every message" in err
    assert (
        "  PUBLIC_BASE_URL = 'https://notify.your-shop.example': notify.your-shop.example is a reserved example name"
        in err
    )


def test_allowed_settings_pass_and_are_said_to(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stage", "prod", "--allow", "PUBLIC_BASE_URL"]) == 1
    err = capsys.readouterr().err
    assert "Allowed for now: PUBLIC_BASE_URL" in err and "still has 4 placeholder" in err
    assert main(["--stage", "prod", "--allow", "PUBLIC_BASE_URL,SHOP_NAME,CORS_ORIGINS,SES_FROM,CATALOG_URL"]) == 0


def test_an_unknown_stage_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stage", "staging"]) == 1
    assert capsys.readouterr().err.startswith("infra.placeholders: no stage 'staging'")


def test_make_package_checks_every_stage_but_the_sample_dev_stage() -> None:
    # As from a shell that sets neither (make would take STAGE from the environment).
    env = {k: v for k, v in os.environ.items() if k not in ("STAGE", "ALLOW_PLACEHOLDERS", "MAKEFLAGS", "MFLAGS")}

    def commands(*args: str) -> str:
        done = subprocess.run(
            ["make", "-n", "package", *args], cwd=ROOT, capture_output=True, text=True, check=True, env=env
        )
        return done.stdout

    prod = commands("STAGE=prod", "ALLOW_PLACEHOLDERS=PUBLIC_BASE_URL")
    assert '-m infra.placeholders --stage prod --allow "PUBLIC_BASE_URL"' in prod
    assert prod.index("infra.placeholders") < prod.index("chalice package")  # refused before anything is built
    assert "infra.placeholders" not in commands()
