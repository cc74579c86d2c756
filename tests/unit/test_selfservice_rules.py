"""Pure rules of the shopper's pages: one-click bodies, CSRF form tokens, wording."""

from __future__ import annotations

import pytest

from chalicelib.line import PlaceInLine
from chalicelib.manage import FormGuard, FormRefused
from chalicelib.optout_service import sms_match
from chalicelib.shopper.pages import moment
from chalicelib.shopper.selfservice import is_one_click, place_words

MULTIPART = b'--b1\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\nOne-Click\r\n--b1--\r\n'


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b"List-Unsubscribe=One-Click", "application/x-www-form-urlencoded", True),
        (b"List-Unsubscribe=One-Click\r\n", "application/x-www-form-urlencoded; charset=utf-8", True),
        (b"List-Unsubscribe=One-Click", "text/plain", True),
        (MULTIPART, "multipart/form-data; boundary=b1", True),
        (MULTIPART.replace(b"One-Click", b"Nope"), "multipart/form-data; boundary=b1", False),
        (MULTIPART, "multipart/form-data", False),  # no boundary: not a readable form
        (b"", "application/x-www-form-urlencoded", False),
        (b"List-Unsubscribe=Two-Click", "application/x-www-form-urlencoded", False),
        (b"\xff\xfe", "text/plain", False),
        (b"List-Unsubscribe=One-Click&" + b"x" * 5000, "application/x-www-form-urlencoded", False),
    ],
)
def test_one_click_bodies(body: bytes, content_type: str, expected: bool) -> None:
    assert is_one_click(body, content_type) is expected


def test_a_form_token_works_for_its_person_action_and_hour_only() -> None:
    guard = FormGuard("key-1", window_s=3600)
    token = guard.issue("person-a", "leave", 7200.0)
    guard.check("person-a", "leave", token, 7200.0)
    guard.check("person-a", "leave", token, 7200.0 + 3599 + 3600)  # the next hour still accepts it
    for key, action, at in [
        ("person-b", "leave", 7200.0),
        ("person-a", "switch", 7200.0),
        ("person-a", "leave", 7200.0 + 2 * 3600),
    ]:
        with pytest.raises(FormRefused):
            guard.check(key, action, token, at)
    with pytest.raises(FormRefused):
        FormGuard("another-key").check("person-a", "leave", token, 7200.0)


@pytest.mark.parametrize("token", ["", "abc", "12.", ".abc", "x.y", "2.0000"])
def test_a_malformed_form_token_is_refused(token: str) -> None:
    with pytest.raises(FormRefused):
        FormGuard("key-1").check("person-a", "leave", token, 7200.0)


@pytest.mark.parametrize(
    ("place", "lang", "text"),
    [
        (PlaceInLine(1, 1), "en", "You are first in line."),
        (PlaceInLine(2, 2), "en", "1 person is ahead of you in line."),
        (PlaceInLine(3, 3), "de", "2 Personen sind vor Ihnen in der Warteliste."),
        (PlaceInLine(2, 2), "fr", "1 personne est devant vous dans la file."),
        (PlaceInLine(1, 1235), "de", "Höchstens 1.234 Personen sind vor Ihnen in der Warteliste."),
        (PlaceInLine(1, 1235), "fr", "Au plus 1\u202f234 personnes sont devant vous dans la file."),
    ],
)
def test_a_place_is_counted_in_the_shoppers_language(place: PlaceInLine, lang: str, text: str) -> None:
    assert place_words(place, lang) == text


def test_a_range_is_written_with_the_languages_numbers() -> None:
    assert place_words(PlaceInLine(4901, 5001), "nl").startswith("Er staan tussen 4.900 en 5.000 mensen voor je")


def test_times_are_a_time_element_in_utc_that_names_its_zone() -> None:
    # 2026-12-04 16:00 UTC; the text is what a browser without scripts shows.
    assert moment(1796400000, "de") == '<time datetime="2026-12-04T16:00:00Z" data-local>4. Dez., 16:00 UTC</time>'
    assert moment(None, "en") == "soon"


@pytest.mark.parametrize(("raw", "e164"), [("+447700900001", "+447700900001"), ("+1 (202) 555-0100", "+12025550100")])
def test_sns_numbers_match_as_capture_stores_them(raw: str, e164: str) -> None:
    assert sms_match(raw) == e164
