"""The shopper's language: which one a tap asked for, and every string and number in it.

English is the source: each string is written in English in the code (the gettext msgid) and translated in
gettext `.po` files, one per language and domain, read with Babel (chalicelib/locales/<lang>/LC_MESSAGES/
<domain>.po, with the list of every msgid in chalicelib/locales/<domain>.pot). A domain is one area of what a
shopper sees: `widget`, `pages`, `messages`. Plural forms follow each catalogue's own Plural-Forms header, and
numbers, prices and dates are formatted by Babel's CLDR data for the language.

A string is filled with `{name}` fields by keyword; any other brace stays as written, so a template that keeps
placeholders for later (compose's `{link}`, `{product}`, `{shop}`) passes through untouched.

Pure: no AWS. The catalogues are read once per Lambda instance, and Babel is imported only when a string or a
number is first asked for, so a function that shows a shopper nothing does not pay for it at a cold start.
"""

from __future__ import annotations

import gettext
import io
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from babel import Locale

LOCALES_DIR = Path(__file__).parent / "locales"
# The languages shoppers are served in; the first is the source and the fallback.
LANGUAGES = ("en", "de", "fr", "es", "nl")
DEFAULT_LANGUAGE = LANGUAGES[0]
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "nl": "Dutch"}
# A language tag as a tap or a header may send it: "de", "de-AT", "de_AT", "zh-Hant-TW" (BCP 47's shape, loosely).
_TAG = re.compile(r"^[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*$")
_FIELD = re.compile(r"\{([a-z_]+)\}")

# In the test suite a string asked for that is in no domain's .pot is an error, so no string can be added to
# the code without a translation being owed for it (tests/conftest.py turns this on).
_strict = False


class MissingMessage(KeyError):
    """A string the code asked for is not in its domain's template (strict mode only)."""


def set_strict(on: bool) -> None:
    """Refuse strings missing from their domain's .pot (the test suite) or let them through in English."""
    global _strict
    _strict = on


def language_of(tag: object) -> str | None:
    """The served language a tag names ('de-AT' -> 'de'), or None for a tag we do not serve or that is malformed."""
    if not isinstance(tag, str) or len(tag) > 35 or not _TAG.match(tag.strip()):
        return None
    primary = tag.strip().replace("_", "-").split("-")[0].lower()
    return primary if primary in LANGUAGES else None


def accept_language(header: str | None) -> list[str]:
    """The tags of an Accept-Language header, most preferred first (q=0 dropped)."""
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate((header or "")[:512].split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if tag and q > 0:
            ranked.append((-q, i, tag.strip()))
    return [tag for _, _, tag in sorted(ranked)]


def negotiate(*candidates: object, accept: str | None = None) -> str:
    """The first served language among the candidates, then the Accept-Language header's; else English."""
    for tag in [*candidates, *accept_language(accept)]:
        lang = language_of(tag)
        if lang is not None:
            return lang
    return DEFAULT_LANGUAGE


def domains() -> list[str]:
    """Every domain with a template."""
    return sorted(p.stem for p in LOCALES_DIR.glob("*.pot"))


@cache
def template_ids(domain: str) -> frozenset[str]:
    """The msgids of a domain's template."""
    from babel.messages.pofile import read_po

    path = LOCALES_DIR / f"{domain}.pot"
    if not path.exists():
        return frozenset()
    with path.open("rb") as f:
        catalog = read_po(f)
    return frozenset(str(m.id[0] if isinstance(m.id, tuple) else m.id) for m in catalog if m.id)


@cache
def _translations(domain: str, lang: str) -> gettext.NullTranslations:
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    path = LOCALES_DIR / lang / "LC_MESSAGES" / f"{domain}.po"
    if lang == DEFAULT_LANGUAGE or not path.exists():
        return gettext.NullTranslations()
    with path.open("rb") as f:
        catalog = read_po(f, locale=lang, domain=domain)
    buffer = io.BytesIO()
    write_mo(buffer, catalog)
    buffer.seek(0)
    return gettext.GNUTranslations(buffer)


def fill(text: str, fields: dict[str, object]) -> str:
    """`{name}` replaced by its value for each name given; any other brace left as written."""
    if not fields:
        return text
    return _FIELD.sub(lambda m: str(fields[m.group(1)]) if m.group(1) in fields else m.group(0), text)


class Text:
    """The strings of one domain in one language."""

    def __init__(self, domain: str, lang: str) -> None:
        self.domain = domain
        self.lang = lang if lang in LANGUAGES else DEFAULT_LANGUAGE
        self._t = _translations(domain, self.lang)

    def _known(self, msgid: str) -> None:
        if _strict and msgid not in template_ids(self.domain):
            raise MissingMessage(f"{msgid!r} is not in chalicelib/locales/{self.domain}.pot")

    def __call__(self, msgid: str, **fields: object) -> str:
        """The string in this language, its `{fields}` filled."""
        self._known(msgid)
        return fill(self._t.gettext(msgid), fields)

    def plural(self, singular: str, plural: str, n: int, **fields: object) -> str:
        """The singular or a plural form for n, by the language's own rule; `{n}` is n formatted for it."""
        self._known(singular)
        return fill(self._t.ngettext(singular, plural, n), {"n": number(n, self.lang), **fields})

    def context(self, context: str, msgid: str, **fields: object) -> str:
        """A string whose English is shared with another meaning (gettext's msgctxt)."""
        self._known(msgid)
        return fill(self._t.pgettext(context, msgid), fields)


@lru_cache(maxsize=64)
def text(domain: str, lang: str) -> Text:
    """The strings of a domain in a language (English for a language we do not serve)."""
    return Text(domain, lang)


def every(domain: str, msgids: Iterable[str]) -> dict[str, dict[str, str]]:
    """Each msgid in every language: {lang: {msgid: string}} (what the widget script carries)."""
    ids = list(msgids)
    return {lang: {m: text(domain, lang)(m) for m in ids} for lang in LANGUAGES}


def number(n: int | float | Decimal, lang: str) -> str:
    """A number as the language writes it (1,234 / 1.234 / 1 234)."""
    from babel.numbers import format_decimal

    return format_decimal(n, locale=_locale(lang))


def price(amount: str | None, currency: str | None, lang: str) -> str | None:
    """A price ('24.00', 'EUR') as the language writes it ('€24.00', '24,00 €'); None when either is missing."""
    from babel.numbers import format_currency

    if not amount or not currency:
        return None
    try:
        value = Decimal(amount)
    except (InvalidOperation, ValueError):
        return None
    try:
        return format_currency(value, currency.upper(), locale=_locale(lang))
    except (ValueError, KeyError):
        return f"{amount} {currency.upper()}"


def moment(ts: int | float, lang: str, *, zone: str = "UTC") -> str:
    """A moment as the language writes a day and a time, in UTC, naming the zone ('Nov 30, 14:05 UTC')."""
    from babel.dates import format_skeleton, format_time

    when = datetime.fromtimestamp(ts, tz=UTC)
    locale = _locale(lang)
    day = format_skeleton("MMMd", when, tzinfo=UTC, locale=locale)
    return f"{day}, {format_time(when, format='short', tzinfo=UTC, locale=locale)} {zone}"


@lru_cache(maxsize=8)
def _locale(lang: str) -> Locale:
    from babel import Locale

    return Locale.parse(lang if lang in LANGUAGES else DEFAULT_LANGUAGE)
