"""Message composition: the facts a restock's copy is written from, the copy itself, and the whole SMS and
email each recipient gets, in the recipient's own language. The same functions build what the copy rules check
and what is sent.

Copy is written with placeholders, never with the names themselves: {product} and {shop} become the catalogue's
product name and the shop's name, and {link} each recipient's reserve link, only here, when each message is put
together (escaped for HTML in the email's HTML part). Whatever a name holds, it is never an instruction to the
model that writes the copy, and a name is substituted in one pass, so a name holding "{link}" stays text.

Every fixed word around the copy (the SMS frame, the email's greeting, labels and footer) is a string of the
`messages` domain (chalicelib/i18n.py), in the language of the recipient's place (`Request.lang`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from chalicelib import i18n
from chalicelib.colours import DEFAULT_ACCENT, accent_or_default, link_colour, readable_on
from chalicelib.config import Settings
from chalicelib.messages.senders import EMAIL, STOP_LINE, Notice
from chalicelib.messages.sms import GSM_PART, is_gsm, septets, to_gsm
from chalicelib.messages.wording import DEFAULT_TONE, tone_of
from chalicelib.tables.catalog import Product

DOMAIN = "messages"
LINK = "{link}"
PRODUCT = "{product}"
SHOP = "{shop}"
PLACEHOLDERS = (LINK, PRODUCT, SHOP)
PLACEHOLDER = re.compile(r"\{(link|product|shop)\}")
# The whole SMS as sent (shop, copy, reserve link, window, manage link, and the STOP line when two-way) fits 2
# GSM-7 segments (306 septets) with real-length links, in every language: both are short random ids looked up in
# a table (chalicelib/link_ids.py), about 85 characters each under an API Gateway stage URL (docs/NOTICES.md).
SMS_TOTAL_SEGMENTS = 2
MAX_SUBJECT = 100
# A long product name is shortened, in the SMS only, until the whole SMS fits its segments; never below this.
SMS_PRODUCT_MIN = 8
# How the SMS ends depends on whether a reply can reach us (SMS_TWO_WAY): with a two-way origination identity
# (a number or pool that receives replies) the manage link and the STOP line; without one, a reply goes nowhere,
# so the manage link, where the shopper can stop everything, is the opt-out and says so.
MANAGE_LABEL = "Manage: {link}"
OPT_OUT_LABEL = "Stop texts: {link}"
# "Stop texts" opens the shopper's own page with the form that stops everything first (selfservice.manage_page).
STOP_QUERY = "?stop"
WINDOW_LINE = "Link valid for {window}."
SHOP_NAME_LIMIT = 30  # the frame's shop name, shortened beyond this so the product's name keeps its room
IMAGE_SIZE = 120  # the product picture's width and height in the email, in CSS pixels


def words(lang: str) -> i18n.Text:
    """The fixed strings of the messages in a language."""
    return i18n.text(DOMAIN, lang)


@dataclass(frozen=True)
class Copy:
    """The text of one restock's notices, with LINK where each recipient's reserve link goes and PRODUCT and SHOP
    where the names go (a copy cached before placeholders were used holds the names and fills the same way).

    The email's HTML is not part of it: it is built from `email_text` for each recipient (email_body_html), in
    their language and the shop's colours, so a copy cached with an older HTML map still renders today's."""

    sms: str
    email_subject: str
    email_text: str
    source: str

    def to_item(self) -> dict[str, str]:
        """This language's map in the restock item's cached copy."""
        return asdict(self)

    @classmethod
    def from_item(cls, item: Any) -> Copy | None:
        """A cached copy, or None when the stored map is incomplete."""
        if not isinstance(item, dict):
            return None
        fields = ("sms", "email_subject", "email_text", "source")
        if not all(isinstance(item.get(k), str) and item.get(k) for k in fields):
            return None
        return cls(**{k: str(item[k]) for k in fields})


@dataclass(frozen=True)
class Brand:
    """How the shop presents itself in an email: its web address, logo and accent colour (chalicelib/config.py)."""

    shop_url: str = ""
    logo_url: str = ""
    accent: str = DEFAULT_ACCENT


def brand_of(settings: Settings) -> Brand:
    """The shop's brand as its settings give it."""
    return Brand(shop_url=settings.shop_url, logo_url=settings.shop_logo_url, accent=settings.shop_accent)


