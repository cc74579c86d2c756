"""Message copy for a restock: one Bedrock Converse call, checked against what the system can promise.

The copy carries the placeholder LINK where each recipient's reserve link goes. Anything the model returns
that breaks a rule (link missing or doubled, other links, an SMS that would need more than two segments,
prices, guarantees, invented times) is replaced by a plain template, and a metric says so.
"""

from __future__ import annotations

import html
import json
import logging
import re
import secrets
import unicodedata
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from chalicelib.config import Settings
from chalicelib.links import Links
from chalicelib.metrics import FALLBACK_COPY, Metrics
from chalicelib.senders import EMAIL, STOP_LINE, Notice
from chalicelib.tables.restocks import RestocksTable

log = logging.getLogger(__name__)

LINK = "{link}"
BEDROCK = "bedrock"
TEMPLATE = "template"
SMS_COPY_SEGMENTS = 2  # the copy with its reserve link and the STOP line
SMS_TOTAL_SEGMENTS = 3  # everything, including the manage link
MAX_SUBJECT = 100
MAX_EMAIL_BODY = 1500
MANAGE_LABEL = "Manage alerts: "

# GSM 03.38: the basic set costs one septet a character, the extension set two. Anything else forces UCS-2,
# which shrinks a segment from 153 to 67 characters, so it is translated or refused.
GSM_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM_EXTENDED = frozenset("^{}\\[~]|€\f")
TYPOGRAPHIC = str.maketrans(
    {
        "‘": "'",
        "’": "'",
        "‚": "'",
        "“": '"',
        "”": '"',
        "„": '"',
        "–": "-",
        "—": "-",
        "…": "...",
        "\u00a0": " ",
        "•": "-",
    }
)

URL_PATTERN = re.compile(
    r"(https?://|www\.|\w@\w|\b[a-z0-9-]+\.(com|net|org|io|co|uk|shop|store|app|ly|me|info|biz|xyz|link|site|online|eu)\b)",
    re.IGNORECASE,
)
# Promises the system cannot keep: a guaranteed or set-aside unit, prices and deals, scarcity it does not know.
FORBIDDEN = re.compile(
    r"(guarantee|promise|reserved for you|saved for you|set aside|kept for you|yours until|exclusive|discount|"
    r"coupon|promo|voucher|%\s*off|\bfree\b|\bsale\b|\bprice|\bdeal\b|[£$€¥]|\bonly\s+\w+\s+left|\blast\s+(one|few)\b|"
    r"\bunits?\s+left|\bin\s+stock\s+until\b)",
    re.IGNORECASE,
)


class CopyRejected(ValueError):
    """The model's copy broke a rule; `reason` names which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Copy:
    """The text of one restock's notices, with LINK where each recipient's reserve link goes."""

    sms: str
    email_subject: str
    email_text: str
    email_html: str
    source: str

    def to_item(self) -> dict[str, str]:
        """The map cached on the restock item."""
        return asdict(self)

    @classmethod
    def from_item(cls, item: Any) -> Copy | None:
        """A cached copy, or None when the stored map is incomplete."""
        if not isinstance(item, dict):
            return None
        fields = ("sms", "email_subject", "email_text", "email_html", "source")
        if not all(isinstance(item.get(k), str) and item.get(k) for k in fields):
            return None
        return cls(**{k: str(item[k]) for k in fields})


@dataclass(frozen=True)
class Facts:
    """What the copy may say: names and the two time windows, in words."""

    product: str
    shop: str
    voice: str
    offer_window: str
    hold_window: str


def window_words(seconds: int) -> str:
    """A duration as a shopper reads it: 3600 -> '1 hour', 900 -> '15 minutes'."""
    seconds = max(60, int(seconds))
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return f"{hours} hour" + ("s" if hours != 1 else "")
    minutes = -(-seconds // 60)
    return f"{minutes} minute" + ("s" if minutes != 1 else "")


def facts_for(product: dict[str, Any], shop: str) -> Facts:
    """The facts of a catalogue product the copy is written from."""
    return Facts(
        product=str(product.get("name") or product.get("sku") or "your item").strip(),
        shop=shop,
        voice=str(product.get("voice") or "friendly"),
        offer_window=window_words(int(product.get("offer_window_s") or 3600)),
        hold_window=window_words(int(product.get("hold_window_s") or 900)),
    )


# --- GSM-7 arithmetic (pure).


def to_gsm(text: str) -> str:
    """Text with typographic characters and accents replaced by their GSM-7 forms where one exists."""
    text = text.translate(TYPOGRAPHIC)
    out = []
    for char in text:
        if char in GSM_BASIC or char in GSM_EXTENDED:
            out.append(char)
            continue
        plain = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        out.append(plain if plain and all(c in GSM_BASIC for c in plain) else char)
    return "".join(out)


def is_gsm(text: str) -> bool:
    """True when every character fits GSM-7 (so a segment holds 153 characters, not 67)."""
    return all(c in GSM_BASIC or c in GSM_EXTENDED for c in text)


def septets(text: str) -> int:
    """GSM-7 length: extension characters count twice."""
    return sum(2 if c in GSM_EXTENDED else 1 for c in text)


def sms_segments(text: str) -> int:
    """How many SMS parts a message needs (GSM-7: 160 alone, 153 each when split; UCS-2: 70 / 67)."""
    if is_gsm(text):
        length, single, part = septets(text), 160, 153
    else:
        length, single, part = len(text.encode("utf-16-le")) // 2, 70, 67
    return 1 if length <= single else -(-length // part)


# --- Composition: the same functions build what is validated and what is sent.


def fill(text: str, url: str) -> str:
    """Put a recipient's link where the placeholder is."""
    return text.replace(LINK, url)


