"""Taps are matched by mailbox: sub-addresses and Gmail's dots name the same inbox; mail goes as typed."""

from __future__ import annotations

import pytest

from chalicelib.contacts import contact_key, mailbox_of, match_keys, normalise_contact

KEY = "k" * 32


@pytest.mark.parametrize(
    ("raw", "mailbox"),
    [
        ("ada+drop1@gmail.com", "ada@gmail.com"),
        ("A.d.A+x+y@GMail.com", "ada@gmail.com"),
        ("ada.lovelace@googlemail.com", "adalovelace@gmail.com"),
        ("ada+shop@outlook.com", "ada@outlook.com"),
        ("ada+shop@hotmail.co.uk", "ada@hotmail.co.uk"),
        ("ada+shop@live.com", "ada@live.com"),
        ("ada+shop@icloud.com", "ada@icloud.com"),
        ("ada+shop@fastmail.com", "ada@fastmail.com"),
        ("ada+shop@proton.me", "ada@proton.me"),
        ("ada+shop@protonmail.com", "ada@protonmail.com"),
    ],
)
def test_sub_addresses_of_providers_that_honour_them_name_one_mailbox(raw: str, mailbox: str) -> None:
    contact = normalise_contact("email", raw, "GB")
    assert contact.match == mailbox
    # Mail still goes to the address as typed (only the domain is lower-cased, as before).
    assert contact.address.split("@")[0] == raw.strip().split("@")[0]


@pytest.mark.parametrize(
    "raw",
    [
        "ada+chairs@example.co.uk",  # a custom domain may route "+" anywhere
        "ada.lovelace@outlook.com",  # only Gmail ignores dots
        "a.d.a@example.com",
        "ada.lovelace@icloud.com",
    ],
)
def test_elsewhere_the_whole_local_part_counts(raw: str) -> None:
    contact = normalise_contact("email", raw, "GB")
    assert contact.match == raw.lower()
    assert contact.legacy_match is None


def test_forty_spellings_of_one_gmail_inbox_share_one_key() -> None:
    spellings = [f"a.d.a+drop{i}@gmail.com" for i in range(20)] + [f"ad.a+{i}@googlemail.com" for i in range(20)]
    keys = {match_keys(normalise_contact("email", raw, "GB"), KEY)[0] for raw in spellings}
    assert keys == {contact_key("ada@gmail.com", KEY)}


def test_a_spelling_that_differs_from_its_mailbox_also_carries_its_old_key() -> None:
    tagged = normalise_contact("email", "Ada+Drop@Gmail.com", "GB")
    assert match_keys(tagged, KEY) == (contact_key("ada@gmail.com", KEY), contact_key("ada+drop@gmail.com", KEY))
    plain = normalise_contact("email", "ada@gmail.com", "GB")
    assert match_keys(plain, KEY) == (contact_key("ada@gmail.com", KEY),)
    number = normalise_contact("sms", "07400 123456", "GB")
    assert match_keys(number, KEY) == (contact_key("+447400123456", KEY),)


def test_an_address_that_is_all_tag_or_all_dots_keeps_its_local_part() -> None:
    assert mailbox_of("+tag@gmail.com") == "+tag@gmail.com"
    assert mailbox_of("...@gmail.com") == "...@gmail.com"