@dataclass(frozen=True)
class Facts:
    """What a restock's messages say in one language: the names (substituted when composing, never given to the
    model), the tone (one of wording.TONES), the two time windows in words, and what the email shows of the
    product (its price formatted for the language, its page and picture) and of the shop."""

    product: str
    shop: str
    voice: str
    offer_window: str
    hold_window: str
    lang: str = i18n.DEFAULT_LANGUAGE
    price: str | None = None
    product_url: str = ""
    image_url: str = ""
    brand: Brand = Brand()


def window_words(seconds: int, lang: str = i18n.DEFAULT_LANGUAGE) -> str:
    """A duration as a shopper reads it: 3600 -> '1 hour' ('1 Stunde'), 900 -> '15 minutes' ('15 Minuten')."""
    seconds = max(60, int(seconds))
    t = words(lang)
    if seconds % 3600 == 0:
        return t.plural("{n} hour", "{n} hours", seconds // 3600)
    return t.plural("{n} minute", "{n} minutes", -(-seconds // 60))


def facts_for(product: Product, shop: str, lang: str = i18n.DEFAULT_LANGUAGE, brand: Brand = Brand()) -> Facts:
    """The facts of a catalogue product the copy is written from, in one language."""
    lang = lang if lang in i18n.LANGUAGES else i18n.DEFAULT_LANGUAGE
    return Facts(
        product=(product.name or product.sku or words(lang)("your item")).strip(),
        shop=shop,
        voice=tone_of(product.voice) or DEFAULT_TONE,  # a value stored before tones were fixed maps to its tone
        offer_window=window_words(product.offer_window_s or 3600, lang),
        hold_window=window_words(product.hold_window_s or 900, lang),
        lang=lang,
        price=i18n.price(product.price, product.currency, lang),
        product_url=product.product_url or "",
        image_url=product.image_url or "",
        brand=brand,
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
    """The whole SMS in the facts' language: the shop's name, the copy with its link, how long the link lasts,
    then the opt-out. Folded whole to GSM-7 (accents and letters outside it to their GSM-7 forms, sms.to_gsm).

    The product's name goes where the copy says {product}, shortened until the whole SMS fits its segments.
    The shop and the offer window are written here, around the copy, not asked of the copy: whatever the model
    wrote (or a copy cached before a window changed), every SMS names who sent it and how long the offer lasts,
    from the facts of this very offer. A copy that already starts with the shop's name is not prefixed twice.
    """
    t = words(facts.lang)
    shop = sms_shop(facts.shop)
    window = t(WINDOW_LINE, window=facts.offer_window)
    ending = _sms_ending(t, manage_url, two_way=two_way)

    def whole(name: str) -> str:
        body = fill(copy_sms, link=reserve_url, product=name, shop=shop)
        lead = "" if not shop or body.startswith(shop) else f"{shop}: "
        return f"{lead}{body}\n{window}\n{ending}"

    return _fit_sms(facts.product, whole, shortens=PRODUCT in copy_sms)


def _sms_ending(t: i18n.Text, manage_url: str, *, two_way: bool) -> str:
    """How every SMS ends: the manage link and STOP where replies reach us, else the opt-out link."""
    if two_way:
        return f"{t(MANAGE_LABEL, link=manage_url)}\n{t(STOP_LINE)}"
    return t(OPT_OUT_LABEL, link=manage_url + STOP_QUERY)


def _fit_sms(product: str, whole: Callable[[str], str], *, shortens: bool = True) -> str:
    """The SMS `whole` writes around the product's name, the name shortened until the text fits
    SMS_TOTAL_SEGMENTS (never below SMS_PRODUCT_MIN characters). Folded whole to GSM-7: one character outside it
    (say, in a copy cached long ago) would make every part UCS-2."""
    product = gsm_only(product).strip()
    limit = len(product)
    while True:
        name = shorten(product, limit)
        text = gsm_only(whole(name))
        over = septets(text) - SMS_TOTAL_SEGMENTS * GSM_PART
        if not shortens or over <= 0 or limit <= SMS_PRODUCT_MIN:
            return text
        # Each septet over comes off the name (a name may appear more than once, so go round again).
        limit = max(SMS_PRODUCT_MIN, min(limit, len(name)) - over)


# --- The email.

# The card every email is drawn on, and the text written on it.
CARD, TEXT = "#ffffff", "#111827"


def on_colour(background: str) -> str:
    """The text colour readable on a background: white or near-black, whichever contrasts more."""
    return readable_on(background, CARD, TEXT)


def _link(accent: str) -> str:
    """The accent for links on the white card when it is readable there, else the body's text colour."""
    return link_colour(accent, CARD, TEXT)


def _accent(facts: Facts) -> str:
    return accent_or_default(facts.brand.accent or "")


def button(href: str, label: str, accent: str) -> str:
    """A button every client draws: a table cell with the background, and the link inside it (no image, no CSS
    that a client may drop). `href` and `label` are HTML-escaped already."""
    fg = on_colour(accent)
    return (
        '<table role="presentation" cellpadding="0" cellspacing="0" border="0" style="margin:8px 0 16px">'
        f'<tr><td align="center" bgcolor="{accent}" style="background:{accent};border-radius:6px">'
        f'<a href="{href}" style="display:inline-block;padding:12px 22px;font-family:Arial,Helvetica,sans-serif;'
        f'font-size:16px;font-weight:bold;line-height:20px;color:{fg};text-decoration:none;border-radius:6px">'
        f"{label}</a></td></tr></table>"
    )


P_STYLE = "margin:0 0 16px;font-family:Arial,Helvetica,sans-serif;font-size:16px;line-height:24px;color:#111827"
SMALL = "margin:0 0 8px;font-family:Arial,Helvetica,sans-serif;font-size:13px;line-height:20px;color:#4b5563"


def email_body_html(text: str, lang: str, accent: str = DEFAULT_ACCENT) -> tuple[str, bool]:
    """HTML for an email body written as plain paragraphs (the model never writes markup), with its placeholders
    still in: a paragraph that is only the link becomes the button, a link inside a sentence a text link. Also
    says whether the button was drawn (when not, the email adds one after the copy)."""
    t = words(lang)
    parts = []
    drawn = False
    for para in re.split(r"\n\s*\n", text.strip()):
        para = para.strip()
        if para == LINK:
            parts.append(button(LINK, html.escape(t("Hold one for me")), accent))
            drawn = True
            continue
        escaped = html.escape(para).replace("\n", "<br>")
        anchor = f'<a class="lnk" href="{LINK}" style="color:{_link(accent)}">{html.escape(t("this link"))}</a>'
        parts.append(f'<p class="fg" style="{P_STYLE}">' + escaped.replace(LINK, anchor) + "</p>")
    return "\n".join(parts), drawn


# Dark mode for the clients that read a <style> (the inline styles alone give a correct light email).
DARK = (
    "<style>:root{color-scheme:light dark;supported-color-schemes:light dark}"
    "@media (prefers-color-scheme:dark){.bg{background:#0b0f14!important}.card{background:#111827!important}"
    ".fg{color:#f3f4f6!important}.muted{color:#9ca3af!important}.lnk{color:#e5e7eb!important}"
    # A logo drawn for a light page (dark lettering on transparency) would vanish: it keeps a light ground.
    ".logo{background:#ffffff!important;border-radius:6px!important;padding:4px 8px!important}}</style>"
)


def email_document(lang: str, title: str, rows: list[str]) -> str:
    """A whole HTML email: a centred card at most 600px wide, in tables (role="presentation"), inline styles."""
    body = "\n".join(f'<tr><td style="padding:0 24px">{row}</td></tr>' for row in rows)
    return (
        f'<!doctype html>\n<html lang="{lang}" dir="ltr"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark"><meta name="supported-color-schemes" content="light dark">'
        f"<title>{html.escape(title)}</title>{DARK}</head>"
        '<body class="bg" style="margin:0;padding:0;background:#f3f4f6">'
        '<table role="presentation" class="bg" width="100%" cellpadding="0" cellspacing="0" border="0" '
        'style="background:#f3f4f6"><tr><td align="center" style="padding:24px 12px">'
        '<table role="presentation" class="card" width="600" cellpadding="0" cellspacing="0" border="0" '
        'style="width:100%;max-width:600px;background:#ffffff;border-radius:8px">'
        '<tr><td style="height:24px;line-height:24px;font-size:0">&nbsp;</td></tr>\n'
        f"{body}\n"
        '<tr><td style="height:16px;line-height:16px;font-size:0">&nbsp;</td></tr>'
        "</table></td></tr></table></body></html>"
    )


def _header(facts: Facts) -> str:
    return shop_header(facts.shop, facts.brand)


def shop_header(shop_name: str, brand: Brand) -> str:
    """The top of every email the shop sends: its logo (else its name), linking to its site when it has one."""
    shop = html.escape(shop_name, quote=True)
    if brand.logo_url:
        inner = (
            f'<img class="logo" src="{html.escape(brand.logo_url, quote=True)}" alt="{shop}" height="40" '
            'style="display:block;height:40px;width:auto;max-width:240px;border:0;outline:none;'
            'font-family:Arial,Helvetica,sans-serif;font-size:18px;color:#111827">'
        )
    else:
        inner = (
            '<span class="fg" style="font-family:Arial,Helvetica,sans-serif;font-size:20px;font-weight:bold;'
            f'color:#111827">{shop}</span>'
        )
    if brand.shop_url:
        inner = f'<a href="{html.escape(brand.shop_url, quote=True)}" style="text-decoration:none">{inner}</a>'
    return f'<div style="padding:0 0 20px">{inner}</div>'


def _product_card(facts: Facts, t: i18n.Text) -> str:
    name = html.escape(facts.product, quote=True)
    href = html.escape(facts.product_url, quote=True)
    title = f'<a href="{href}" style="color:#111827;text-decoration:none" class="fg">{name}</a>' if href else name
    cells = []
    if facts.image_url:
        image = (
            f'<img src="{html.escape(facts.image_url, quote=True)}" alt="{name}" width="{IMAGE_SIZE}" '
            f'height="{IMAGE_SIZE}" style="display:block;width:{IMAGE_SIZE}px;height:{IMAGE_SIZE}px;'
            'object-fit:cover;border:0;border-radius:6px">'
        )
        image = f'<a href="{href}" style="text-decoration:none">{image}</a>' if href else image
        cells.append(f'<td width="{IMAGE_SIZE}" valign="top" style="padding:0 16px 0 0">{image}</td>')
    facts_html = [
        '<p class="fg" style="margin:0 0 4px;font-family:Arial,Helvetica,sans-serif;font-size:18px;'
        f'line-height:24px;font-weight:bold;color:#111827">{title}</p>'
    ]
    if facts.price:
        facts_html.append(f'<p class="fg" style="{SMALL};color:#111827">{html.escape(facts.price)}</p>')
    if href:
        label = html.escape(t("View the product"))
        facts_html.append(
            f'<p style="{SMALL}"><a class="lnk" href="{href}" style="color:{_link(_accent(facts))}">{label}</a></p>'
        )
    cells.append(f'<td valign="top" style="padding:0">{"".join(facts_html)}</td>')
    return (
        '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" '
        f'style="margin:0 0 20px"><tr>{"".join(cells)}</tr></table>'
    )


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
    """The whole email for one recipient, in their language: the shop's logo, the product (picture, name, price,
    page), the copy with their link, the button, how long the link lasts, and a footer saying why they got it,
    with their manage and unsubscribe links and the shop. The text part says the same, link for link."""
    t = words(facts.lang)
    accent = _accent(facts)
    greeting = t("Hi {name},", name=name) if name else t("Hello,")
    window = t(WINDOW_LINE, window=facts.offer_window)
    hold = t("Hold one for me")
    names = {"product": facts.product, "shop": facts.shop}
    subject = shorten(" ".join(fill(copy.email_subject, link="", **names).split()), MAX_SUBJECT)

    body, drawn = email_body_html(copy.email_text, facts.lang, accent)
    product_lines = [facts.product, *([facts.price] if facts.price else [])]
    if facts.product_url:
        product_lines.append(f"{t('View the product')}: {facts.product_url}")
    lines = [greeting, "", "\n".join(product_lines), "", fill(copy.email_text, link=reserve_url, **names), ""]
    if not drawn:
        lines += [f"{hold}: {reserve_url}", ""]
    footer_text, footer_html = _footer(facts, t, manage_url, unsubscribe_url)
    text = "\n".join([*lines, window, "", *footer_text])

    escaped = {k: html.escape(v, quote=True) for k, v in names.items()}
    if not drawn:
        body += "\n" + button(LINK, html.escape(hold), accent)
    rows = [
        _header(facts),
        f'<p class="fg" style="{P_STYLE}">{html.escape(greeting)}</p>',
        _product_card(facts, t),
        fill(body, link=html.escape(reserve_url, quote=True), **escaped),
        f'<p class="muted" style="{SMALL}">{html.escape(window)}</p>',
        footer_html,
    ]
    return _email(facts, to, subject, text, rows, unsubscribe_url)


def _footer(facts: Facts, t: i18n.Text, manage_url: str, unsubscribe_url: str) -> tuple[list[str], str]:
    """The footer every notice email ends with, as text lines and as HTML: why they got it, their manage and
    unsubscribe links, the shop."""
    why = t("You asked {shop} to tell you when {product} was back in stock.", shop=facts.shop, product=facts.product)
    manage, unsubscribe = t("Manage your alerts"), t("Unsubscribe")
    shop_line = f"{facts.shop} - {facts.brand.shop_url}" if facts.brand.shop_url else facts.shop
    text = ["--", why, f"{manage}: {manage_url}", f"{unsubscribe}: {unsubscribe_url}", shop_line, ""]
    shop = html.escape(facts.shop, quote=True)
    if facts.brand.shop_url:
        shop = f'<a class="lnk" href="{html.escape(facts.brand.shop_url, quote=True)}" style="color:#4b5563">{shop}</a>'
    manage_href, unsubscribe_href = html.escape(manage_url, quote=True), html.escape(unsubscribe_url, quote=True)
    footer = (
        '<hr style="border:0;border-top:1px solid #e5e7eb;margin:24px 0 16px">'
        f'<p class="muted" style="{SMALL}">{html.escape(why)}</p>'
        f'<p class="muted" style="{SMALL}"><a class="lnk" href="{manage_href}" style="color:#4b5563">{html.escape(manage)}</a>'
        f' &middot; <a class="lnk" href="{unsubscribe_href}" style="color:#4b5563">{html.escape(unsubscribe)}</a></p>'
        f'<p class="muted" style="{SMALL}">{shop}</p>'
    )
    return text, footer


def _email(facts: Facts, to: str, subject: str, text: str, rows: list[str], unsubscribe_url: str) -> Notice:
    return Notice(
        channel=EMAIL,
        to=to,
        subject=subject,
        text=text,
        html=email_document(facts.lang, subject, rows),
        unsubscribe_url=unsubscribe_url,
    )


# --- The reminder before an offer lapses (chalicelib/reminders.py): fixed words only, no model copy.

REMINDER_SUBJECT = "Still want {product}? It goes to the next person in {window}"
REMINDER_TEXT = (
    "We are still keeping one {product} for you, for {window} more. If you do not hold it by then, it goes to the "
    "next person waiting."
)
REMINDER_ONCE = "This is the only reminder we send about it."
REMINDER_SMS = "{shop}: {product} is kept for you for {window} more, then goes to the next person: {link}"


def compose_reminder_sms(facts: Facts, window: str, reserve_url: str, manage_url: str, *, two_way: bool) -> str:
    """The reminder SMS in the facts' language: the shop, the product, the time left, the reserve link and the
    opt-out ending the notices have, folded to GSM-7, its product name shortened to keep SMS_TOTAL_SEGMENTS."""
    t = words(facts.lang)
    shop = sms_shop(facts.shop)
    ending = _sms_ending(t, manage_url, two_way=two_way)
    return _fit_sms(
        facts.product,
        lambda name: f"{t(REMINDER_SMS, shop=shop, product=name, window=window, link=reserve_url)}\n{ending}",
    )


def compose_reminder_email(
    facts: Facts,
    window: str,
    *,
    to: str,
    name: str,
    reserve_url: str,
    manage_url: str,
    unsubscribe_url: str,
) -> Notice:
    """The reminder email in the facts' language: the time left, the hold button, and the footer every notice
    has (why they got it, their manage and unsubscribe links, the shop), the text part saying the same."""
    t = words(facts.lang)
    accent = _accent(facts)
    greeting = t("Hi {name},", name=name) if name else t("Hello,")
    keeping = t(REMINDER_TEXT, product=facts.product, window=window)
    once = t(REMINDER_ONCE)
    hold = t("Hold one for me")
    subject = shorten(" ".join(t(REMINDER_SUBJECT, product=facts.product, window=window).split()), MAX_SUBJECT)
    footer_text, footer_html = _footer(facts, t, manage_url, unsubscribe_url)
    text = "\n".join([greeting, "", keeping, "", f"{hold}: {reserve_url}", "", once, "", *footer_text])
    rows = [
        _header(facts),
        f'<p class="fg" style="{P_STYLE}">{html.escape(greeting)}</p>',
        f'<p class="fg" style="{P_STYLE}">{html.escape(keeping)}</p>',
        button(html.escape(reserve_url, quote=True), html.escape(hold), accent),
        f'<p class="muted" style="{SMALL}">{html.escape(once)}</p>',
        footer_html,
    ]
    return _email(facts, to, subject, text, rows, unsubscribe_url)
