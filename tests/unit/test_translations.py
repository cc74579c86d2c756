"""Every string a shopper can see is translated into every language we serve, with the same fields."""

from __future__ import annotations

import re

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po

from chalicelib import i18n

FIELD = re.compile(r"\{[a-z_]+\}")
# A translator marks a string that is rightly the same as the English (a brand, "OK") with this comment.
SAME = "same in this language"


def _po(domain: str, lang: str) -> Catalog:
    path = i18n.LOCALES_DIR / lang / "LC_MESSAGES" / f"{domain}.po"
    assert path.exists(), f"{path} is missing"
    with path.open("rb") as f:
        return read_po(f, locale=lang)


def _forms(string: object) -> list[str]:
    return [str(s) for s in string] if isinstance(string, tuple) else [str(string)]


CASES = [(d, lang) for d in i18n.domains() for lang in i18n.LANGUAGES[1:]]


def test_there_are_domains_to_translate() -> None:
    assert {"widget", "pages", "messages"} <= set(i18n.domains())


@pytest.mark.parametrize(("domain", "lang"), CASES)
def test_every_string_is_translated_with_its_fields(domain: str, lang: str) -> None:
    catalog = _po(domain, lang)
    wanted = i18n.template_ids(domain)
    have = {str(m.id[0] if isinstance(m.id, tuple) else m.id): m for m in catalog if m.id}
    assert wanted - set(have) == set(), f"untranslated in {lang}/{domain}.po"
    assert set(have) - wanted == set(), f"{lang}/{domain}.po has strings the template no longer has"
    for msgid, message in have.items():
        assert not message.fuzzy, f"{lang}: {msgid!r} is marked fuzzy"
        forms = _forms(message.string)
        assert all(forms), f"{lang}: {msgid!r} has an empty translation"
        ids = _forms(message.id)
        if any(f == ids[0] for f in forms) and any(c.isalpha() for c in ids[0]):
            assert SAME in " ".join(message.user_comments + message.auto_comments), (
                f"{lang}: {msgid!r} is left in English"
            )
        fields = set(FIELD.findall(" ".join(ids)))
        for form in forms:
            assert set(FIELD.findall(form)) <= fields, f"{lang}: {form!r} has a field {msgid!r} does not"
        if len(ids) == 1:
            assert set(FIELD.findall(forms[0])) == fields, f"{lang}: {forms[0]!r} drops a field of {msgid!r}"


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_a_language_tag_is_served_by_its_primary_language(lang: str) -> None:
    assert i18n.negotiate(f"{lang}-XX") == lang
    assert i18n.negotiate(None, accept=f"pt-BR, {lang};q=0.5") == lang


def test_an_unserved_or_malformed_tag_falls_back_to_english() -> None:
    assert i18n.negotiate("pt-BR") == "en"
    assert i18n.negotiate("<script>", 42, accept="zz;q=1, de;q=0") == "en"


def test_a_string_missing_from_its_template_is_refused_in_the_suite() -> None:
    with pytest.raises(i18n.MissingMessage):
        i18n.text("pages", "de")("A sentence nobody put in the template")


def test_fields_are_filled_and_other_braces_kept() -> None:
    assert i18n.fill("{n} waiting for {product} at {link}", {"n": 3}) == "3 waiting for {product} at {link}"


@pytest.mark.parametrize(
    ("lang", "expected"), [("en", "€24.00"), ("de", "24,00\xa0€"), ("fr", "24,00\xa0€"), ("nl", "€\xa024,00")]
)
def test_prices_are_written_as_the_language_writes_them(lang: str, expected: str) -> None:
    assert i18n.price("24.00", "eur", lang) == expected
    assert i18n.price(None, "EUR", lang) is None
