"""The HTML a shopper sees: one page frame in the shop's look, and the text of every page a reserve link or a
shopper's own link answers with. Holds (reserve links), self-service (unsubscribe, "my requests"), email
confirmation and opting back in all draw on it, so a text they share, such as a link cut short, is written once.

Every string is in the `pages` domain (chalicelib/locales/pages.pot), in the shopper's language.
"""

from __future__ import annotations

import base64
import hashlib
import html
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from chalicelib import i18n
from chalicelib.colours import DEFAULT_ACCENT, accent_or_default, link_colour, readable_on
from chalicelib.holds import (
    EXPIRED_LINK,
    HOLDING_PAGE,
    INVALID_LINK,
    JUST_GONE_PAGE,
    OFFER_PAGE,
    STORE_DOWN,
    UNAVAILABLE,
    UNKNOWN_LINK,
    ReserveOutcome,
)

if TYPE_CHECKING:
    from chalicelib.config import Settings

DOMAIN = "pages"


class Html(str):
    """Text already made safe for HTML: the frame writes it as it is; any other str is escaped."""


def esc(text: str) -> Html:
    """Plain text, escaped for HTML."""
    return Html(html.escape(text))


def markup(lang: str, msgid: str, **fields: str) -> Html:
    """A translated sentence as HTML: the translation escaped, then its `{fields}` filled with HTML the caller
    made safe (an escaped name, a <time> element)."""
    return Html(i18n.fill(html.escape(i18n.text(DOMAIN, lang)(msgid)), dict(fields)))


def tr(lang: str, msgid: str, **fields: object) -> str:
    """A page string in a language, as plain text."""
    return i18n.text(DOMAIN, lang)(msgid, **fields)


# --- The shop's look.


@dataclass(frozen=True)
class Shop:
    """What every page shows of the shop: its name, home page, logo and accent colour (docs/SHOPPER.md)."""

    name: str
    url: str = ""
    logo_url: str = ""
    accent: str = DEFAULT_ACCENT

    @classmethod
    def of(cls, settings: Settings) -> Shop:
        """The shop as the stage's settings describe it."""
        return cls(settings.shop_name, settings.shop_url, settings.shop_logo_url, settings.shop_accent)


@dataclass(frozen=True)
class About:
    """The one product a page is about: its name, picture and page in the shop."""

    name: str
    image_url: str = ""
    url: str = ""


LIGHT_BG, LIGHT_FG = "#ffffff", "#1a1a1a"
DARK_BG, DARK_FG = "#121212", "#ececec"
BLACK, WHITE = "#000000", "#ffffff"


def on_accent(accent: str) -> str:
    """The text colour that reads best on a button of the accent colour (black or white)."""
    return readable_on(accent, BLACK, WHITE)


