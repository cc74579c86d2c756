"""Email bombing: every confirmation, re-subscribe and code email a stranger can make us send is charged to caps per
address (across every product), per client address and shop-wide (chalicelib/messages/email_caps.py, docs/SECURITY.md)."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

import pytest

from chalicelib.contacts import contact_key
from chalicelib.errors import Busy, RateLimited
from chalicelib.queue.messages import ResubscribeProof, parse
from chalicelib.web.errors import error_status
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.integration.test_code_sms_caps import emitted
from tests.support import CHAIR, app_client, queued_bodies, rebuilt

VICTIM = "victim@example.com"
JSON = {"Content-Type": "application/json"}


def with_settings(services: Services, **changed: Any) -> Services:
    """The same emulator and clock with some settings changed (taps are not held back by the per-minute limit
    unless a test sets it)."""
    changed.setdefault("rate_limit_per_minute", 10_000)
    built: Services = rebuilt(services, settings=dataclasses.replace(services.settings, **changed))
    return built


def products(services: Services, count: int) -> list[str]:
    skus = [f"CHAIR-{i:03d}" for i in range(count)]
    for sku in skus:
        services.tables.catalog.upsert(sku, dict(CHAIR))
    return skus


def tap(services: Services, sku: str, address: str, source: str = "203.0.113.7") -> Any:
    return services.capture.capture(source, {"sku": sku, "channel": "email", "contact": address})


def confirmations_queued(services: Services) -> int:
    return sum(1 for body in queued_bodies(services) if '"kind":"confirm"' in body)


def proofs_queued(bodies: list[str]) -> int:
    return sum(1 for body in bodies if isinstance(parse(body), ResubscribeProof))


def owing(services: Services, skus: list[str], address: str) -> int:
    """How many of `address`'s places owe a confirmation email (what the sweep would send)."""
    key = contact_key(address, services.hash_key)
    total = 0
    for sku in skus:
        unique = services.tables.requests.unique(sku, key)
        assert unique is not None, f"the place for {sku} is kept"
        place = services.tables.requests.place_of(sku, key)
        assert place is not None and place.unconfirmed
        total += place.confirm_owed_at is not None
    return total


def test_sixty_taps_for_sixty_products_owe_one_address_at_most_its_daily_cap(
    services: Services, clock: FixedClock, capsys: pytest.CaptureFixture[str]
) -> None:
    shop = with_settings(services, metrics_enabled=True)
    skus = products(shop, 60)
    # One client address, one UTC day: a tap every three minutes from 01:00, so no per-minute or per-hour limit on
    # taps is what stops them.
    clock.advance(86400 - clock.now() % 86400 + 3600)
    capsys.readouterr()
    outcomes = []
    for sku in skus:
        outcomes.append(tap(shop, sku, VICTIM))
        clock.advance(180)
    assert {o.status for o in outcomes} == {"queued"}, "every place is kept"
    assert confirmations_queued(shop) == shop.settings.emails_per_address_per_day == 5
    assert owing(shop, skus, VICTIM) == 5, "nothing is left owed for the sweep to send later"
    assert emitted(capsys.readouterr().out, "NonNoticeEmailRefused") == 55


def test_a_capped_place_gets_its_confirmation_when_tapped_again_the_next_day(
    services: Services, clock: FixedClock
) -> None:
    shop = with_settings(services, emails_per_address_per_day=1)
    first, second = products(shop, 2)
    tap(shop, first, VICTIM)
    tap(shop, second, VICTIM)
    assert confirmations_queued(shop) == 1
    tap(shop, second, VICTIM)
    assert confirmations_queued(shop) == 0, "still today: the address's cap stands for repeat taps too"
    clock.advance(86400)
    assert tap(shop, second, VICTIM).status == "already_queued"
    assert confirmations_queued(shop) == 1
    assert owing(shop, [second], VICTIM) == 1


def test_one_client_address_is_capped_across_addresses_per_hour_and_per_day(
    services: Services, clock: FixedClock
) -> None:
    shop = with_settings(services, emails_per_source_per_hour=3, emails_per_source_per_day=5)
    [sku] = products(shop, 1)
    # The day's count is per UTC day: start at 01:00 UTC, so the next hour is the same day whenever the test runs.
    clock.advance(86400 - clock.now() % 86400 + 3600)
    for i in range(5):
        tap(shop, sku, f"p{i}@example.com")
    assert confirmations_queued(shop) == 3
    tap(shop, sku, "other@example.com", source="198.51.100.9")
    assert confirmations_queued(shop) == 1, "another client address has its own count"
    clock.advance(3600)
    for i in range(5, 10):
        tap(shop, sku, f"p{i}@example.com")
    assert confirmations_queued(shop) == 2, "the day's cap of 5 stops the next hour's third"


def test_the_shop_wide_daily_cap_holds_across_addresses_and_clients(services: Services, clock: FixedClock) -> None:
    shop = with_settings(services, non_notice_emails_per_day=3)
    [sku] = products(shop, 1)
    for i in range(6):
        tap(shop, sku, f"p{i}@example.com", source=f"198.51.100.{i}")
    assert confirmations_queued(shop) == 3
    assert shop.tables.rate_counters.count(f"mailday#{int(shop.clock.now() // 86400)}") == 3
    clock.advance(86400)
    tap(shop, sku, "next-day@example.com", source="198.51.100.99")
    assert confirmations_queued(shop) == 1


