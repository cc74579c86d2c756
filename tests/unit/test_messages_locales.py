"""Messages in every language: every SMS the code can build stays within 2 GSM-7 segments and is pure GSM-7, every
fixed string is in the recipient's language (no English left in a de/fr/es/nl message), and copy rules read the
price, discount and promise words of each language."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from babel.messages.pofile import read_po

from chalicelib import i18n
from chalicelib.config import settings_from_env
from chalicelib.confirm import CODE_TTL_S, code_email, code_sms, confirmation_email
from chalicelib.i18n import LANGUAGES
from chalicelib.link_ids import new_link_id
from chalicelib.links import Links
from chalicelib.messages.compose import (
    LINK,
    PRODUCT,
    SHOP,
    SMS_TOTAL_SEGMENTS,
    Copy,
    Facts,
    compose_email,
    compose_sms,
    facts_for,
    window_words,
)
from chalicelib.messages.copy_rules import CopyRejected, template_copy, validate
from chalicelib.messages.copywriter import Copywriter
from chalicelib.messages.senders import Notice
from chalicelib.messages.sms import is_gsm, septets, sms_segments, to_gsm
from chalicelib.metrics import FALLBACK_COPY, Metrics
from chalicelib.tables.catalog import Product
from chalicelib.tables.restocks import RestocksTable
from chalicelib.tokens import Tokens
from devstack.fake_model import FakeBedrock
from infra.stages import stage_env
from tests.support import CHAIR

FOREIGN = LANGUAGES[1:]
SETTINGS = settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": "eu-west-2"})
# A deployed stage's longest base (an API Gateway default endpoint, bench/sms.py): links of about 85 characters.
GATEWAY = "https://abcdefghij.execute-api.eu-west-2.amazonaws.com/api"
LINKS = Links(GATEWAY, Tokens("k" * 32))
LONG_SHOP = "The Very Long Named Independent Furniture and Homeware Emporium of Somewhere"
LONG_NAME = "Hand-turned solid walnut dining chair with woven rush seat, natural oil finish, set of one"
CHAIR_ITEM = {"sku": "CHAIR-WALNUT", **CHAIR}


def catalogue(lang: str) -> list[str]:
    """Every string of the messages domain in a language (each plural form), as the .po file has them."""
    if lang == "en":
        return sorted(i18n.template_ids("messages"))
    path = i18n.LOCALES_DIR / lang / "LC_MESSAGES" / "messages.po"
    with path.open("rb") as f:
        po = read_po(f, locale=lang)
    out = []
    for message in po:
        if message.id:
            out += [str(s) for s in message.string] if isinstance(message.string, tuple) else [str(message.string)]
    return out


def writer(bedrock: FakeBedrock | None, *, shop: str = SETTINGS.shop_name, two_way: bool = False) -> Copywriter:
    settings = dataclasses.replace(SETTINGS, shop_name=shop, sms_two_way=two_way)
    return Copywriter(settings=settings, restocks=RestocksTable(None), links=LINKS, bedrock=bedrock)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_catalogue_string_folds_to_pure_gsm7(lang: str) -> None:
    # Whatever of the catalogue reaches an SMS (frame, template, code SMS), folding keeps every letter: nothing is
    # dropped for want of a GSM-7 form (œ -> oe, ç -> c, á -> a, typographic quotes -> ').
    for string in catalogue(lang):
        folded = to_gsm(string)
        assert is_gsm(folded), (lang, string, [c for c in folded if not is_gsm(c)])


@pytest.mark.parametrize(
    ("text", "sms"),
    [
        ("Cœur", "Coeur"),
        ("ça, Ça", "ca, Ça"),
        ("día, información", "dia, informacion"),
        ("ĳs, België", "ijs, Belgie"),
        ("« Là-bas » l’été", '" Là-bas " l\'été'),
        ("24,00\u202f€", "24,00 €"),
    ],
)
def test_letters_outside_gsm7_fold_to_their_gsm7_forms(text: str, sms: str) -> None:
    assert to_gsm(text) == sms and is_gsm(sms)


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("two_way", [False, True])
@pytest.mark.parametrize("shop", [SETTINGS.shop_name, LONG_SHOP])
@pytest.mark.parametrize("offer_s", [3600, 2700, 7200])
def test_every_sms_the_notifier_can_build_fits_two_gsm7_segments(
    lang: str, two_way: bool, shop: str, offer_s: int
) -> None:
    product = Product.from_item({**CHAIR_ITEM, "name": LONG_NAME, "offer_window_s": offer_s})
    for model in (None, FakeBedrock()):
        copywriter = writer(model, shop=shop, two_way=two_way)
        every = copywriter.facts(product)
        copy = copywriter.write(every, Metrics("Test", "bisn", enabled=False))[lang]
        assert copy.source == ("template" if model is None else "bedrock"), lang
        reserve, manage = LINKS.reserve(new_link_id()), LINKS.manage_short(new_link_id())
        assert len(reserve) >= 83 and len(manage) >= 83  # a real id under a gateway stage URL
        text = compose_sms(copy.sms, every[lang], reserve, manage, two_way=two_way)
        assert is_gsm(text), [c for c in text if not is_gsm(c)]
        assert septets(text) <= 306 and sms_segments(text) <= SMS_TOTAL_SEGMENTS
        assert reserve in text and manage in text and ("STOP" in text) == two_way
        assert text.startswith(to_gsm(shop[:27]))  # the shop first (shortened beyond 30 characters)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_code_sms_is_one_gsm7_segment_in_every_language(lang: str) -> None:
    text = code_sms(LONG_SHOP + " ✓", "123456", lang)
    assert is_gsm(text) and sms_segments(text) == 1 and "123456" in text


@pytest.mark.parametrize("lang", FOREIGN)
def test_the_sms_frame_speaks_the_language_and_keeps_the_stop_keyword(lang: str) -> None:
    facts = facts_for(Product.from_item(CHAIR_ITEM), "Walnut & Wool", lang)
    t = i18n.text("messages", lang)
    text = compose_sms(f"{PRODUCT}: {LINK}", facts, "https://a.example/r/x", "https://a.example/m/y", two_way=True)
    lines = text.split("\n")
    assert lines[1] == to_gsm(t("Link valid for {window}.", window=window_words(3600, lang)))
    assert lines[2] == to_gsm(t("Manage: {link}", link="https://a.example/m/y"))
    assert "STOP" in lines[3] and lines[3] == to_gsm(t("Reply STOP to opt out"))
    one_way = compose_sms(f"{PRODUCT}: {LINK}", facts, "https://a.example/r/x", "https://a.example/m/y", two_way=False)
    assert one_way.split("\n")[-1] == to_gsm(t("Stop texts: {link}", link="https://a.example/m/y?stop"))


@pytest.mark.parametrize(
    ("lang", "seconds", "words"),
    [
        ("de", 3600, "1 Stunde"),
        ("de", 7200, "2 Stunden"),
        ("fr", 900, "15 minutes"),
        ("fr", 3600, "1 heure"),
        ("es", 2700, "45 minutos"),
        ("nl", 7200, "2 uur"),
        ("nl", 60, "1 minuut"),
    ],
)
def test_windows_are_said_with_the_languages_plurals(lang: str, seconds: int, words: str) -> None:
    assert window_words(seconds, lang) == words


# --- No English left in a message in another language.

# English words of the fixed strings that no de/fr/es/nl message has any reason to hold.
ENGLISH = re.compile(
    r"\b(?:the|you|your|hold|back in stock|is back|link valid|manage|reply|stop texts|unsubscribe|hello|hi|"
    r"someone|confirm|code for|it works|ignore|minutes?|hours?|days?|this link|view|alerts|asked|next person)\b",
    re.IGNORECASE,
)


def english_in(text: str, lang: str) -> list[str]:
    # Words that are rightly the same in the language ("minutes" in French, "STOP") are not English leaks.
    same = {"fr": {"minute", "minutes"}}.get(lang, set())
    return [w for w in ENGLISH.findall(text) if w.lower() not in same]


def notice_email(lang: str, copy: Copy | None = None) -> tuple[str, str, str]:
    product = Product.from_item(
        {**CHAIR_ITEM, "price": "129.00", "currency": "EUR", "product_url": "https://shop.example/p/chair"}
    )
    facts = facts_for(product, "Walnut & Wool", lang)
    email = compose_email(
        copy or template_copy(facts),
        to="ada@example.com",
        name="Ada",
        facts=facts,
        reserve_url="https://a.example/r/x",
        manage_url="https://a.example/me/y",
        unsubscribe_url="https://a.example/u/z",
    )
    assert email.html is not None and email.subject is not None
    return email.subject, email.text or "", email.html


@pytest.mark.parametrize("lang", FOREIGN)
def test_no_english_fixed_string_leaks_into_a_message_in_another_language(lang: str) -> None:
    product = Product.from_item(CHAIR_ITEM)
    facts = facts_for(product, "Walnut & Wool", lang)
    texts = [*notice_email(lang)]
    model = json.loads(FakeBedrock.written())[lang]
    model_copy = validate(model, facts, LINKS.reserve(new_link_id()), LINKS.manage_short(new_link_id()), two_way=True)
    texts += [*notice_email(lang, model_copy)]
    for two_way in (False, True):
        for copy in (template_copy(facts), model_copy):
            texts.append(
                compose_sms(copy.sms, facts, "https://a.example/r/x", "https://a.example/m/y", two_way=two_way)
            )
    confirm = chair_confirmation(lang, "Ada")
    code = code_email("Walnut & Wool", "123456", "ada@example.com", lang)
    texts += [confirm.subject or "", confirm.text or "", confirm.html or "", code.subject or "", code.text or ""]
    texts += [code.html or "", code_sms("Walnut & Wool", "123456", lang)]
    for text in texts:
        # Names, links and markup are not words of the message: read the words only.
        words = re.sub(r"<[^>]+>|https?://\S+|Walnut & Wool|Walnut dining chair|Walnut &amp; Wool", " ", text)
        assert english_in(words, lang) == [], (lang, text)


def chair_confirmation(lang: str, greeting_name: str) -> Notice:
    """The confirmation email of a place for the walnut chair, in `lang`."""
    return confirmation_email(
        shop="Walnut & Wool",
        product="Walnut dining chair",
        to="ada@example.com",
        greeting_name=greeting_name,
        confirm_url="https://a.example/c/x",
        manage_url="https://a.example/me/y",
        unsubscribe_url="https://a.example/u/z",
        days=7,
        lang=lang,
    )


@pytest.mark.parametrize("lang", FOREIGN)
def test_the_confirmation_and_code_messages_are_in_the_places_language(lang: str) -> None:
    t = i18n.text("messages", lang)
    confirm = chair_confirmation(lang, "")
    assert confirm.html is not None and f'<html lang="{lang}"' in confirm.html
    assert t("Hello,") in (confirm.text or "") and t.plural("{n} day", "{n} days", 7) in (confirm.text or "")
    assert "https://a.example/c/x" in (confirm.text or "") and 'href="https://a.example/c/x"' in confirm.html
    code = code_email("Walnut & Wool", "123456", "ada@example.com", lang)
    assert code.subject == t("Your code for {shop}", shop="Walnut & Wool")
    assert window_words(CODE_TTL_S, lang) in (code.text or "") and "123456" in (code.text or "")


# --- Copy rules in every language.

REFUSED: dict[str, list[str]] = {
    "de": [
        "jetzt mit 20 Rabatt",
        "gratis Versand",
        "kostenlos dazu",
        "garantiert für Sie",
        "für Sie reserviert",
        "ein tolles Angebot",
        "nur noch wenige da",
        "solange der Vorrat reicht",
    ],
    "fr": [
        "livraison gratuite",
        "code promo",
        "pendant les soldes",
        "réservé pour vous",
        "garanti pour vous",
        "une offre spéciale",
        "dernière chance",
        "il ne reste que deux",
        "derniere chance sans accent",
    ],
    "es": [
        "envío gratis",
        "con descuento",
        "una gran oferta",
        "reservado para ti",
        "garantizado",
        "últimas unidades",
        "hasta agotar existencias",
    ],
    "nl": [
        "gratis verzending",
        "met korting",
        "een aanbieding",
        "voor je gereserveerd",
        "gegarandeerd",
        "op = op",
        "op is op",
        "laatste kans",
    ],
}


@pytest.mark.parametrize(("lang", "words"), [(lang, w) for lang, ws in REFUSED.items() for w in ws])
def test_each_languages_price_discount_and_promise_words_are_refused(lang: str, words: str) -> None:
    facts = facts_for(Product.from_item(CHAIR_ITEM), "Walnut & Wool", lang)
    good = json.loads(FakeBedrock.written())[lang]
    raw = {**good, "email_subject": f"{PRODUCT}: {words}"}
    with pytest.raises(CopyRejected) as refused:
        validate(raw, facts, "https://a.example/r/x", "https://a.example/m/y", two_way=False)
    assert refused.value.reason in ("subject_forbidden_promise", "subject_invented_number")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_each_languages_template_and_the_fake_models_copy_pass_the_rules(lang: str) -> None:
    copywriter = writer(None, two_way=True)
    facts = facts_for(Product.from_item(CHAIR_ITEM), SETTINGS.shop_name, lang)
    template = template_copy(facts)
    for raw in (
        {"sms": template.sms, "email_subject": template.email_subject, "email_body": template.email_text},
        json.loads(FakeBedrock.written())[lang],
    ):
        checked = validate(raw, facts, copywriter.reserve_sample, copywriter.manage_sample, two_way=True)
        assert checked.sms.count(LINK) == 1 and PRODUCT in checked.email_subject


def test_a_refused_german_copy_falls_back_alone_and_the_english_is_used() -> None:
    answer = json.loads(FakeBedrock.written())
    answer["de"]["email_body"] = answer["de"]["email_body"].replace("Warteliste.", "Warteliste. Kostenloser Versand!")
    bedrock = FakeBedrock(text=json.dumps(answer))
    copywriter = writer(bedrock)
    metrics = Metrics("Test", "bisn", enabled=False)
    copies = copywriter.write(copywriter.facts(Product.from_item(CHAIR_ITEM)), metrics)
    assert len(bedrock.calls) == 1  # one Converse call for every language
    assert copies["de"] == template_copy(facts_for(Product.from_item(CHAIR_ITEM), SETTINGS.shop_name, "de"))
    assert {lang: c.source for lang, c in copies.items()} == {
        "en": "bedrock",
        "de": "template",
        "fr": "bedrock",
        "es": "bedrock",
        "nl": "bedrock",
    }
    assert copies["en"].email_text == answer["en"]["email_body"]
    assert metrics.totals == {FALLBACK_COPY: 1}
    assert metrics.document()["copy_fallback_reason"] == {"de": "email_forbidden_promise"}


def test_english_copy_may_say_reserve_as_a_verb_which_french_copy_may_not_say_as_reserve() -> None:
    en = facts_for(Product.from_item(CHAIR_ITEM), "Walnut & Wool", "en")
    raw = {"sms": f"{PRODUCT} is back. Tap to reserve one: {LINK}", "email_subject": f"{PRODUCT} is back"}
    raw["email_body"] = f"{PRODUCT} is back at {SHOP}.\n\n{LINK}"
    assert validate(raw, en, "https://a.example/r/x", "https://a.example/m/y", two_way=False).source == "bedrock"
    fr = dataclasses.replace(en, lang="fr")
    raw = {**raw, "sms": f"{PRODUCT} est réservé : {LINK}"}
    with pytest.raises(CopyRejected):
        validate(raw, fr, "https://a.example/r/x", "https://a.example/m/y", two_way=False)


def test_the_prompt_asks_every_language_with_its_own_windows_and_the_fake_answers_each() -> None:
    bedrock = FakeBedrock()
    copywriter = writer(bedrock)
    copywriter.write(copywriter.facts(Product.from_item(CHAIR_ITEM)), Metrics("Test", "bisn", enabled=False))
    [call] = bedrock.calls
    prompt = call["messages"][0]["content"][0]["text"]
    for lang in LANGUAGES:
        assert f"- {lang} (" in prompt
    assert "1 Stunde; 15 Minuten" in prompt and "1 heure; 15 minutes" in prompt and "1 uur; 15 minuten" in prompt
    assert set(json.loads(FakeBedrock.written(("de", "fr")))) == {"de", "fr"}


def test_facts_are_in_the_language_asked_and_english_for_one_not_served() -> None:
    facts = facts_for(Product.from_item({**CHAIR_ITEM, "price": "24.00", "currency": "EUR"}), "W", "de")
    assert (facts.lang, facts.offer_window, facts.price) == ("de", "1 Stunde", "24,00\xa0€")
    assert facts_for(Product.from_item(CHAIR_ITEM), "W", "pt").lang == "en"
    assert isinstance(facts, Facts)
