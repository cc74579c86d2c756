"""Settings for one stage, read once from environment variables set in .chalice/config.json."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlparse

from chalicelib.colours import DEFAULT_ACCENT, is_colour

# How long an offer waits for its shopper when the product names no window of its own (a catalogued product's
# default, chalicelib/tables/catalog.py DEFAULTS): written here, where the settings that must fit inside it are checked.
DEFAULT_OFFER_WINDOW_S = 3600

# Notifier invocations that may run at once: the `MaximumConcurrency` of its SQS trigger (app.py; SQS allows 2 to
# 1000). The account's send rates are shared out among them (chalicelib/messages/senders.py: `per_function_rate`).
NOTIFIER_MAX_CONCURRENCY = 2


class ConfigError(RuntimeError):
    """A required setting is missing or malformed; the function must not start half-configured."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the app reads from its environment, validated at first use. A field's default here is the
    setting's only default: settings_from_env applies it when the variable is unset."""

    stage: str
    name_prefix: str
    aws_region: str
    public_base_url: str
    shop_name: str
    default_phone_region: str
    cors_origins: tuple[str, ...]
    rate_limit_per_minute: int = 20  # taps per client address per minute
    request_ttl_days: int = 90  # how long a place waits untouched before it leaves the list
    unknown_sku_alert_threshold: int = 5
    unknown_sku_window_s: int = 3600
    alert_topic_arn: str
    ses_from: str
    copy_mode: str
    bedrock_model_id: str
    sends_concurrency: int = 16
    sms_per_second: float = 20.0
    email_per_second: float = 14.0
    # SMS pumping guards (README "Limits"): where and what kind of number SMS may go to, and the caps on taps.
    # Countries (ISO 3166 alpha-2) whose numbers may get SMS; the default is DEFAULT_PHONE_REGION alone.
    sms_allowed_countries: tuple[str, ...] = ()
    places_per_number: int = 20  # new SMS places one number may take (all SKUs) per REQUEST_TTL_DAYS
    taps_per_number_per_hour: int = 10
    taps_per_prefix_per_hour: int = 30  # a prefix is the E.164 number less its last 4 digits
    # SMS that are not restock notices (switch and re-subscribe codes) the whole shop sends per UTC day: codes are
    # bounded only by requests, notices by units in stock (chalicelib/messages/sms_caps.py).
    non_notice_sms_per_day: int = 200
    # New places an hour per email domain (a small one, and a big free-mail one) and per client address: one script
    # with many inboxes must not take a whole drop (chalicelib/place_caps.py).
    places_per_domain_per_hour: int = 30
    places_per_freemail_domain_per_hour: int = 3000
    places_per_source_per_hour: int = 30
    # The Cloudflare Turnstile site key of an optional human check on the tap (chalicelib/challenge.py); "" is off.
    turnstile_site_key: str = ""
    # Emails that are not restock notices (confirmations, re-subscribe emails, codes by email) a stranger can make
    # us send: per address per UTC day across every product, per client address an hour and a day, and shop-wide
    # per UTC day (chalicelib/messages/email_caps.py).
    emails_per_address_per_day: int = 5
    emails_per_source_per_hour: int = 20
    emails_per_source_per_day: int = 50
    non_notice_emails_per_day: int = 2000
    max_waiting_per_sku: int = 10_000  # places waiting on one SKU's list at once
    # The largest CSV the dashboard imports in one request (docs/IMPORT.md); a bigger file goes through `bisn import`.
    import_max_bytes: int = 262_144
    # Offers on one restock that may lapse unused with no sale in between before it stops re-offering its units.
    reoffer_lapse_limit: int = 20
    # One reminder before an unused offer lapses ("your unit goes to the next person in 10 minutes";
    # chalicelib/reminders.py): "off", "email" (email offers only) or "email+sms" (SMS offers too, each reminder
    # SMS billed as its segments). Sent LAPSE_REMINDER_MINUTES before the offer's end, and only for an offer whose
    # window is longer than that.
    lapse_reminder: str = "off"
    lapse_reminder_minutes: int = 10
    # Secrets: either the value itself (local stage) or the name of a Secrets Manager secret.
    secret_refs: Mapping[str, str] = field(default_factory=dict)
    secret_values: Mapping[str, str] = field(default_factory=dict)
    # Powertools EMF metrics: the CloudWatch namespace, and whether to write them at all (off locally and in tests).
    metrics_namespace: str = "BackInStock"
    metrics_enabled: bool = True
    # The `service` dimension of every metric (POWERTOOLS_SERVICE_NAME; the template sets it to the stack's
    # NamePrefix, the dimension its alarms watch). Also the `service` key of every log line.
    service_name: str = "bisn"
    # Where catalogue sync reads the store's product feed ('' = this stage has no feed).
    catalog_url: str = ""
    stock_feed_url: str = ""  # the generic platform's optional stock levels for the reconciliation (docs/PLATFORMS.md)
    # The SES configuration set every email is sent under; its event destination publishes bounces, complaints
    # and deliveries to the feedback queue ('' = send without one).
    ses_configuration_set: str = ""
    # Whether SMS go out from a two-way origination identity (an End User Messaging phone number or pool that
    # receives replies). Only then does an SMS say "Reply STOP"; otherwise its manage link is the opt-out.
    sms_two_way: bool = False
    # The number every SMS is sent from (E.164: an End User Messaging SMS phone number of this account and region),
    # passed to SNS Publish as AWS.MM.SMS.OriginationNumber ('' = SNS picks the route's sender).
    sms_origination_number: str = ""
    # The store the stage sells through (chalicelib/platforms): "generic" (our own webhooks, a JSON feed, holds in
    # our tables), "shopify" or "woocommerce" (their webhooks and catalogue, and holds placed on the store too).
    platform: str = "generic"
    shopify_shop_domain: str = ""  # e.g. walnut-and-wool.myshopify.com
    shopify_location_ids: tuple[str, ...] = ()  # the selling locations whose levels count ('' = every location)
    # A Dev Dashboard app's client id: with SHOPIFY_CLIENT_SECRET it obtains the Admin API token (client credentials
    # grant) instead of an admin-created app's SHOPIFY_ACCESS_TOKEN.
    shopify_client_id: str = ""
    woocommerce_store_url: str = ""  # the WordPress site's URL, e.g. https://shop.example
    # How long an audit fact is kept: each carries a `ttl` this many days after it was written, and DynamoDB's
    # TTL deletes it after that (infra/template.json).
    audit_retention_days: int = 400
    # Email double opt-in: a new email place is told about restocks only once its address confirms it (one
    # confirmation email per place), and goes after EMAIL_CONFIRM_DAYS unconfirmed.
    email_double_opt_in: bool = True
    email_confirm_days: int = 7
    # The dashboard's staff sign-in (docs/ADMIN.md): the Cognito user pool and its app client (no secret), both
    # from the template; '' = this stage has no dashboard (every /admin/api route answers 401). ADMIN_JWKS_URL
    # is where the pool's signing keys are read when not from the issuer itself (the local emulator's).
    admin_user_pool_id: str = ""
    admin_client_id: str = ""
    admin_jwks_url: str = ""
    # The shop's look on every page, email and widget a shopper sees (docs/SHOPPER.md): its home page (the
    # "back to the shop" link), its logo (an https image), its accent colour (#rrggbb), and the consent line the
    # widget shows under its button ('' = the built-in line in the shopper's language).
    shop_url: str = ""
    shop_logo_url: str = ""
    shop_accent: str = DEFAULT_ACCENT
    widget_consent: str = ""
    # Events out (docs/EVENTS.md): which events go to the shop's own platform ('' = none), which fields their
    # payloads carry, and the Standard Webhooks receiver they are posted to ('' = no webhook; Klaviyo is the
    # other destination, on when KLAVIYO_API_KEY is set).
    outbound_events: tuple[str, ...] = ()
    outbound_event_fields: tuple[str, ...] = ("sku",)
    outbound_webhook_url: str = ""

    def table_name(self, short: str) -> str:
        """Full name of a table from infra/template.json, e.g. 'catalog' -> 'bisn-catalog'."""
        return f"{self.name_prefix}-{short}"

    @property
    def jobs_queue_name(self) -> str:
        """Name of the notifier's job queue."""
        return f"{self.name_prefix}-jobs"

    @property
    def dlq_name(self) -> str:
        """Name of the job queue's dead-letter queue."""
        return f"{self.name_prefix}-jobs-dlq"

    @property
    def feedback_queue_name(self) -> str:
        """Name of the queue SES's bounce, complaint and delivery events arrive on (through SNS)."""
        return f"{self.name_prefix}-ses-feedback"

    @property
    def events_queue_name(self) -> str:
        """Name of the queue outbound events wait on for delivery."""
        return f"{self.name_prefix}-events"

    @property
    def events_dlq_name(self) -> str:
        """Name of the events queue's dead-letter queue."""
        return f"{self.name_prefix}-events-dlq"

    @property
    def outbound_destinations(self) -> tuple[str, ...]:
        """Where each outbound event goes: "webhook" and/or "klaviyo" (none when no event is chosen)."""
        if not self.outbound_events:
            return ()
        webhook = ("webhook",) if self.outbound_webhook_url else ()
        keyed = "KLAVIYO_API_KEY" in self.secret_values or "KLAVIYO_API_KEY" in self.secret_refs
        klaviyo = ("klaviyo",) if keyed else ()
        return webhook + klaviyo


