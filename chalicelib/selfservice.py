"""The shopper's own pages: unsubscribe (RFC 8058 one-click) and "my requests" (place in line, leave, switch).

Every answer is a small HTML page (or a redirect back to one); a refusal is an honest page, never a 5xx.
The pages carry bearer tokens in their URLs, so they send no Referer, forbid framing (a hidden frame
could trick a click on "Unsubscribe") and are never cached.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs

from chalice import Response

from chalicelib.clock import Clock
from chalicelib.errors import DomainError
from chalicelib.leaving import GONE, HOLDING, Exit
from chalicelib.line import PlaceInLine
from chalicelib.manage import ACTIONS, FormRefused, ManageService, ManageView, Place, product_name
from chalicelib.optout_service import OptoutService
from chalicelib.pages import LINK_INCOMPLETE, OWN_LINK_EXPIRED, SIGNED_OUT, page, redirect, when
from chalicelib.tables.catalog import CatalogTable
from chalicelib.tables.requests import RequestState
from chalicelib.tokens import TokenExpired, TokenInvalid, TokenRevoked, Tokens
from chalicelib.web import cross_site

MAX_FORM_BYTES = 4096
SIGNED_OUT_DONE = (
    "Every link to this page we sent you so far no longer works. Your places in line are kept; "
    "the next message we send you carries a new link."
)
ONE_CLICK = ("List-Unsubscribe", "One-Click")  # RFC 8058 §3.1: the body a mail client POSTs

DONE_MESSAGES = {
    "left": "You have left that list.",
    "gone": "You were not on that list any more.",
    "holding": "One is held for you, so it stays yours to buy until the hold ends; then you leave the list.",
    "switched": "Done: your notices now go to the contact shown below, and you keep your places.",
    "code_sent": "We sent a code to your new contact. Enter it below to switch.",
    "stopped": "You are unsubscribed: we will not message you or add you to any list.",
}


def ordinal(n: int) -> str:
    """1 -> '1st', 2 -> '2nd', 11 -> '11th', 23 -> '23rd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def place_words(place: PlaceInLine) -> str:
    """A waiting place's status line: exact when the line's figures pin it down, else the range they allow."""
    if place.exact is not None:
        return f"You are {ordinal(place.exact)} in line."
    if place.lowest == 1:
        return f"You are at most {ordinal(place.highest)} in line."
    return (
        f"You are between {ordinal(place.lowest)} and {ordinal(place.highest)} in line "
        "(some people ahead of you left or bought since you joined)."
    )


def is_one_click(raw: bytes | None, content_type: str) -> bool:
    """True when the body says List-Unsubscribe=One-Click (urlencoded, text, or multipart/form-data)."""
    data = raw or b""
    if len(data) > MAX_FORM_BYTES:
        return False
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        # RFC 8058 prefers multipart; read it with the standard library's MIME parser.
        # Imported here, not at the top: a cold start pays for it only on the paths that use it.
        import email.parser
        import email.policy

        head = f"Content-Type: {content_type}\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + data)
        if not message.is_multipart():
            return False
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            value = part.get_content() if part.get_content_maintype() == "text" else ""
            if name == ONE_CLICK[0] and str(value).strip() == ONE_CLICK[1]:
                return True
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    fields = parse_qs(text.strip(), keep_blank_values=True, max_num_fields=10)
    return ONE_CLICK[1] in [v.strip() for v in fields.get(ONE_CLICK[0], [])]


