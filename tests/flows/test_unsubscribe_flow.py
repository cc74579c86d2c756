"""Unsubscribe links through the HTTP API: GET asks, POST (RFC 8058 one-click or the button) acts."""

from __future__ import annotations

from typing import Any

import pytest
from chalice.test import Client

from chalicelib.queue.messages import Job
from chalicelib.tables.requests import Request
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import join_request
from tests.scenes import Scene, scene
from tests.support import queued_jobs

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def link(services: Services, request: Request) -> str:
    return f"/unsubscribe/{services.tokens.unsubscribe(request.contact_key)}"


def snapshot(s: Scene) -> tuple[Any, ...]:
    requests = [s.services.tables.requests.get(s.sku, r.joined_ts) for r in s.requests]
    return (requests, s.counters(), s.waiting_count(), [s.row(t) for t in s.tokens], s.audit_kinds())


def told(services: Services, sku: str) -> list[str]:
    """Contact keys that were sent a notice for `sku`."""
    return [str(f["contact_key"]) for f in services.tables.audit.for_sku(sku) if f["kind"] == "notice_sent"]


def test_opening_the_link_changes_nothing(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    s.offer(0)
    before = snapshot(s)
    response = client.http.get(link(services, s.requests[0]))
    assert response.status_code == 200
    page = response.body.decode()
    assert 'method="post"' in page
    assert 'name="List-Unsubscribe" value="One-Click"' in page
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert snapshot(s) == before
    assert services.tables.optout.get(s.requests[0].contact_key) is None


def test_one_click_post_unsubscribes_and_passes_the_offer_to_the_next_person(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=3)
    # The restock's first pass tells the front of the line.
    services.notifier.handle(Job(s.sku, s.restock.restock_id, s.restock.restock_ts), lambda: 60_000)
    assert told(services, s.sku) == [s.requests[0].contact_key]
    token = s.request(0).offer_token

    response = client.http.post(link(services, s.requests[0]), headers=FORM, body="List-Unsubscribe=One-Click")
    assert response.status_code == 200
    assert "You are unsubscribed" in response.body.decode()
    assert services.tables.optout.get(s.requests[0].contact_key)["source"] == "unsubscribe"
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts) is None
    assert services.tables.reservations.get(token).state == "lapsed"
    [topup] = queued_jobs(services)
    assert topup.kind == "topup"

    services.notifier.handle(topup, lambda: 60_000)
    assert sorted(told(services, s.sku)) == sorted([s.requests[0].contact_key, s.requests[1].contact_key])
    assert s.waiting_count() == 2


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded", "List-Unsubscribe=One-Click"),
        ("text/plain", "List-Unsubscribe=One-Click"),
        (
            "multipart/form-data; boundary=XyZ",
            '--XyZ\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\nOne-Click\r\n--XyZ--\r\n',
        ),
    ],
)
def test_every_one_click_encoding_is_understood(
    client: Client, services: Services, clock: FixedClock, content_type: str, body: str
) -> None:
    s = scene(services, clock, units=1, people=1)
    response = client.http.post(link(services, s.requests[0]), headers={"Content-Type": content_type}, body=body)
    assert response.status_code == 200
    assert services.tables.optout.get(s.requests[0].contact_key) is not None
    assert s.waiting_count() == 0


def test_a_post_without_the_one_click_body_changes_nothing(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=1)
    response = client.http.post(link(services, s.requests[0]), headers=FORM, body="something=else")
    assert response.status_code == 400
    assert "Please use the button" in response.body.decode()
    assert services.tables.optout.get(s.requests[0].contact_key) is None
    assert s.waiting_count() == 1


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (FORM["Content-Type"], "&".join(f"f{i}=x" for i in range(11)) + "&List-Unsubscribe=One-Click"),
        (
            "multipart/form-data; boundary=b",
            '--b\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n'
            "Content-Type: text/plain; charset=no-such-charset\r\n\r\nOne-Click\r\n--b--\r\n",
        ),
    ],
    ids=["eleven_fields", "unknown_charset"],
)
def test_a_body_no_form_or_mail_client_sends_gets_the_honest_page_and_changes_nothing(
    client: Client, services: Services, clock: FixedClock, content_type: str, body: str
) -> None:
    s = scene(services, clock, units=1, people=1)
    headers = {"Content-Type": content_type}
    response = client.http.post(link(services, s.requests[0]), headers=headers, body=body)
    assert response.status_code == 400
    assert "Please use the button" in response.body.decode()
    assert services.tables.optout.get(s.requests[0].contact_key) is None
    assert s.waiting_count() == 1


def test_unsubscribing_twice_is_harmless(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    url = link(services, s.requests[0])
    client.http.post(url, headers=FORM, body="List-Unsubscribe=One-Click")
    again = client.http.post(url, headers=FORM, body="List-Unsubscribe=One-Click")
    assert again.status_code == 200
    assert "already unsubscribed" in again.body.decode()
    assert s.audit_kinds()["leave"] == 1


def test_a_held_unit_is_kept_and_the_page_says_so(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    token = s.offer(0)
    s.tap(token)
    response = client.http.post(link(services, s.requests[0]), headers=FORM, body="List-Unsubscribe=One-Click")
    page = response.body.decode()
    assert "You are holding one Walnut dining chair until" in page
    assert "stays yours" in page
    assert s.row(token).state == "held"
    assert s.request(0).state == "reserved"


@pytest.mark.parametrize("token", ["not-a-token", "x" * 600])
def test_a_broken_link_gets_an_honest_page(client: Client, services: Services, token: str) -> None:
    for response in (
        client.http.get(f"/unsubscribe/{token}"),
        client.http.post(f"/unsubscribe/{token}", headers=FORM, body="List-Unsubscribe=One-Click"),
    ):
        assert response.status_code == 400
        assert "not complete" in response.body.decode()


def test_a_manage_token_is_not_an_unsubscribe_token(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    manage_token = services.tokens.manage(s.requests[0].contact_key)
    response = client.http.post(f"/unsubscribe/{manage_token}", headers=FORM, body="List-Unsubscribe=One-Click")
    assert response.status_code == 400
    assert services.tables.optout.get(s.requests[0].contact_key) is None


def test_after_unsubscribing_capture_acknowledges_and_the_notifier_skips(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=2, people=2)
    client.http.post(link(services, s.requests[0]), headers=FORM, body="List-Unsubscribe=One-Click")
    again = client.http.post(
        "/notify-me",
        headers={"Content-Type": "application/json"},
        body=f'{{"sku": "{s.sku}", "channel": "sms", "contact": "{s.requests[0].contact}"}}',
    )
    assert again.status_code == 202
    # The same answer as any first sign-up: a stranger typing the contact learns nothing of the opt-out.
    assert again.json_body == {"status": "received", "channel": "sms", "confirm_email": False}
    # A place written before the opt-out reached every list (say, a tap racing the click) is still never
    # messaged: the notifier checks the opt-out table for each person it is about to tell.
    services.tables.optout.remove(s.requests[0].contact_key)
    late = join_request(services, s.sku, s.requests[0].contact, clock.now())
    services.tables.optout.add(late.contact_key, "unsubscribe", clock.now())
    services.notifier.handle(Job(s.sku, s.restock.restock_id, s.restock.restock_ts), lambda: 60_000)
    assert told(services, s.sku) == [s.requests[1].contact_key]
    [skip] = [f for f in services.tables.audit.for_sku(s.sku) if f["kind"] == "notice_skipped"]
    assert (skip["reason"], skip["contact_key"]) == ("opted_out", late.contact_key)
