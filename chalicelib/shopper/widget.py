"""The embeddable Notify-me widget: its script, with the shop's look and every language's strings written in.

The script (static/widget.js) carries one placeholder object; the served script has in its place the shop's accent
colour, its consent line, the countries SMS may go to (each with its calling code and an example mobile number) and
the widget's strings in every language we serve (chalicelib/locales/widget.pot), so the shopper's language needs no
second request. It is built
once per process for the settings it is asked with. Babel and phonenumbers are imported only when it is built, so
loading the app stays cheap (tests/unit/test_cold_start.py).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chalicelib.config import Settings

WIDGET_PATH = Path(__file__).parent.parent / "static" / "widget.js"
PLACEHOLDER = re.compile(r"/\*bisn-config\*/\{[^\n]*\};")
# Whole-line comments only: a `//` inside a string (a URL) is never on a line of its own.
LINE_COMMENT = re.compile(r"^\s*//[^\n]*\n", re.MULTILINE)
BLOCK_COMMENT = re.compile(r"^\s*/\*.*?\*/\s*\n", re.MULTILINE | re.DOTALL)
# The script has no multi-line strings, so a line's indentation is only for its readers.
INDENT = re.compile(r"^[ \t]+", re.MULTILINE)
# Spaces around operators and punctuation, dropped before the strings are written in. No string literal in the
# script holds one of these except two CSS selector lists, which mean the same without it
# (tests/unit/test_widget.py runs the built script).
# A line break after { ; , or before } ] ) means nothing to JavaScript (no statement ends there by itself), so those
# lines are joined; that is safe only while no line ends in a comment after its code (`build` refuses one).
JOINS = re.compile(r"(?<=[{;,])\n+|\n+(?=[}\])])")
# The space between a keyword and its parenthesis or block ("function (", "if (", "else {").
KEYWORD_SPACE = re.compile(r"\b(function|if|for|else|return|catch) (?=[({])")
TRAILING_COMMENT = re.compile(r"[;{}(),][ \t]*//")
SPACING = re.compile(r" ?(===|!==|\|\||&&|[=+?:<>{}]|>=|<=) (?=[^\n])|(?<=[,;)]) (?=[^\n])| (?=[}])")

# What the widget shows, by the short key the script asks for; the English is the msgid (widget.pot).
STRINGS: dict[str, str] = {
    "open": "Notify me when available",
    "legend": "Tell me when it is back in stock",
    "how": "How should we tell you?",
    "sms": "Text message",
    "email": "Email",
    "phone": "Mobile number",
    "address": "Email address",
    "phoneHint": "A mobile number: we cannot text landlines, toll-free or premium-rate numbers.",
    "name": "Your name (optional)",
    "consent": "We use your number or address only to tell you when it is back. You can stop at any time.",
    "submit": "Notify me",
    "sending": "Adding you to the list…",
    "onList": "You're on the list — we'll text you when it's back.",
    "onListEmail": "You're on the list — we'll email you when it's back.",
    # Added to "onListEmail" after every email tap while the shop asks for confirmation, for a new address and one
    # already confirmed alike (the answer must not tell them apart), so it says an email went only where one did.
    "confirm": "If your address still needs confirming, we have emailed you a link.",
    "needPhone": "Please enter your mobile number.",
    "needEmail": "Please enter your email address.",
    # What is wrong with a number, each followed by "eg" with a mobile of the shopper's own country; the two lengths
    # are keyed by the `reason` an invalid_phone refusal carries.
    "phoneFix": "That is not a valid mobile number.",
    "too_short": "That number is too short.",
    "too_long": "That number is too long.",
    "eg": "For example: {example}",
    "mean": "Did you mean {address}?",
    "badEmail": "Please check your email address, for example name@example.com.",
    "mobileOnly": "We can only text mobile numbers. Please enter a mobile number, or choose email.",
    "country": "We cannot text numbers in that country. Please choose email instead.",
    "looksEmail": "That looks like an email address. Please choose Email.",
    "looksPhone": "That looks like a phone number. Please choose Text message.",
    "nameBad": "Please use only letters, spaces, apostrophes and hyphens in your name.",
    "places": "This number has joined many waiting lists lately. Please try again later.",
    "gone": "Sorry, alerts are not available for this product.",
    "full": "The waiting list for this product is full for now. Please check back later.",
    "tooMany": "Too many tries. Please wait a little and try again.",
    "busy": "We are busy right now. Please try again in a moment.",
    "failed": "Sorry, something went wrong. Please try again.",
    "offline": "Sorry, we could not reach the shop. Please try again.",
    # Only a number that had stopped our texts is sent a code, and only its owner knows: every SMS tap is asked, and
    # the code field opens from this question.
    "optin": "Got a code from us by text?",
    "code": "6-digit code",
    "codeSend": "Turn texts back on",
    "codeNeed": "Enter the 6 digits from our text.",
    "codeWrong": "That code is not right. Please check our text and try again.",
    "resubscribed": "You will get texts again, and you are on the list",
}


# What a tap on a product the store sells on backorder is told when the shop chose a pre-order note for it. Not in
# STRINGS: the API's refusal carries it in the tap's language (`note`), so the script does not carry it in five.
PREORDER_NOTE = "You can order this now, and it will be sent when it is back in stock."


# The country a language is mostly spoken in, for a shopper whose language tags name none ("de", not "de-AT").
# English names none: it is the first language of too many countries to guess one.
HOME_REGIONS = {"de": "DE", "fr": "FR", "es": "ES", "nl": "NL"}


def home_regions(tags: list[str], lang: str) -> tuple[str, ...]:
    """The countries a shopper's language tags name, in their order ('de-AT' -> AT), then their language's home."""
    found = [
        part.upper()
        for tag in tags
        for part in tag.replace("_", "-").split("-")[1:]
        if len(part) == 2 and part.isalpha()
    ]
    home = HOME_REGIONS.get(lang)
    return tuple(dict.fromkeys([*found, *([home] if home else [])]))


def served_regions(region: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The countries SMS goes to (SMS_ALLOWED_COUNTRIES), the shop's own first: its example is the one a shopper whose
    languages name no country sees."""
    return tuple(dict.fromkeys(r for r in (region, *allowed) if r in allowed)) or (region,)