SECRETS = ("WEBHOOK_SECRET", "TOKEN_KEY", "CONTACT_HASH_KEY")
# Secrets a stage may leave out: the catalogue feed's bearer token (a public feed needs none), and each platform's
# credentials (a webhook dialect is accepted only where its secret is set; PLATFORM's store needs its API keys).
OPTIONAL_SECRETS = (
    "CATALOG_TOKEN",
    "SHOPIFY_WEBHOOK_SECRET",
    "SHOPIFY_ACCESS_TOKEN",
    "SHOPIFY_CLIENT_SECRET",
    "WOOCOMMERCE_WEBHOOK_SECRET",
    "WOOCOMMERCE_CONSUMER_KEY",
    "WOOCOMMERCE_CONSUMER_SECRET",
    "TURNSTILE_SECRET",
    "OUTBOUND_WEBHOOK_SECRET",
    "KLAVIYO_API_KEY",
)
PLATFORM_NEEDS = {
    "generic": (),
    "shopify": ("SHOPIFY_WEBHOOK_SECRET",),  # and an Admin API credential: _shopify_client_id
    "woocommerce": ("WOOCOMMERCE_WEBHOOK_SECRET", "WOOCOMMERCE_CONSUMER_KEY", "WOOCOMMERCE_CONSUMER_SECRET"),
}
SHOPIFY_DOMAIN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}\.myshopify\.com$")
LOCATION_ID = re.compile(r"[0-9]{1,20}")
E164 = re.compile(r"\+[1-9][0-9]{4,14}")  # a plus, the country code and at most 15 digits in all (ITU-T E.164)
LOCAL_STAGE = "local"  # runs on the emulator only, where no reply can come back anyway


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"environment variable {name} is required (set it per stage in .chalice/config.json)")
    return value


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from exc
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


