"""Message copy for a restock: one Bedrock Converse call, checked against what the system can promise.

The model is told the tone and the two windows, never the product's or the shop's name: it writes the
placeholders {product} and {shop} where the names go and LINK where each recipient's reserve link goes, and the
names are put in only when each message is composed (chalicelib/compose.py). So nothing a catalogue name or a
shop's setting holds is ever read by the model as an instruction. Anything the model returns that breaks a rule
(a placeholder missing, doubled or unknown, other links or hosts, an SMS that would need more than its segment
budget, prices, discounts, guarantees, invented times) is replaced by a plain template, and a metric says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from chalicelib.compose import LINK, PRODUCT, SHOP, Copy, Facts, facts_for
from chalicelib.config import Settings
from chalicelib.copy_rules import CopyRejected, parse_model_text, template_copy, validate
from chalicelib.link_ids import new_link_id
from chalicelib.links import Links
from chalicelib.metrics import FALLBACK_COPY, Metrics
from chalicelib.tables.catalog import Product
from chalicelib.tables.restocks import Restock, RestocksTable
from chalicelib.wording import DEFAULT_TONE, TONES

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You write short, honest back-in-stock notices for an independent shop. "
    "Reply with one JSON object only, with the keys sms, email_subject and email_body. "
    f"Put the placeholder {LINK} exactly once in sms and exactly once in email_body, and nowhere else. "
    f"You are not told the product's name or the shop's name: write {PRODUCT} wherever the product's name goes "
    f"(at least once in each of sms, email_subject and email_body) and {SHOP} wherever the shop's name goes; "
    "both are filled in later. Use no other placeholders and no braces. "
    "Write no other links, web addresses or email addresses, no prices, discounts, offers or numbers of items, "
    "no guarantees, and no times other than the two windows you are given. Do not say an item is reserved, "
    "saved or set aside for the reader: the link holds one only when they use it in time. "
    "The sms must be plain text under 120 characters without emoji and without an opt-out line: "
    "the shop's name is put before it, and how long the link lasts and the opt-out after it. The email_body is two or three short plain-text paragraphs without markup or a greeting."
)


def user_prompt(facts: Facts) -> str:
    """The request for one restock's copy: the tone and the windows only, never a name (they are placeholders)."""
    tone = facts.voice if facts.voice in TONES else DEFAULT_TONE
    return (
        f"Tone: {tone} ({TONES[tone]})\n"
        f"The link can be used for {facts.offer_window}; using it holds one item for {facts.hold_window} "
        "while the reader checks out. If unused it passes to the next person waiting.\n"
        "Write the notice."
    )


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

    def copy_for(self, restock: Restock, product: Product, metrics: Metrics) -> Copy:
        """The copy of this restock; the first caller writes it onto the restock so later jobs reuse it."""
        cached = Copy.from_item(restock.copy)
        if cached:
            return cached
        copy = self.write(facts_for(product, self.settings.shop_name), metrics)
        stored = self.restocks.cache_copy(restock.sku, restock.restock_ts, copy.to_item())
        return Copy.from_item(stored) or copy

    def write(self, facts: Facts, metrics: Metrics) -> Copy:
        """New copy for these facts: the model's when it passes every rule, the template otherwise."""
        if self.bedrock is None:
            return template_copy(facts)
        try:
            response = self.bedrock.converse(
                modelId=self.settings.bedrock_model_id,
                system=[{"text": SYSTEM_PROMPT}],
                messages=[{"role": "user", "content": [{"text": user_prompt(facts)}]}],
                inferenceConfig={"maxTokens": 700, "temperature": 0.5},
            )
            text = converse_text(response)
            if not text:
                raise CopyRejected("empty")
            return validate(
                parse_model_text(text),
                facts,
                self.reserve_sample,
                self.manage_sample,
                two_way=self.settings.sms_two_way,
            )
        except CopyRejected as rejected:
            reason = rejected.reason
        except Exception as exc:  # any model failure (throttling, timeout, access) means the template
            reason = f"model_error:{type(exc).__name__}"
        log.warning("copy fell back to the template: %s", reason)
        metrics.count(FALLBACK_COPY)
        metrics.metadata("copy_fallback_reason", reason)
        return template_copy(facts)
