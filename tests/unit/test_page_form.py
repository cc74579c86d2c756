"""A shopper page's form body, read once for every page that posts one (chalicelib/web/__init__.py page_form)."""

from __future__ import annotations

import pytest

from chalicelib.errors import FormRefused
from chalicelib.web import MAX_PAGE_FORM_BYTES, MAX_PAGE_FORM_FIELDS, page_form

FORM = "application/x-www-form-urlencoded"


def test_the_last_value_of_each_field_is_read() -> None:
    assert page_form(b"action=leave&sku=A&sku=B&note=", FORM) == {"action": "leave", "sku": "B", "note": ""}


@pytest.mark.parametrize(
    ("raw", "content_type", "code"),
    [
        (b"a=" + b"x" * MAX_PAGE_FORM_BYTES, FORM, "form_too_large"),
        (b'{"action": "leave"}', "application/json", "form_refused"),
        (b"action=leave", "text/plain", "form_refused"),
        (b"action=\xff", FORM, "form_refused"),
        ("&".join(f"f{n}=1" for n in range(MAX_PAGE_FORM_FIELDS + 1)).encode(), FORM, "form_refused"),
    ],
)
def test_a_body_no_page_of_ours_sends_is_refused(raw: bytes, content_type: str, code: str) -> None:
    with pytest.raises(FormRefused) as refused:
        page_form(raw, content_type)
    assert refused.value.code == code
