"""The words for unsubscribing and for switching off one's links never meet in any language.

Unsubscribing stops every message; switching off one's links only stops the links sent so far and keeps every place.
A German "Überall abmelden" (sign out everywhere) reads as "unsubscribe everywhere", so a shopper who pressed it
believed they had left and kept receiving messages. Each language has one key word for each act, and neither act's
strings may use the other's.
"""

from __future__ import annotations

import re

import pytest
from babel.messages.pofile import read_po

from chalicelib import i18n
from chalicelib.shopper.pages import SIGNED_OUT
from chalicelib.shopper.selfservice import (
    SIGNED_OUT_DONE,
    SWITCH_OFF_BUTTON,
    SWITCH_OFF_HEADING,
    SWITCH_OFF_WARNING,
    SWITCHED_OFF_TITLE,
)

# The stems each language writes the two acts with: (unsubscribing, switching off one's links).
GLOSSARY: dict[str, tuple[str, str]] = {
    "en": (r"unsubscrib", r"switch\w* off|links? to your requests was switched off"),
    "de": (r"abmeld|abgemeld", r"sperr"),
    "nl": (r"afmeld|afgemeld", r"schakel"),
    "fr": (r"désabonn", r"désactiv"),
    "es": (r"de baja", r"desactiv"),
}
# Words that read as leaving in a language, whichever verb they sit in: never in the switching-off strings.
LEAVING = {"de": r"meld", "nl": r"meld", "fr": r"déconnect|désinscri", "es": r"baja|cerr\w* sesión", "en": r"sign"}
# The switching-off strings that name the act (the done page's message says what it did without naming it).
SWITCH_OFF = (SWITCH_OFF_BUTTON, SWITCHED_OFF_TITLE, SWITCH_OFF_WARNING, SIGNED_OUT.title, SIGNED_OUT.message)
SWITCH_OFF_ALL = (*SWITCH_OFF, SWITCH_OFF_HEADING, SIGNED_OUT_DONE)


def strings(lang: str) -> dict[str, str]:
    """Every msgid of every domain with its string in `lang` (the msgid itself in English)."""
    found: dict[str, str] = {}
    for domain in i18n.domains():
        if lang == i18n.DEFAULT_LANGUAGE:
            found.update({m: m for m in i18n.template_ids(domain)})
            continue
        with (i18n.LOCALES_DIR / lang / "LC_MESSAGES" / f"{domain}.po").open("rb") as f:
            for message in read_po(f, locale=lang):
                if message.id and isinstance(message.id, str):
                    found[message.id] = str(message.string)
    return found


def unsubscribe_ids(catalogue: dict[str, str]) -> list[str]:
    return [m for m in catalogue if re.search(r"unsubscrib", m, re.IGNORECASE)]


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_unsubscribing_and_switching_off_links_share_no_key_word(lang: str) -> None:
    unsubscribe, switch_off = GLOSSARY[lang]
    catalogue = strings(lang)
    unsubscribing = unsubscribe_ids(catalogue)
    assert len(unsubscribing) >= 5, "the unsubscribe strings were not found"
    for msgid in ("Unsubscribe", "You are unsubscribed"):
        said = catalogue[msgid]
        assert re.search(unsubscribe, said, re.IGNORECASE), f"{lang}: {said!r} does not use the word for unsubscribing"
    for msgid in unsubscribing:
        said = catalogue[msgid]
        assert not re.search(switch_off, said, re.IGNORECASE), f"{lang}: {said!r} reads as switching off links"
    for msgid in SWITCH_OFF:
        said = catalogue[msgid]
        assert re.search(switch_off, said, re.IGNORECASE), f"{lang}: {said!r} does not use the word for switching off"
    for msgid in SWITCH_OFF_ALL:
        said = catalogue[msgid]
        assert not re.search(unsubscribe, said, re.IGNORECASE), f"{lang}: {said!r} reads as unsubscribing"
        assert not re.search(LEAVING[lang], said, re.IGNORECASE), f"{lang}: {said!r} reads as leaving"


def test_no_shopper_string_speaks_of_signing_out() -> None:
    # A shopper never signs in (their links are their key), so nothing they read may offer to sign them out.
    for domain in i18n.domains():
        assert [m for m in i18n.template_ids(domain) if re.search(r"sign(ed)? out", m, re.IGNORECASE)] == []
