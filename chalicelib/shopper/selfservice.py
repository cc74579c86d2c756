"""The shopper's own pages: unsubscribe (RFC 8058 one-click) and "my requests" (place in line, leave, switch).

Every answer is a small HTML page (or a redirect back to one); a refusal is an honest page, never a 5xx.
The pages carry bearer tokens in their URLs, so they send no Referer, forbid framing (a hidden frame
could trick a click on "Unsubscribe") and are never cached.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from urllib.parse import parse_qs

from chalicelib import i18n
from chalicelib.clock import Clock
from chalicelib.errors import DomainError, FormRefused
from chalicelib.leaving import GONE, HOLDING, Exit
from chalicelib.line import PlaceInLine
from chalicelib.link_ids import is_link_id
from chalicelib.manage import ACTIONS, CONFIRM_FIRST, ManageService, ManageView, Place, product_name
from chalicelib.optout_service import UNDO_WINDOW_S, OptoutService, UndoOffer
from chalicelib.shopper.pages import (
    LINK_INCOMPLETE,
    OWN_LINK_EXPIRED,
    SIGNED_OUT,
    Page,
    Shop,
    esc,
    markup,
    moment,
    see_other,
    shopper_page,
    shopper_text_page,
    tr,
)
from chalicelib.shopper.undo import ALREADY, EXPIRED, KEPT, NEWER, UndoOutcome, UnsubscribeUndo
from chalicelib.tables.catalog import CatalogTable
from chalicelib.tables.requests import RequestState
from chalicelib.tokens import TokenExpired, TokenInvalid, TokenRevoked, Tokens
from chalicelib.web import MAX_PAGE_FORM_BYTES, page_form
from chalicelib.web.errors import error_status

# Switching off one's links is not unsubscribing, and its words must never read as such in any language: a shopper
# who thinks they left would keep receiving messages (tests/unit/test_glossary.py keeps the two apart).
SWITCH_OFF_HEADING = "Someone else has this link?"
SWITCH_OFF_WARNING = (
    "This switches off every link to this page we have sent you. You stay on your lists, and our next message "
    "brings a new link."
)
SWITCH_OFF_BUTTON = "Switch off my links to this page"
SWITCHED_OFF_TITLE = "Your old links are switched off"
SIGNED_OUT_DONE = (
    "Every link to this page we sent you so far no longer works. Your places in line are kept; "
    "the next message we send you carries a new link."
)
ONE_CLICK = ("List-Unsubscribe", "One-Click")  # RFC 8058 §3.1: the body a mail client POSTs
UNDO_BUTTON = "Undo"
UNDO_TOO_LATE = "It is too late to undo"
# Why an undo cannot lift the opt-out that stands, by that opt-out's source (tables/optout.py SOURCES).
UNDO_KEPT = {
    "bounce": "Our messages to you could not be delivered since, so they stay off: this link cannot change that.",
    "invalid_number": "Our messages to you could not be delivered since, so they stay off: this link cannot change "
    "that.",
    "complaint": "A message of ours was reported as unwanted since, so messages stay off: this link cannot change "
    "that.",
}
UNDO_KEPT_OTHER = (
    "Messages to you were turned off another way since (a STOP reply, or the shop at your request), and this link "
    "cannot undo that."
)

DONE_MESSAGES = {
    "left": "You have left that list.",
    "gone": "You were not on that list any more.",
    "holding": "One is held for you, so it stays yours to buy until the hold ends; then you leave the list.",
    "switched": "Done: your notices now go to the contact shown below, and you keep your places.",
    "code_sent": "We sent a code to your new contact. Enter it below to switch.",
    "stopped": "You are unsubscribed: we will not message you or add you to any list.",
}

# A refused form or change, by its error's code, in a language other than English (in English, and for an error
# with another code, the error's own message is shown).
REFUSALS = {
    "form_refused": "This form is not from your page. Open your link again and retry.",
    "form_expired": "This page was open too long. Reload it and try again.",
    "form_too_large": "That form was too large.",
    "code_wait": "We sent a code a moment ago. Please wait a minute before asking again.",
    "code_expired": "That code has expired or was tried too often. Please ask for a new one.",
    "wrong_code": "That code is not right. Please check it and try again.",
    "opted_out": "You have unsubscribed, so there are no notices to switch.",
    "nothing_to_switch": "Your notices changed meanwhile. Please start again.",
    "same_contact": "That is the contact we already use.",
    "contact_opted_out": "That contact asked us not to send it messages, so we cannot switch to it.",
    "too_many_places": "That number already waits for as many products as we keep for one number. "
    "Leave a list you no longer need first, or keep email.",
    "invalid_phone": "That is not a valid phone number.",
    # A refusal with a finer `reason` is worded by it when it has words of its own (code:reason).
    "invalid_phone:too_short": "That phone number is too short for a mobile number.",
    "invalid_phone:too_long": "That phone number is too long for a mobile number.",
    "sms_number_type": "Text messages go to mobile numbers only. Use a mobile number, or keep email.",
    "sms_country_not_allowed": "We cannot send text messages to numbers from that country. Please keep email.",
    "invalid_email": "That is not a valid email address.",
    "contact_channel_mismatch": "That does not look like the kind of contact asked for. Please check it.",
    "missing_field": "Please fill in the field.",
    "not_confirmed": CONFIRM_FIRST,
    "sms_daily_limit": "We have sent as many codes by SMS today as we send in a day. Please try again tomorrow, "
    "or keep email.",
}


def place_words(place: PlaceInLine, lang: str = i18n.DEFAULT_LANGUAGE) -> str:
    """A waiting place's status line, counting the people ahead in the shopper's language: exact when the line's
    figures pin it down, else the range they allow."""
    t = i18n.text("pages", lang)
    if place.exact is not None:
        if place.exact <= 1:
            return t("You are first in line.")
        return t.plural("{n} person is ahead of you in line.", "{n} people are ahead of you in line.", place.exact - 1)
    if place.highest <= 1:
        return t("You are first in line.")
    if place.lowest <= 1:
        return t.plural(
            "At most {n} person is ahead of you in line.",
            "At most {n} people are ahead of you in line.",
            place.highest - 1,
        )
    return t(
        "Between {low} and {high} people are ahead of you in line (some people ahead of you left or bought "
        "since you joined).",
        low=i18n.number(place.lowest - 1, lang),
        high=i18n.number(place.highest - 1, lang),
    )


def is_one_click(raw: bytes | None, content_type: str) -> bool:
    """True when the body says List-Unsubscribe=One-Click (urlencoded, text, or multipart/form-data)."""
    data = raw or b""
    if len(data) > MAX_PAGE_FORM_BYTES:
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
            try:
                value = part.get_content() if part.get_content_maintype() == "text" else ""
            except (LookupError, ValueError):  # a charset Python does not know: not a body any mail client sends
                continue
            if name == ONE_CLICK[0] and str(value).strip() == ONE_CLICK[1]:
                return True
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    try:
        fields = parse_qs(text.strip(), keep_blank_values=True, max_num_fields=10)
    except ValueError:  # more fields than any one-click body or the page's button sends
        return False
    return ONE_CLICK[1] in [v.strip() for v in fields.get(ONE_CLICK[0], [])]


@dataclass(frozen=True, kw_only=True, eq=False)
class SelfService:
    """Answers the shopper's links with pages, in the language of their latest place when we know it, else the
    one their browser asks for (Accept-Language), else English."""

    shop: Shop
    tokens: Tokens
    optouts: OptoutService
    manage: ManageService
    catalog: CatalogTable
    clock: Clock
    undo: UnsubscribeUndo

    def _page(self, status: int, lang: str, title: str, message: str, extra_html: str = "") -> Page:
        return shopper_page(status, tr(lang, title), message, self.shop, extra_html, lang=lang)

    def _bad_link(self, expired: bool, lang: str) -> Page:
        if expired:
            return shopper_text_page(410, OWN_LINK_EXPIRED, self.shop, lang)
        return shopper_text_page(400, LINK_INCOMPLETE, self.shop, lang)

    # --- Unsubscribe

    def unsubscribe_form(self, token: str, accept: str | None = None) -> Page:
        """GET /unsubscribe/{token}: a confirmation page; changes nothing (mail scanners open links)."""
        lang = i18n.negotiate(accept=accept)
        try:
            self.tokens.read_unsubscribe(token)
        except (TokenInvalid, TokenExpired):
            return self._bad_link(expired=False, lang=lang)
        form = (
            f'<form method="post" action="{html.escape(token)}">'
            '<input type="hidden" name="List-Unsubscribe" value="One-Click">'
            f"<button type=submit>{html.escape(tr(lang, 'Unsubscribe'))}</button></form>"
            f'<p class="note">{html.escape(tr(lang, "If you hold an item right now, it stays yours to buy until its hold ends."))}</p>'
        )
        message = tr(
            lang,
            "You will leave every waiting list at {shop} and we will not message you again.",
            shop=self.shop.name,
        )
        return self._page(200, lang, "Stop back-in-stock messages?", message, form)

    def unsubscribe(self, token: str, raw: bytes | None, content_type: str, accept: str | None = None) -> Page:
        """POST /unsubscribe/{token}: RFC 8058 one-click or the page's button; opt out and leave every list."""
        lang = i18n.negotiate(accept=accept)
        try:
            key = self.tokens.read_unsubscribe(token).value
        except (TokenInvalid, TokenExpired):
            return self._bad_link(expired=False, lang=lang)
        if not is_one_click(raw, content_type):
            return self._page(
                400,
                lang,
                "Please use the button",
                tr(lang, "This request did not say what to do. Open the link again and press Unsubscribe."),
            )
        result, offer = self.optouts.unsubscribe(key)
        return self._unsubscribed(result.newly, result.exits, lang, offer)

    def _unsubscribed(self, newly: bool, exits: list[Exit], lang: str, offer: UndoOffer | None = None) -> Page:
        parts = []
        left = [e for e in exits if e.outcome not in (HOLDING, GONE)]
        if left:
            names = ", ".join(html.escape(product_name(self.catalog, e.sku)) for e in left)
            parts.append(f"<p>{markup(lang, 'You left the waiting list for: {products}.', products=names)}</p>")
        for held in (e for e in exits if e.outcome == HOLDING):
            line = markup(
                lang,
                "You are holding one {product} until {time}. It stays yours to buy until then; if you do not, it "
                "goes to the next person in line.",
                product=esc(product_name(self.catalog, held.sku)),
                time=moment(held.hold_expires_at, lang),
            )
            parts.append(f"<p>{line}</p>")
        message = (
            "We will not send you any more messages or add you to waiting lists."
            if newly
            else "You had already unsubscribed, so nothing more will be sent to you."
        )
        if offer is not None:
            parts.append(self._undo_form(self.tokens.undo(offer.contact_key, offer.at, offer.nonce), lang))
        return self._page(200, lang, "You are unsubscribed", tr(lang, message), "".join(parts))

    # --- Undoing an unsubscribe (chalicelib/shopper/undo.py)

    @staticmethod
    def _undo_form(undo_token: str, lang: str) -> str:
        """The done page's Undo: a POST (a GET never changes anything), to `undo/{token}` beside the page's own URL
        (/unsubscribe/{token} and /unsubscribe/undo/{token} share /unsubscribe/)."""
        return (
            f'<section id="undo"><h2>{html.escape(tr(lang, "Unsubscribed by mistake?"))}</h2>'
            f'<form method="post" action="undo/{html.escape(undo_token)}">'
            f"<p>{html.escape(tr(lang, 'Undo puts you back at the end of each line you left.'))}</p>"
            f"<button type=submit>{html.escape(tr(lang, UNDO_BUTTON))}</button></form></section>"
        )

    def _read_undo(self, token: str, lang: str) -> tuple[str, int, str] | Page:
        try:
            return self.tokens.read_undo(token, UNDO_WINDOW_S)
        except TokenExpired:
            return self._page(
                410, lang, UNDO_TOO_LATE, tr(lang, "The time to undo has passed, so you stay unsubscribed.")
            )
        except TokenInvalid:
            return self._bad_link(expired=False, lang=lang)

    def undo_form(self, token: str, accept: str | None = None) -> Page:
        """GET /unsubscribe/undo/{token}: what Undo does, with its button; changes nothing."""
        lang = i18n.negotiate(accept=accept)
        read = self._read_undo(token, lang)
        if isinstance(read, Page):
            return read
        form = (
            f'<form method="post" action="{html.escape(token)}">'
            f"<button type=submit>{html.escape(tr(lang, UNDO_BUTTON))}</button></form>"
        )
        return self._page(
            200,
            lang,
            "Unsubscribed by mistake?",
            tr(lang, "Undo puts you back at the end of each line you left."),
            form,
        )

    def undo_unsubscribe(self, token: str, accept: str | None = None) -> Page:
        """POST /unsubscribe/undo/{token}: take back the unsubscribe the token names, once, inside its window."""
        lang = i18n.negotiate(accept=accept)
        read = self._read_undo(token, lang)
        if isinstance(read, Page):
            return read
        return self._undone(self.undo.undo(*read), lang)

    def _undone(self, done: UndoOutcome, lang: str) -> Page:
        if done.outcome == ALREADY:
            return self._page(
                200, lang, "Already undone", tr(lang, "That unsubscribe was taken back already: nothing more changed.")
            )
        if done.outcome == EXPIRED:
            return self._page(
                410, lang, UNDO_TOO_LATE, tr(lang, "The time to undo has passed, so you stay unsubscribed.")
            )
        if done.outcome == NEWER:
            return self._page(
                409,
                lang,
                "This undo is for an earlier unsubscribe",
                tr(lang, "You unsubscribed again since, so nothing changed: you stay unsubscribed."),
            )
        if done.outcome == KEPT:
            why = UNDO_KEPT.get(done.source or "", UNDO_KEPT_OTHER)
            return self._page(409, lang, "We cannot undo this", tr(lang, why))
        parts = []
        if done.back:
            names = ", ".join(html.escape(product_name(self.catalog, sku)) for sku in done.back)
            line = markup(lang, "You are back at the end of the line for: {products}.", products=names)
            parts.append(f"<p>{line}</p>")
        if done.refused:
            names = ", ".join(html.escape(product_name(self.catalog, sku)) for sku in done.refused)
            line = markup(
                lang,
                "We could not put you back on the list for: {products} (the list is full, or the product is no "
                "longer sold).",
                products=names,
            )
            parts.append(f"<p>{line}</p>")
        message = tr(lang, "Your unsubscribe is undone: we may message you again.")
        return self._page(200, lang, "Your unsubscribe is undone", message, "".join(parts))

    # --- My requests

    def _manage_key(self, token: str, lang: str) -> str | Page:
        """The contact behind a manage link, or the page that says why the link does not work."""
        try:
            return self.manage.read_token(token)
        except TokenExpired:
            return self._bad_link(expired=True, lang=lang)
        except TokenRevoked:
            return shopper_text_page(410, SIGNED_OUT, self.shop, lang)
        except TokenInvalid:
            return self._bad_link(expired=False, lang=lang)

    def manage_page(
        self, token: str, done: str | None = None, accept: str | None = None, *, stop_first: bool = False
    ) -> Page:
        """GET /me/{token}: the products this shopper waits for, their place in each, and what they can do. With
        `stop_first` (an SMS's "Stop texts" link, `?stop`) the form that stops everything comes before all else."""
        key = self._manage_key(token, i18n.negotiate(accept=accept))
        if isinstance(key, Page):
            return key
        view = self.manage.view(key)
        lang = i18n.negotiate(view.lang, accept=accept)
        body = self._manage_html(view, done, lang, stop_first=stop_first)
        return self._page(200, lang, "Your requests", self._summary(view, lang), body)

    def manage_action(
        self,
        token: str,
        raw: bytes | None,
        content_type: str,
        accept: str | None = None,
        source: str | None = None,
    ) -> Page:
        """POST /me/{token}: leave a list, switch channel or stop everything, then back to the page. `source` is
        the client address (a code SMS counts against its caps)."""
        lang = i18n.negotiate(accept=accept)
        key = self._manage_key(token, lang)
        if isinstance(key, Page):
            return key
        back = f'<p><a href="{html.escape(token)}">{html.escape(tr(lang, "Back to your requests"))}</a></p>'
        try:
            form = page_form(raw, content_type)
            action = form.get("action", "")
            self.manage.check_form(key, action, form.get("form_token", ""))
            return self._act(key, token, action, form, lang, source)
        except FormRefused as refused:
            return self._page(error_status(refused), lang, "Please try that again", self._refusal(refused, lang), back)
        except DomainError as error:
            return self._page(error_status(error), lang, "That did not work", self._refusal(error, lang), back)

    @staticmethod
    def _refusal(error: DomainError, lang: str) -> str:
        # English keeps the error's own words, which can say more (how many tries are left, what is wrong with an
        # address); another language gets the translated sentence for its kind.
        msgid = REFUSALS.get(f"{error.code}:{error.reason}") or REFUSALS.get(error.code)
        return tr(lang, msgid) if msgid and lang != i18n.DEFAULT_LANGUAGE else error.message

    def _act(
        self, key: str, token: str, action: str, form: dict[str, str], lang: str, source: str | None = None
    ) -> Page:
        if action == "leave":
            exit_ = self.manage.leave(key, form.get("sku", "")[:64])
            done = {HOLDING: "holding", GONE: "gone"}.get(exit_.outcome, "left")
            return see_other(f"{token}?done={done}")
        if action == "switch":
            self.manage.start_switch(key, form.get("contact", "")[:254], source=source)
            return see_other(f"{token}?done=code_sent")
        if action == "code":
            result = self.manage.finish_switch(key, form.get("code", ""))
            return see_other(f"{self.manage.link_token(result.new_key)}?done=switched")
        if action == "signout":
            self.manage.sign_out(key)
            return self._page(200, lang, SWITCHED_OFF_TITLE, tr(lang, SIGNED_OUT_DONE))
        assert action in ACTIONS  # check_form refused anything else
        self.optouts.opt_out(key, "unsubscribe")
        return see_other(f"{token}?done=stopped")

    # --- HTML

    def _summary(self, view: ManageView, lang: str) -> str:
        if view.opted_out and not view.places:
            return tr(lang, "You have unsubscribed: we will not message you or add you to any waiting list.")
        if not view.places:
            return tr(lang, "You are not waiting for anything right now.")
        t = i18n.text("pages", lang)
        waiting = t.plural("You are waiting for {n} product.", "You are waiting for {n} products.", len(view.places))
        by = "We tell you by SMS at {contact}." if view.channel == "sms" else "We tell you by email at {contact}."
        return f"{waiting} {t(by, contact=view.contact or '')}"

    def _checkout_link(self, place: Place) -> str:
        """Where a held place goes on to checkout: its reserve link, whose page sends the shopper to the shop's
        checkout (relative, so it stays on this stage: /me/x and /m/x both sit one level down)."""
        token = place.offer_token or ""
        if is_link_id(token):
            return f"../r/{token}"
        return f"../reserve/{self.tokens.reserve(token)}"

    def _hidden(self, key: str, action: str) -> str:
        form_token = html.escape(self.manage.form_token(key, action))
        return (
            f'<input type="hidden" name="action" value="{action}">'
            f'<input type="hidden" name="form_token" value="{form_token}">'
        )

    def _place_html(self, place: Place, key: str, lang: str) -> str:
        name = html.escape(place.name)
        checkout = ""
        if place.state == RequestState.OFFERED:
            status = markup(
                lang,
                "We sent you a link to reserve one; it works until {time}.",
                time=moment(place.offer_expires_at, lang),
            )
        elif place.state == RequestState.RESERVED:
            status = markup(
                lang,
                "One is held for you until {time}. It stays yours to buy until then, even if you leave this list.",
                time=moment(place.hold_expires_at, lang),
            )
            if place.offer_token:
                label = html.escape(tr(lang, "Go to checkout"))
                checkout = f'<p><a class="button" href="{html.escape(self._checkout_link(place))}">{label}</a></p>'
        else:
            status = esc(place_words(place.place, lang))
        leave = (
            f'<form method="post" action="">{self._hidden(key, "leave")}'
            f'<input type="hidden" name="sku" value="{html.escape(place.sku)}">'
            f'<button type=submit class="quiet">{html.escape(tr(lang, "Leave this list"))}</button></form>'
        )
        return f'<section class="place"><h2>{name}</h2><p class="status">{status}</p>{checkout}{leave}</section>'

    def _manage_html(self, view: ManageView, done: str | None, lang: str, *, stop_first: bool = False) -> str:
        key = view.contact_key
        parts = []
        if done in DONE_MESSAGES:
            said = html.escape(tr(lang, DONE_MESSAGES[done]))
            parts.append(f'<p class="done" role="status"><strong>{said}</strong></p>')
        stop = (
            f'<section id="stop"><h2>{html.escape(tr(lang, "Stop everything"))}</h2><form method="post" action="">'
            f"{self._hidden(key, 'stop')}"
            f"<button type=submit>{html.escape(tr(lang, 'Unsubscribe and leave every list'))}</button></form>"
            "</section>"
            if not view.opted_out
            else ""
        )
        if stop_first:
            # Whoever tapped "Stop texts" came to stop: that form first, the places and the rest after it.
            parts.append(stop)
        if view.opted_out and view.places:
            parts.append(f"<p>{html.escape(tr(lang, 'You have unsubscribed, so we will not message you again.'))}</p>")
        parts += [self._place_html(p, key, lang) for p in view.places]
        pending = self.manage.pending_switch(key) if view.places and not view.opted_out else None
        if pending:
            sent = markup(lang, "We sent a 6-digit code to {contact}. It works for 15 minutes.", contact=esc(pending))
            parts.append(
                f'<section><h2>{html.escape(tr(lang, "Enter your code"))}</h2><form method="post" action="">'
                f"{self._hidden(key, 'code')}<p>{sent}</p>"
                f'<label>{html.escape(tr(lang, "Code"))} <input name="code" inputmode="numeric" '
                'autocomplete="one-time-code" required maxlength="12"></label>'
                f"<button type=submit>{html.escape(tr(lang, 'Switch'))}</button></form></section>"
            )
        if view.places and view.other_channel and not view.opted_out and not view.confirmed:
            # No form that would only be refused: say what unlocks it.
            parts.append(
                f"<section><h2>{html.escape(tr(lang, 'Change how we tell you'))}</h2>"
                f'<p class="note">{html.escape(tr(lang, CONFIRM_FIRST))}</p></section>'
            )
        elif view.places and view.other_channel and not view.opted_out:
            email = view.other_channel == "email"
            label = "Send my notices by email instead" if email else "Send my notices by SMS instead"
            kind = 'type="email" autocomplete="email"' if email else 'type="tel" autocomplete="tel"'
            field = "Your email address" if email else "Your mobile number"
            parts.append(
                f'<section><h2>{html.escape(tr(lang, "Change how we tell you"))}</h2><form method="post" action="">'
                f"{self._hidden(key, 'switch')}"
                f'<label>{html.escape(tr(lang, field))} <input name="contact" {kind} required maxlength="254"></label>'
                f'<p class="note">{html.escape(tr(lang, "We send a code there first; you keep your place in every line."))}</p>'
                f"<button type=submit>{html.escape(tr(lang, label))}</button></form></section>"
            )
        if not stop_first:
            parts.append(stop)
        if view.places:
            # Only a page that shows places has anything a stranger holding its link could see or change; with none,
            # switching the links off would protect nothing, so the page does not offer it.
            parts.append(
                f"<section><h2>{html.escape(tr(lang, SWITCH_OFF_HEADING))}</h2>"
                f'<form method="post" action="">{self._hidden(key, "signout")}'
                f"<p>{html.escape(tr(lang, SWITCH_OFF_WARNING))}</p>"
                f'<button type=submit class="quiet">{html.escape(tr(lang, SWITCH_OFF_BUTTON))}</button></form>'
                "</section>"
            )
        return "".join(parts)
