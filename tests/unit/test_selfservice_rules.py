"""Pure rules of the shopper's pages: one-click bodies, CSRF form tokens, wording."""

from __future__ import annotations

import pytest

from chalicelib.manage import FormGuard, FormRefused
from chalicelib.optout_service import sms_match
from chalicelib.selfservice import is_one_click, ordinal, when

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
    ("n", "text"), [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (21, "21st")]
)
def test_ordinals(n: int, text: str) -> None:
    assert ordinal(n) == text


def test_times_are_shown_in_utc() -> None:
    assert when(0) == "00:00 UTC on 01 Jan"
    assert when(None) == "soon"


@pytest.mark.parametrize(("raw", "e164"), [("+447700900001", "+447700900001"), ("+1 (202) 555-0100", "+12025550100")])
def test_sns_numbers_match_as_capture_stores_them(raw: str, e164: str) -> None:
    assert sms_match(raw) == e164
