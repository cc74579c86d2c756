"""Generated input against contact normalisation and the signed webhooks (hypothesis).

- Contact normalisation never raises anything but BadRequest; an SMS contact comes out as E.164 that
  normalises to itself from any region; a phone number written in any common notation comes out as its
  E.164; an email's match form is the same for every spelling that differs only in case.
- A webhook body of any shape, correctly signed, gets a 2xx or a 4xx from the app, never an exception.
- Shopify's and WooCommerce's own webhooks, validly signed, with any body and any headers, on a stage that takes
  both dialects: a 2xx or a 4xx, and a 4xx writes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import phonenumbers
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.contacts import Contact, normalise_contact
from chalicelib.errors import BadRequest
from chalicelib.tables.reservations import OfferState
from chalicelib.webhooks import sign
from devstack import fake_shopify
from devstack.clocks import FixedClock
from tests.platforms import THROW, WOO_URL, Shop, join, platform_shop
from tests.reliability.tally import count
from tests.reliability.world import World
from tests.reliability.wsgi import ChaliceWsgi
from tests.support import ROOT, installed

REGIONS = ["GB", "US", "IE", "FR", "DE", "IN", "AU", "BR", "JP", "NG"]
E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def normalised(channel: str, raw: str, region: str) -> Contact | None:
    """The contact, or None when refused; anything other than BadRequest fails the test."""
    count("contact examples")
    try:
        return normalise_contact(channel, raw, region)
    except BadRequest:
        return None


# --- contacts

phone_like = st.from_regex(r"\A[+(]?[0-9][0-9 ().\-]{4,22}\Z")


@FUZZ
@given(
    channel=st.sampled_from(["sms", "email", "SMS", "fax", ""]),
    raw=st.text(max_size=300),
    region=st.sampled_from(REGIONS),
)
def test_any_text_is_a_contact_or_a_bad_request(channel: str, raw: str, region: str) -> None:
    normalised(channel, raw, region)


@FUZZ
@given(raw=st.one_of(phone_like, st.text(alphabet="+0123456789 ()-.#*x", max_size=30)), region=st.sampled_from(REGIONS))
def test_an_sms_contact_is_e164_and_normalises_to_itself_from_any_region(raw: str, region: str) -> None:
    contact = normalised("sms", raw, region)
    if contact is None:
        return
    assert E164.match(contact.address), contact
    assert contact.match == contact.address
    for other in REGIONS:
        assert normalise_contact("sms", contact.address, other) == contact


@FUZZ
@given(
    region=st.sampled_from(REGIONS),
    kind=st.sampled_from([phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE]),
    style=st.sampled_from(
        [
            phonenumbers.PhoneNumberFormat.E164,
            phonenumbers.PhoneNumberFormat.INTERNATIONAL,
            phonenumbers.PhoneNumberFormat.NATIONAL,
            phonenumbers.PhoneNumberFormat.RFC3966,
        ]
    ),
    padding=st.sampled_from(["", " ", "  ", "\t"]),
)
def test_a_real_number_in_any_common_notation_comes_out_as_its_e164(
    region: str, kind: int, style: int, padding: str
) -> None:
    number = phonenumbers.example_number_for_type(region, kind)
    if number is None:
        return
    written = padding + phonenumbers.format_number(number, style) + padding
    expected = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    contact = normalised("sms", written, region)
    assert contact is not None and contact.address == expected, (written, contact)


def recased(text: str, flips: list[bool]) -> str:
    return "".join(c.swapcase() if flip else c for c, flip in zip(text, flips + [False] * len(text), strict=False))


@FUZZ
@given(email=st.emails(), flips=st.lists(st.booleans(), max_size=80))
def test_email_matching_ignores_case(email: str, flips: list[bool]) -> None:
    contact = normalised("email", email, "GB")
    if contact is None:
        return
    assert normalise_contact("email", contact.address, "GB") == contact, "normalising twice changes nothing"
    variant = recased(email, flips)
    if variant.lower() != email.lower():
        return  # a letter whose case does not map back (Unicode has a few); not the same spelling
    other = normalised("email", variant, "GB")
    assert other is not None and other.match == contact.match, (email, variant)


ascii_local = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._+-]{0,20}[A-Za-z0-9]\Z")
ascii_domain = st.from_regex(r"\A[A-Za-z][A-Za-z0-9-]{0,10}[A-Za-z0-9]\.(com|co\.uk|org|shop)\Z")


@FUZZ
@given(local=ascii_local, domain=ascii_domain, flips=st.lists(st.booleans(), max_size=60))
def test_ascii_emails_differing_in_case_are_one_person(local: str, domain: str, flips: list[bool]) -> None:
    email = f"{local}@{domain}"
    contact = normalised("email", email, "GB")
    if contact is None:
        return
    other = normalised("email", recased(email, flips), "GB")
    assert other is not None and other.match == contact.match


# --- webhook bodies


@pytest.fixture
def shop(world: World) -> Iterator[tuple[World, ChaliceWsgi, list[str]]]:
    """A product with a restock, offers and one hold, and the app behind the local gateway."""
    from app import app

    world.product()
    for n in ("+447400100401", "+447400100402", "+447400100403"):
        world.tap(n)
    world.inventory(2)
    world.pump()
    tokens = [str(r["token_id"]) for r in world.offers(OfferState.OFFERED)]
    world.reserve(tokens[0])
    with installed(world.services):
        yield world, ChaliceWsgi(app, ROOT), tokens


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=80),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def inventory_bodies(sku: str) -> st.SearchStrategy[str]:
    fields = st.fixed_dictionaries(
        {},
        optional={
            "sku": st.one_of(st.just(sku), st.just("UNKNOWN-1"), json_values),
            "available": st.one_of(st.integers(min_value=-5, max_value=2_000_000), json_values),
            "occurred_at": st.one_of(st.just("2020-01-01T00:00:00Z"), st.datetimes().map(str), json_values),
            "extra": json_values,
        },
    )
    return st.one_of(
        fields.map(json.dumps), json_values.map(lambda v: json.dumps(v, allow_nan=True)), st.text(max_size=200)
    )


def order_bodies(tokens: list[str]) -> st.SearchStrategy[str]:
    fields = st.fixed_dictionaries(
        {},
        optional={
            "reservation_id": st.one_of(st.sampled_from(tokens), st.text(max_size=70), json_values),
            "order_id": st.one_of(st.integers(), st.text(max_size=140), json_values),
        },
    )
    return st.one_of(
        fields.map(json.dumps), json_values.map(lambda v: json.dumps(v, allow_nan=True)), st.text(max_size=200)
    )


def post_signed(world: World, gateway: ChaliceWsgi, path: str, text: str) -> tuple[int, Any]:
    headers = {
        "content-type": "application/json",
        **sign(world.services.webhook_secrets()[0], text, f"msg_{uuid.uuid4().hex}"),
    }
    status, _headers, body = gateway._handle("POST", path, headers, text.encode())
    count("signed webhook bodies")
    return status, body


@FUZZ
@given(data=st.data())
def test_any_signed_inventory_body_gets_a_2xx_or_a_4xx(shop: tuple[World, ChaliceWsgi, list[str]], data: Any) -> None:
    world, gateway, _ = shop
    text = data.draw(inventory_bodies(world.sku))
    status, body = post_signed(world, gateway, "/webhooks/inventory", text)
    assert 200 <= status < 500, (status, text, body)
    if status >= 400:
        assert set(json.loads(body)) == {"error", "message"}


@FUZZ
@given(data=st.data())
def test_any_signed_order_body_gets_a_2xx_or_a_4xx(shop: tuple[World, ChaliceWsgi, list[str]], data: Any) -> None:
    world, gateway, tokens = shop
    text = data.draw(order_bodies(tokens))
    status, body = post_signed(world, gateway, "/webhooks/orders", text)
    assert 200 <= status < 500, (status, text, body)
    if status >= 400:
        assert set(json.loads(body)) == {"error", "message"}


def nested(depth: int, opener: str) -> str:
    """A JSON body nested `depth` levels deep (arrays or objects)."""
    if opener == "[":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def form_with(fields: int) -> str:
    return "&".join(f"field{i}=x" for i in range(fields))


@FUZZ
@given(
    depth=st.integers(min_value=1, max_value=6000),
    opener=st.sampled_from("[{"),
    fields=st.integers(min_value=0, max_value=400),
    kind=st.sampled_from(["json", "form", "webhook"]),
)
def test_bodies_nested_deep_or_with_many_fields_get_a_4xx(
    shop: tuple[World, ChaliceWsgi, list[str]], depth: int, opener: str, fields: int, kind: str
) -> None:
    world, gateway, _ = shop
    if kind == "form":
        # From an allowed storefront's page, so the body itself is what gets judged.
        origin = world.services.settings.cors_origins[0]
        headers = {"content-type": "application/x-www-form-urlencoded", "origin": origin}
        status, _headers, _body = gateway._handle("POST", "/notify-me", headers, form_with(fields).encode())
    elif kind == "json":
        headers = {"content-type": "application/json"}
        status, _headers, _body = gateway._handle("POST", "/notify-me", headers, nested(depth, opener).encode())
    else:
        status, _body = post_signed(world, gateway, "/webhooks/inventory", nested(depth, opener))
    count("deep or wide bodies")
    assert 400 <= status < 500, (kind, depth, fields, status)


# --- Shopify's and WooCommerce's own webhooks

PLATFORM_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
header_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FFF), max_size=60)


@pytest.fixture
def stores(session: Any, clock: FixedClock) -> Iterator[Shop]:
    """A Shopify stage that takes WooCommerce's webhooks too, with someone waiting for THROW."""
    with platform_shop("shopify", session, clock) as shop:
        assert shop.services.store_webhooks.accepts("shopify") and shop.services.store_webhooks.accepts("woocommerce")
        join(shop, THROW, "ada@example.com")
        yield shop


