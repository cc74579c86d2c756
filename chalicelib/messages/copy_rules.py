"""Copy rules: the checks a model's copy must pass (the placeholders exactly as asked, no links or hosts of its own,
the whole SMS within its segment budget, no promise the system cannot keep), and the plain template used whenever
it does not (pure). Copy comes in every language of chalicelib/i18n.py, each checked on its own with its own words
and windows, and each language's template is its translation in the `messages` catalogue.

The model writes {product} and {shop} for the names and {link} for the link (chalicelib/messages/compose.py fills them in);
any other placeholder, or a required one missing, refuses the copy. The words it writes itself are read folded
(chalicelib/messages/wording.py: NFKC, invisible characters dropped, look-alike letters made Latin), so a host spelled with
fullwidth dots, zero-width spaces or Cyrillic letters is still a host, and "half price" is still a discount.
"""

from __future__ import annotations

import json
import re

from chalicelib.i18n import LANGUAGES
from chalicelib.messages.compose import (
    LINK,
    MAX_SUBJECT,
    PLACEHOLDER,
    PRODUCT,
    SMS_TOTAL_SEGMENTS,
    Copy,
    Facts,
    compose_sms,
    words,
)
from chalicelib.messages.sms import is_gsm, sms_segments, to_gsm
from chalicelib.messages.wording import find_deal, find_host, fold

__all__ = ["MAX_SUBJECT", "SMS_TOTAL_SEGMENTS", "CopyRejected", "parse_model_text", "template_copy", "validate"]

BEDROCK = "bedrock"
TEMPLATE = "template"
MAX_EMAIL_BODY = 1500


class CopyRejected(ValueError):
    """The model's copy broke a rule; `reason` names which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _strip_known(text: str, facts: Facts) -> str:
    """The text without the placeholders and the windows we supplied (they hold digits)."""
    text = PLACEHOLDER.sub(" ", text)
    for window in (facts.offer_window, facts.hold_window):
        text = text.replace(window, " ")
    return text


def _check_common(field: str, text: str, facts: Facts) -> None:
    if not text.strip():
        raise CopyRejected(f"{field}_empty")
    rest = _strip_known(text, facts)
    if find_host(rest, spelled_dots=True) is not None:
        raise CopyRejected(f"{field}_foreign_url")
    if find_deal(rest, copy=True, lang=facts.lang) is not None:
        raise CopyRejected(f"{field}_forbidden_promise")
    folded = fold(rest)
    if "{" in folded or "}" in folded:
        raise CopyRejected(f"{field}_stray_placeholder")
    # Digits beyond the windows we gave are invented: a price, a time, a stock count.
    if re.search(r"\d", folded):
        raise CopyRejected(f"{field}_invented_number")


def parse_model_json(text: str) -> dict[str, object]:
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
    return {str(k): v for k, v in data.items()}


def copy_fields(value: object) -> dict[str, str]:
    """One language's copy out of the model's answer: its three texts, or CopyRejected naming what is missing."""
    if not isinstance(value, dict):
        raise CopyRejected("language_missing")
    out = {}
    for key in ("sms", "email_subject", "email_body"):
        field = value.get(key)
        if not isinstance(field, str):
            raise CopyRejected(f"{key}_missing")
        out[key] = field.strip()
    return out


def parse_model_text(text: str) -> dict[str, dict[str, str] | CopyRejected]:
    """Each language's copy in the model's answer (keyed by language), or why that language's is unusable."""
    data = parse_model_json(text)
    out: dict[str, dict[str, str] | CopyRejected] = {}
    for lang in LANGUAGES:
        try:
            out[lang] = copy_fields(data.get(lang))
        except CopyRejected as rejected:
            out[lang] = rejected
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
    # Every message names the product; the shop may be named ({shop}), and the SMS frame names it anyway.
    for field, text in (("sms", sms), ("email", body), ("subject", subject)):
        if PRODUCT not in text:
            raise CopyRejected(f"{field}_no_product")
    return Copy(sms=sms, email_subject=subject, email_text=body, source=BEDROCK)


# --- The template: plain, friendly, always valid.


def template_copy(facts: Facts) -> Copy:
    """The plain copy in the facts' language, used when the model is off, fails, or says something it must not;
    it passes `validate`.

    Like the model's, it holds placeholders for the names. The SMS copy leaves the shop's name and the offer window
    to the frame compose_sms puts around it, which also shortens a long product name until the SMS fits."""
    t = words(facts.lang)
    body = "\n\n".join(
        (
            t("Good news: {product} is back in stock at {shop}."),
            t(
                "Use the link below within {offer_window} to hold one for {hold_window} while you check out:",
                offer_window=facts.offer_window,
                hold_window=facts.hold_window,
            ),
            LINK,
            t("If you don't use it in time, it passes to the next person waiting."),
        )
    )
    # Short enough for 2 segments with a 30-character shop name: the hold's length is on the link's page.
    sms = to_gsm(t("{product} is back. Tap to hold one: {link}"))
    return Copy(sms=sms, email_subject=t("{product} is back in stock"), email_text=body, source=TEMPLATE)