def style(accent: str) -> str:
    """The page's one stylesheet, in the shop's accent; mobile first, light and dark."""
    accent = accent_or_default(accent)
    light_link = link_colour(accent, LIGHT_BG, LIGHT_FG)
    dark_link = link_colour(accent, DARK_BG, DARK_FG)
    return (
        f":root{{color-scheme:light dark;--bg:{LIGHT_BG};--fg:{LIGHT_FG};--muted:#555;--card:#f4f2ef;--line:#ddd;"
        f"--accent:{accent};--on-accent:{on_accent(accent)};--link:{light_link}}}"
        f"@media (prefers-color-scheme:dark){{:root{{--bg:{DARK_BG};--fg:{DARK_FG};--muted:#b8b8b8;--card:#1f1f1f;"
        f"--line:#333;--link:{dark_link}}}.logo img{{background:#fff;border-radius:.4rem;padding:.25rem}}}}"
        "*{box-sizing:border-box}"
        "body{margin:0;background:var(--bg);color:var(--fg);"
        "font:1rem/1.55 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif}"
        ".wrap{max-width:34rem;margin:0 auto;padding:0 1rem}"
        "header{border-bottom:1px solid var(--line)}header .wrap{display:flex;align-items:center;min-height:4rem}"
        ".logo{display:inline-flex;align-items:center;min-height:44px;color:var(--fg);font-weight:700;"
        "text-decoration:none;font-size:1.1rem}.logo img{display:block;max-height:3rem;max-width:14rem;height:auto}"
        "main.wrap{padding-top:1.5rem;padding-bottom:1rem}h1{font-size:1.5rem;line-height:1.25;margin:0 0 1rem}"
        "h2{font-size:1.15rem;margin:0 0 .5rem}p{margin:0 0 1rem}"
        "a{color:var(--link);text-decoration-color:var(--accent);text-underline-offset:.2em}"
        "a:focus-visible,button:focus-visible,input:focus-visible{outline:3px solid var(--link);outline-offset:2px}"
        "button,.button{display:inline-flex;align-items:center;justify-content:center;min-height:44px;"
        "min-width:44px;padding:.6rem 1.25rem;border:2px solid var(--accent);border-radius:.5rem;"
        "background:var(--accent);color:var(--on-accent);font:inherit;font-weight:600;line-height:1.2;"
        "text-align:center;text-decoration:none;cursor:pointer}"
        "button.quiet{background:transparent;color:var(--link)}"
        "form{margin:0 0 1rem}label{display:block;margin:0 0 .5rem;font-weight:600}"
        "input{display:block;width:100%;min-height:44px;margin-top:.25rem;padding:.5rem .75rem;font:inherit;"
        "color:var(--fg);background:var(--bg);border:1px solid var(--muted);border-radius:.4rem}"
        ".product{display:flex;gap:1rem;align-items:center;background:var(--card);border-radius:.75rem;"
        "padding:.75rem;margin:0 0 1.25rem}.product img{width:88px;height:88px;object-fit:cover;border-radius:.5rem;"
        "flex:none}.product p{margin:0;font-weight:600}"
        "section{border-top:1px solid var(--line);padding:1rem 0}.done{padding:.75rem 1rem;border-radius:.5rem;"
        "background:var(--card);border-left:4px solid var(--accent)}.note{color:var(--muted)}"
        "footer{border-top:1px solid var(--line);padding:1rem 0 2rem}footer a{display:inline-flex;"
        "align-items:center;min-height:44px}"
        "@media (min-width:40rem){main.wrap{padding-top:2.5rem}h1{font-size:1.75rem}}"
    )


# --- Scripts. Each is allowed by its hash alone: no 'unsafe-inline', and no other script can run on a page.


def script_hash(source: str) -> str:
    """The CSP source expression that allows exactly this inline script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


# Times are written in UTC, naming the zone (what a browser without scripts shows); this rewrites each one into
# the browser's own time zone, in the page's language.
LOCAL_TIMES = (
    'document.querySelectorAll("time[data-local]").forEach(function(t){var d=new Date(t.dateTime);'
    'if(!isNaN(d))t.textContent=new Intl.DateTimeFormat(document.documentElement.lang,{month:"short",'
    'day:"numeric",hour:"numeric",minute:"2-digit",timeZoneName:"short"}).format(d);});'
)
LOCAL_TIMES_HASH = script_hash(LOCAL_TIMES)


def moment(ts: int | None, lang: str) -> Html:
    """A moment on a page: a <time> in UTC that the page's script shows in the shopper's own time zone."""
    if ts is None:
        return esc(tr(lang, "soon"))
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Html(f'<time datetime="{stamp}" data-local>{html.escape(i18n.moment(ts, lang))}</time>')


# --- Headers.

SECURITY_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Robots-Tag": "noindex",
}


def img_sources(*urls: str) -> str:
    """Where a page's images may come from: any https origin, and the origin of a configured http image (the
    local stage's logo and product pictures), never more."""
    sources = ["https:"]
    for url in urls:
        parsed = urlparse(url or "")
        if parsed.scheme == "http" and parsed.netloc:
            origin = f"http://{parsed.netloc}"
            if origin not in sources:
                sources.append(origin)
    return " ".join(sources)


