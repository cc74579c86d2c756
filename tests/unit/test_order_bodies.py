"""The orders webhook's body: every malformed one is a 400 with its code, refused before any table is read.

The service runs on tables that fail the test if touched, so each refusal is shown to come before any AWS call;
one end-to-end case on the emulator is in tests/integration/test_orders.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.errors import BadRequest
from chalicelib.orders import Order, OrdersService, parse_order
from chalicelib.webhooks import sign

SECRET = "whsec_orders-unit-test"

MALFORMED: list[tuple[object, str]] = [
    ("not json", "invalid_json"),
    ([1, 2], "invalid_body"),
    ({"order_id": "o-1"}, "missing_field"),
    ({"reservation_id": "abc"}, "missing_field"),
    ({"reservation_id": 12, "order_id": "o-1"}, "invalid_field"),
    ({"reservation_id": "a b", "order_id": "o-1"}, "invalid_field"),
    ({"reservation_id": "a" * 65, "order_id": "o-1"}, "invalid_field"),
    ({"reservation_id": "abc", "order_id": True}, "invalid_field"),
    ({"reservation_id": "abc", "order_id": {"id": 1}}, "invalid_field"),
    ({"reservation_id": "abc", "order_id": "x" * 129}, "invalid_field"),
    ({"reservation_id": "abc", "order_id": "line\nbreak"}, "invalid_field"),
    ({"reservation_id": "abc", "order_id": "   "}, "invalid_field"),
]


class Untouchable:
    """Stands for the tables, the unit moves and the clock: any use of them fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a malformed order reached {name!r}")


def orders() -> OrdersService:
    untouchable: Any = Untouchable()
    return OrdersService(tables=untouchable, moves=untouchable, clock=untouchable, webhook_secrets=lambda: [SECRET])


def signed(body: object) -> tuple[bytes, dict[str, str]]:
    text = body if isinstance(body, str) else json.dumps(body)
    return text.encode(), sign(SECRET, text, "msg_1")


@pytest.mark.parametrize(("body", "code"), MALFORMED)
def test_malformed_order_is_a_bad_request(body: object, code: str) -> None:
    raw, headers = signed(body)
    with pytest.raises(BadRequest) as raised:
        orders().receive(raw, headers)
    assert raised.value.code == code


def test_parse_order_keeps_numeric_order_ids_as_text() -> None:
    assert parse_order({"reservation_id": "ab_c-1", "order_id": 7}) == Order("ab_c-1", "7")