def compose_sms(copy_sms: str, reserve_url: str, manage_url: str) -> str:
    """The whole SMS: the copy with its link, the manage link, and the STOP line last."""
    return f"{fill(copy_sms, reserve_url)}\n{MANAGE_LABEL}{manage_url}\n{STOP_LINE}"


def email_html(text: str) -> str:
    """HTML for an email body written as plain paragraphs (the model never writes markup)."""
    parts = []
    for para in re.split(r"\n\s*\n", text.strip()):
        para = para.strip()
        if para == LINK:
            parts.append(
                f'<p><a href="{LINK}" style="display:inline-block;padding:10px 18px;background:#1f2937;'
                f'color:#ffffff;text-decoration:none;border-radius:6px">Hold one for me</a></p>'
            )
            continue
        escaped = html.escape(para).replace("\n", "<br>")
        parts.append("<p>" + escaped.replace(LINK, f'<a href="{LINK}">this link</a>') + "</p>")
    return "\n".join(parts)


def compose_email(
    copy: Copy,
    *,
    to: str,
    name: str,
    facts: Facts,
    reserve_url: str,
    manage_url: str,
    unsubscribe_url: str,
) -> Notice:
    """The whole email for one recipient: greeting, the copy with their link, and a footer with their links."""
    greeting = f"Hi {name}," if name else "Hello,"
    why = f"You asked {facts.shop} to tell you when {facts.product} was back in stock."
    text = (
        f"{greeting}\n\n{fill(copy.email_text, reserve_url)}\n\n--\n{why}\n"
        f"Manage your alerts: {manage_url}\nUnsubscribe: {unsubscribe_url}\n"
    )
    safe = {k: html.escape(v, quote=True) for k, v in (("r", reserve_url), ("m", manage_url), ("u", unsubscribe_url))}
    body_html = (
        '<!doctype html><html><body style="font-family:sans-serif;line-height:1.5;color:#111827">'
        f"<p>{html.escape(greeting)}</p>\n{fill(copy.email_html, safe['r'])}\n"
        f'<hr><p style="font-size:12px;color:#6b7280">{html.escape(why)}<br>'
        f'<a href="{safe["m"]}">Manage your alerts</a> · <a href="{safe["u"]}">Unsubscribe</a></p>'
        "</body></html>"
    )
    return Notice(
        channel=EMAIL, to=to, subject=copy.email_subject, text=text, html=body_html, unsubscribe_url=unsubscribe_url
    )


# --- Validation (pure).


def _strip_known(text: str, facts: Facts) -> str:
    """The text without the placeholder and the names and windows we supplied (they may hold digits or dots)."""
    for known in (LINK, facts.product, to_gsm(facts.product), facts.shop, to_gsm(facts.shop)):
        text = text.replace(known, " ")
    for window in (facts.offer_window, facts.hold_window):
        text = text.replace(window, " ")
    return text


def _check_common(field: str, text: str, facts: Facts) -> None:
    if not text.strip():
        raise CopyRejected(f"{field}_empty")
    rest = _strip_known(text, facts)
    if URL_PATTERN.search(rest):
        raise CopyRejected(f"{field}_foreign_url")
    if FORBIDDEN.search(rest):
        raise CopyRejected(f"{field}_forbidden_promise")
    if "{" in rest or "}" in rest:
        raise CopyRejected(f"{field}_stray_placeholder")
    # Digits beyond the windows and names we gave are invented: a price, a time, a stock count.
    if re.search(r"\d", rest):
        raise CopyRejected(f"{field}_invented_number")


