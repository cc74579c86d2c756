"""Copy rules: the checks a model's copy must pass (the link exactly once, no other links, the whole SMS within
its segment budget, no promise the system cannot keep), and the plain template used whenever it does not (pure)."""

from __future__ import annotations

import json
import re

from chalicelib.compose import LINK, Copy, Facts, compose_sms, email_html, gsm_only, shorten
from chalicelib.sms import is_gsm, sms_segments, to_gsm

BEDROCK = "bedrock"
TEMPLATE = "template"
# The whole SMS as sent (shop, copy, reserve link, window, manage link, and the STOP line when two-way) with
# real-length links. Two signed links of about 130 characters each leave no way into 2 GSM-7 segments (306):
# that needs shorter links (docs/NOTICES.md).
SMS_TOTAL_SEGMENTS = 3
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


def fits(sms: str, facts: Facts, reserve_sample: str, manage_sample: str, *, two_way: bool) -> bool:
    """True when the SMS composed around this copy, with the opt-out line in use, fits the segment budget."""
    composed = compose_sms(sms, facts, reserve_sample, manage_sample, two_way=two_way)
    return sms_segments(composed) <= SMS_TOTAL_SEGMENTS


def validate(raw: dict[str, str], facts: Facts, reserve_sample: str, manage_sample: str, *, two_way: bool) -> Copy:
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
    if not fits(sms, facts, reserve_sample, manage_sample, two_way=two_way):
        raise CopyRejected("sms_too_long")
    if len(subject) > MAX_SUBJECT:
        raise CopyRejected("subject_too_long")
    if len(body) > MAX_EMAIL_BODY:
        raise CopyRejected("email_too_long")
    return Copy(sms=sms, email_subject=subject, email_text=body, email_html=email_html(body), source=BEDROCK)


# --- The template: plain, friendly, always valid.


def template_copy(facts: Facts, reserve_sample: str, manage_sample: str, *, two_way: bool) -> Copy:
    """The plain copy used when the model is off, fails, or says something it must not.

    The SMS copy leaves the shop's name and the offer window to the frame compose_sms puts around it."""
    product, shop = facts.product, facts.shop
    body = (
        f"Good news: {product} is back in stock at {shop}.\n\n"
        f"Use the link below within {facts.offer_window} to hold one for {facts.hold_window} while you check out:"
        f"\n\n{LINK}\n\n"
        "If you don't use it in time, it passes to the next person waiting."
    )
    sms = ""
    # A long product name is shortened until the SMS fits; the link and the windows always stay.
    for limit in (80, 60, 40, 24, 12):
        sms = gsm_only(
            f"{shorten(product, limit)} is back. Tap to hold one for {facts.hold_window} while you check out: {LINK}"
        )
        if fits(sms, facts, reserve_sample, manage_sample, two_way=two_way):
            break
    return Copy(
        sms=sms,
        email_subject=shorten(f"{product} is back in stock", MAX_SUBJECT),
        email_text=body,
        email_html=email_html(body),
        source=TEMPLATE,
    )