def test_a_capped_tap_is_answered_exactly_as_any_other(services: Services) -> None:
    shop = with_settings(services, emails_per_address_per_day=1)
    first, second = products(shop, 2)
    with app_client(shop) as client:
        answers = [
            client.http.post("/notify-me", headers=JSON, body=json.dumps({"sku": s, "channel": "email", "contact": c}))
            for s, c in ((first, VICTIM), (second, VICTIM), (second, "someone@example.com"))
        ]
    assert [a.status_code for a in answers] == [202, 202, 202]
    assert answers[0].body == answers[1].body == answers[2].body
    assert confirmations_queued(shop) == 2, "the victim's second place owes nothing; the other address's one does"


def test_a_resubscribe_bomb_is_capped_per_client_and_shares_the_count_with_confirmations(
    services: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    shop = with_settings(services, emails_per_source_per_hour=3, metrics_enabled=True)
    [sku] = products(shop, 1)
    for i in range(4):
        shop.tables.optout.add(contact_key(f"gone{i}@example.com", shop.hash_key), "unsubscribe", shop.clock.now())
    tap(shop, sku, "fresh@example.com")
    capsys.readouterr()
    outcomes = [tap(shop, sku, f"gone{i}@example.com") for i in range(4)]
    assert {o.status for o in outcomes} == {"acknowledged"}
    bodies = queued_bodies(shop)
    assert proofs_queued(bodies) == 2, "one confirmation and two re-subscribe emails fill the client's hour"
    assert emitted(capsys.readouterr().out, "NonNoticeEmailRefused") == 2
    # A refused proof is not recorded as owed, so the sweep sends nothing for it either.
    asked = [f for f in shop.tables.audit.for_sku(sku) if f["kind"] == "resubscribe_asked"]
    assert len(asked) == 2


def test_a_resubscribe_email_counts_against_the_addresss_daily_cap(services: Services, clock: FixedClock) -> None:
    shop = with_settings(services, emails_per_address_per_day=1)
    first, second = products(shop, 2)
    tap(shop, first, VICTIM)
    queued_bodies(shop)
    key = contact_key(VICTIM, shop.hash_key)
    shop.tables.optout.add(key, "unsubscribe", shop.clock.now())
    tap(shop, second, VICTIM)
    assert proofs_queued(queued_bodies(shop)) == 0, "the address had its one email today"
    clock.advance(86400)
    tap(shop, second, VICTIM)
    assert proofs_queued(queued_bodies(shop)) == 1


def test_a_switch_code_by_email_is_refused_with_a_429_past_the_addresss_cap(services: Services) -> None:
    shop = with_settings(services, emails_per_address_per_day=2)
    first, second = products(shop, 2)
    shop.capture.capture("198.51.100.1", {"sku": first, "channel": "sms", "contact": "+447400123456"})
    person = contact_key("+447400123456", shop.hash_key)
    tap(shop, first, VICTIM)
    tap(shop, second, VICTIM)
    with pytest.raises(RateLimited) as refused:
        shop.manage.start_switch(person, VICTIM, source="198.51.100.1")
    assert (error_status(refused.value), refused.value.code) == (429, "address_email_limit")
    assert 0 < refused.value.retry_after_s <= 86400
    assert shop.manage.pending_switch(person) is None, "no code goes, so none is waited for"
    assert shop.manage.start_switch(person, "mine@example.com", source="198.51.100.1"), "another address still may"
    assert sum(1 for b in queued_bodies(shop) if '"kind":"code"' in b) == 1


def test_a_switch_code_by_email_spends_the_client_addresss_email_cap(services: Services) -> None:
    shop = with_settings(services, emails_per_source_per_hour=1)
    [sku] = products(shop, 1)
    people = []
    for i in range(2):
        number = f"+4474001234{i:02d}"
        shop.capture.capture(f"198.51.100.{i}", {"sku": sku, "channel": "sms", "contact": number})
        people.append(contact_key(number, shop.hash_key))
    shop.manage.start_switch(people[0], "a@example.com", source="203.0.113.20")
    with pytest.raises(RateLimited) as refused:
        shop.manage.start_switch(people[1], "b@example.com", source="203.0.113.20")
    assert refused.value.code == "source_email_limit"


def test_simultaneous_taps_for_many_products_never_pass_the_addresss_cap(services: Services) -> None:
    shop = with_settings(services, emails_per_address_per_day=3)
    skus = products(shop, 12)
    barrier = threading.Barrier(len(skus))
    failures: list[BaseException] = []

    def one(i: int, sku: str) -> None:
        barrier.wait()
        try:
            tap(shop, sku, VICTIM, source=f"10.0.2.{i}")
        except Busy:
            pass  # an honest "try again" that wrote nothing; never a place past the cap
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=one, args=(i, sku)) for i, sku in enumerate(skus)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert confirmations_queued(shop) == 3
    day = int(shop.clock.now() // 86400)
    who = contact_key(f"email:{VICTIM}", shop.hash_key)
    assert shop.tables.rate_counters.count(f"mailaddr#{who}#{day}") == 3
