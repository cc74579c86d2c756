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


def test_the_shops_daily_ceiling_of_code_sms_has_a_default_and_is_validated() -> None:
    assert settings_from_env(local()).non_notice_sms_per_day == 200
    assert settings_from_env({**local(), "NON_NOTICE_SMS_PER_DAY": "50"}).non_notice_sms_per_day == 50
    for bad in ("0", "-1", "many", "1.5"):
        with pytest.raises(ConfigError, match="NON_NOTICE_SMS_PER_DAY"):
            settings_from_env({**local(), "NON_NOTICE_SMS_PER_DAY": bad})


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


def dev() -> dict[str, str]:
    return {**stage_env("dev"), "AWS_DEFAULT_REGION": "eu-west-2"}


def test_an_origination_number_is_an_e164_number() -> None:
    assert settings_from_env(dev()).sms_origination_number == ""
    settings = settings_from_env({**dev(), "SMS_ORIGINATION_NUMBER": " +447700900123 "})
    assert settings.sms_origination_number == "+447700900123"
    for bad in ("07700900123", "+44 7700 900123", "+0447700900123", "+4477009001234567", "arn:aws:sms-voice:x"):
        with pytest.raises(ConfigError, match="SMS_ORIGINATION_NUMBER"):
            settings_from_env({**dev(), "SMS_ORIGINATION_NUMBER": bad})


def test_a_deployed_stage_asks_for_replies_only_from_its_own_two_way_number() -> None:
    with pytest.raises(ConfigError, match="SMS_TWO_WAY=true needs SMS_ORIGINATION_NUMBER"):
        settings_from_env({**dev(), "SMS_TWO_WAY": "true"})
    two_way = settings_from_env({**dev(), "SMS_TWO_WAY": "true", "SMS_ORIGINATION_NUMBER": "+447700900123"})
    assert two_way.sms_two_way is True and two_way.sms_origination_number == "+447700900123"
    # The local stage runs on the emulator, where no reply comes back from any sender: the wording may be tried there.
    assert settings_from_env({**local(), "SMS_TWO_WAY": "true"}).sms_two_way is True


# --- PLATFORM and what each platform needs

SHOPIFY = {
    "PLATFORM": "shopify",
    "SHOPIFY_SHOP_DOMAIN": "walnut-and-wool.myshopify.com",
    "SHOPIFY_WEBHOOK_SECRET": "whsec",
    "SHOPIFY_ACCESS_TOKEN": "shpat_x",
}
WOOCOMMERCE = {
    "PLATFORM": "woocommerce",
    "WOOCOMMERCE_STORE_URL": "https://shop.example",
    "WOOCOMMERCE_WEBHOOK_SECRET": "whsec",
    "WOOCOMMERCE_CONSUMER_KEY": "ck_x",
    "WOOCOMMERCE_CONSUMER_SECRET": "cs_x",
}


def bare() -> dict[str, str]:
    """The local stage with no platform setting or platform secret of its own."""
    names = ("PLATFORM", "SHOPIFY_", "WOOCOMMERCE_")
    return {k: v for k, v in local().items() if not k.startswith(names)}


def test_the_platform_is_generic_unless_a_stage_says_otherwise() -> None:
    settings = settings_from_env(bare())
    assert (settings.platform, settings.shopify_shop_domain, settings.woocommerce_store_url) == ("generic", "", "")


@pytest.mark.parametrize("platform", ["magento", "shopify-plus", "generic "])
def test_an_unknown_platform_fails_fast(platform: str) -> None:
    env = {**bare(), "PLATFORM": platform}
    if platform.strip() == "generic":
        assert settings_from_env(env).platform == "generic"  # spaces and case are forgiven
        return
    with pytest.raises(ConfigError, match="PLATFORM must be"):
        settings_from_env(env)


def test_shopify_and_woocommerce_load_with_their_settings() -> None:
    shopify = settings_from_env({**bare(), **SHOPIFY, "SHOPIFY_LOCATION_IDS": " 70010001, 70010002 "})
    assert (shopify.platform, shopify.shopify_shop_domain) == ("shopify", "walnut-and-wool.myshopify.com")
    assert shopify.shopify_location_ids == ("70010001", "70010002")
    woo = settings_from_env({**bare(), **WOOCOMMERCE, "WOOCOMMERCE_STORE_URL": "https://shop.example/"})
    assert (woo.platform, woo.woocommerce_store_url) == ("woocommerce", "https://shop.example")


def test_a_platform_secret_may_be_a_secret_id() -> None:
    env = {**bare(), **SHOPIFY}
    env["SHOPIFY_ACCESS_TOKEN_SECRET_ID"] = "bisn/shopify-access-token"
    del env["SHOPIFY_ACCESS_TOKEN"]
    assert settings_from_env(env).secret_refs["SHOPIFY_ACCESS_TOKEN"] == "bisn/shopify-access-token"


