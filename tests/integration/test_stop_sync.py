"""SMS STOP replies: the SNS account's opted-out numbers become opt-outs (source 'stop') and leave every list."""

from __future__ import annotations

from typing import Any
from unittest.mock import Mock

import pytest
from botocore.exceptions import ClientError
from chalice.test import Client
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sns.models import sns_backends

from chalicelib.contacts import contact_key
from chalicelib.optout_service import PASS_EVERY_S, OptoutService
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.scenes import scene
from tests.support import REGION, CrashAt, InjectedCrash, deadline_after


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
        cursors=services.tables.saved_states,
        undos=services.tables.undo_records,
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
    assert services.tables.requests.unique(s.sku, contact_key("+447400999001", services.hash_key)) is None


class PagedOptOuts:
    """SNS ListPhoneNumbersOptedOut as botocore's sns model (2010-03-31, service-2.json) and the API reference
    describe it: `phoneNumbers` a page at a time (up to 100; here `page_size`, to make many pages of few numbers)
    and a `nextToken` while more remain; a token SNS no longer takes is InvalidParameter (here: one handed out
    before `expire_tokens`)."""

    def __init__(self, numbers: list[str], page_size: int) -> None:
        self.numbers = numbers
        self.page_size = page_size
        self.calls: list[str | None] = []
        self.generation = 0

    def expire_tokens(self) -> None:
        self.generation += 1

    def list_phone_numbers_opted_out(self, nextToken: str | None = None) -> dict[str, Any]:
        self.calls.append(nextToken)
        start = 0
        if nextToken:
            generation, _, at = nextToken.partition(":")
            if int(generation.removeprefix("g")) != self.generation:
                raise ClientError(
                    {"Error": {"Code": "InvalidParameter", "Message": "Invalid parameter: NextToken"}},
                    "ListPhoneNumbersOptedOut",
                )
            start = int(at)
        end = start + self.page_size
        page: dict[str, Any] = {"phoneNumbers": self.numbers[start:end]}
        if end < len(self.numbers):
            page["nextToken"] = f"g{self.generation}:{end}"
        return page


def paged_service(services: Services, clock: FixedClock, sns: PagedOptOuts, **kwargs: Any) -> OptoutService:
    return OptoutService(
        optout=services.tables.optout,
        cursors=services.tables.saved_states,
        undos=services.tables.undo_records,
        exits=services.exits,
        sns=sns,
        clock=clock,
        hash_key=services.hash_key,
        **kwargs,
    )


def numbers(n: int) -> list[str]:
    return [f"+4477009{i:05d}" for i in range(n)]


def test_a_long_opt_out_list_is_read_whole_over_several_runs_without_dropping_a_number(
    services: Services, clock: FixedClock
) -> None:
    listed = numbers(450)  # 225 pages of 2: more pages than one run reads, and more than the old cap of 200
    sns = PagedOptOuts(listed, page_size=2)
    service = paged_service(services, clock, sns)
    reports = []
    while not (reports and reports[-1].pass_done):
        reports.append(service.sync_sms_optouts(max_pages=50))
        clock.advance(60)
    assert [r.pages for r in reports] == [50, 50, 50, 50, 25]
    assert sum(r.newly_suppressed for r in reports) == 450
    # Each run carried on at the token the last one stopped at; no page was read twice.
    assert sns.calls == [None] + [f"g0:{i}" for i in range(2, 450, 2)]
    suppressed = services.tables.optout.leaving_among([contact_key(n, services.hash_key) for n in listed])
    assert len(suppressed) == 450 and not any(suppressed.values())


def test_a_finished_pass_starts_again_only_a_day_after_it_began(services: Services, clock: FixedClock) -> None:
    sns = PagedOptOuts(numbers(6), page_size=2)
    service = paged_service(services, clock, sns)
    assert service.sync_sms_optouts().pass_done
    clock.advance(3600)
    quiet = service.sync_sms_optouts()
    assert (quiet.pages, quiet.pass_done) == (0, True)
    assert len(sns.calls) == 3
    clock.advance(PASS_EVERY_S)
    sns.numbers.append("+447700955555")
    again = service.sync_sms_optouts()
    # Every number is read again, and the ones already suppressed cost nothing but the page's one read.
    assert (again.pages, again.numbers_seen, again.newly_suppressed) == (4, 7, 1)


def test_the_sync_stops_at_its_deadline_and_the_next_run_carries_on(services: Services, clock: FixedClock) -> None:
    sns = PagedOptOuts(numbers(20), page_size=2)
    service = paged_service(services, clock, sns)
    first = service.sync_sms_optouts(deadline_after(3))
    assert (first.pages, first.pass_done) == (3, False)
    rest = service.sync_sms_optouts()
    assert (rest.pages, rest.pass_done) == (7, True)
    assert first.newly_suppressed + rest.newly_suppressed == 20


def test_a_token_sns_no_longer_takes_starts_the_pass_again(services: Services, clock: FixedClock) -> None:
    sns = PagedOptOuts(numbers(10), page_size=2)
    service = paged_service(services, clock, sns)
    service.sync_sms_optouts(max_pages=2)
    sns.expire_tokens()
    report = service.sync_sms_optouts()
    # Two pages, then the saved token is refused: the pass starts over from the first page.
    assert sns.calls == [None, "g0:2", "g0:4", None, "g1:2", "g1:4", "g1:6", "g1:8"]
    assert report.pass_done


def test_a_crash_between_suppressing_a_number_and_its_places_leaving_is_finished_by_the_next_run(
    services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=2)
    sns = PagedOptOuts([s.requests[0].contact, s.requests[1].contact], page_size=1)
    crashing = paged_service(services, clock, sns, faults=CrashAt("stop_sync.after_suppress"))
    with pytest.raises(InjectedCrash):
        crashing.sync_sms_optouts()
    first = s.requests[0]
    # Suppressed (nobody messages it), but its place is still in line, and the page's token was not saved.
    assert services.tables.optout.get(first.contact_key)["leaving"] is True
    assert services.tables.requests.get(s.sku, first.joined_ts) is not None
    report = paged_service(services, clock, sns).sync_sms_optouts()
    assert sns.calls == [None, None, "g0:1"]
    assert report.pass_done and report.places_left == 2 and report.newly_suppressed == 1
    assert services.tables.requests.get(s.sku, first.joined_ts) is None
    assert "leaving" not in services.tables.optout.get(first.contact_key)
    assert s.waiting_count() == 0