def signed(secret: str, body: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def payloads(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[bytes]:
    shaped = st.fixed_dictionaries({}, optional={**fields, "extra": json_values})
    return st.one_of(
        shaped.map(lambda v: json.dumps(v, allow_nan=True).encode()),
        json_values.map(lambda v: json.dumps(v, allow_nan=True).encode()),
        st.text(max_size=200).map(str.encode),
        st.binary(max_size=200),
    )


def ids(real: list[int]) -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(real), st.integers(min_value=-(2**70), max_value=2**70), json_values)


def shopify_bodies(shop: Shop) -> st.SearchStrategy[bytes]:
    variant = shop.store.variant(THROW)
    times = st.one_of(st.just("2026-01-01T10:00:00-05:00"), st.datetimes().map(str), json_values)
    line = st.fixed_dictionaries({}, optional={"sku": st.one_of(st.just(THROW), json_values), "id": ids([variant.id])})
    attribute = st.fixed_dictionaries(
        {}, optional={"name": st.one_of(st.just("bisn_reservation_id"), json_values), "value": json_values}
    )
    return payloads(
        {
            "inventory_item_id": ids([variant.inventory_item_id]),
            "location_id": ids(list(shop.store.locations)),
            "available": st.one_of(st.integers(min_value=-5, max_value=2_000_000), json_values),
            "updated_at": times,
            "id": ids([variant.product_id, 5550000001]),
            "financial_status": st.one_of(st.sampled_from(["paid", "pending", "refunded"]), json_values),
            "note_attributes": st.one_of(st.lists(attribute, max_size=3), json_values),
            "status": st.one_of(st.sampled_from(["active", "archived", "draft", "completed"]), json_values),
            "order_id": ids([5550000001]),
            "tags": st.one_of(st.just("bisn-x, vip"), st.text(max_size=300), json_values),
            "invoice_url": json_values,
            "title": st.one_of(st.text(max_size=300), json_values),
            "variants": st.one_of(st.lists(line, max_size=3), json_values),
            "images": json_values,
            "image": json_values,
        }
    )


def woocommerce_bodies(shop: Shop) -> st.SearchStrategy[bytes]:
    meta = st.fixed_dictionaries(
        {}, optional={"key": st.one_of(st.just("_bisn_reservation_id"), json_values), "value": json_values}
    )
    return payloads(
        {
            "id": ids([101, 102, 501]),
            "parent_id": ids([0, 101]),
            "type": st.one_of(st.sampled_from(["simple", "variation", "variable", "grouped"]), json_values),
            "sku": st.one_of(st.just(THROW), st.just("UNKNOWN-1"), json_values),
            "status": st.one_of(st.sampled_from(["publish", "draft", "processing", "on-hold"]), json_values),
            "manage_stock": st.one_of(st.booleans(), st.just("parent"), json_values),
            "stock_quantity": st.one_of(st.integers(min_value=-5, max_value=2_000_000), json_values),
            "stock_status": st.one_of(st.sampled_from(["instock", "outofstock", "onbackorder"]), json_values),
            "date_modified_gmt": st.one_of(st.just("2026-01-01T10:00:00"), json_values),
            "date_paid_gmt": json_values,
            "name": st.one_of(st.text(max_size=300), json_values),
            "price": st.one_of(st.sampled_from(["24.00", "-1", "1e3"]), json_values),
            "permalink": json_values,
            "images": json_values,
            "meta_data": st.one_of(st.lists(meta, max_size=3), json_values),
        }
    )


def shopify_headers() -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries(
        {
            "X-Shopify-Topic": st.one_of(
                st.sampled_from(
                    [
                        "inventory_levels/update",
                        "orders/create",
                        "orders/paid",
                        "draft_orders/update",
                        "products/create",
                        "products/update",
                        "products/delete",
                        "app/uninstalled",
                    ]
                ),
                header_text,
            ),
            # Mostly the right shop and a usable id, so that most deliveries reach the topic's parsing.
            "X-Shopify-Shop-Domain": st.one_of(
                st.just(fake_shopify.SHOP_DOMAIN), st.just(fake_shopify.SHOP_DOMAIN), header_text
            ),
            "X-Shopify-Webhook-Id": st.one_of(
                st.uuids().map(str), st.uuids().map(str), header_text, st.text(min_size=201, max_size=300)
            ),
        },
        optional={
            "X-Shopify-Triggered-At": st.one_of(st.datetimes().map(str), header_text),
            "X-Shopify-API-Version": header_text,
        },
    )


def woocommerce_headers() -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries(
        {
            "X-WC-Webhook-Topic": st.one_of(
                st.sampled_from(
                    [
                        "product.created",
                        "product.updated",
                        "product.deleted",
                        "order.created",
                        "order.updated",
                        "coupon.created",
                    ]
                ),
                header_text,
            ),
            "X-WC-Webhook-Source": st.one_of(st.just(f"{WOO_URL}/"), st.just(WOO_URL.upper()), header_text),
        },
        optional={
            "X-WC-Webhook-ID": st.one_of(st.just("7"), header_text),
            "X-WC-Webhook-Delivery-ID": header_text,
            "X-WC-Webhook-Resource": header_text,
        },
    )


@PLATFORM_FUZZ
@given(data=st.data())
def test_any_signed_store_delivery_gets_a_2xx_or_a_4xx_and_a_4xx_writes_nothing(stores: Shop, data: Any) -> None:
    platform = data.draw(st.sampled_from(["shopify", "woocommerce"]))
    if platform == "shopify":
        body = data.draw(shopify_bodies(stores))
        headers = data.draw(shopify_headers())
        secret, signature_header = fake_shopify.WEBHOOK_SECRET, "X-Shopify-Hmac-Sha256"
    else:
        body = data.draw(woocommerce_bodies(stores))
        headers = data.draw(woocommerce_headers())
        secret, signature_header = "fake-webhook-secret", "X-WC-Webhook-Signature"
    content_type = data.draw(st.sampled_from(["application/json", "application/x-www-form-urlencoded"]))
    headers = {"Content-Type": content_type, **headers, signature_header: signed(secret, body)}
    before = stores.snapshot()
    response = stores.client.http.post(f"/webhooks/{platform}", headers=headers, body=body)
    count(f"signed store deliveries answered {response.status_code}")
    assert 200 <= response.status_code < 500, (response.status_code, headers, body, response.body)
    if response.status_code >= 400:
        assert set(json.loads(response.body)) == {"error", "message"}, response.body
        assert stores.snapshot() == before, (headers, body, response.body)


@PLATFORM_FUZZ
@given(
    platform=st.sampled_from(["shopify", "woocommerce"]),
    body=st.one_of(st.binary(max_size=300), st.just(b"webhook_id=7")),
    headers=st.dictionaries(
        st.sampled_from(
            [
                "X-Shopify-Hmac-Sha256",
                "X-WC-Webhook-Signature",
                "X-Shopify-Topic",
                "X-WC-Webhook-Topic",
                "X-Shopify-Shop-Domain",
                "X-WC-Webhook-Source",
                "X-Shopify-Webhook-Id",
            ]
        ),
        header_text,
        max_size=5,
    ),
)
def test_an_unsigned_or_wrongly_signed_store_delivery_is_refused_and_writes_nothing(
    stores: Shop, platform: str, body: bytes, headers: dict[str, str]
) -> None:
    before = stores.snapshot()
    response = stores.client.http.post(
        f"/webhooks/{platform}", headers={"Content-Type": "application/json", **headers}, body=body
    )
    count("unsigned store deliveries")
    unsigned = not headers.get("X-WC-Webhook-Signature", "").strip()
    if platform == "woocommerce" and body == b"webhook_id=7" and unsigned:
        assert response.status_code == 200, response.body  # WooCommerce's ping: acknowledged, changes nothing
    else:
        assert response.status_code == 401, (headers, body, response.body)
        assert set(json.loads(response.body)) == {"error", "message"}
    assert stores.snapshot() == before
