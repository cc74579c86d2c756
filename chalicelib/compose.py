"""Message composition: the facts a restock's copy is written from, the copy itself, and the whole SMS and
email each recipient gets. The same functions build what the copy rules check and what is sent.

Copy is written with placeholders, never with the names themselves: {product} and {shop} become the catalogue's
product name and the shop's name, and {link} each recipient's reserve link, only here, when each message is put
together (escaped for HTML in the email's HTML part). Whatever a name holds, it is never an instruction to the
model that writes the copy, and a name is substituted in one pass, so a name holding "{link}" stays text.
"""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass
from typing import Any

from chalicelib.senders import EMAIL, STOP_LINE, Notice
from chalicelib.sms import GSM_PART, is_gsm, septets, to_gsm
from chalicelib.tables.catalog import Product
from chalicelib.wording import DEFAULT_TONE, tone_of

LINK = "{link}"
PRODUCT = "{product}"
SHOP = "{shop}"
PLACEHOLDERS = (LINK, PRODUCT, SHOP)
PLACEHOLDER = re.compile(r"\{(link|product|shop)\}")
# The whole SMS as sent (shop, copy, reserve link, window, manage link, and the STOP line when two-way) fits 2
# GSM-7 segments (306 septets) with real-length links: both are short random ids looked up in a table
# (chalicelib/link_ids.py), about 85 characters each under an API Gateway stage URL (docs/NOTICES.md).
SMS_TOTAL_SEGMENTS = 2
MAX_SUBJECT = 100
# A long product name is shortened, in the SMS only, until the whole SMS fits its segments; never below this.
SMS_PRODUCT_MIN = 8
# How the SMS ends depends on whether a reply can reach us (SMS_TWO_WAY): with a two-way origination identity
# (a number or pool that receives replies) the manage link and "Reply STOP"; without one, a reply goes nowhere,
# so the manage link, where the shopper can stop everything, is the opt-out and says so.
MANAGE_LABEL = "Manage: "
OPT_OUT_LABEL = "Stop texts: "
SHOP_NAME_LIMIT = 30  # the frame's shop name, shortened beyond this so the product's name keeps its room


@dataclass(frozen=True)
class Copy:
    """The text of one restock's notices, with LINK where each recipient's reserve link goes and PRODUCT and SHOP
    where the names go (a copy cached before placeholders were used holds the names and fills the same way)."""

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
    """What a restock's messages say: the names (substituted when composing, never given to the model), the tone
    (one of wording.TONES) and the two time windows, in words."""

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


def facts_for(product: Product, shop: str) -> Facts:
    """The facts of a catalogue product the copy is written from."""
    return Facts(
        product=(product.name or product.sku or "your item").strip(),
        shop=shop,
        voice=tone_of(product.voice) or DEFAULT_TONE,  # a value stored before tones were fixed maps to its tone
        offer_window=window_words(product.offer_window_s or 3600),
        hold_window=window_words(product.hold_window_s or 900),
    )


def fill(text: str, *, link: str, product: str, shop: str) -> str:
    """Put a recipient's link and the names where the placeholders are, in one pass."""
    values = {LINK: link, PRODUCT: product, SHOP: shop}
    return PLACEHOLDER.sub(lambda found: values[found.group(0)], text)


def gsm_only(text: str) -> str:
    """Text in GSM-7, anything without a GSM-7 form dropped (one such character would make every part UCS-2)."""
    return "".join(c for c in to_gsm(text) if is_gsm(c))


def shorten(text: str, limit: int) -> str:
    """Text cut to at most `limit` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(1, limit - 3)].rstrip() + "..."


def sms_shop(shop: str) -> str:
    """The shop's name as the SMS frame prints it."""
    return shorten(gsm_only(shop).strip(), SHOP_NAME_LIMIT)


def compose_sms(copy_sms: str, facts: Facts, reserve_url: str, manage_url: str, *, two_way: bool) -> str:
    """The whole SMS: the shop's name, the copy with its link, how long the link lasts, then the opt-out.

    The product's name goes where the copy says {product}, shortened until the whole SMS fits its segments.
    The shop and the offer window are written here, around the copy, not asked of the copy: whatever the model
    wrote (or a copy cached before a window changed), every SMS names who sent it and how long the offer lasts,
    from the facts of this very offer. A copy that already starts with the shop's name is not prefixed twice.
    """
    shop = sms_shop(facts.shop)
    window = f"Link valid for {gsm_only(facts.offer_window)}."
    ending = f"{MANAGE_LABEL}{manage_url}\n{STOP_LINE}" if two_way else f"{OPT_OUT_LABEL}{manage_url}"
    product = gsm_only(facts.product).strip()
    limit = len(product)
    while True:
        name = shorten(product, limit)
        body = fill(copy_sms, link=reserve_url, product=name, shop=shop)
        lead = "" if not shop or body.startswith(shop) else f"{shop}: "
        # Folded whole: one character outside GSM-7 (say, in a copy cached long ago) would make every part UCS-2.
        text = gsm_only(f"{lead}{body}\n{window}\n{ending}")
        over = septets(text) - SMS_TOTAL_SEGMENTS * GSM_PART
        if PRODUCT not in copy_sms or over <= 0 or limit <= SMS_PRODUCT_MIN:
            return text
        # Each septet over comes off the name (a name may appear more than once, so go round again).
        limit = max(SMS_PRODUCT_MIN, min(limit, len(name)) - over)


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
    names = {"product": facts.product, "shop": facts.shop}
    text = (
        f"{greeting}\n\n{fill(copy.email_text, link=reserve_url, **names)}\n\n--\n{why}\n"
        f"Manage your alerts: {manage_url}\nUnsubscribe: {unsubscribe_url}\n"
    )
    safe = {k: html.escape(v, quote=True) for k, v in (("r", reserve_url), ("m", manage_url), ("u", unsubscribe_url))}
    escaped = {k: html.escape(v, quote=True) for k, v in names.items()}
    body_html = (
        '<!doctype html><html><body style="font-family:sans-serif;line-height:1.5;color:#111827">'
        f"<p>{html.escape(greeting)}</p>\n{fill(copy.email_html, link=safe['r'], **escaped)}\n"
        f'<hr><p style="font-size:12px;color:#6b7280">{html.escape(why)}<br>'
        f'<a href="{safe["m"]}">Manage your alerts</a> · <a href="{safe["u"]}">Unsubscribe</a></p>'
        "</body></html>"
    )
    return Notice(
        channel=EMAIL,
        to=to,
        subject=shorten(" ".join(fill(copy.email_subject, link="", **names).split()), MAX_SUBJECT),
        text=text,
        html=body_html,
        unsubscribe_url=unsubscribe_url,
    )