COUNTRY = re.compile(r"^[A-Z]{2}$")


def _countries(env: Mapping[str, str], default_region: str) -> tuple[str, ...]:
    """SMS_ALLOWED_COUNTRIES: ISO 3166 alpha-2 codes separated by commas (default: DEFAULT_PHONE_REGION)."""
    raw = env.get("SMS_ALLOWED_COUNTRIES", "").strip()
    countries = tuple(dict.fromkeys(c.strip().upper() for c in raw.split(",") if c.strip())) or (default_region,)
    bad = [c for c in countries if not COUNTRY.match(c)]
    if bad:
        raise ConfigError(f"SMS_ALLOWED_COUNTRIES must be two-letter country codes (e.g. GB,IE), got {bad!r}")
    return countries


def _cors_origins(env: Mapping[str, str]) -> tuple[str, ...]:
    """CORS_ORIGINS: the storefront origins, comma-separated; a wildcard is refused."""
    origins = tuple(o.strip().rstrip("/") for o in env.get("CORS_ORIGINS", "").split(",") if o.strip())
    wild = [o for o in origins if "*" in o]
    if wild:
        # A wildcard would let any site's page preflight JSON taps and post form taps (the cross-site form guard
        # takes the same list), so every visitor of a hostile page could be made to tap for numbers it chose.
        raise ConfigError(
            f"CORS_ORIGINS must name each storefront origin (https://shop.example), never a wildcard; got {wild[0]!r}"
        )
    return origins


