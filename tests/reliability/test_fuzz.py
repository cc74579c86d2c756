"""Generated input against contact normalisation and the signed webhooks (hypothesis).

- Contact normalisation never raises anything but BadRequest; an SMS contact comes out as E.164 that
  normalises to itself from any region; a phone number written in any common notation comes out as its
  E.164; an email's match form is the same for every spelling that differs only in case.
- A webhook body of any shape, correctly signed, gets a 2xx or a 4xx from the app, never an exception.
"""

from __future__ import annotations

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