def policy(scripts: tuple[str, ...], images: str, *, form_action: bool) -> str:
    """The page's Content-Security-Policy: nothing but inline styles, images from `images`, and exactly the
    inline scripts given (by hash)."""
    parts = ["default-src 'none'"]
    if scripts:
        parts.append("script-src " + " ".join(script_hash(s) for s in scripts))
    parts += ["style-src 'unsafe-inline'", f"img-src {images}"]
    if form_action:
        parts.append("form-action 'self'")
    parts += ["frame-ancestors 'none'", "base-uri 'none'"]
    return "; ".join(parts)


# --- The frame.


def product_card(about: About | None) -> str:
    """The product a page is about: its picture and its name, linked to its page in the shop."""
    if about is None or not about.name:
        return ""
    name = html.escape(about.name)
    image = f'<img src="{html.escape(about.image_url)}" alt="{name}">' if _web_url(about.image_url) else ""
    label = f'<a href="{html.escape(about.url)}">{name}</a>' if _web_url(about.url) else name
    return f'<div class="product">{image}<p>{label}</p></div>'


def _web_url(url: str | None) -> bool:
    return bool(url) and str(url).startswith(("https://", "http://"))


@dataclass(frozen=True)
class Page:
    """A rendered page: the status it is answered with, its HTML and its headers. Page modules return one and
    never speak HTTP themselves; the entry point answers with it (chalicelib/web/responses.py `page_response`)."""

    status: int
    html: str
    headers: dict[str, str | list[str]]

    def with_headers(self, extra: dict[str, str]) -> Page:
        """The same page with more headers, after those it has."""
        return Page(self.status, self.html, {**self.headers, **extra})


def shopper_page(
    status: int,
    title: str,
    message: str,
    shop: Shop,
    extra_html: str = "",
    *,
    lang: str = i18n.DEFAULT_LANGUAGE,
    about: About | None = None,
    scripts: tuple[str, ...] = (),
    form_action: bool = True,
) -> Page:
    """A shopper page in the shop's look, with the security headers every tokenised page needs (no Referer, no
    framing, never cached); its forms post only to us unless `form_action` is False (a form to the shop's checkout).

    `message` is plain text unless it is `Html`; `extra_html` is HTML the caller built safely. `scripts` are the
    page's own inline scripts (each allowed by its hash); times add the script that shows them in local time.
    """
    lang = lang if lang in i18n.LANGUAGES else i18n.DEFAULT_LANGUAGE
    body_html = message if isinstance(message, Html) else html.escape(message)
    paragraph = f"<p>{body_html}</p>" if body_html else ""
    content = f"{product_card(about)}{paragraph}{extra_html}"
    if "data-local>" in content:
        scripts = (LOCAL_TIMES, *scripts)
    name = html.escape(shop.name)
    logo = f'<img src="{html.escape(shop.logo_url)}" alt="{name}" height="48">' if _web_url(shop.logo_url) else name
    home = shop.url if _web_url(shop.url) else (about.url if about and _web_url(about.url) else "")
    brand = f'<a class="logo" href="{html.escape(home)}">{logo}</a>' if home else f'<span class="logo">{logo}</span>'
    back = (
        f'<footer><div class="wrap"><a href="{html.escape(home)}">{html.escape(tr(lang, "Back to the shop"))}</a></div></footer>'
        if home
        else ""
    )
    tags = "".join(f"<script>{s}</script>" for s in scripts)
    body = (
        f'<!doctype html>\n<html lang="{lang}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="color-scheme" content="light dark"><title>{html.escape(title)} · {name}</title>'
        f"<style>{style(shop.accent)}</style></head>\n"
        f'<body><header><div class="wrap">{brand}</div></header>'
        f'<main class="wrap"><h1>{html.escape(title)}</h1>{content}</main>{back}{tags}</body></html>\n'
    )
    images = img_sources(shop.logo_url, about.image_url if about else "")
    headers: dict[str, str | list[str]] = {
        "Content-Type": "text/html; charset=utf-8",
        "Cache-Control": "no-store",
        **SECURITY_HEADERS,
        "Content-Security-Policy": policy(scripts, images, form_action=form_action),
    }
    return Page(status, body, headers)


