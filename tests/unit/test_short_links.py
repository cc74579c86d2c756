"""Short link ids, and every SMS the product sends fitting 2 GSM-7 segments with real-length links."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import pytest

from chalicelib import i18n
from chalicelib.config import settings_from_env
from chalicelib.confirm import code_sms
from chalicelib.i18n import LANGUAGES
from chalicelib.link_ids import LINK_ID_BYTES, LINK_ID_CHARS, is_link_id, new_link_id
from chalicelib.links import Links
from chalicelib.messages.compose import SHOP_NAME_LIMIT, SMS_PRODUCT_MIN, SMS_TOTAL_SEGMENTS, compose_sms, facts_for
from chalicelib.messages.copywriter import Copywriter
from chalicelib.messages.sms import is_gsm, septets, sms_segments, to_gsm
from chalicelib.metrics import Metrics
from chalicelib.tables.catalog import Product
from chalicelib.tables.restocks import RestocksTable
from chalicelib.tokens import Tokens
from devstack.fake_model import FakeBedrock
from infra.stages import stage_env

DEMO = Path(__file__).resolve().parents[2] / "devstack" / "demo-catalog.json"
# An API Gateway stage's default endpoint, as a deployment without a custom domain prints it
# (https://{restapi-id}.execute-api.{region}.amazonaws.com/{stage}; restapi ids are 10 characters).
GATEWAY_URL = "https://abcdefghij.execute-api.eu-west-2.amazonaws.com/api"
LONG_SHOP = "The Very Long Named Independent Furniture and Homeware Emporium of Somewhere"
SETTINGS = settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": "eu-west-2", "PUBLIC_BASE_URL": GATEWAY_URL})


def longest_demo_product() -> Product:
    products = [Product.from_item(p) for p in json.loads(DEMO.read_text())["products"]]
    return max(products, key=lambda p: (len(p.name), p.sku))


def test_a_link_id_carries_128_random_bits_in_22_url_safe_characters() -> None:
    ids = {new_link_id() for _ in range(2000)}
    assert len(ids) == 2000  # no repeats
    for link_id in ids:
        assert len(link_id) == LINK_ID_CHARS and is_link_id(link_id)
        assert len(base64.urlsafe_b64decode(link_id + "==")) == LINK_ID_BYTES == 16
    # Every base64url character turns up in every position: nothing fixed, nothing skewed to a subset.
    assert len({i[0] for i in ids}) == 64 and len({i[10] for i in ids}) == 64


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a" * 21,
        "a" * 23,
        "a" * 21 + "=",  # padding is never part of an id
        "a" * 21 + ".",
        "eyJ0IjoiYWJjIn0.aw9ebw.cJQ6pna2yRVsCPBDJ",  # a signed token always holds a dot
        "0" * 32,  # an offer row id from before ids were random (uuid4 hex)
        "a" * 21 + "\n",
    ],
)
def test_anything_else_is_not_a_link_id(text: str) -> None:
    assert not is_link_id(text)


def test_short_links_use_the_short_routes_and_older_rows_keep_signed_ones() -> None:
    links = Links(GATEWAY_URL + "/", Tokens("k" * 32))
    link_id = new_link_id()
    assert links.reserve(link_id) == f"{GATEWAY_URL}/r/{link_id}"
    assert links.manage_short(link_id) == f"{GATEWAY_URL}/m/{link_id}"
    assert links.reserve("0" * 32).startswith(f"{GATEWAY_URL}/reserve/")  # a uuid4-hex row: signed, as before


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("two_way", [False, True])
@pytest.mark.parametrize("model", [False, True])
@pytest.mark.parametrize("shop", ["Walnut & Wool (demo shop)", LONG_SHOP])
def test_the_real_notice_sms_fits_two_gsm7_segments(two_way: bool, model: bool, shop: str, lang: str) -> None:
    settings = dataclasses.replace(SETTINGS, sms_two_way=two_way, shop_name=shop)
    links = Links(settings.public_base_url, Tokens("k" * 32))
    writer = Copywriter(
        settings=settings, restocks=RestocksTable(None), links=links, bedrock=FakeBedrock() if model else None
    )
    product = longest_demo_product()
    every = writer.facts(product)
    facts = every[lang]
    copy = writer.write(every, Metrics("Test", "bisn", enabled=False))[lang]
    # The notifier's links: the offer row's id and the person's manage id, both random link ids.
    text = compose_sms(
        copy.sms, facts, links.reserve(new_link_id()), links.manage_short(new_link_id()), two_way=two_way
    )
    assert is_gsm(text) and septets(text) <= 306
    assert sms_segments(text) <= SMS_TOTAL_SEGMENTS == 2
    shown_shop = shop if len(shop) <= SHOP_NAME_LIMIT else shop[: SHOP_NAME_LIMIT - 3].rstrip() + "..."
    assert text.startswith(f"{shown_shop}: ")  # the shop comes first
    window = i18n.text("messages", lang)("Link valid for {window}.", window=facts.offer_window)
    assert to_gsm(window) in text.split("\n")  # how long the offer lasts
    assert text.count(f"{GATEWAY_URL}/r/") == 1 and text.count(f"{GATEWAY_URL}/m/") == 1
    # The product's name is shortened with an ellipsis rather than overflow, and only when needed.
    if product.name not in text:
        cuts = [product.name[:n].rstrip() + "..." for n in range(SMS_PRODUCT_MIN - 3, len(product.name))]
        assert any(cut in text for cut in cuts), text


def test_a_name_that_would_overflow_is_shortened_never_the_links() -> None:
    links = Links(GATEWAY_URL, Tokens("k" * 32))
    facts = dataclasses.replace(
        facts_for(longest_demo_product(), LONG_SHOP), product="Hand-turned solid walnut dining chair " * 4
    )
    reserve, manage = links.reserve(new_link_id()), links.manage_short(new_link_id())
    text = compose_sms("{product} is back. Tap to hold one: {link}", facts, reserve, manage, two_way=True)
    assert sms_segments(text) == 2 and reserve in text and manage in text and "Hand-turned" in text


def test_non_gsm_characters_are_folded_so_the_sms_is_never_ucs2() -> None:
    links = Links(GATEWAY_URL, Tokens("k" * 32))
    facts = dataclasses.replace(facts_for(longest_demo_product(), "Café “Ōak” — 北"), product="Crème brûlée dish ✓")
    text = compose_sms(
        "{product} is back – tap: {link}", facts, links.reserve(new_link_id()), GATEWAY_URL, two_way=False
    )
    assert is_gsm(text) and sms_segments(text) <= 2
    # é and è are GSM-7 letters and stay; û, Ō and the typographic marks fold; ✓ and 北 have no GSM-7 form.
    assert text.startswith('Café "Oak" -: Crème brulée dish is back - tap:')


def test_the_switch_code_sms_is_one_gsm7_segment_with_the_longest_shop_name() -> None:
    text = code_sms(LONG_SHOP + " ✓", "123456")
    assert is_gsm(text) and sms_segments(text) == 1
    assert text.startswith(LONG_SHOP[: SHOP_NAME_LIMIT - 3].rstrip() + "...: your code is 123456.")