def parse_model_text(text: str) -> dict[str, str]:
    """The JSON object the model was asked for, tolerating a Markdown fence around it."""
    body = text.strip()
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except ValueError:
        start, end = body.find("{"), body.rfind("}")
        try:
            data = json.loads(body[start : end + 1]) if 0 <= start < end else None
        except ValueError:
            data = None
    if not isinstance(data, dict):
        raise CopyRejected("not_json")
    out = {}
    for key in ("sms", "email_subject", "email_body"):
        value = data.get(key)
        if not isinstance(value, str):
            raise CopyRejected(f"{key}_missing")
        out[key] = value.strip()
    return out


def validate(raw: dict[str, str], facts: Facts, reserve_sample: str, manage_sample: str) -> Copy:
    """Check a model's copy against every rule; returns it as Copy, or raises CopyRejected naming the rule."""
    sms = to_gsm(raw["sms"])
    subject = " ".join(raw["email_subject"].split())
    body = raw["email_body"].strip()
    for field, text in (("sms", sms), ("email", body)):
        count = text.count(LINK)
        if count == 0:
            raise CopyRejected(f"{field}_no_link")
        if count > 1:
            raise CopyRejected(f"{field}_link_twice")
    if LINK in subject:
        raise CopyRejected("subject_has_link")
    _check_common("sms", sms, facts)
    _check_common("email", body, facts)
    _check_common("subject", subject, facts)
    if "STOP" in _strip_known(sms, facts):
        raise CopyRejected("sms_has_stop_line")
    if not is_gsm(sms):
        raise CopyRejected("sms_not_gsm")
    if sms_segments(f"{fill(sms, reserve_sample)}\n{STOP_LINE}") > SMS_COPY_SEGMENTS:
        raise CopyRejected("sms_too_long")
    if sms_segments(compose_sms(sms, reserve_sample, manage_sample)) > SMS_TOTAL_SEGMENTS:
        raise CopyRejected("sms_too_long")
    if len(subject) > MAX_SUBJECT:
        raise CopyRejected("subject_too_long")
    if len(body) > MAX_EMAIL_BODY:
        raise CopyRejected("email_too_long")
    return Copy(sms=sms, email_subject=subject, email_text=body, email_html=email_html(body), source=BEDROCK)


# --- The template: plain, friendly, always valid.


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 3)].rstrip() + "..."


def template_copy(facts: Facts, reserve_sample: str, manage_sample: str) -> Copy:
    """The plain copy used when the model is off, fails, or says something it must not."""
    product, shop = facts.product, facts.shop
    body = (
        f"Good news: {product} is back in stock at {shop}.\n\n"
        f"Use the link below within {facts.offer_window} to hold one for {facts.hold_window} while you check out:"
        f"\n\n{LINK}\n\n"
        "If you don't use it in time, it passes to the next person waiting."
    )
    sms = ""
    # Long product or shop names are shortened until the SMS fits; the link and the windows always stay.
    for limit in (80, 60, 40, 24, 12):
        sms = to_gsm(
            f"{_shorten(shop, limit)}: {_shorten(product, limit)} is back. Tap within {facts.offer_window} "
            f"to hold one for {facts.hold_window} while you check out: {LINK}"
        )
        sms = "".join(c for c in sms if is_gsm(c))
        fits_copy = sms_segments(f"{fill(sms, reserve_sample)}\n{STOP_LINE}") <= SMS_COPY_SEGMENTS
        if fits_copy and sms_segments(compose_sms(sms, reserve_sample, manage_sample)) <= SMS_TOTAL_SEGMENTS:
            break
    return Copy(
        sms=sms,
        email_subject=_shorten(f"{product} is back in stock", MAX_SUBJECT),
        email_text=body,
        email_html=email_html(body),
        source=TEMPLATE,
    )


# --- The model call.

SYSTEM_PROMPT = (
    "You write short, honest back-in-stock notices for an independent shop. "
    "Reply with one JSON object only, with the keys sms, email_subject and email_body. "
    f"Put the placeholder {LINK} exactly once in sms and exactly once in email_body, and nowhere else. "
    "Write no other links, web addresses or email addresses, no prices, discounts, offers or numbers of items, "
    "no guarantees, and no times other than the two windows you are given. Do not say an item is reserved, "
    "saved or set aside for the reader: the link holds one only when they use it in time. "
    "The sms must be plain text under 150 characters without emoji and without an opt-out line "
    "(one is added). The email_body is two or three short plain-text paragraphs without markup or a greeting."
)