def see_other(location: str) -> Page:
    """303 See Other back to a page (POST, then redirect, then GET: a reload never re-submits)."""
    return Page(303, "", {"Location": location, **SECURITY_HEADERS})


def button_form(action: str, label: str, hidden: dict[str, str] | None = None, *, form_id: str = "") -> str:
    """A form that posts to `action` with one button (and hidden fields)."""
    fields = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in (hidden or {}).items()
    )
    ident = f' id="{form_id}"' if form_id else ""
    return (
        f'<form{ident} method="post" action="{html.escape(action)}">{fields}'
        f"<button type=submit>{html.escape(label)}</button></form>"
    )


# --- Texts every kind of link shares.


@dataclass(frozen=True)
class PageText:
    """A page's heading and its one-paragraph message (English msgids of the `pages` domain)."""

    title: str
    message: str


LINK_INCOMPLETE = PageText(
    "This link is not complete",
    "It may have been cut short when it was copied. Please open it straight from your message.",
)
EXPIRED_TITLE = "This link has expired"
# A shopper's own (manage) link outlived its age limit.
OWN_LINK_EXPIRED = PageText(
    EXPIRED_TITLE,
    "For your privacy, this link only works for a while. Use the link in your most recent message.",
)
# A shopper's own link issued before they switched off their links.
SIGNED_OUT = PageText(
    "This link was switched off",
    "This link to your requests was switched off at your request. Use the link in the next message we send you.",
)


def shopper_text_page(status: int, text: PageText, shop: Shop, lang: str, about: About | None = None) -> Page:
    """A page that is only a heading and a message, in the shopper's language."""
    return shopper_page(status, tr(lang, text.title), tr(lang, text.message), shop, lang=lang, about=about)


# An address no route serves, opened in a browser (chalicelib/web/not_found.py).
NOT_FOUND_PAGE = PageText(
    "We cannot find that page",
    "There is nothing at this address. If you followed a link from one of our messages, please open it again "
    "straight from the message: a link that was cut short or copied in part leads here.",
)


# --- Reserve links. Opening one (GET) holds nothing: mail and chat scanners open links before the shopper does.
# The page holds (or goes on to checkout) only through its form, a POST, and only a press of its button sends it:
# no script sends it, since a scanner that runs the page's scripts (a sandbox that "detonates" links) would start
# the shopper's hold at delivery and use up its minutes before they ever look.

# Reserve links: the page for each outcome that is not a redirect to checkout.
RESERVE_PAGES: dict[str, PageText] = {
    JUST_GONE_PAGE: PageText(
        "Just gone — you keep your place for next time",
        "Sorry, the last one went moments before you tapped. You have not lost your place in line: "
        "we will tell you when it is back in stock.",
    ),
    INVALID_LINK: LINK_INCOMPLETE,
    UNKNOWN_LINK: PageText(
        "We cannot find this reservation",
        "This link does not match any reservation we have. Please open it straight from your message.",
    ),
    UNAVAILABLE: PageText(
        "Checkout is not available right now",
        "We could not take you to checkout, so nothing has been reserved yet. Please try your link again shortly.",
    ),
    STORE_DOWN: PageText(
        "It is held for you — checkout will be back in a moment",
        "We have set one aside for you, but the shop's checkout did not answer just now. "
        "Please tap the link in your message again in a minute: it is still yours until your hold ends.",
    ),
}
# An expired reserve link: why it expired, in words.
RESERVE_EXPIRED_MESSAGES: dict[str, str] = {
    "offer_lapsed": "The time to reserve this item has passed, so it went to the next person in line. "
    "You keep your place, and we will tell you when it is back in stock.",
    "hold_expired": "The item was held for you for a while and that time is up, so it went to the next person in "
    "line. You keep your place, and we will tell you when it is back in stock.",
}
RESERVE_EXPIRED_DEFAULT = "This reservation link is no longer valid. You keep your place in line for next time."
# A link whose hold ended in an order: the shopper bought it, which is no expiry to them.
BOUGHT = PageText(
    "You bought this one",
    "This link was for the one you ordered, so there is nothing more to hold with it. Thank you for your order.",
)