def phone_example(region: str) -> str:
    """A mobile number of the region as a shopper would type it with its country code ('+44 7400 123456')."""
    import phonenumbers

    number = phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.MOBILE)
    if number is None:
        return "+44 7400 123456"
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL)


def script_config(
    accent: str, consent: str, region: str, turnstile: str = "", allowed: tuple[str, ...] = ()
) -> dict[str, object]:
    """What the served script is told: the shop's look and words, where SMS may go, and every language's strings."""
    import phonenumbers

    from chalicelib import i18n

    # Each language's strings as a list in the order of `keys`: the keys are written once, not once per language.
    strings = {lang: [i18n.text("widget", lang)(msgid) for msgid in STRINGS.values()] for lang in i18n.LANGUAGES}
    served = served_regions(region, allowed)
    config: dict[str, object] = {
        "accent": accent,
        "consent": consent,
        # [region, calling code, example] of each country SMS goes to: the widget shows the example of the shopper's
        # own country among them, and offers email first to a shopper whose languages name none of them.
        "regions": [[r, str(phonenumbers.country_code_for_region(r)), phone_example(r)] for r in served],
    }
    if turnstile:
        # Only with the human check on: the script loads Cloudflare's then, and never otherwise.
        config["turnstile"] = turnstile
    return {**config, "keys": list(STRINGS), "strings": strings}


def build(accent: str, consent: str, region: str, turnstile: str = "", allowed: tuple[str, ...] = ()) -> str:
    """The script as served: indentation and comments on lines of their own dropped, the configuration written in."""
    source = WIDGET_PATH.read_text(encoding="utf-8")
    if TRAILING_COMMENT.search(source):
        raise RuntimeError(f"{WIDGET_PATH} has a comment after code on a line; put it on a line of its own")
    source = INDENT.sub("", BLOCK_COMMENT.sub("", LINE_COMMENT.sub("", source)))
    source = KEYWORD_SPACE.sub(r"\1", JOINS.sub("", SPACING.sub(lambda m: m.group(1) or "", source)))
    config = json.dumps(
        script_config(accent, consent, region, turnstile, allowed), ensure_ascii=False, separators=(",", ":")
    )
    # U+2028/2029 end a line inside a JavaScript string in older engines; "</" could close an inline script.
    config = config.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("</", "<\\/")
    built, count = PLACEHOLDER.subn(lambda _: f"{config};", source, count=1)
    if count != 1:
        raise RuntimeError(f"{WIDGET_PATH} has no /*bisn-config*/ placeholder")
    return built


@lru_cache(maxsize=4)
def _built(accent: str, consent: str, region: str, turnstile: str, allowed: tuple[str, ...]) -> str:
    return build(accent, consent, region, turnstile, allowed)


def widget_source(settings: Settings) -> str:
    """The widget's JavaScript for this shop, built once per Lambda instance."""
    return _built(
        settings.shop_accent,
        settings.widget_consent,
        settings.default_phone_region,
        settings.turnstile_site_key,
        settings.sms_allowed_countries,
    )
