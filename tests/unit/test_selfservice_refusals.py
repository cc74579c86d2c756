"""The shopper's page words a refused form in the shopper's language, and a phone number's refusal says what is
wrong with it (too short, too long) in every language, not only in English (chalicelib/shopper/selfservice.py REFUSALS)."""

from __future__ import annotations

import pytest

from chalicelib import i18n
from chalicelib.contacts import normalise_phone
from chalicelib.errors import BadRequest
from chalicelib.shopper.selfservice import REFUSALS, SelfService

SHORT = {
    "de": "zu kurz",
    "es": "demasiado corto",
    "fr": "trop court",
    "nl": "te kort",
}
LONG = {
    "de": "zu lang",
    "es": "demasiado largo",
    "fr": "trop long",
    "nl": "te lang",
}


def refused(number: str) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        normalise_phone(number, "GB")
    return caught.value


@pytest.mark.parametrize("lang", sorted(SHORT))
def test_a_number_too_short_or_too_long_is_told_so_in_the_shoppers_language(lang: str) -> None:
    short, long_ = refused("+44 7400 12"), refused("+44 7400 1234567890")
    assert (short.reason, long_.reason) == ("too_short", "too_long")
    general = i18n.text("pages", lang)(REFUSALS["invalid_phone"])
    assert SHORT[lang] in SelfService._refusal(short, lang)
    assert LONG[lang] in SelfService._refusal(long_, lang)
    assert SelfService._refusal(refused("not a number"), lang) == general


def test_english_keeps_the_errors_own_words() -> None:
    short = refused("+44 7400 12")
    assert SelfService._refusal(short, i18n.DEFAULT_LANGUAGE) == short.message
    assert "too short" in short.message


def test_every_finer_refusal_is_translated_in_every_language() -> None:
    finer = [msgid for key, msgid in REFUSALS.items() if ":" in key]
    assert finer
    for lang in SHORT:
        t = i18n.text("pages", lang)
        for msgid in finer:
            assert t(msgid) != msgid, (lang, msgid)
