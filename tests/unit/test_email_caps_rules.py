"""The pure rules of the email caps (chalicelib/messages/email_caps.py): which counters an email is charged to, their
windows, and the refusal each cap answers with."""

from __future__ import annotations

import pytest

from chalicelib.config import ConfigError, settings_from_env
from chalicelib.messages.email_caps import ADDRESS, CEILING, SOURCE_DAY, SOURCE_HOUR, email_caps, refusal
from chalicelib.web.errors import error_status
from tests.unit.test_config import local

KEY = "k" * 32
NOON = 20_000 * 86400 + 12 * 3600 + 30  # 12:00:30 UTC on some day


def test_counters_name_keyed_hashes_never_the_address_or_the_client() -> None:
    caps = email_caps("ada@example.com", KEY, NOON, "iphash")
    keys = (caps.address_key, caps.source_hour_key, caps.source_day_key, caps.ceiling_key)
    assert not any("ada" in str(k) or "example" in str(k) for k in keys)
    assert caps.address_key != email_caps("bob@example.com", KEY, NOON).address_key
    assert caps.address_key != email_caps("ada@example.com", "other-key", NOON).address_key


def test_the_address_counter_spans_the_utc_day_across_every_product_and_client() -> None:
    morning = email_caps("ada@example.com", KEY, NOON - 11 * 3600, "one")
    evening = email_caps("ada@example.com", KEY, NOON + 11 * 3600, "two")
    assert morning.address_key == evening.address_key
    assert morning.ceiling_key == evening.ceiling_key
    assert morning.source_hour_key != evening.source_hour_key
    tomorrow = email_caps("ada@example.com", KEY, NOON + 12 * 3600, "one")
    assert tomorrow.address_key != morning.address_key and tomorrow.ceiling_key != morning.ceiling_key


def test_counters_expire_after_their_window_so_the_table_does_not_grow() -> None:
    caps = email_caps("ada@example.com", KEY, NOON, "ip")
    assert NOON < caps.hour_expires <= NOON + 3600 + 60
    assert NOON < caps.day_expires <= NOON + 86400 + 3600
    assert (caps.to_hour_end, caps.to_midnight) == (3600 - 30, 12 * 3600 - 30)


def test_without_a_client_address_only_the_address_and_shop_counters_apply() -> None:
    caps = email_caps("ada@example.com", KEY, NOON)
    assert caps.source_hour_key is None and caps.source_day_key is None


@pytest.mark.parametrize(
    ("cap", "code", "wait"),
    [
        (ADDRESS, "address_email_limit", 12 * 3600 - 30),
        (SOURCE_HOUR, "source_email_limit", 3600 - 30),
        (SOURCE_DAY, "source_email_limit", 12 * 3600 - 30),
        (CEILING, "email_daily_limit", 12 * 3600 - 30),
    ],
)
def test_each_cap_refuses_with_a_429_naming_it_and_when_to_try_again(cap: str, code: str, wait: int) -> None:
    refused = refusal(cap, email_caps("ada@example.com", KEY, NOON, "ip"))
    assert (error_status(refused), refused.code, refused.retry_after_s) == (429, code, wait)
    assert "ada" not in refused.message


def test_the_email_caps_have_defaults_and_are_validated() -> None:
    settings = settings_from_env(local())
    assert (
        settings.emails_per_address_per_day,
        settings.emails_per_source_per_hour,
        settings.emails_per_source_per_day,
        settings.non_notice_emails_per_day,
    ) == (5, 20, 50, 2000)
    assert settings_from_env({**local(), "EMAILS_PER_ADDRESS_PER_DAY": "2"}).emails_per_address_per_day == 2
    for name in (
        "EMAILS_PER_ADDRESS_PER_DAY",
        "EMAILS_PER_SOURCE_PER_HOUR",
        "EMAILS_PER_SOURCE_PER_DAY",
        "NON_NOTICE_EMAILS_PER_DAY",
    ):
        for bad in ("0", "many"):
            with pytest.raises(ConfigError, match=name):
                settings_from_env({**local(), name: bad})
