"""Bodies no real client sends (nested past the parser's stack, or with more fields than a form has) are 400s."""

from __future__ import annotations

import pytest

from chalicelib.catalog_sync import FeedError, parse_feed
from chalicelib.errors import BadRequest
from chalicelib.web import MAX_FORM_FIELDS, parse_body


def test_json_nested_past_the_parsers_stack_is_an_invalid_body() -> None:
    deep = b"[" * 3000 + b"]" * 3000
    with pytest.raises(BadRequest) as refused:
        parse_body(deep, "application/json", 1 << 20)
    assert refused.value.code == "invalid_body"


def test_a_form_with_more_fields_than_allowed_is_an_invalid_body() -> None:
    form = "&".join(f"f{i}=1" for i in range(MAX_FORM_FIELDS + 1)).encode()
    with pytest.raises(BadRequest) as refused:
        parse_body(form, "application/x-www-form-urlencoded", 4096)
    assert refused.value.code == "invalid_body"


def test_a_form_with_the_allowed_fields_is_read() -> None:
    form = "&".join(f"f{i}=1" for i in range(MAX_FORM_FIELDS)).encode()
    assert len(parse_body(form, "application/x-www-form-urlencoded", 4096)) == MAX_FORM_FIELDS


def test_a_feed_nested_past_the_parsers_stack_is_refused_whole() -> None:
    with pytest.raises(FeedError):
        parse_feed(b'{"products":' + b"[" * 3000 + b"]" * 3000 + b"}")
