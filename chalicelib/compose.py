"""Message composition: the facts a restock's copy is written from, the copy itself, and the whole SMS and
email each recipient gets. The same functions build what the copy rules check and what is sent."""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass
from typing import Any

from chalicelib.senders import EMAIL, STOP_LINE, Notice
from chalicelib.sms import is_gsm, to_gsm
from chalicelib.tables.catalog import Product

LINK = "{link}"
# How the SMS ends depends on whether a reply can reach us (SMS_TWO_WAY): with a two-way origination identity
# (a number or pool that receives replies) the manage link and "Reply STOP"; without one, a reply goes nowhere,
# so the manage link, where the shopper can stop everything, is the opt-out and says so.
MANAGE_LABEL = "Manage alerts: "
OPT_OUT_LABEL = "Stop texts: "
SHOP_NAME_LIMIT = 40  # the frame's shop name, shortened beyond this so the copy keeps its room


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


def facts_for(product: Product, shop: str) -> Facts:
    """The facts of a catalogue product the copy is written from."""
    return Facts(
        product=(product.name or product.sku or "your item").strip(),
        shop=shop,
        voice=product.voice or "friendly",
        offer_window=window_words(product.offer_window_s or 3600),
        hold_window=window_words(product.hold_window_s or 900),
    )


def fill(text: str, url: str) -> str:
    """Put a recipient's link where the placeholder is."""
    return text.replace(LINK, url)


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

    The shop and the offer window are written here, around the copy, not asked of the copy: whatever the model
    wrote (or a copy cached before a window changed), every SMS names who sent it and how long the offer lasts,
    from the facts of this very offer. A copy that already starts with the shop's name is not prefixed twice.
    """
    shop = sms_shop(facts.shop)
    body = fill(copy_sms, reserve_url)
    lead = "" if not shop or body.startswith(shop) else f"{shop}: "
    window = f"Link valid for {gsm_only(facts.offer_window)}."
    ending = f"{MANAGE_LABEL}{manage_url}\n{STOP_LINE}" if two_way else f"{OPT_OUT_LABEL}{manage_url}"
    return f"{lead}{body}\n{window}\n{ending}"


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