@pytest.mark.parametrize(
    ("settings", "missing"),
    [
        (SHOPIFY, "SHOPIFY_WEBHOOK_SECRET"),
        (SHOPIFY, "SHOPIFY_ACCESS_TOKEN"),
        (SHOPIFY, "SHOPIFY_SHOP_DOMAIN"),
        (WOOCOMMERCE, "WOOCOMMERCE_WEBHOOK_SECRET"),
        (WOOCOMMERCE, "WOOCOMMERCE_CONSUMER_KEY"),
        (WOOCOMMERCE, "WOOCOMMERCE_CONSUMER_SECRET"),
        (WOOCOMMERCE, "WOOCOMMERCE_STORE_URL"),
    ],
)
def test_a_platform_without_its_secrets_or_its_shop_fails_fast(settings: dict[str, str], missing: str) -> None:
    env = {**bare(), **settings}
    del env[missing]
    with pytest.raises(ConfigError, match=missing):
        settings_from_env(env)


@pytest.mark.parametrize(
    ("secret", "shop"),
    [("SHOPIFY_WEBHOOK_SECRET", "SHOPIFY_SHOP_DOMAIN"), ("WOOCOMMERCE_WEBHOOK_SECRET", "WOOCOMMERCE_STORE_URL")],
)
def test_a_dialects_secret_on_the_generic_platform_needs_its_shop_too(secret: str, shop: str) -> None:
    with pytest.raises(ConfigError, match=shop):
        settings_from_env({**bare(), secret: "whsec"})


@pytest.mark.parametrize(
    "domain",
    [
        "walnut-and-wool.com",
        "https://walnut-and-wool.myshopify.com",
        "walnut-and-wool.myshopify.com/admin",
        "walnut_and_wool.myshopify.com",
        "-walnut.myshopify.com",
        "evil.com?.myshopify.com",
        "a.b.myshopify.com",
    ],
)
def test_a_shopify_domain_that_is_not_a_myshopify_domain_fails_fast(domain: str) -> None:
    with pytest.raises(ConfigError, match="SHOPIFY_SHOP_DOMAIN"):
        settings_from_env({**bare(), **SHOPIFY, "SHOPIFY_SHOP_DOMAIN": domain})


def test_a_shopify_domain_is_read_in_lower_case() -> None:
    env = {**bare(), **SHOPIFY, "SHOPIFY_SHOP_DOMAIN": " Walnut-And-Wool.MyShopify.com "}
    assert settings_from_env(env).shopify_shop_domain == "walnut-and-wool.myshopify.com"


@pytest.mark.parametrize("ids", ["70010001,workshop", "7001-0001", "-1", "1.5", "0x10", "\u00b2", "\u0661\u0662"])
def test_location_ids_that_are_not_numeric_fail_fast(ids: str) -> None:
    with pytest.raises(ConfigError, match="SHOPIFY_LOCATION_IDS"):
        settings_from_env({**bare(), **SHOPIFY, "SHOPIFY_LOCATION_IDS": ids})


@pytest.mark.parametrize(
    "url",
    [
        "http://shop.example",
        "http://10.0.0.5:8080",
        "ftp://shop.example",
        "shop.example",
        "https://",
        "file:///var/www",
    ],
)
def test_woocommerce_needs_an_https_store_url(url: str) -> None:
    with pytest.raises(ConfigError, match="WOOCOMMERCE_STORE_URL"):
        settings_from_env({**bare(), **WOOCOMMERCE, "WOOCOMMERCE_STORE_URL": url})


@pytest.mark.parametrize("url", ["http://127.0.0.1:8002", "http://localhost:8080/", "https://shop.example/wp"])
def test_plain_http_is_allowed_only_to_this_machine(url: str) -> None:
    settings = settings_from_env({**bare(), **WOOCOMMERCE, "WOOCOMMERCE_STORE_URL": url})
    assert settings.woocommerce_store_url == url.rstrip("/")


def test_the_local_stage_loads_with_every_dialect_enabled() -> None:
    from chalicelib.wiring import Services

    settings = settings_from_env(local())
    services = Services(settings)
    assert services.shopify is not None and services.woocommerce is not None
    assert services.shopify.shop_domain == settings.shopify_shop_domain
    assert settings.woocommerce_store_url


@pytest.mark.parametrize("origins", ["*", "https://shop.example,*", " * ", "https://*.shop.example"])
def test_a_wildcard_cors_origin_fails_fast(origins: str) -> None:
    # A wildcard would switch off the cross-site form guard, which takes the same list.
    with pytest.raises(ConfigError, match=r"CORS_ORIGINS .*never a wildcard"):
        settings_from_env({**local(), "CORS_ORIGINS": origins})
