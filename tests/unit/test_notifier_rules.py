"""Who may be told about a restock, and how a large restock's next slice is described (pure rules)."""

from __future__ import annotations

import json

import pytest

from chalicelib.errors import BadRequest
from chalicelib.metrics import skip_metric
from chalicelib.notifier import skip_reason
from chalicelib.queue.messages import Job, parse, to_body
from chalicelib.tables.requests import Request

RESTOCK = "rs_aaaaaaaaaaaaaaaaaaaaaaaa"
WAITING = {"state": "waiting", "contact_key": "k1", "channel": "sms", "contact": "+447400123456"}
GONE = "gone"  # the place is no longer there (read back as None)


def place(changes: dict[str, str]) -> Request | None:
    """The waiting place with `changes`, as the table hands it back."""
    if changes.get("state") == GONE:
        return None
    return Request.from_item({"sku": "SKU", "joined_ts": "2026-01-01T00:00:00.000000Z#aaaaaa", **WAITING, **changes})


@pytest.mark.parametrize(
    ("changes", "suppressed", "reason"),
    [
        ({}, set(), None),
        ({"last_notified_restock": "rs_other"}, set(), None),
        ({}, {"k1"}, "opted_out"),
        ({"state": "converted"}, {"k1"}, "opted_out"),
        ({"state": "converted"}, set(), "converted"),
        ({"last_notified_restock": RESTOCK}, set(), "already_notified"),
        ({"state": "offered", "last_notified_restock": RESTOCK}, set(), "already_notified"),
        ({"state": "offered", "last_notified_restock": "rs_other"}, set(), "holding_offer"),
        ({"state": "reserved", "last_notified_restock": "rs_other"}, set(), "holding_unit"),
        ({"state": GONE}, set(), "not_waiting"),
        ({"channel": "fax"}, set(), "no_contact"),
        ({"contact": ""}, set(), "no_contact"),
    ],
)
def test_skip_matrix(changes: dict[str, str], suppressed: set[str], reason: str | None) -> None:
    assert skip_reason(place(changes), RESTOCK, suppressed) == reason


def test_skip_metrics_are_named_by_reason() -> None:
    assert skip_metric("already_notified") == "NoticeSkippedAlreadyNotified"


def test_a_continuation_job_carries_its_cursor_and_count() -> None:
    job = Job("SKU", RESTOCK, "2026-01-01T00:00:00.000000Z#aaaaaaaa", kind="continue", after="2025#01", passed=42)
    assert parse(to_body(job)) == job


def test_a_first_job_body_has_no_cursor() -> None:
    body = json.loads(to_body(Job("SKU", RESTOCK, "ts")))
    assert body == {"kind": "restock", "restock_id": RESTOCK, "restock_ts": "ts", "sku": "SKU"}


@pytest.mark.parametrize("cursor", [{"after": 5}, {"passed": -1}, {"passed": "3"}, {"passed": True}])
def test_a_malformed_cursor_is_refused(cursor: dict[str, object]) -> None:
    body = json.dumps({"sku": "SKU", "restock_id": RESTOCK, "restock_ts": "ts", "kind": "continue", **cursor})
    with pytest.raises(BadRequest):
        parse(body)