def user_prompt(facts: Facts) -> str:
    """The request for one restock's copy."""
    return (
        f"Shop: {facts.shop}\nProduct: {facts.product}\nVoice: {facts.voice}\n"
        f"The link can be used for {facts.offer_window}; using it holds one item for {facts.hold_window} "
        "while the reader checks out. If unused it passes to the next person waiting.\n"
        "Write the notice."
    )


class FakeBedrock:
    """A stand-in for the Bedrock runtime client (local stage and tests): fixed text, or a given failure.

    Without fixed text it answers the way a model asked by user_prompt would, naming the product, so the
    local demo's notices read like real ones.
    """

    def __init__(self, text: str | None = None, error: Exception | None = None, stop_reason: str = "end_turn") -> None:
        self.text = text
        self.error = error
        self.stop_reason = stop_reason
        self.calls: list[dict[str, Any]] = []

    @staticmethod
    def written_for(prompt: str) -> str:
        """The fake's notice for one prompt: the product by name, the link once."""
        fields = dict(line.split(": ", 1) for line in prompt.splitlines() if ": " in line)
        product = fields.get("Product", "The item you asked us to watch")
        return json.dumps(
            {
                "sms": f"Good news: {product} is back! Tap soon to hold one while you check out: {LINK}",
                "email_subject": f"{product} is back in stock",
                "email_body": (
                    f"{product} is back in stock, and you asked to be told first.\n\n"
                    f"Tap the link to hold one while you check out:\n\n{LINK}\n\n"
                    "If you don't use it in time, it passes to the next person waiting."
                ),
            }
        )

    def converse(self, **kwargs: Any) -> dict[str, Any]:
        """Answer like Converse does."""
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        text = self.text
        if text is None:
            prompt = "".join(str(b.get("text", "")) for m in kwargs.get("messages", []) for b in m.get("content", []))
            text = self.written_for(prompt)
        content = [{"text": text}] if text else []
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": self.stop_reason,
            "usage": {"inputTokens": 200, "outputTokens": 120, "totalTokens": 320},
        }


def converse_text(response: dict[str, Any]) -> str:
    """The text of a Converse response (empty when the model said nothing or was cut off)."""
    if response.get("stopReason") not in (None, "end_turn", "stop_sequence"):
        return ""
    blocks = ((response.get("output") or {}).get("message") or {}).get("content") or []
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict)).strip()


class Copywriter:
    """Gets each restock's copy once: from the cache on the restock, else from the model, else the template."""

    def __init__(self, *, settings: Settings, restocks: RestocksTable, links: Links, bedrock: Any | None) -> None:
        self.settings = settings
        self.restocks = restocks
        self.bedrock = bedrock
        # Realistic links (real token lengths) decide whether an SMS fits before any real link exists.
        self.reserve_sample = links.reserve(uuid.uuid4().hex)
        self.manage_sample = links.manage(secrets.token_hex(20))

    def copy_for(self, restock: dict[str, Any], product: dict[str, Any], metrics: Metrics) -> Copy:
        """The copy of this restock; the first caller writes it onto the restock so later jobs reuse it."""
        cached = Copy.from_item(restock.get("copy"))
        if cached:
            return cached
        copy = self.write(facts_for(product, self.settings.shop_name), metrics)
        stored = self.restocks.cache_copy(str(restock["sku"]), str(restock["restock_ts"]), copy.to_item())
        return Copy.from_item(stored) or copy

    def write(self, facts: Facts, metrics: Metrics) -> Copy:
        """New copy for these facts: the model's when it passes every rule, the template otherwise."""
        if self.bedrock is None:
            return template_copy(facts, self.reserve_sample, self.manage_sample)
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
            return validate(parse_model_text(text), facts, self.reserve_sample, self.manage_sample)
        except CopyRejected as rejected:
            reason = rejected.reason
        except Exception as exc:  # any model failure (throttling, timeout, access) means the template
            reason = f"model_error:{type(exc).__name__}"
        log.warning("copy fell back to the template: %s", reason)
        metrics.count(FALLBACK_COPY)
        metrics.metadata("copy_fallback_reason", reason)
        return template_copy(facts, self.reserve_sample, self.manage_sample)
