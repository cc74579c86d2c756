"""Settings fail fast: a stage that is missing something refuses to start."""

from __future__ import annotations

import pytest

from chalicelib.config import ConfigError, settings_from_env
from infra.stages import stage_env


def local() -> dict[str, str]:
    return {**stage_env("local"), "AWS_DEFAULT_REGION": "eu-west-2"}


def test_local_stage_settings_load() -> None:
    settings = settings_from_env(local())
    assert settings.table_name("requests") == "bisn-requests"
    assert settings.jobs_queue_name == "bisn-jobs"
    assert settings.default_phone_region == "GB"
    assert settings.rate_limit_per_minute == 20


@pytest.mark.parametrize(
    "name", ["STAGE", "NAME_PREFIX", "PUBLIC_BASE_URL", "SHOP_NAME", "ALERT_TOPIC_ARN", "SES_FROM"]
)
def test_a_missing_required_setting_fails_fast(name: str) -> None:
    env = local()
    env.pop(name)
    with pytest.raises(ConfigError, match=name):
        settings_from_env(env)


def test_a_secret_needs_a_value_or_a_secret_id() -> None:
    env = local()
    env.pop("TOKEN_KEY")
    with pytest.raises(ConfigError, match="TOKEN_KEY"):
        settings_from_env(env)
    env["TOKEN_KEY_SECRET_ID"] = "bisn/token-key"
    assert settings_from_env(env).secret_refs["TOKEN_KEY"] == "bisn/token-key"


@pytest.mark.parametrize(("name", "value"), [("RATE_LIMIT_PER_MINUTE", "lots"), ("RATE_LIMIT_PER_MINUTE", "0")])
def test_malformed_numbers_fail_fast(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        settings_from_env({**local(), name: value})


@pytest.mark.parametrize("stage", ["local", "dev", "prod"])
def test_every_stage_in_chalice_config_is_complete(stage: str) -> None:
    settings = settings_from_env({**stage_env(stage), "AWS_DEFAULT_REGION": "eu-west-2"})
    assert settings.stage == stage


def test_sms_two_way_is_off_unless_a_stage_says_so() -> None:
    assert settings_from_env(local()).sms_two_way is False
    assert settings_from_env({**local(), "SMS_TWO_WAY": "true"}).sms_two_way is True
    assert settings_from_env({**local(), "SMS_TWO_WAY": "false"}).sms_two_way is False
    with pytest.raises(ConfigError, match="SMS_TWO_WAY"):
        settings_from_env({**local(), "SMS_TWO_WAY": "maybe"})