def _public_url(env: Mapping[str, str], name: str) -> str:
    """A URL shoppers' browsers and mail clients open: https://, or http:// to this machine (the local stack)."""
    url = env.get(name, "").strip()
    if not url:
        return ""
    parsed = urlparse(url)
    local = parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost", "::1")
    if not parsed.netloc or not (parsed.scheme == "https" or local) or any(c in url for c in "\"'<> "):
        raise ConfigError(f"{name} must be an https:// URL (http:// only to this machine), got {url!r}")
    return url


def _accent(env: Mapping[str, str]) -> str:
    value = env.get("SHOP_ACCENT", "").strip() or DEFAULT_ACCENT
    if not is_colour(value):
        raise ConfigError(f"SHOP_ACCENT must be a colour written #rrggbb, got {value!r}")
    return value.lower()


def _catalog_url(env: Mapping[str, str], name: str = "CATALOG_URL") -> str:
    """CATALOG_URL (or STOCK_FEED_URL, fetched the same way with the same token): https:// anywhere, http:// only to
    this machine, file: only in the local stage."""
    url = env.get(name, "").strip()
    if not url:
        return ""
    parsed = urlparse(url)
    if parsed.scheme == "https" and parsed.netloc:
        return url
    # The bearer token must never cross a network in clear, and a deployed function has no local files.
    if parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost", "::1"):
        return url
    if parsed.scheme == "file" and env.get("STAGE", "").strip() == "local":
        return url
    raise ConfigError(
        f"{name} must be an https:// URL (http:// only to this machine, file: only in the local stage), got {url!r}"
    )


def _platform(env: Mapping[str, str], configured: set[str]) -> tuple[str, str, tuple[str, ...], str]:
    """PLATFORM and what it needs: (platform, Shopify shop domain, Shopify locations, WooCommerce store URL)."""
    platform = env.get("PLATFORM", "").strip().lower() or "generic"
    if platform not in PLATFORM_NEEDS:
        raise ConfigError(f"PLATFORM must be generic, shopify or woocommerce, got {platform!r}")
    missing = [name for name in PLATFORM_NEEDS[platform] if name not in configured]
    if missing:
        raise ConfigError(f"PLATFORM={platform} needs {', '.join(missing)} (or their _SECRET_ID)")
    domain = env.get("SHOPIFY_SHOP_DOMAIN", "").strip().lower()
    if domain and not SHOPIFY_DOMAIN.match(domain):
        raise ConfigError(f"SHOPIFY_SHOP_DOMAIN must be the shop's <name>.myshopify.com domain, got {domain!r}")
    if not domain and (platform == "shopify" or "SHOPIFY_WEBHOOK_SECRET" in configured):
        raise ConfigError("SHOPIFY_SHOP_DOMAIN is required with Shopify (its <name>.myshopify.com domain)")
    locations = tuple(part.strip() for part in env.get("SHOPIFY_LOCATION_IDS", "").split(",") if part.strip())
    # ASCII digits only: str.isdigit() also takes "²" or "١٢", which no webhook's location id would ever match.
    if any(not LOCATION_ID.fullmatch(part) for part in locations):
        raise ConfigError("SHOPIFY_LOCATION_IDS must be numeric Shopify location ids, separated by commas")
    store_url = env.get("WOOCOMMERCE_STORE_URL", "").strip().rstrip("/")
    if store_url:
        parsed = urlparse(store_url)
        local = parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost", "::1")
        # The consumer key and secret travel as HTTP Basic credentials: never over a network in clear.
        if not (parsed.scheme == "https" and parsed.netloc) and not local:
            raise ConfigError(f"WOOCOMMERCE_STORE_URL must be an https:// URL, got {store_url!r}")
    elif platform == "woocommerce" or "WOOCOMMERCE_WEBHOOK_SECRET" in configured:
        raise ConfigError("WOOCOMMERCE_STORE_URL is required with WooCommerce (the WordPress site's https:// URL)")
    return platform, domain, locations, store_url


