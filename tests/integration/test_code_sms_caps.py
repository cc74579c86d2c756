"""SMS pumping through codes: a channel switch's code and a re-subscribe code spend the caps a tap does, and the
shop's daily ceiling of SMS that are not notices (chalicelib/messages/sms_caps.py, docs/SECURITY.md)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client

from chalicelib.contacts import contact_key, normalise_contact
from chalicelib.errors import DomainError, RateLimited
from chalicelib.messages.sms_caps import places_key
from chalicelib.queue.messages import OptinLink, SwitchCode
from chalicelib.web.errors import error_status
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.flows.test_manage_flow import code_for, form_for, forms
from tests.notices import drain, sms_outbox
from tests.support import CHAIR, app_client, emitted, queued_bodies, queued_messages, rebuilt

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
JSON = {"Content-Type": "application/json"}
NUMBER = "+447400123456"


def with_settings(services: Services, **changed: Any) -> Services:
    """The same emulator and clock with some settings changed."""
    built: Services = rebuilt(services, settings=dataclasses.replace(services.settings, **changed))
    return built


def email_person(
    services: Services, email: str, sku: str, *, confirmed: bool = True, source: str = "198.51.100.200"
) -> str:
    """`email` waits for `sku` (confirmed from its inbox unless told otherwise); their contact key."""
    joined = services.capture.capture(source, {"sku": sku, "channel": "email", "contact": email})
    if confirmed:
        services.confirm_pages.confirm(services.tokens.confirm(sku, str(joined.joined_ts)))
    return contact_key(email.lower(), services.hash_key)


def people(services: Services, count: int, sku: str) -> list[str]:
    return [email_person(services, f"p{i}@example.com", sku, source=f"198.51.100.{100 + i}") for i in range(count)]


def ask(services: Services, key: str, number: str, source: str = "203.0.113.9") -> str:
    return services.manage.start_switch(key, number, source=source)


def refusal(services: Services, key: str, number: str, source: str = "203.0.113.9") -> DomainError:
    with pytest.raises(DomainError) as refused:
        ask(services, key, number, source)
    return refused.value


def codes_queued(services: Services) -> int:
    return sum(1 for m in queued_messages(services) if isinstance(m, SwitchCode))


@pytest.fixture
def sku(services: Services) -> str:
    services.tables.catalog.upsert("CHAIR-WALNUT", dict(CHAIR))
    return "CHAIR-WALNUT"


# --- 1. A switch only from a confirmed place.


def test_an_unconfirmed_email_place_cannot_start_a_switch(services: Services, sku: str) -> None:
    key = email_person(services, "ada@example.com", sku, confirmed=False)
    refused = refusal(services, key, NUMBER)
    assert (error_status(refused), refused.code) == (409, "not_confirmed")
    assert "confirm your email address first" in refused.message
    assert codes_queued(services) == 0
    assert services.manage.pending_switch(key) is None


def test_the_page_says_to_confirm_first_and_a_posted_switch_gets_a_409_page(
    client: Client, services: Services, sku: str
) -> None:
    key = email_person(services, "ada@example.com", sku, confirmed=False)
    url = f"/me/{services.tokens.manage(key)}"
    page = client.http.get(url).body
    assert "switch" not in [f.get("action") for f in forms(page)]
    assert "confirm your email address first" in page.decode()
    fields = {"action": "switch", "form_token": services.manage.form_token(key, "switch"), "contact": NUMBER}
    response = client.http.post(url, headers=FORM, body=urlencode(fields))
    assert response.status_code == 409
    assert "confirm your email address first" in response.body.decode()
    assert codes_queued(services) == 0


def test_once_confirmed_the_page_offers_the_switch(client: Client, services: Services, sku: str) -> None:
    key = email_person(services, "ada@example.com", sku)
    page = client.http.get(f"/me/{services.tokens.manage(key)}").body
    assert "switch" in [f.get("action") for f in forms(page)]
    ask(services, key, NUMBER)
    assert codes_queued(services) == 1


# --- 2. The caps a tap spends, and the shop's daily ceiling.


def test_switch_codes_and_taps_share_the_numbers_hourly_cap(services: Services, clock: FixedClock, sku: str) -> None:
    capped = with_settings(services, taps_per_number_per_hour=3)
    keys = people(capped, 3, sku)
    capped.capture.capture("198.51.100.1", {"sku": sku, "channel": "sms", "contact": NUMBER})
    ask(capped, keys[0], NUMBER)
    ask(capped, keys[1], "07400 123456")
    refused = refusal(capped, keys[2], NUMBER)
    assert isinstance(refused, RateLimited) and refused.code == "number_rate_limited"
    assert capped.manage.pending_switch(keys[2]) is None, "no code goes, so none is waited for"
    with pytest.raises(RateLimited) as tap_refused:
        capped.capture.capture("198.51.100.2", {"sku": sku, "channel": "sms", "contact": NUMBER})
    assert tap_refused.value.code == "number_rate_limited"
    assert codes_queued(capped) == 2
    clock.advance(3600)
    ask(capped, keys[2], NUMBER)


def test_switch_codes_are_capped_per_block_of_numbers(services: Services, sku: str) -> None:
    capped = with_settings(services, taps_per_prefix_per_hour=2)
    keys = people(capped, 4, sku)
    ask(capped, keys[0], "+447400120001")
    ask(capped, keys[1], "+447400120002")
    refused = refusal(capped, keys[2], "+447400129999")
    assert refused.code == "prefix_rate_limited" and error_status(refused) == 429
    ask(capped, keys[3], "+447400139999")  # another block
    assert codes_queued(capped) == 3


def test_switch_codes_are_capped_per_client_address(services: Services, sku: str) -> None:
    capped = with_settings(services, rate_limit_per_minute=2)
    keys = people(capped, 4, sku)
    ask(capped, keys[0], "+447400110001", source="203.0.113.50")
    ask(capped, keys[1], "+447400120001", source="203.0.113.50")
    refused = refusal(capped, keys[2], "+447400130001", source="203.0.113.50")
    assert refused.code == "rate_limited" and error_status(refused) == 429
    ask(capped, keys[3], "+447400140001", source="203.0.113.51")
    assert codes_queued(capped) == 3


@pytest.fixture
def ceiling_of_two(services: Services) -> Iterator[tuple[Services, Client]]:
    capped = with_settings(services, non_notice_sms_per_day=2, metrics_enabled=True)
    with app_client(capped) as client:
        yield capped, client


def test_the_shops_daily_ceiling_refuses_a_code_with_a_429_page_and_counts_the_refusal(
    ceiling_of_two: tuple[Services, Client], clock: FixedClock, sku: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capped, client = ceiling_of_two
    keys = people(capped, 4, sku)
    # Numbers in different blocks, from different addresses: only the shop-wide ceiling is left to stop them.
    ask(capped, keys[0], "+447400110001", source="203.0.113.1")
    ask(capped, keys[1], "+447400220001", source="203.0.113.2")
    capsys.readouterr()
    url = f"/me/{capped.tokens.manage(keys[2])}"
    fields = {**form_for(client.http.get(url).body, "switch"), "contact": "+447400330001"}
    response = client.http.post(url, headers=FORM, body=urlencode(fields))
    assert response.status_code == 429
    assert "as many codes by SMS today" in response.body.decode()
    assert emitted(capsys.readouterr().out, "NonNoticeSmsRefused") == 1
    assert codes_queued(capped) == 2
    # The ceiling is per UTC day.
    clock.advance(86400)
    ask(capped, keys[3], "+447400440001", source="203.0.113.4")


def test_a_resubscribe_code_counts_against_the_daily_ceiling_and_the_tap_answers_as_always(
    ceiling_of_two: tuple[Services, Client], sku: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capped, client = ceiling_of_two
    keys = people(capped, 2, sku)
    ask(capped, keys[0], "+447400110001", source="203.0.113.1")
    ask(capped, keys[1], "+447400220001", source="203.0.113.2")
    queued_messages(capped)
    capped.tables.optout.add(contact_key(NUMBER, capped.hash_key), "stop", capped.clock.now())
    capsys.readouterr()
    body = json.dumps({"sku": sku, "channel": "sms", "contact": NUMBER})
    answer = client.http.post("/notify-me", headers=JSON, body=body)
    assert answer.status_code == 202, "the same answer every tap gets: nothing about the number"
    assert emitted(capsys.readouterr().out, "NonNoticeSmsRefused") == 1
    drain(capped)
    assert sms_outbox() == []


def test_switch_codes_count_against_the_number_a_resubscribe_tap_is_capped_by(
    services: Services, clock: FixedClock, sku: str
) -> None:
    capped = with_settings(services, taps_per_number_per_hour=2)
    keys = people(capped, 2, sku)
    ask(capped, keys[0], NUMBER)
    ask(capped, keys[1], NUMBER)
    queued_messages(capped)
    capped.tables.optout.add(contact_key(NUMBER, capped.hash_key), "stop", clock.now())
    with app_client(capped) as capped_client:
        body = json.dumps({"sku": sku, "channel": "sms", "contact": NUMBER})
        answer = capped_client.http.post("/notify-me", headers=JSON, body=body)
    assert answer.status_code == 429 and answer.json_body["error"] == "number_rate_limited"
    drain(capped)
    assert sms_outbox() == []


# --- 3. Places counted against the number only once the code proves it.


def places_counted(services: Services, number: str) -> int:
    key, _ = places_key(number, services.hash_key, services.clock.now(), services.settings.request_ttl_days)
    return services.tables.rate_counters.count(key)


def test_switches_nobody_proves_cost_the_numbers_owner_no_places(
    services: Services, clock: FixedClock, sku: str
) -> None:
    capped = with_settings(services, places_per_number=2)
    skus = [f"LAMP-{i}" for i in range(3)]
    for other in skus:
        capped.tables.catalog.upsert(other, dict(CHAIR))
    keys = people(capped, 4, sku)
    for key in keys:
        ask(capped, key, NUMBER)
        clock.advance(61)
    assert places_counted(capped, NUMBER) == 0
    # The number's owner still takes the places the cap allows.
    for i, other in enumerate(skus[:2]):
        outcome = capped.capture.capture(f"198.51.100.{i}", {"sku": other, "channel": "sms", "contact": NUMBER})
        assert outcome.status == "queued"
    assert places_counted(capped, NUMBER) == 2


def test_the_places_are_counted_when_the_code_is_entered(client: Client, services: Services, sku: str) -> None:
    key = email_person(services, "ada@example.com", sku)
    url = f"/me/{services.tokens.manage(key)}"
    asked = client.http.post(
        url, headers=FORM, body=urlencode({**form_for(client.http.get(url).body, "switch"), "contact": NUMBER})
    )
    assert asked.status_code == 303
    assert places_counted(services, NUMBER) == 0
    page = client.http.get(url).body
    [place] = list(services.tables.requests.queue(sku))
    code = code_for(services, place)
    done = client.http.post(url, headers=FORM, body=urlencode({**form_for(page, "code"), "code": code}))
    assert done.status_code == 303 and done.headers["Location"].endswith("?done=switched")
    assert places_counted(services, NUMBER) == 1
    assert [r.channel for r in services.tables.requests.queue(sku)] == ["sms"]


def test_a_staff_opt_in_link_by_sms_counts_against_the_daily_ceiling(
    ceiling_of_two: tuple[Services, Client], sku: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capped, _ = ceiling_of_two
    keys = people(capped, 2, sku)
    ask(capped, keys[0], "+447400110001", source="203.0.113.1")
    ask(capped, keys[1], "+447400220001", source="203.0.113.2")
    queued_bodies(capped)
    key = contact_key(NUMBER, capped.hash_key)
    capped.tables.optout.add(key, "stop", capped.clock.now())
    capsys.readouterr()
    with pytest.raises(RateLimited) as refused:
        capped.optins.start(
            normalise_contact("sms", NUMBER, "GB"), key, started_by={"email": "staff@example.com", "sub": "s-1"}
        )
    assert refused.value.code == "sms_daily_limit"
    assert emitted(capsys.readouterr().out, "NonNoticeSmsRefused") == 1
    assert [m for m in queued_messages(capped) if isinstance(m, OptinLink)] == []
    # An email link is no SMS: it goes whatever the ceiling says.
    email_key = contact_key("bea@example.com", capped.hash_key)
    capped.tables.optout.add(email_key, "unsubscribe", capped.clock.now())
    started = capped.optins.start(
        normalise_contact("email", "bea@example.com", "GB"), email_key, started_by={"email": "staff@example.com"}
    )
    assert started["status"] == "link_sent"