# A form of ours (confirm, unsubscribe) posted from another site's page: nothing changed.
FORM_CROSS_SITE = PageText("Please try that again", "This form was sent from another website, so we ignored it.")

CROSS_SITE = PageText(
    "Please use the link in your message",
    "This request came from another website, so nothing was reserved. Open the link in your message to hold one.",
)


def _about(outcome: ReserveOutcome) -> About | None:
    if not outcome.product_name:
        return None
    return About(outcome.product_name, outcome.product_image_url or "", outcome.product_url or "")


def _reserve_form(
    title: str, message: Html, button: str, token: str, shop: Shop, outcome: ReserveOutcome, lang: str
) -> Page:
    form = button_form(token, button, form_id="go")
    # Without form-action: browsers apply it to the redirect that answers the form, and this form's answer is a
    # 303 to the shop's checkout on another origin.
    return shopper_page(
        200,
        title,
        message,
        shop,
        form,
        lang=lang,
        about=_about(outcome),
        form_action=False,
    )


def reserve_link_page(outcome: ReserveOutcome, status: int, shop: Shop, token: str, accept: str | None = None) -> Page:
    """The answer to an opened link or a tap, with the status the entry point chose: the page whose form
    holds (or goes on to checkout), a redirect to checkout, or a small page that says why not. The page is in
    the offer's language, or the browser's (`accept`, its Accept-Language) when the link names no offer."""
    lang = i18n.negotiate(outcome.lang, accept=accept)
    if outcome.location is not None:
        link = html.escape(tr(lang, "Continue to checkout"))
        return Page(
            status,
            f'<!doctype html><p><a href="{html.escape(outcome.location)}">{link}</a></p>',
            {
                **SECURITY_HEADERS,
                "Location": outcome.location,
                "Content-Type": "text/html; charset=utf-8",
                "Cache-Control": "no-store",
            },
        )
    name = outcome.product_name or ""
    if outcome.kind == OFFER_PAGE:
        return _reserve_form(
            tr(lang, "{product} is back in stock", product=name),
            markup(
                lang,
                "We will hold one for you while you check out. This link works until {time}.",
                time=moment(outcome.offer_expires_at, lang),
            ),
            tr(lang, "Hold one for me"),
            token,
            shop,
            outcome,
            lang,
        )
    if outcome.kind == HOLDING_PAGE:
        return _reserve_form(
            tr(lang, "One {product} is held for you", product=name),
            markup(lang, "It is yours to buy until {time}.", time=moment(outcome.hold_expires_at, lang)),
            tr(lang, "Go to checkout"),
            token,
            shop,
            outcome,
            lang,
        )
    if outcome.kind == EXPIRED_LINK and outcome.reason == "used":
        text = BOUGHT
    elif outcome.kind == EXPIRED_LINK:
        text = PageText(EXPIRED_TITLE, RESERVE_EXPIRED_MESSAGES.get(outcome.reason or "", RESERVE_EXPIRED_DEFAULT))
    else:
        text = RESERVE_PAGES[outcome.kind]
    return shopper_text_page(status, text, shop, lang, _about(outcome))


def reserve_refused(status: int, token: str, shop: Shop, accept: str | None) -> Page:
    """A tap sent from another website's page: nothing is held; the shopper's own link still works. The page is
    in the browser's language (the offer is not read for a refused tap)."""
    lang = i18n.negotiate(accept=accept)
    back = f'<p><a href="{html.escape(token)}">{html.escape(tr(lang, "Open your link"))}</a></p>'
    return shopper_page(status, tr(lang, CROSS_SITE.title), tr(lang, CROSS_SITE.message), shop, back, lang=lang)