SHOPIFY_CLIENT_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


def _shopify_client_id(env: Mapping[str, str], platform: str, configured: set[str]) -> str:
    """SHOPIFY_CLIENT_ID (with the SHOPIFY_CLIENT_SECRET secret), or the SHOPIFY_ACCESS_TOKEN secret: one of the two."""
    client_id = env.get("SHOPIFY_CLIENT_ID", "").strip()
    if client_id and not SHOPIFY_CLIENT_ID.match(client_id):
        raise ConfigError(f"SHOPIFY_CLIENT_ID must be the app's client id from the Dev Dashboard, got {client_id!r}")
    if bool(client_id) != ("SHOPIFY_CLIENT_SECRET" in configured):
        raise ConfigError("set both SHOPIFY_CLIENT_ID and SHOPIFY_CLIENT_SECRET (or its _SECRET_ID), or neither")
    static = "SHOPIFY_ACCESS_TOKEN" in configured
    if platform == "shopify" and not client_id and not static:
        raise ConfigError(
            "PLATFORM=shopify needs SHOPIFY_CLIENT_ID and SHOPIFY_CLIENT_SECRET (a Dev Dashboard app) or "
            "SHOPIFY_ACCESS_TOKEN (an admin-created app), or their _SECRET_ID"
        )
    if client_id and static:
        # Two credentials for one shop would leave it unclear which app's scopes a call runs with.
        raise ConfigError("set SHOPIFY_CLIENT_ID and SHOPIFY_CLIENT_SECRET or SHOPIFY_ACCESS_TOKEN, not both")
    return client_id


def _origination(env: Mapping[str, str]) -> str:
    number = env.get("SMS_ORIGINATION_NUMBER", "").strip()
    if number and not E164.fullmatch(number):
        raise ConfigError(f"SMS_ORIGINATION_NUMBER must be an E.164 number such as +447700900123, got {number!r}")
    return number


def _two_way(env: Mapping[str, str]) -> bool:
    """SMS_TWO_WAY; a deployed stage may ask for replies only from a number of its own that can receive them."""
    two_way = _bool(env, "SMS_TWO_WAY", False)
    deployed = env.get("STAGE", "").strip() != LOCAL_STAGE
    if two_way and deployed and not env.get("SMS_ORIGINATION_NUMBER", "").strip():
        raise ConfigError(
            "SMS_TWO_WAY=true needs SMS_ORIGINATION_NUMBER, the two-way number SMS go out from: a reply to a shared "
            "sender ID reaches nobody, so 'Reply STOP' would be a promise nobody keeps (docs/DEPLOY.md, step 5)"
        )
    return two_way


POOL_ID = re.compile(r"^[\w-]+_[0-9a-zA-Z]+$")
CLIENT_ID = re.compile(r"^[\w+]+$")


def _admin(env: Mapping[str, str], region: str) -> dict[str, str]:
    """ADMIN_USER_POOL_ID and ADMIN_CLIENT_ID (both or neither), and ADMIN_JWKS_URL (the local stage only)."""
    pool = env.get("ADMIN_USER_POOL_ID", "").strip()
    client = env.get("ADMIN_CLIENT_ID", "").strip()
    jwks = env.get("ADMIN_JWKS_URL", "").strip()
    if bool(pool) != bool(client):
        raise ConfigError("set both ADMIN_USER_POOL_ID and ADMIN_CLIENT_ID, or neither (no dashboard)")
    # Cognito pool ids are "<region>_<id>" (botocore's UserPoolIdType pattern); tokens name that region.
    if pool and (not POOL_ID.match(pool) or not pool.startswith(f"{region}_")):
        raise ConfigError(f"ADMIN_USER_POOL_ID must be a user pool id of {region}, like {region}_AbC123, got {pool!r}")
    if client and not CLIENT_ID.match(client):
        raise ConfigError(f"ADMIN_CLIENT_ID must be an app client id, got {client!r}")
    if jwks and env.get("STAGE", "").strip() != "local":
        raise ConfigError("ADMIN_JWKS_URL is for the local stage only: a deployed stage reads the pool's own keys")
    return {"admin_user_pool_id": pool, "admin_client_id": client, "admin_jwks_url": jwks}


