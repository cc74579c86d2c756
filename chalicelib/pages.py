"""The HTML a shopper sees: one page frame, and the text of every page a reserve link or a shopper's own link
answers with. Holds (reserve links) and self-service (unsubscribe, "my requests") both draw on it, so a text
they share, such as a link cut short, is written once.
"""

from __future__ import annotations

import base64
import hashlib
import html
from dataclasses import dataclass
from datetime import UTC, datetime

from chalice import Response

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


@dataclass(frozen=True)
class PageText:
    """A page's heading and its one-paragraph message."""

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
# A shopper's own link signed before they signed out everywhere.
SIGNED_OUT = PageText(
    "This link was signed out",
    "This link to your requests was switched off when you chose to sign out everywhere. "
    "Use the link in the next message we send you.",
)

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
    "used": "This link has already been used to place an order, so there is nothing more to reserve with it.",
}
RESERVE_EXPIRED_DEFAULT = "This reservation link is no longer valid. You keep your place in line for next time."


def when(ts: int | None) -> str:
    """A moment as shoppers read it, in UTC ('14:05 UTC on 30 Nov')."""
    if ts is None:
        return "soon"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%H:%M UTC on %d %b")


def html_page(status: int, title: str, message: str, shop_name: str, extra_html: str = "") -> Response:
    """A small, accessible HTML page carrying the shop's name."""
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} · {html.escape(shop_name)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#1a1a1a}}
h1{{font-size:1.5rem}}button{{font-size:1rem;padding:.6rem 1.2rem}}.shop{{color:#555;font-size:.9rem}}</style></head>
<body><main><p class="shop">{html.escape(shop_name)}</p><h1>{html.escape(title)}</h1><p>{html.escape(message)}</p>{extra_html}</main></body></html>
"""
    return Response(
        body=body, status_code=status, headers={"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"}
    )


# --- The shopper's own pages (unsubscribe, "my requests"): the frame with what every tokenised page needs.

SECURITY_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Robots-Tag": "noindex",
}


def page(status: int, title: str, message: str, shop_name: str, extra_html: str = "") -> Response:
    """A shopper page with the security headers every tokenised page needs."""
    response = html_page(status, title, message, shop_name, extra_html)
    response.headers.update(SECURITY_HEADERS)
    return response


def redirect(location: str) -> Response:
    """303 See Other back to a page (POST, then redirect, then GET: a reload never re-submits)."""
    return Response(body="", status_code=303, headers={"Location": location, **SECURITY_HEADERS})


# --- Reserve links. Opening one (GET) holds nothing: mail and chat scanners open links before the shopper does.
# The page holds (or goes on to checkout) through its form, a POST, which one tiny script sends at once, so a
# person still taps once; a scanner that fetches the page without running it holds nothing.

AUTO_SUBMIT = 'document.getElementById("go").submit();'
# The page's only script, allowed by its hash: no 'unsafe-inline', and no other script can run on the page.
AUTO_SUBMIT_HASH = "'sha256-" + base64.b64encode(hashlib.sha256(AUTO_SUBMIT.encode()).digest()).decode() + "'"
# SECURITY_HEADERS' policy with that one script, and without form-action: browsers apply form-action to the
# redirect that answers the form, and this form's answer is a 303 to the shop's checkout on another origin.
RESERVE_PAGE_CSP = (
    f"default-src 'none'; script-src {AUTO_SUBMIT_HASH}; style-src 'unsafe-inline'; "
    "frame-ancestors 'none'; base-uri 'none'"
)

CROSS_SITE = PageText(
    "Please use the link in your message",
    "This request came from another website, so nothing was reserved. Open the link in your message to hold one.",
)


def _reserve_form(title: str, message: str, button: str, token: str, shop_name: str) -> Response:
    form = (
        f'<form id="go" method="post" action="{html.escape(token)}"><button type=submit>{html.escape(button)}</button>'
        f"</form><script>{AUTO_SUBMIT}</script>"
    )
    response = page(200, title, message, shop_name, form)
    response.headers["Content-Security-Policy"] = RESERVE_PAGE_CSP
    return response


def reserve_response(outcome: ReserveOutcome, status: int, shop_name: str, token: str) -> Response:
    """The HTTP answer to an opened link or a tap, with the status the entry point chose: the page whose form
    holds (or goes on to checkout), a redirect to checkout, or a small page that says why not."""
    if outcome.location is not None:
        return Response(
            body=f'<!doctype html><p><a href="{html.escape(outcome.location)}">Continue to checkout</a></p>',
            status_code=status,
            headers={
                **SECURITY_HEADERS,
                "Location": outcome.location,
                "Content-Type": "text/html; charset=utf-8",
                "Cache-Control": "no-store",
            },
        )
    name = outcome.product_name or ""
    if outcome.kind == OFFER_PAGE:
        return _reserve_form(
            f"{name} is back in stock",
            f"We will hold one for you while you check out. This link works until {when(outcome.offer_expires_at)}.",
            "Hold one for me",
            token,
            shop_name,
        )
    if outcome.kind == HOLDING_PAGE:
        return _reserve_form(
            f"One {name} is held for you",
            f"It is yours to buy until {when(outcome.hold_expires_at)}.",
            "Go to checkout",
            token,
            shop_name,
        )
    if outcome.kind == EXPIRED_LINK:
        text = PageText(EXPIRED_TITLE, RESERVE_EXPIRED_MESSAGES.get(outcome.reason or "", RESERVE_EXPIRED_DEFAULT))
    else:
        text = RESERVE_PAGES[outcome.kind]
    return page(status, text.title, text.message, shop_name)


def reserve_refused(status: int, token: str, shop_name: str) -> Response:
    """A tap sent from another website's page: nothing is held; the shopper's own link still works."""
    back = f'<p><a href="{html.escape(token)}">Open your link</a></p>'
    return page(status, CROSS_SITE.title, CROSS_SITE.message, shop_name, back)
