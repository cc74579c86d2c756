"""Product and shop names in letters GSM-7 lacks reach the SMS readable: transliterated, never dropped."""

from __future__ import annotations

import dataclasses

import pytest

from chalicelib.i18n import LANGUAGES
from chalicelib.link_ids import new_link_id
from chalicelib.links import Links
from chalicelib.messages.compose import SMS_TOTAL_SEGMENTS, compose_sms, facts_for, gsm_only
from chalicelib.messages.copy_rules import template_copy
from chalicelib.messages.sms import GSM_BASIC, is_gsm, sms_segments, to_gsm
from chalicelib.tables.catalog import Product
from chalicelib.tokens import Tokens

GATEWAY_URL = "https://abcdefghij.execute-api.eu-west-2.amazonaws.com/api"
LINKS = Links(GATEWAY_URL, Tokens("k" * 32))
PRODUCT = Product.from_item({"sku": "MUG-1", "name": "Mug", "offer_window_s": 3600, "hold_window_s": 900})

# Names as a shop in each language would write them, and how they read in GSM-7: one letter for each letter.
NAMES = [
    ("Łódź", "Lodz"),
    ("Żółć gęślą jaźń", "Zolc gesla jazn"),
    ("Příliš žluťoučký kůň", "Prilis zlutoucky kun"),
    ("Işık Ağaç Şeker", "Isik Agac Seker"),
    ("Tiếng Việt Phở", "Tieng Viet Pho"),
    ("Καφές", "KAΦEΣ"),
]


@pytest.mark.parametrize(("name", "folded"), NAMES)
def test_a_name_in_letters_gsm7_lacks_keeps_every_letter(name: str, folded: str) -> None:
    assert to_gsm(name) == gsm_only(name) == folded
    assert len(folded) == len(name)  # nothing dropped
    assert [c.isalpha() for c in folded] == [c.isalpha() for c in name]


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize(("name", "folded"), NAMES)
def test_the_composed_sms_carries_the_name_readable_in_two_gsm7_segments(name: str, folded: str, lang: str) -> None:
    facts = dataclasses.replace(facts_for(PRODUCT, f"Sklep {name}", lang), product=name)
    text = compose_sms(
        template_copy(facts).sms,
        facts,
        LINKS.reserve(new_link_id()),
        LINKS.manage_short(new_link_id()),
        two_way=True,
    )
    assert is_gsm(text), [c for c in text if not is_gsm(c)]
    assert sms_segments(text) <= SMS_TOTAL_SEGMENTS == 2
    assert text.startswith(f"Sklep {folded}: ")  # the shop's name, in full
    assert text.count(folded) == 2  # and the product's, where the copy names it


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("Straße Ørsted æble Ñandú Çà", "Straße Ørsted æble Ñandu Çà"),  # GSM-7 letters stay as they are
        ("Đà Nẵng, Ưu đãi, Ầu Ơ", "Dà Nang, Uu dai, Au O"),  # Vietnamese: stacked marks and đ
        ("Őrség Űr", "Orség Ur"),  # Hungarian double acutes
        ("İzmir ığ", "Izmir ig"),  # Turkish dotted capital and dotless small i
        ("Þórsmörk Øðal", "Thorsmörk Ødal"),
        ("ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ", "ABΓΔEZHΘIKΛMNΞOΠPΣTYΦXΨΩ"),
        ("αβγδεζηθικλμνξοπρσςτυφχψω", "ABΓΔEZHΘIKΛMNΞOΠPΣΣTYΦXΨΩ"),
        ("ά έ ή ί ό ύ ώ ϊ ΰ", "A E H I O Y Ω I Y"),
        ("Cafe\u0301", "Café"),  # typed as e and a combining accent: GSM-7's é, not a dropped mark
    ],
)
def test_letters_fold_to_their_gsm7_forms(text: str, folded: str) -> None:
    assert to_gsm(text) == folded and is_gsm(folded)


def test_every_gsm7_character_is_kept_as_it_is() -> None:
    alphabet = "".join(sorted(GSM_BASIC))
    assert to_gsm(alphabet) == alphabet


def test_only_what_has_no_letter_form_is_left_out() -> None:
    assert gsm_only("Mug ✓ 北 😀") == "Mug   "