def _turnstile(env: Mapping[str, str], secrets: set[str]) -> str:
    """TURNSTILE_SITE_KEY, with the TURNSTILE_SECRET secret it is verified with; "" (no human check) by default."""
    site_key = env.get("TURNSTILE_SITE_KEY", "").strip()
    if site_key and "TURNSTILE_SECRET" not in secrets:
        raise ConfigError("TURNSTILE_SITE_KEY needs TURNSTILE_SECRET (or TURNSTILE_SECRET_SECRET_ID) to verify with")
    if site_key and not re.fullmatch(r"[0-9A-Za-z_-]{1,100}", site_key):
        raise ConfigError("TURNSTILE_SITE_KEY must be a Turnstile site key such as 0x4AAAAAAA...")
    return site_key


LAPSE_REMINDERS = {"off": (), "email": ("email",), "email+sms": ("email", "sms")}


def _lapse_reminder(env: Mapping[str, str]) -> str:
    """LAPSE_REMINDER: off, email or email+sms."""
    mode = env.get("LAPSE_REMINDER", "").strip().lower() or Settings.lapse_reminder
    if mode not in LAPSE_REMINDERS:
        raise ConfigError(f"LAPSE_REMINDER must be off, email or email+sms, got {mode!r}")
    return mode


def _lapse_reminder_minutes(env: Mapping[str, str]) -> int:
    """LAPSE_REMINDER_MINUTES, which must leave the reminder inside a product's default offer window (a product
    with a shorter window gets no reminder: chalicelib/reminders.py)."""
    minutes = _int(env, "LAPSE_REMINDER_MINUTES", Settings.lapse_reminder_minutes, minimum=1)
    window_minutes = DEFAULT_OFFER_WINDOW_S // 60
    if minutes >= window_minutes:
        raise ConfigError(
            f"LAPSE_REMINDER_MINUTES must be less than the default offer window ({window_minutes} minutes), "
            f"got {minutes}"
        )
    return minutes


