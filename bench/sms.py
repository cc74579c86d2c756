"""SMS segments per notice, measured on the composed messages themselves (no emulator needed).

Each notice is composed as the notifier composes it (chalicelib/notifier.py: the restock's copy, then
`compose_sms` with the recipient's own short links: the offer row's random id and the person's random manage id,
chalicelib/link_ids.py), for the demo catalogue's longest product name and a
typical one (the median length), with links as long as a deployed stage's at their longest (an API Gateway
stage's default endpoint, which a stage without a custom domain uses as `PUBLIC_BASE_URL`, and real id lengths), the copy from both sources the notifier may use: the template, and
the local stage's stand-in for the model, in every language shoppers are served in (each folded to GSM-7 as sent).
A segment is billed whatever it holds, so the month's SMS cost (bench/cost.py) is priced per segment from the
largest count over all languages, with the stage's opt-out line (`SMS_TWO_WAY`).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.stack import bench_env
from chalicelib.config import Settings, settings_from_env
from chalicelib.i18n import DEFAULT_LANGUAGE, LANGUAGES
from chalicelib.link_ids import new_link_id
from chalicelib.links import Links
from chalicelib.messages.compose import compose_reminder_sms, compose_sms, facts_for, window_words
from chalicelib.messages.copywriter import Copywriter
from chalicelib.messages.sms import is_gsm, septets, sms_segments
from chalicelib.metrics import Metrics
from chalicelib.tables.catalog import Product
from chalicelib.tables.restocks import RestocksTable
from chalicelib.tokens import Tokens
from devstack.fake_model import FakeBedrock
from infra.stages import stage_env

DEMO_CATALOG = Path(__file__).resolve().parent.parent / "devstack" / "demo-catalog.json"
DEPLOYED_STAGE = "prod"
# https://{restapi-id}.execute-api.{region}.amazonaws.com/{stage}: restapi ids are 10 characters; the region is
# DEPLOY_REGION (infra/policies.py) and the stage Chalice's "api". Longer than the prod stage's custom domain.
GATEWAY_BASE_URL = "https://abcdefghij.execute-api.eu-west-2.amazonaws.com/api"


def demo_products() -> dict[str, Product]:
    """The demo catalogue's longest product name and a typical one (the median length)."""
    products = [Product.from_item(p) for p in json.loads(DEMO_CATALOG.read_text())["products"]]
    by_length = sorted(products, key=lambda p: (len(p.name), p.sku))
    return {"longest": by_length[-1], "typical": by_length[(len(by_length) - 1) // 2]}


def measured_settings(**overrides: str) -> Settings:
    """The local stage (the demo shop) with a deployed stage's longest public base URL (the prod stage's own, or an
    API Gateway default endpoint, whichever is longer), so links are as long as live ones can be."""
    base_url = max(stage_env(DEPLOYED_STAGE)["PUBLIC_BASE_URL"], GATEWAY_BASE_URL, key=len)
    return settings_from_env(bench_env("local", PUBLIC_BASE_URL=base_url, **overrides))


def composed_sms(settings: Settings, product: Product, *, model: bool, lang: str = DEFAULT_LANGUAGE) -> str:
    """One recipient's SMS for a restock of `product`, in their language, composed as the notifier composes it."""
    links = Links(settings.public_base_url, Tokens(secrets.token_urlsafe(48)))
    writer = Copywriter(
        settings=settings, restocks=RestocksTable(None), links=links, bedrock=FakeBedrock() if model else None
    )
    every = writer.facts(product)
    facts = every[lang]
    copy = writer.write(every, Metrics("Bench", "bench", enabled=False))[lang]
    # The notifier's own ids: an offer row's random link id, and the person's manage id (another one).
    reserve = links.reserve(new_link_id())
    manage = links.manage_short(new_link_id())
    return compose_sms(copy.sms, facts, reserve, manage, two_way=settings.sms_two_way)


def composed_reminder_sms(settings: Settings, product: Product, lang: str = DEFAULT_LANGUAGE) -> str:
    """One recipient's reminder before their offer lapses (LAPSE_REMINDER=email+sms), composed as the notifier
    composes it (chalicelib/reminders.py), with the same links as the notice."""
    links = Links(settings.public_base_url, Tokens(secrets.token_urlsafe(48)))
    facts = facts_for(product, settings.shop_name, lang)
    window = window_words(settings.lapse_reminder_minutes * 60, lang)
    reserve, manage = links.reserve(new_link_id()), links.manage_short(new_link_id())
    return compose_reminder_sms(facts, window, reserve, manage, two_way=settings.sms_two_way)


def sample(text: str) -> dict[str, Any]:
    """What a composed SMS costs: characters, encoding and segments."""
    gsm = is_gsm(text)
    return {
        "characters": len(text),
        "encoding": "GSM-7" if gsm else "UCS-2",
        "units": septets(text) if gsm else len(text.encode("utf-16-le")) // 2,
        "segments": sms_segments(text),
    }


def sms_segments_per_notice(settings: Settings | None = None) -> dict[str, Any]:
    """Segments per SMS notice: the largest count over the demo's longest and typical names, both copy sources and
    every language, with the stage's opt-out line; the largest per language, and the samples behind it, with and
    without two-way."""
    settings = settings or measured_settings()
    samples = []
    for two_way in (False, True):
        variant = replace(settings, sms_two_way=two_way)
        for name, product in demo_products().items():
            for model, lang in ((m, lang) for m in (False, True) for lang in LANGUAGES):
                text = composed_sms(variant, product, model=model, lang=lang)
                samples.append(
                    {
                        "lang": lang,
                        "product": name,
                        "name_chars": len(product.name),
                        "copy": "model" if model else "template",
                        "two_way": two_way,
                        **sample(text),
                    }
                )
    used = [s for s in samples if s["two_way"] == settings.sms_two_way]
    # The reminder before an offer lapses, billed the same way when a shop turns it on for SMS.
    reminders = [
        sms_segments(composed_reminder_sms(settings, product, lang))
        for product in demo_products().values()
        for lang in LANGUAGES
    ]
    return {
        "segments": max(s["segments"] for s in used),
        "reminder_segments": max(reminders),
        "by_lang": {lang: max(s["segments"] for s in used if s["lang"] == lang) for lang in LANGUAGES},
        "two_way": settings.sms_two_way,
        "link_base": settings.public_base_url,
        "samples": samples,
    }
