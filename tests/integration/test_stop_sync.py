"""SMS STOP replies: the SNS account's opted-out numbers become opt-outs (source 'stop') and leave every list."""

from __future__ import annotations

from typing import Any
from unittest.mock import Mock

from chalice.test import Client
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sns.models import sns_backends

from chalicelib.contacts import contact_key
from chalicelib.optout_service import OptoutService
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.scenes import scene
from tests.support import REGION


def reply_stop(number: str) -> None:
    """What SNS does when a phone replies STOP: the number joins the account's opted-out list.

    The emulator has no API for it (only AWS's carriers do), so the test adds it to the emulator's list.
    """
    sns_backends[DEFAULT_ACCOUNT_ID][REGION].opt_out_numbers.append(number)


def test_stop_reply_becomes_an_optout_and_leaves_every_list(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=3)
    token = s.offer(1)
    reply_stop(s.requests[1].contact)
    reply_stop(s.requests[2].contact)
    report = services.optouts.sync_sms_optouts()
    # The emulator also lists a few numbers of its own; each is suppressed too (nobody waits for them).
    assert report.newly_suppressed == report.numbers_seen >= 2
    assert report.places_left == 2
    for request in s.requests[1:]:
        record = services.tables.optout.get(request.contact_key)
        assert record is not None and record["source"] == "stop"
        assert services.tables.requests.get(s.sku, request.joined_ts) is None
    assert s.row(token).state == "lapsed"  # the live offer went back for the next person
    assert s.waiting_count() == 1
    assert services.tables.optout.get(s.requests[0].contact_key) is None


def test_a_second_sync_changes_nothing(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    reply_stop(s.requests[0].contact)
    services.optouts.sync_sms_optouts()
    again = services.optouts.sync_sms_optouts()
    assert again.newly_suppressed == 0
    assert again.places_left == 0


def test_the_minute_sweep_runs_the_sync(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    reply_stop(s.requests[0].contact)
    summary = services.sweep.run()
    assert summary["optouts_synced"] >= 1
    assert services.tables.optout.get(s.requests[0].contact_key)["source"] == "stop"


def test_sync_follows_next_token_across_pages(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    sns = Mock(spec=services.aws.sns)
    pages: list[dict[str, Any]] = [
        {"phoneNumbers": ["+447700900001", s.requests[0].contact], "nextToken": "page-2"},
        {"phoneNumbers": [s.requests[1].contact], "nextToken": "page-3"},
        {"phoneNumbers": []},
    ]
    sns.list_phone_numbers_opted_out.side_effect = pages
    service = OptoutService(
        optout=services.tables.optout,
        cursors=services.tables.throttle,
        exits=services.exits,
        sns=sns,
        clock=clock,
        hash_key=services.hash_key,
    )
    report = service.sync_sms_optouts()
    assert [c.kwargs for c in sns.list_phone_numbers_opted_out.call_args_list] == [
        {},
        {"nextToken": "page-2"},
        {"nextToken": "page-3"},
    ]
    assert (report.pages, report.numbers_seen, report.newly_suppressed, report.places_left) == (3, 3, 3, 2)
    assert services.tables.optout.get(contact_key("+447700900001", services.hash_key))["source"] == "stop"


def test_capture_acknowledges_a_stopped_number_and_stores_nothing(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=1)
    reply_stop("+447400999001")
    services.optouts.sync_sms_optouts()
    response = client.http.post(
        "/notify-me",
        headers={"Content-Type": "application/json"},
        body='{"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 999001"}',
    )
    assert response.status_code == 202
    assert response.json_body == {"status": "received", "channel": "sms", "confirm_email": False}  # as any sign-up
    assert services.tables.requests.get_unique(s.sku, contact_key("+447400999001", services.hash_key)) is None
