"""Message copy for a restock, in every language shoppers are served in: one Bedrock Converse call, each
language's copy checked against what the system can promise.

The model is told the tone and the two windows, never the product's or the shop's name: it writes the
placeholders {product} and {shop} where the names go and LINK where each recipient's reserve link goes, and the
names are put in only when each message is composed (chalicelib/messages/compose.py). So nothing a catalogue name or a
shop's setting holds is ever read by the model as an instruction. It answers one JSON object keyed by language;
each language's copy is checked on its own, and any language whose copy breaks a rule (a placeholder missing,
doubled or unknown, other links or hosts, an SMS that would need more than its segment budget, prices, discounts,
guarantees, invented times, in that language's words or English) is replaced by that language's plain template,
and a metric counts each language that fell back. The other languages keep the model's copy.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from chalicelib.config import Settings
from chalicelib.i18n import DEFAULT_LANGUAGE, LANGUAGE_NAMES, LANGUAGES
from chalicelib.link_ids import new_link_id
from chalicelib.links import Links
from chalicelib.messages.compose import LINK, PRODUCT, SHOP, Brand, Copy, Facts, brand_of, facts_for
from chalicelib.messages.copy_rules import CopyRejected, parse_model_text, template_copy, validate
from chalicelib.messages.wording import DEFAULT_TONE, TONES
from chalicelib.metrics import FALLBACK_COPY, Metrics
from chalicelib.tables.catalog import Product
from chalicelib.tables.restocks import Restock, RestocksTable

log = logging.getLogger(__name__)

# How each language addresses the reader (the catalogues' own choice, chalicelib/locales).
ADDRESS = {"de": "formal Sie", "fr": "vous", "es": "informal tu", "nl": "informal je"}

SYSTEM_PROMPT = (
    "You write short, honest back-in-stock notices for an independent shop, in several languages. "
    "Reply with one JSON object only, with one key per language code you are asked for; each value is an object "
    "with the keys sms, email_subject and email_body, written naturally in that language (not word for word). "
    f"In each language, put the placeholder {LINK} exactly once in sms and exactly once in email_body, and nowhere "
    f"else. You are not told the product's name or the shop's name: write {PRODUCT} wherever the product's name "
    f"goes (at least once in each of sms, email_subject and email_body) and {SHOP} wherever the shop's name goes; "
    "both are filled in later. Keep the placeholders in English as written. Use no other placeholders and no "
    "braces. Write no other links, web addresses or email addresses, no prices, discounts, offers or numbers of "
    "items, no guarantees, and no times other than the two windows you are given, written exactly as given for "
    "that language. Do not say an item is reserved, saved or set aside for the reader: the link holds one only "
    "when they use it in time. The sms must be plain text under 100 characters without emoji and without an "
    "opt-out line: the shop's name is put before it, and how long the link lasts and the opt-out after it. The "
    "email_body is two or three short plain-text paragraphs without markup or a greeting."
)


def user_prompt(facts: dict[str, Facts]) -> str:
    """The request for one restock's copy in each language: the tone and the windows only, never a name (they
    are placeholders)."""
    english = facts[DEFAULT_LANGUAGE]
    tone = english.voice if english.voice in TONES else DEFAULT_TONE
    lines = [
        f"Tone: {tone} ({TONES[tone]})",
        f"The link can be used for {english.offer_window}; using it holds one item for {english.hold_window} "
        "while the reader checks out. If unused it passes to the next person waiting.",
        "Languages, with the two windows as that language writes them:",
    ]
    for lang, f in facts.items():
        address = f", addressing the reader with {ADDRESS[lang]}" if lang in ADDRESS else ""
        lines.append(f"- {lang} ({LANGUAGE_NAMES[lang]}{address}): {f.offer_window}; {f.hold_window}")
    lines.append("Write the notice in each of these languages.")
    return "\n".join(lines)


def converse_text(response: dict[str, Any]) -> str:
    """The text of a Converse response (empty when the model said nothing or was cut off)."""
    if response.get("stopReason") not in (None, "end_turn", "stop_sequence"):
        return ""
    blocks = ((response.get("output") or {}).get("message") or {}).get("content") or []
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict)).strip()


@dataclass(frozen=True, kw_only=True, eq=False)
class Copywriter:
    """Gets each restock's copy once: from the cache on the restock, else from the model, else the template."""

    settings: Settings
    restocks: RestocksTable
    links: Links
    bedrock: Any | None  # None with COPY_MODE=template

    # Realistic links (real token lengths) decide whether an SMS fits before any real link exists.
    @cached_property
    def reserve_sample(self) -> str:
        """A reserve link as long as a real one (an offer row's id is a random link id)."""
        return self.links.reserve(new_link_id())

    @cached_property
    def manage_sample(self) -> str:
        """A manage link as long as an SMS's (a person's short manage id)."""
        return self.links.manage_short(new_link_id())

    def facts(self, product: Product) -> dict[str, Facts]:
        """The product's facts in every language."""
        brand: Brand = brand_of(self.settings)
        return {lang: facts_for(product, self.settings.shop_name, lang, brand) for lang in LANGUAGES}

    def copy_for(self, restock: Restock, product: Product, metrics: Metrics) -> dict[str, Copy]:
        """The copy of this restock in every language; the first caller writes it onto the restock so later jobs
        reuse it. A restock cached before copy came in languages has its English only: the other languages get
        their template (the model is asked once per restock, and it was)."""
        facts = self.facts(product)
        cached = self._cached(restock.copy)
        if cached:
            return {lang: cached.get(lang) or template_copy(facts[lang]) for lang in LANGUAGES}
        copies = self.write(facts, metrics)
        stored = self.restocks.cache_copy(
            restock.sku, restock.restock_ts, {lang: c.to_item() for lang, c in copies.items()}
        )
        kept = self._cached(stored)
        return {lang: kept.get(lang) or copies[lang] for lang in LANGUAGES} if kept else copies

    @staticmethod
    def _cached(stored: dict[str, dict[str, str]] | None) -> dict[str, Copy]:
        found = {lang: Copy.from_item(item) for lang, item in (stored or {}).items() if lang in LANGUAGES}
        return {lang: copy for lang, copy in found.items() if copy is not None}

    def write(self, facts: dict[str, Facts], metrics: Metrics) -> dict[str, Copy]:
        """New copy for these facts (one per language), from one model call: each language's the model's when it
        passes every rule, that language's template otherwise."""
        if self.bedrock is None:
            return {lang: template_copy(f) for lang, f in facts.items()}
        try:
            response = self.bedrock.converse(
                modelId=self.settings.bedrock_model_id,
                system=[{"text": SYSTEM_PROMPT}],
                messages=[{"role": "user", "content": [{"text": user_prompt(facts)}]}],
                inferenceConfig={"maxTokens": 3000, "temperature": 0.5},
            )
            text = converse_text(response)
            if not text:
                raise CopyRejected("empty")
            answers = parse_model_text(text)
        except CopyRejected as rejected:
            return self._fell_back(facts, metrics, dict.fromkeys(facts, rejected.reason))
        except Exception as exc:  # any model failure (throttling, timeout, access) means the templates
            return self._fell_back(facts, metrics, dict.fromkeys(facts, f"model_error:{type(exc).__name__}"))
        copies: dict[str, Copy] = {}
        reasons: dict[str, str] = {}
        for lang, f in facts.items():
            answer = answers.get(lang) or CopyRejected("language_missing")
            try:
                if isinstance(answer, CopyRejected):
                    raise answer
                copies[lang] = validate(
                    answer, f, self.reserve_sample, self.manage_sample, two_way=self.settings.sms_two_way
                )
            except CopyRejected as rejected:
                reasons[lang] = rejected.reason
        return {**copies, **self._fell_back(facts, metrics, reasons)} if reasons else copies

    def _fell_back(self, facts: dict[str, Facts], metrics: Metrics, reasons: dict[str, str]) -> dict[str, Copy]:
        """The templates of the languages whose copy was refused, each counted once (FALLBACK_COPY) with its
        reason kept by language (the metrics have no dimensions: restocks and languages are metadata)."""
        for lang, reason in reasons.items():
            log.warning("%s copy fell back to the template: %s", lang, reason)
            metrics.count(FALLBACK_COPY)
        metrics.metadata("copy_fallback_reason", reasons)
        return {lang: template_copy(facts[lang]) for lang in reasons}
