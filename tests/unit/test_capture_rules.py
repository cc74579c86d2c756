"""Parsing a Notify-me body: what is accepted and what is refused, before any AWS call."""

from __future__ import annotations

from typing import Any

import pytest

from app import CAPTURE_STATUS
from chalicelib.capture import MAX_NAME_LEN, CaptureOutcome, name_ok, parse_notify_me
from chalicelib.errors import BadRequest

GOOD: dict[str, Any] = {"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 123456", "name": "Ada"}


def test_a_good_tap_is_parsed_and_normalised() -> None:
    tap = parse_notify_me(GOOD, "GB")
    assert (tap.sku, tap.contact.address, tap.contact.channel, tap.name) == (
        "CHAIR-WALNUT",
        "+447400123456",
        "sms",
        "Ada",
    )


def test_name_is_optional_and_channel_case_is_ignored() -> None:
    tap = parse_notify_me({**GOOD, "name": None, "channel": "EMAIL", "contact": "a@example.com"}, "GB")
    assert tap.name == ""
    assert tap.contact.channel == "email"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"sku": None}, "missing_field"),
        ({"sku": ""}, "missing_field"),
        ({"sku": 42}, "invalid_field"),
        ({"sku": "has space"}, "invalid_sku"),
        ({"sku": "x" * 65}, "field_too_long"),
        ({"sku": "<script>"}, "invalid_sku"),
        ({"channel": None}, "missing_field"),
        ({"channel": ["sms"]}, "invalid_field"),
        ({"channel": "fax"}, "unsupported_channel"),
        ({"contact": None}, "missing_field"),
        ({"contact": 7400123456}, "invalid_field"),
        ({"contact": "x" * 255}, "field_too_long"),
        ({"name": "n" * 101}, "field_too_long"),
        ({"name": {"first": "Ada"}}, "invalid_field"),
        ({"name": "Ada\x00"}, "invalid_field"),
    ],
)
def test_malformed_fields_are_refused_with_a_code(change: dict[str, Any], code: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_notify_me({**GOOD, **change}, "GB")
    assert caught.value.code == code


@pytest.mark.parametrize("body", [[], "sku", 3, None])
def test_a_body_that_is_not_an_object_is_refused(body: Any) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_notify_me(body, "GB")
    assert caught.value.code == "invalid_body"


@pytest.mark.parametrize(("status", "http"), [("queued", 202), ("already_queued", 202), ("acknowledged", 202)])
def test_outcomes_map_to_their_status_codes(status: str, http: int) -> None:
    assert CAPTURE_STATUS[CaptureOutcome(status).status] == http


@pytest.mark.parametrize("name", ["Ada", "Anne-Marie", "O'Brien", "Zoë", "José María", "Łucja", "王芳", "D’Arcy"])
def test_a_name_of_letters_spaces_apostrophes_and_hyphens_is_kept(name: str) -> None:
    assert parse_notify_me({**GOOD, "name": name}, "GB").name == name


@pytest.mark.parametrize(
    "name", ["visit evil.example", "http://x", "50% off", "Ada2", "call 0800", "a\nb", "<b>Ada</b>", "Ada!"]
)
def test_a_name_that_could_carry_a_link_a_price_or_markup_is_refused(name: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_notify_me({**GOOD, "name": name}, "GB")
    assert refused.value.code == "invalid_field"


def test_a_name_longer_than_forty_characters_is_refused() -> None:
    with pytest.raises(BadRequest) as refused:
        parse_notify_me({**GOOD, "name": "A" * 41}, "GB")
    assert refused.value.code == "field_too_long"


# As macOS and some keyboards send them: each accent a combining mark after its letter (NFD).
@pytest.mark.parametrize(
    ("typed", "kept"),
    [
        ("Na\u0301ndor", "Nándor"),
        ("Zoe\u0308", "Zoë"),
        ("Nguye\u0302\u0303n", "Nguyễn"),
        ("Đo\u0302\u0303 Thi\u0323", "Đỗ Thị"),
    ],
)
def test_a_name_typed_in_decomposed_unicode_is_kept_composed(typed: str, kept: str) -> None:
    assert typed != kept and name_ok(typed)
    assert parse_notify_me({**GOOD, "name": typed}, "GB").name == kept


def test_a_decomposed_name_is_measured_as_composed() -> None:
    assert parse_notify_me({**GOOD, "name": "a\u0301" * MAX_NAME_LEN}, "GB").name == "á" * MAX_NAME_LEN
    with pytest.raises(BadRequest) as refused:
        parse_notify_me({**GOOD, "name": "a\u0301" * (MAX_NAME_LEN + 1)}, "GB")
    assert refused.value.code == "field_too_long"


@pytest.mark.parametrize("name", ["\u0301Ada", "Ada\u0301\u0301\u0301", "Ada \u0308"])
def test_a_mark_that_composes_with_no_letter_is_still_refused(name: str) -> None:
    assert not name_ok(name)
    with pytest.raises(BadRequest) as refused:
        parse_notify_me({**GOOD, "name": name}, "GB")
    assert refused.value.code == "invalid_field"
