"""Opting back in: the proof message's cap, its code, its words in every language, and its queue message."""

from __future__ import annotations

import html

import pytest

from chalicelib import i18n
from chalicelib.errors import BadRequest
from chalicelib.messages.compose import Brand, button, shop_header
from chalicelib.messages.sms import is_gsm, sms_segments
from chalicelib.queue.messages import ResubscribeProof, parse, to_body
from chalicelib.shopper.resubscribe import (
    CODE_ATTEMPTS,
    PROOF_EVERY_S,
    PROOF_WINDOW_S,
    ProofCodes,
    cap_key,
    code_sms,
    proof_email,
)
from chalicelib.tables.base import TransactionCancelled, Tx
from chalicelib.tables.optout import resubscribe_code_key
from chalicelib.wiring import Services

# A long name with letters outside GSM-7: the SMS must fold it and still fit.
LONG_SHOP = "Ateliers Lumière & Søn – Maßanfertigung Çağdaş Möbel GmbH"


def test_a_code_is_six_digits_derived_from_its_nonce_with_a_key_of_its_own() -> None:
    codes = ProofCodes("token-key")
    code = codes.code("nonce-1")
    assert len(code) == 6 and code.isdigit()
    assert codes.code("nonce-1") == code, "the notifier and the check derive the same code"
    nonces = [f"n{i}" for i in range(5)]
    assert [ProofCodes("another-key").code(n) for n in nonces] != [codes.code(n) for n in nonces]
    assert len({codes.code(n) for n in nonces}) > 1, "each nonce its own code"
    assert codes.matches("nonce-1", f"{code[:3]} {code[3:]}"), "spaces typed between digits are ignored"
    assert not codes.matches("nonce-1", str((int(code) + 1) % 1_000_000).zfill(6))


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_the_code_sms_names_the_shop_first_and_fits_two_gsm_segments(lang: str) -> None:
    text = code_sms(LONG_SHOP, "123456", lang)
    assert is_gsm(text), text
    assert sms_segments(text) <= 2, text
    assert text.startswith("Ateliers Lumi"), "the shop's name comes first"
    assert "123456" in text and "15" in text


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_the_email_says_they_unsubscribed_and_carries_the_link_in_both_parts(lang: str) -> None:
    link = "https://shop.example/resubscribe/" + "a" * 32
    notice = proof_email(
        shop="Walnut & Wool",
        product="Walnut chair",
        to="ada@example.com",
        name="Ada",
        lang=lang,
        link=link,
        unsubscribe_url="https://shop.example/unsubscribe/x",
        brand=Brand(shop_url="https://shop.example/", logo_url="https://shop.example/logo.svg", accent="#7a4b2a"),
    )
    t = i18n.text("resubscribe", lang)
    assert t("You unsubscribed from {shop}'s messages earlier.", shop="Walnut & Wool") in notice.text
    assert link in notice.text and f'href="{link}"' in notice.html
    assert "Walnut chair" in notice.text and "Walnut &amp; Wool" in notice.html, "escaped in HTML"
    assert f'lang="{lang}"' in notice.html
    assert notice.subject and notice.unsubscribe_url, "the List-Unsubscribe header as every email has it"


def test_the_re_subscribe_email_wears_the_shops_look_as_its_notices_do() -> None:
    brand = Brand(shop_url="https://shop.example/", logo_url="https://shop.example/logo.svg", accent="#7a4b2a")
    link = "https://shop.example/resubscribe/" + "a" * 32
    notice = proof_email(
        shop="Walnut & Wool",
        product="Walnut chair",
        to="ada@example.com",
        name="",
        lang="de",
        link=link,
        unsubscribe_url="https://shop.example/unsubscribe/x",
        brand=brand,
    )
    assert notice.html is not None
    # The notices' frame: the logo linking to the shop, the card, the button in the shop's accent.
    assert shop_header("Walnut & Wool", brand) in notice.html
    assert button(html.escape(link), "Nachrichten wieder einschalten", "#7a4b2a") in notice.html
    assert 'class="card"' in notice.html and "color-scheme" in notice.html
    assert 'href="https://shop.example/unsubscribe/x"' in notice.html and ">Abmelden</a>" in notice.html
    assert "Abmelden: https://shop.example/unsubscribe/x" in notice.text


def test_the_queue_message_names_the_proof_and_nothing_else_is_taken_for_one() -> None:
    proof = ResubscribeProof("rs#" + "a" * 32)
    assert parse(to_body(proof)) == proof
    assert not isinstance(parse('{"kind":"confirm","sku":"A","joined_ts":"t"}'), ResubscribeProof)
    assert not isinstance(parse('{"sku":"A","restock_id":"r","restock_ts":"t"}'), ResubscribeProof)
    with pytest.raises(BadRequest):
        parse("not json")
    with pytest.raises(BadRequest):
        parse('{"kind":"resubscribe"}')


def _charge(services: Services, key: str, now: float) -> bool:
    item = services.tables.rate_counters.proof_cap_item(
        cap_key(key), now, every_s=PROOF_EVERY_S, window_s=PROOF_WINDOW_S
    )
    try:
        services.tables.run(Tx().add("cap", item))
    except TransactionCancelled:
        return False
    return True


def test_the_cap_is_one_a_day_and_three_in_any_thirty_days(services: Services) -> None:
    day, start = 86400, 1_700_000_000.0
    assert _charge(services, "k", start)
    assert not _charge(services, "k", start + day - 1), "under 24 hours after the last"
    assert _charge(services, "k", start + 10 * day)
    assert _charge(services, "k", start + 20 * day)
    assert not _charge(services, "k", start + 29 * day), "three already within 30 days"
    assert _charge(services, "k", start + 30 * day), "the first of the three has left the window"
    assert not _charge(services, "k", start + 31 * day), "the one of day 10 is still inside it (sliding, not fixed)"
    assert _charge(services, "k", start + 40 * day)
    assert _charge(services, "other", start + day - 1), "each contact has its own cap"


def test_a_code_gets_five_tries_then_none(services: Services) -> None:
    optout = services.tables.optout
    key, now = resubscribe_code_key("k"), 1_700_000_000.0
    assert optout.try_code(key, now, CODE_ATTEMPTS) is None, "no code, nothing to try"
    fields = {"k": "k", "sku": "A", "channel": "sms", "to": "+447400123458", "name": "", "lang": "en", "nonce": "n"}
    services.tables.run(Tx().add("p", optout.pending_proof_item(key, fields, now=now, ttl_s=900)))
    tries = [optout.try_code(key, now + i, CODE_ATTEMPTS) for i in range(CODE_ATTEMPTS + 1)]
    assert [t is not None for t in tries] == [True] * CODE_ATTEMPTS + [False]
    assert optout.try_code(resubscribe_code_key("k2"), now, CODE_ATTEMPTS) is None
