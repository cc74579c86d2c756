"""Contact normalisation and validation: pure rules, table-driven."""

from __future__ import annotations

import pytest

from chalicelib.contacts import contact_key, example_region, mask, normalise_any, normalise_contact
from chalicelib.errors import BadRequest


@pytest.mark.parametrize(
    ("raw", "region", "expected"),
    [
        ("07400 123456", "GB", "+447400123456"),
        ("07400123456", "GB", "+447400123456"),
        ("+44 7400 123456", "GB", "+447400123456"),
        ("0044 7400 123456", "GB", "+447400123456"),
        ("(0)7400-123-456", "GB", "+447400123456"),
        ("+1 415 555 2671", "GB", "+14155552671"),
        ("415 555 2671", "US", "+14155552671"),
        ("+33 6 12 34 56 78", "GB", "+33612345678"),
        ("  07400 123456  ", "GB", "+447400123456"),
    ],
)
def test_phone_numbers_become_e164(raw: str, region: str, expected: str) -> None:
    contact = normalise_contact("sms", raw, region)
    assert contact.address == expected
    assert contact.match == expected


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("12", "invalid_phone"),
        ("not a number", "invalid_phone"),
        ("+44 7400 12", "invalid_phone"),
        ("+999 1234 5678", "invalid_phone"),
        ("07700 900123", "invalid_phone"),  # a reserved drama range: parses, but no phone has it
        ("a@b.com", "contact_channel_mismatch"),
        ("", "missing_field"),
        ("   ", "missing_field"),
        ("1" * 300, "field_too_long"),
    ],
)
def test_bad_phone_numbers_are_refused_with_a_code(raw: str, code: str) -> None:
    with pytest.raises(BadRequest) as caught:
        normalise_contact("sms", raw, "GB")
    assert caught.value.code == code


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        # Lengths from libphonenumber's metadata (PhoneNumberMetadata.xml): a GB mobile has 10 national digits,
        # a German one 10 or 11.
        ("+44 7400 12345", "too_short"),  # typed with its country code, a digit short: not "add your country code"
        ("0044 7400 12", "too_short"),
        ("12", "too_short"),
        ("+44 7400 1234567", "too_long"),
        ("+49 1512 34567890123", "too_long"),
        ("07700 900123", None),  # the right length, in a range no phone has
        ("+999 1234 5678", None),  # no such country code
        ("not a number", None),
    ],
)
def test_an_invalid_number_says_when_its_length_is_what_is_wrong(raw: str, reason: str | None) -> None:
    with pytest.raises(BadRequest) as caught:
        normalise_contact("sms", raw, "GB")
    assert (caught.value.code, caught.value.reason) == ("invalid_phone", reason)
    assert ("too short" in caught.value.message) is (reason == "too_short")
    assert ("too long" in caught.value.message) is (reason == "too_long")


@pytest.mark.parametrize(
    ("typed", "preferred", "region"),
    [
        ("+49 1512", (), "DE"),  # the calling code typed names the country
        ("0049 1512", ("GB",), "DE"),
        ("+33 6 12", ("DE",), "DE"),  # a country we do not text: the shopper's own instead
        ("01512 345", ("AT", "DE"), "DE"),  # the first of the shopper's countries that we text
        ("01512 345", ("FR",), "GB"),  # none of theirs: the shop's own, listed first
        ("", (), "GB"),
    ],
)
def test_the_example_number_is_of_the_shoppers_own_country_among_those_we_text(
    typed: str, preferred: tuple[str, ...], region: str
) -> None:
    assert example_region(typed, ("GB", "DE"), preferred) == region


@pytest.mark.parametrize(
    ("raw", "address", "match"),
    [
        ("ada@example.com", "ada@example.com", "ada@example.com"),
        ("Ada.Lovelace@Example.COM", "Ada.Lovelace@example.com", "ada.lovelace@example.com"),
        ("  ada@example.com ", "ada@example.com", "ada@example.com"),
        ("STRASSE@example.de", "STRASSE@example.de", "strasse@example.de"),
        ("ada+chairs@example.co.uk", "ada+chairs@example.co.uk", "ada+chairs@example.co.uk"),
    ],
)
def test_emails_are_lower_cased_whole_for_matching(raw: str, address: str, match: str) -> None:
    contact = normalise_contact("email", raw, "GB")
    assert contact.address == address
    assert contact.match == match


@pytest.mark.parametrize(
    ("raw", "address"),
    [
        ("ana@bücher.de", "ana@xn--bcher-kva.de"),
        ("Ana@Bücher.DE", "Ana@xn--bcher-kva.de"),
        ("ana@xn--bcher-kva.de", "ana@xn--bcher-kva.de"),
    ],
)
def test_internationalised_domains_are_kept_in_their_punycode_form(raw: str, address: str) -> None:
    contact = normalise_contact("email", raw, "GB")
    assert contact.address == address
    assert contact.address.isascii()
    # Written either way, the domain is one person.
    assert contact.match == "ana@xn--bcher-kva.de"


@pytest.mark.parametrize("raw", ["Straße@example.de", "anä@bücher.de", "josé@example.com", "用户@例子.广告"])
def test_a_local_part_outside_ascii_is_refused(raw: str) -> None:
    # SES's envelope is ASCII only; such an address could never be sent to.
    with pytest.raises(BadRequest) as caught:
        normalise_contact("email", raw, "GB")
    assert caught.value.code == "invalid_email"
    assert "ASCII" in caught.value.message


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("ada@", "invalid_email"),
        ("@example.com", "invalid_email"),
        ("ada@@example.com", "invalid_email"),
        ("ada@example", "invalid_email"),
        ("ada example@example.com", "invalid_email"),
        ("07400 123456", "contact_channel_mismatch"),
    ],
)
def test_bad_emails_are_refused_with_a_code(raw: str, code: str) -> None:
    with pytest.raises(BadRequest) as caught:
        normalise_contact("email", raw, "GB")
    assert caught.value.code == code


@pytest.mark.parametrize("channel", ["whatsapp", "SMS ", "", "post"])
def test_unsupported_channels_are_refused(channel: str) -> None:
    with pytest.raises(BadRequest) as caught:
        normalise_contact(channel, "07400 123456", "GB")
    assert caught.value.code == "unsupported_channel"


def test_any_contact_is_recognised_by_its_shape() -> None:
    assert normalise_any("Ada@Example.com", "GB").channel == "email"
    assert normalise_any("07400 123456", "GB").address == "+447400123456"


def test_contact_key_is_stable_keyed_and_not_the_contact() -> None:
    first = contact_key("+447400123456", "k1")
    assert first == contact_key("+447400123456", "k1")
    assert first != contact_key("+447400123456", "k2")
    assert "7400" not in first


@pytest.mark.parametrize(
    ("address", "masked"),
    [("+447400123456", "+4474•••••456"), ("ada@example.com", "a•••@example.com"), ("12345", "•••••")],
)
def test_masking_hides_most_of_a_contact(address: str, masked: str) -> None:
    assert mask(address) == masked


def test_a_number_longer_than_e164_allows_is_refused() -> None:
    # The phone metadata accepts 14-digit German fixed-line numbers, 16 digits with the country code;
    # E.164 (and so SMS) stops at 15.
    with pytest.raises(BadRequest) as refused:
        normalise_contact("sms", "020100000000000", "DE")
    assert (refused.value.code, refused.value.reason) == ("invalid_phone", "too_long")
