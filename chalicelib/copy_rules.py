"""Copy rules: the checks a model's copy must pass (the link exactly once, no other links, two SMS segments,
no promise the system cannot keep), and the plain template used whenever it does not (pure)."""

from __future__ import annotations

import json
import re

from chalicelib.compose import LINK, Copy, Facts, compose_sms, email_html, fill
from chalicelib.senders import STOP_LINE
from chalicelib.sms import is_gsm, sms_segments, to_gsm

BEDROCK = "bedrock"
TEMPLATE = "template"
SMS_COPY_SEGMENTS = 2  # the copy with its reserve link and the STOP line
SMS_TOTAL_SEGMENTS = 3  # everything, including the manage link
MAX_SUBJECT = 100
MAX_EMAIL_BODY = 1500

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
    except (ValueError, RecursionError):
        start, end = body.find("{"), body.rfind("}")
        try:
            data = json.loads(body[start : end + 1]) if 0 <= start < end else None
        except (ValueError, RecursionError):
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
