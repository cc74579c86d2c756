"""What a shopper reads after a tap without JavaScript (chalicelib/shopper/nojs.py): the same words the widget says, with an
example number of the shopper's own country among those the shop texts, and nothing that tells a listed contact from
a new one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from chalicelib.config import Settings, settings_from_env
from chalicelib.contacts import normalise_contact
from chalicelib.errors import BadRequest, DomainError, OnBackorder
from chalicelib.shopper.nojs import FormAnswers
from chalicelib.shopper.pages import Page
from chalicelib.tables.catalog import Product
from infra.stages import stage_env
from tests.support import REGION


class NoProducts:
    def get_cached(self, sku: str) -> Product | None:
        return None


def answers(**changes: object) -> FormAnswers:
    settings: Settings = settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": REGION})
    return FormAnswers(settings=replace(settings, **changes), catalog=NoProducts())


def refusal(raw: str) -> DomainError:
    with pytest.raises(BadRequest) as caught:
        normalise_contact("sms", raw, "GB")
    return caught.value


def said(answer: Page) -> str:
    return answer.html


@pytest.mark.parametrize(
    ("typed", "lang", "accept", "words"),
    [
        # Example mobiles: libphonenumber's metadata (PhoneNumberMetadata.xml, <mobile><exampleNumber>).
        ("+44 7400 12", "en", None, "That number is too short. For example: +44 7400 123456"),
        ("+49 1512 3456789012", "de", None, "Diese Nummer ist zu lang. Zum Beispiel: +49 1512 3456789"),
        # No country code typed: the shopper's own country among those texted (a German page: Germany).
        ("0", "de", None, "Das ist keine gültige Handynummer. Zum Beispiel: +49 1512 3456789"),
        ("0", "en", "en-US, de-AT;q=0.8", "That is not a valid mobile number. For example: +43 664 123456"),
    ],
)
def test_a_refused_number_says_what_is_wrong_with_an_example_of_the_shoppers_own_country(
    typed: str, lang: str, accept: str | None, words: str
) -> None:
    page = answers(default_phone_region="GB", sms_allowed_countries=("GB", "DE", "AT")).refused(
        refusal(typed), {"sku": "CHAIR", "channel": "sms", "contact": typed, "lang": lang}, accept
    )
    assert page.status == 400
    assert words in said(page)
    assert "country code" not in said(page)


def test_a_shopper_from_a_country_not_texted_sees_the_shops_own_example() -> None:
    # The shop texts British numbers only: a German page's example is British, the only kind it could text.
    page = answers(default_phone_region="GB", sms_allowed_countries=("GB",)).refused(
        refusal("0"), {"sku": "CHAIR", "channel": "sms", "contact": "0", "lang": "de"}, None
    )
    assert "Zum Beispiel: +44 7400 123456" in said(page)


def test_an_email_tap_says_an_email_went_only_if_one_was_owed() -> None:
    form = {"sku": "CHAIR", "channel": "email", "contact": "ada@example.com", "lang": "en"}
    confirming = said(answers().accepted(202, form, None, confirm_email=True))
    assert "You&#x27;re on the list — we&#x27;ll email you when it&#x27;s back." in confirming
    assert "If your address still needs confirming, we have emailed you a link." in confirming
    assert "Check your inbox" not in confirming
    plain = said(answers().accepted(202, form, None, confirm_email=False))
    assert "emailed you" not in plain


@pytest.mark.parametrize(
    ("offer", "lang", "words"),
    [
        ("preorder", "en", "You can order this now, and it will be sent when it is back in stock."),
        ("preorder", "de", "Sie können den Artikel jetzt bestellen."),
        ("none", "fr", "Désolé, les alertes ne sont pas disponibles pour ce produit."),
    ],
)
def test_a_product_sold_on_backorder_is_answered_by_the_shops_choice(offer: str, lang: str, words: str) -> None:
    refused = OnBackorder("No list.", offer=offer, note="")
    page = answers().refused(
        refused, {"sku": "CHAIR", "channel": "email", "contact": "a@example.com", "lang": lang}, None
    )
    assert page.status == 409
    assert words in said(page)