def _names(env: Mapping[str, str], name: str, allowed: tuple[str, ...], default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list of names, each one of `allowed`; `default` when unset."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    names = tuple(dict.fromkeys(part.strip().lower() for part in raw.split(",") if part.strip()))
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise ConfigError(f"{name} takes {', '.join(allowed)}; got {unknown[0]!r}")
    return names


def _outbound(env: Mapping[str, str], secrets: set[str]) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """OUTBOUND_EVENTS, OUTBOUND_EVENT_FIELDS and OUTBOUND_WEBHOOK_URL (docs/EVENTS.md), checked together."""
    from chalicelib.events_out import EVENT_TYPES, FIELDS

    events = _names(env, "OUTBOUND_EVENTS", EVENT_TYPES, Settings.outbound_events)
    fields = _names(env, "OUTBOUND_EVENT_FIELDS", FIELDS, Settings.outbound_event_fields)
    url = env.get("OUTBOUND_WEBHOOK_URL", "").strip()
    if url:
        parsed = urlparse(url)
        local = parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost", "::1")
        # The payloads may carry contacts: never across a network in clear.
        if not (parsed.scheme == "https" and parsed.netloc) and not local:
            raise ConfigError(f"OUTBOUND_WEBHOOK_URL must be an https:// URL, got {url!r}")
        if "OUTBOUND_WEBHOOK_SECRET" not in secrets:
            raise ConfigError("OUTBOUND_WEBHOOK_URL needs OUTBOUND_WEBHOOK_SECRET (or its _SECRET_ID) to sign with")
    klaviyo = "KLAVIYO_API_KEY" in secrets
    if events and not url and not klaviyo:
        raise ConfigError("OUTBOUND_EVENTS needs OUTBOUND_WEBHOOK_URL or KLAVIYO_API_KEY: somewhere to send them")
    if events and klaviyo and "contact" not in fields:
        # A Klaviyo event belongs to a profile, which is found by email or phone number.
        raise ConfigError("KLAVIYO_API_KEY needs contact in OUTBOUND_EVENT_FIELDS: Klaviyo events name a profile")
    return events, fields, url


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """Build Settings from a mapping of environment variables, failing fast on anything missing. A setting with a
    default in `Settings` takes it from there, so each default is written once (and docs say the same number:
    tests/unit/test_config_defaults.py)."""
    refs: dict[str, str] = {}
    values: dict[str, str] = {}
    for name in SECRETS:
        if env.get(name):
            values[name] = env[name]
        elif env.get(f"{name}_SECRET_ID"):
            refs[name] = env[f"{name}_SECRET_ID"]
        else:
            raise ConfigError(f"set {name} (local stage) or {name}_SECRET_ID (a Secrets Manager secret)")
    for name in OPTIONAL_SECRETS:
        if env.get(name):
            values[name] = env[name]
        elif env.get(f"{name}_SECRET_ID"):
            refs[name] = env[f"{name}_SECRET_ID"]
    platform, shop_domain, locations, store_url = _platform(env, set(values) | set(refs))
    copy_mode = env.get("COPY_MODE", "bedrock").strip() or "bedrock"
    if copy_mode not in ("bedrock", "fake", "template"):
        raise ConfigError(f"COPY_MODE must be bedrock, fake or template, got {copy_mode!r}")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or ""
    if not region:
        raise ConfigError("AWS_REGION is required")
    phone_region = _required(env, "DEFAULT_PHONE_REGION").upper()
    outbound = _outbound(env, set(values) | set(refs))
    return Settings(
        stage=_required(env, "STAGE"),
        name_prefix=_required(env, "NAME_PREFIX"),
        aws_region=region,
        public_base_url=_required(env, "PUBLIC_BASE_URL").rstrip("/"),
        shop_name=_required(env, "SHOP_NAME"),
        default_phone_region=phone_region,
        cors_origins=_cors_origins(env),
        rate_limit_per_minute=_int(env, "RATE_LIMIT_PER_MINUTE", Settings.rate_limit_per_minute, minimum=1),
        request_ttl_days=_int(env, "REQUEST_TTL_DAYS", Settings.request_ttl_days, minimum=1),
        audit_retention_days=_int(env, "AUDIT_RETENTION_DAYS", Settings.audit_retention_days, minimum=1),
        unknown_sku_alert_threshold=_int(
            env, "UNKNOWN_SKU_ALERT_THRESHOLD", Settings.unknown_sku_alert_threshold, minimum=1
        ),
        unknown_sku_window_s=_int(env, "UNKNOWN_SKU_WINDOW_S", Settings.unknown_sku_window_s, minimum=60),
        alert_topic_arn=_required(env, "ALERT_TOPIC_ARN"),
        ses_from=_required(env, "SES_FROM"),
        copy_mode=copy_mode,
        bedrock_model_id=env.get("BEDROCK_MODEL_ID", "global.anthropic.claude-haiku-4-5-20251001-v1:0"),
        sends_concurrency=_int(env, "SENDS_CONCURRENCY", Settings.sends_concurrency, minimum=1),
        sms_per_second=_float(env, "SMS_PER_SECOND", Settings.sms_per_second),
        email_per_second=_float(env, "EMAIL_PER_SECOND", Settings.email_per_second),
        sms_allowed_countries=_countries(env, phone_region),
        places_per_number=_int(env, "PLACES_PER_NUMBER", Settings.places_per_number, minimum=1),
        taps_per_number_per_hour=_int(env, "TAPS_PER_NUMBER_PER_HOUR", Settings.taps_per_number_per_hour, minimum=1),
        taps_per_prefix_per_hour=_int(env, "TAPS_PER_PREFIX_PER_HOUR", Settings.taps_per_prefix_per_hour, minimum=1),
        non_notice_sms_per_day=_int(env, "NON_NOTICE_SMS_PER_DAY", Settings.non_notice_sms_per_day, minimum=1),
        places_per_domain_per_hour=_int(
            env, "PLACES_PER_DOMAIN_PER_HOUR", Settings.places_per_domain_per_hour, minimum=1
        ),
        places_per_freemail_domain_per_hour=_int(
            env, "PLACES_PER_FREEMAIL_DOMAIN_PER_HOUR", Settings.places_per_freemail_domain_per_hour, minimum=1
        ),
        places_per_source_per_hour=_int(
            env, "PLACES_PER_SOURCE_PER_HOUR", Settings.places_per_source_per_hour, minimum=1
        ),
        turnstile_site_key=_turnstile(env, set(values) | set(refs)),
        emails_per_address_per_day=_int(
            env, "EMAILS_PER_ADDRESS_PER_DAY", Settings.emails_per_address_per_day, minimum=1
        ),
        emails_per_source_per_hour=_int(
            env, "EMAILS_PER_SOURCE_PER_HOUR", Settings.emails_per_source_per_hour, minimum=1
        ),
        emails_per_source_per_day=_int(env, "EMAILS_PER_SOURCE_PER_DAY", Settings.emails_per_source_per_day, minimum=1),
        non_notice_emails_per_day=_int(env, "NON_NOTICE_EMAILS_PER_DAY", Settings.non_notice_emails_per_day, minimum=1),
        max_waiting_per_sku=_int(env, "MAX_WAITING_PER_SKU", Settings.max_waiting_per_sku, minimum=1),
        import_max_bytes=_int(env, "IMPORT_MAX_BYTES", Settings.import_max_bytes, minimum=1024),
        reoffer_lapse_limit=_int(env, "REOFFER_LAPSE_LIMIT", Settings.reoffer_lapse_limit, minimum=1),
        lapse_reminder=_lapse_reminder(env),
        lapse_reminder_minutes=_lapse_reminder_minutes(env),
        secret_refs=refs,
        secret_values=values,
        catalog_url=_catalog_url(env),
        stock_feed_url=_catalog_url(env, "STOCK_FEED_URL"),
        ses_configuration_set=env.get("SES_CONFIGURATION_SET", "").strip(),
        sms_two_way=_two_way(env),
        sms_origination_number=_origination(env),
        platform=platform,
        shopify_shop_domain=shop_domain,
        shopify_location_ids=locations,
        shopify_client_id=_shopify_client_id(env, platform, set(values) | set(refs)),
        woocommerce_store_url=store_url,
        email_double_opt_in=_bool(env, "EMAIL_DOUBLE_OPT_IN", Settings.email_double_opt_in),
        email_confirm_days=_int(env, "EMAIL_CONFIRM_DAYS", Settings.email_confirm_days, minimum=1),
        **_admin(env, region),
        shop_url=_public_url(env, "SHOP_URL"),
        shop_logo_url=_public_url(env, "SHOP_LOGO_URL"),
        shop_accent=_accent(env),
        widget_consent=" ".join(env.get("WIDGET_CONSENT", "").split())[:300],
        outbound_events=outbound[0],
        outbound_event_fields=outbound[1],
        outbound_webhook_url=outbound[2],
        metrics_namespace=env.get("POWERTOOLS_METRICS_NAMESPACE", "").strip() or Settings.metrics_namespace,
        metrics_enabled=env.get("POWERTOOLS_METRICS_DISABLED", "").strip().lower() not in ("1", "true", "yes"),
        service_name=env.get("POWERTOOLS_SERVICE_NAME", "").strip() or _required(env, "NAME_PREFIX"),
    )


@lru_cache(maxsize=1)
def load_settings() -> Settings:
    """Settings of the running stage, read once per process."""
    return settings_from_env(os.environ)
