"""Message copy for a restock: one Bedrock Converse call, checked against what the system can promise.

The copy carries the placeholder LINK where each recipient's reserve link goes. Anything the model returns
that breaks a rule (link missing or doubled, other links, an SMS that would need more than its segment budget,
prices, guarantees, invented times) is replaced by a plain template, and a metric says so.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from chalicelib.compose import LINK, Copy, Facts, facts_for
from chalicelib.config import Settings
from chalicelib.copy_rules import CopyRejected, parse_model_text, template_copy, validate
from chalicelib.links import Links
from chalicelib.metrics import FALLBACK_COPY, Metrics
from chalicelib.tables.catalog import Product
from chalicelib.tables.restocks import Restock, RestocksTable

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You write short, honest back-in-stock notices for an independent shop. "
    "Reply with one JSON object only, with the keys sms, email_subject and email_body. "
    f"Put the placeholder {LINK} exactly once in sms and exactly once in email_body, and nowhere else. "
    "Write no other links, web addresses or email addresses, no prices, discounts, offers or numbers of items, "
    "no guarantees, and no times other than the two windows you are given. Do not say an item is reserved, "
    "saved or set aside for the reader: the link holds one only when they use it in time. "
    "The sms must be plain text under 120 characters without emoji and without an opt-out line: "
    "the shop's name is put before it, and how long the link lasts and the opt-out after it. The email_body is two or three short plain-text paragraphs without markup or a greeting."
)


def user_prompt(facts: Facts) -> str:
    """The request for one restock's copy."""
    return (
        f"Shop: {facts.shop}\nProduct: {facts.product}\nVoice: {facts.voice}\n"
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
        """A reserve link as long as a real one."""
        return self.links.reserve(uuid.uuid4().hex)

    @cached_property
    def manage_sample(self) -> str:
        """A manage link as long as a real one."""
        return self.links.manage(secrets.token_hex(20))

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
            return template_copy(facts, self.reserve_sample, self.manage_sample, two_way=self.settings.sms_two_way)
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
        return template_copy(facts, self.reserve_sample, self.manage_sample, two_way=self.settings.sms_two_way)