@dataclass(frozen=True, kw_only=True, eq=False)
class SelfService:
    """Answers the shopper's links with pages."""

    shop_name: str
    tokens: Tokens
    optouts: OptoutService
    manage: ManageService
    catalog: CatalogTable
    clock: Clock
    allowed_origin: str  # scheme://host[:port], the only origin the manage page's forms may come from

    def _page(self, status: int, title: str, message: str, extra_html: str = "") -> Response:
        return page(status, title, message, self.shop_name, extra_html)

    def _bad_link(self, expired: bool) -> Response:
        if expired:
            return self._page(410, OWN_LINK_EXPIRED.title, OWN_LINK_EXPIRED.message)
        return self._page(400, LINK_INCOMPLETE.title, LINK_INCOMPLETE.message)

    # --- Unsubscribe

    def unsubscribe_form(self, token: str) -> Response:
        """GET /unsubscribe/{token}: a confirmation page; changes nothing (mail scanners open links)."""
        try:
            self.tokens.read_unsubscribe(token)
        except (TokenInvalid, TokenExpired):
            return self._bad_link(expired=False)
        form = (
            f'<form method="post" action="{html.escape(token)}">'
            '<input type="hidden" name="List-Unsubscribe" value="One-Click">'
            "<button type=submit>Unsubscribe</button></form>"
            "<p>If you hold an item right now, it stays yours to buy until its hold ends.</p>"
        )
        return self._page(
            200,
            "Stop back-in-stock messages?",
            f"You will leave every waiting list at {self.shop_name} and we will not message you again.",
            form,
        )

    def unsubscribe(self, token: str, raw: bytes | None, content_type: str) -> Response:
        """POST /unsubscribe/{token}: RFC 8058 one-click or the page's button; opt out and leave every list."""
        try:
            key = self.tokens.read_unsubscribe(token).value
        except (TokenInvalid, TokenExpired):
            return self._bad_link(expired=False)
        if not is_one_click(raw, content_type):
            return self._page(
                400,
                "Please use the button",
                "This request did not say what to do. Open the link again and press Unsubscribe.",
            )
        result = self.optouts.opt_out(key, "unsubscribe")
        return self._unsubscribed(result.newly, result.exits)

    def _unsubscribed(self, newly: bool, exits: list[Exit]) -> Response:
        parts = []
        left = [e for e in exits if e.outcome not in (HOLDING, GONE)]
        if left:
            names = ", ".join(html.escape(product_name(self.catalog, e.sku)) for e in left)
            parts.append(f"<p>You left the waiting list for: {names}.</p>")
        for held in (e for e in exits if e.outcome == HOLDING):
            name = html.escape(product_name(self.catalog, held.sku))
            parts.append(
                f"<p>You are holding one {name} until {html.escape(when(held.hold_expires_at))}. It stays yours "
                "to buy until then; if you do not, it goes to the next person in line.</p>"
            )
        message = (
            "We will not send you any more messages or add you to waiting lists."
            if newly
            else "You had already unsubscribed, so nothing more will be sent to you."
        )
        return self._page(200, "You are unsubscribed", message, "".join(parts))

    # --- My requests

    def _manage_key(self, token: str) -> str | Response:
        """The contact behind a manage link, or the page that says why the link does not work."""
        try:
            return self.manage.read_token(token)
        except TokenExpired:
            return self._bad_link(expired=True)
        except TokenRevoked:
            return self._page(410, SIGNED_OUT.title, SIGNED_OUT.message)
        except TokenInvalid:
            return self._bad_link(expired=False)

    def manage_page(self, token: str, done: str | None = None) -> Response:
        """GET /me/{token}: the products this shopper waits for, their place in each, and what they can do."""
        key = self._manage_key(token)
        if isinstance(key, Response):
            return key
        view = self.manage.view(key)
        return self._page(200, "Your requests", self._summary(view), self._manage_html(view, token, done))

    def manage_action(self, token: str, raw: bytes | None, content_type: str, headers: Mapping[str, str]) -> Response:
        """POST /me/{token}: leave a list, switch channel or stop everything, then back to the page."""
        key = self._manage_key(token)
        if isinstance(key, Response):
            return key
        back = f'<p><a href="{html.escape(token)}">Back to your requests</a></p>'
        try:
            self._check_origin(headers)
            form = self._form(raw, content_type)
            action = form.get("action", "")
            self.manage.check_form(key, action, form.get("form_token", ""))
            return self._act(key, token, action, form)
        except FormRefused as refused:
            return self._page(refused.status, "Please try that again", refused.message, back)
        except DomainError as error:
            return self._page(error.status, "That did not work", error.message, back)

    def _check_origin(self, headers: Mapping[str, str]) -> None:
        if cross_site(headers, self.allowed_origin):
            raise FormRefused("This form was sent from another website, so we ignored it.", code="cross_site")

    def _form(self, raw: bytes | None, content_type: str) -> dict[str, str]:
        data = raw or b""
        if len(data) > MAX_FORM_BYTES:
            raise FormRefused("That form was too large.", code="form_too_large")
        if (content_type or "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
            raise FormRefused("Please use the buttons on the page.", code="form_refused")
        try:
            fields = parse_qs(data.decode("utf-8"), keep_blank_values=True, max_num_fields=10)
        except (UnicodeDecodeError, ValueError) as exc:
            raise FormRefused("Please use the buttons on the page.", code="form_refused") from exc
        return {k: v[-1] for k, v in fields.items()}

    def _act(self, key: str, token: str, action: str, form: dict[str, str]) -> Response:
        if action == "leave":
            exit_ = self.manage.leave(key, form.get("sku", "")[:64])
            done = {HOLDING: "holding", GONE: "gone"}.get(exit_.outcome, "left")
            return redirect(f"{token}?done={done}")
        if action == "switch":
            self.manage.start_switch(key, form.get("contact", "")[:254])
            return redirect(f"{token}?done=code_sent")
        if action == "code":
            result = self.manage.finish_switch(key, form.get("code", ""))
            return redirect(f"{self.manage.link_token(result.new_key)}?done=switched")
        if action == "signout":
            self.manage.sign_out(key)
            return self._page(200, "You are signed out everywhere", SIGNED_OUT_DONE)
        assert action in ACTIONS  # check_form refused anything else
        self.optouts.opt_out(key, "unsubscribe")
        return redirect(f"{token}?done=stopped")

    # --- HTML

    def _summary(self, view: ManageView) -> str:
        if view.opted_out and not view.places:
            return "You have unsubscribed: we will not message you or add you to any waiting list."
        if not view.places:
            return "You are not waiting for anything right now."
        count = len(view.places)
        noun = "product" if count == 1 else "products"
        by = "SMS" if view.channel == "sms" else "email"
        return f"You are waiting for {count} {noun}. We tell you by {by} at {view.contact}."

    def _place_html(self, place: Place, key: str) -> str:
        name = html.escape(place.name)
        if place.state == RequestState.OFFERED:
            status = f"We sent you a link to reserve one; it works until {html.escape(when(place.offer_expires_at))}."
        elif place.state == RequestState.RESERVED:
            status = (
                f"One is held for you until {html.escape(when(place.hold_expires_at))}. "
                "It stays yours to buy until then, even if you leave this list."
            )
        else:
            status = place_words(place.place)
        leave = (
            '<form method="post" action="">'
            '<input type="hidden" name="action" value="leave">'
            f'<input type="hidden" name="sku" value="{html.escape(place.sku)}">'
            f'<input type="hidden" name="form_token" value="{html.escape(self.manage.form_token(key, "leave"))}">'
            f"<button type=submit>Leave this list</button></form>"
        )
        return f'<section class="place"><h2>{name}</h2><p class="status">{status}</p>{leave}</section>'

    def _manage_html(self, view: ManageView, token: str, done: str | None) -> str:
        parts = []
        if done in DONE_MESSAGES:
            parts.append(f'<p class="done" role="status"><strong>{html.escape(DONE_MESSAGES[done])}</strong></p>')
        if view.opted_out and view.places:
            parts.append("<p>You have unsubscribed, so we will not message you again.</p>")
        parts += [self._place_html(p, view.contact_key) for p in view.places]
        pending = self.manage.pending_switch(view.contact_key) if view.places and not view.opted_out else None
        if pending:
            parts.append(
                '<section><h2>Enter your code</h2><form method="post" action="">'
                '<input type="hidden" name="action" value="code">'
                f'<input type="hidden" name="form_token" value="{html.escape(self.manage.form_token(view.contact_key, "code"))}">'
                f"<p>We sent a 6-digit code to {html.escape(pending)}. It works for 15 minutes.</p>"
                '<label>Code <input name="code" inputmode="numeric" autocomplete="one-time-code" required maxlength="12">'
                "</label> <button type=submit>Switch</button></form></section>"
            )
        if view.places and view.other_channel and not view.opted_out:
            other = view.other_channel
            label = "Send my notices by email instead" if other == "email" else "Send my notices by SMS instead"
            kind = 'type="email" autocomplete="email"' if other == "email" else 'type="tel" autocomplete="tel"'
            field = "Your email address" if other == "email" else "Your mobile number"
            parts.append(
                '<section><h2>Change how we tell you</h2><form method="post" action="">'
                '<input type="hidden" name="action" value="switch">'
                f'<input type="hidden" name="form_token" value="{html.escape(self.manage.form_token(view.contact_key, "switch"))}">'
                f'<label>{field} <input name="contact" {kind} required maxlength="254"></label> '
                f"<button type=submit>{label}</button>"
                "<p>We send a code there first; you keep your place in every line.</p></form></section>"
            )
        if not view.opted_out:
            parts.append(
                '<section><h2>Stop everything</h2><form method="post" action="">'
                '<input type="hidden" name="action" value="stop">'
                f'<input type="hidden" name="form_token" value="{html.escape(self.manage.form_token(view.contact_key, "stop"))}">'
                "<button type=submit>Unsubscribe and leave every list</button></form></section>"
            )
        parts.append(
            '<section><h2>Sign out everywhere</h2><form method="post" action="">'
            '<input type="hidden" name="action" value="signout">'
            f'<input type="hidden" name="form_token" value="{html.escape(self.manage.form_token(view.contact_key, "signout"))}">'
            "<p>If someone else may have this link, this stops every link to this page we have sent you.</p>"
            "<button type=submit>Sign out everywhere</button></form></section>"
        )
        return "".join(parts)
