"""New places are capped per email domain and per client address an hour, under concurrency too."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

import pytest

from chalicelib.errors import RateLimited
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.support import app_client, rebuilt


def email_tap(sku: str, contact: str) -> dict[str, str]:
    return {"sku": sku, "channel": "email", "contact": contact}


def capped(services: Services, **limits: int) -> Any:
    # The per-minute limit is lifted so only the hourly caps under test can refuse.
    settings = dataclasses.replace(services.settings, rate_limit_per_minute=1000)
    settings = dataclasses.replace(settings, **limits)  # type: ignore[arg-type]
    return dataclasses.replace(services.capture, settings=settings)


def at_once(taps: list[tuple[str, dict[str, str]]], capture: Any) -> tuple[list[Any], list[Exception]]:
    outcomes: list[Any] = []
    refusals: list[Exception] = []
    barrier = threading.Barrier(len(taps))

    def one(source: str, body: dict[str, str]) -> None:
        barrier.wait()
        try:
            outcomes.append(capture.capture(source, body))
        except RateLimited as refused:
            refusals.append(refused)

    threads = [threading.Thread(target=one, args=tap) for tap in taps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes, refusals


def test_a_small_domain_takes_its_cap_of_places_an_hour_even_at_once(services: Services, chair: str) -> None:
    capture = capped(services, places_per_domain_per_hour=5)
    taps = [(f"10.2.0.{i}", email_tap(chair, f"buyer{i}@drop-bots.example")) for i in range(8)]
    outcomes, refusals = at_once(taps, capture)
    assert sorted(o.status for o in outcomes) == ["queued"] * 5
    assert len(refusals) == 3
    assert {r.code for r in refusals} == {"domain_places_limited"}  # type: ignore[attr-defined]
    assert all(0 < r.retry_after_s <= 3600 for r in refusals)  # type: ignore[attr-defined]
    assert len(list(services.tables.requests.queue(chair))) == 5


def test_a_free_mail_domain_has_the_larger_cap(services: Services, chair: str) -> None:
    capture = capped(services, places_per_domain_per_hour=2, places_per_freemail_domain_per_hour=4)
    outcomes = [capture.capture(f"10.2.1.{i}", email_tap(chair, f"shopper{i}@gmail.com")) for i in range(4)]
    assert [o.status for o in outcomes] == ["queued"] * 4
    with pytest.raises(RateLimited) as caught:
        capture.capture("10.2.1.9", email_tap(chair, "shopper9@gmail.com"))
    assert caught.value.code == "domain_places_limited"
    # Another domain's count is its own.
    assert capture.capture("10.2.1.10", email_tap(chair, "ada@example.org")).status == "queued"


def test_one_client_address_takes_its_cap_of_places_an_hour_even_at_once(services: Services, chair: str) -> None:
    capture = capped(services, places_per_source_per_hour=4)
    taps = [("10.2.2.1", email_tap(chair, f"person{i}@domain{i}.example")) for i in range(7)]
    outcomes, refusals = at_once(taps, capture)
    assert sorted(o.status for o in outcomes) == ["queued"] * 4
    assert {r.code for r in refusals} == {"source_places_limited"}  # type: ignore[attr-defined]
    assert len(refusals) == 3
    assert len(list(services.tables.requests.queue(chair))) == 4


def test_the_caps_count_new_places_only_and_reset_next_hour(services: Services, chair: str, clock: FixedClock) -> None:
    capture = capped(services, places_per_source_per_hour=2)
    assert capture.capture("10.2.3.1", email_tap(chair, "ada@example.org")).status == "queued"
    # Asking again keeps the place and costs no place.
    for _ in range(3):
        assert capture.capture("10.2.3.1", email_tap(chair, "ada@example.org")).status == "already_queued"
    assert capture.capture("10.2.3.1", email_tap(chair, "bob@example.org")).status == "queued"
    with pytest.raises(RateLimited) as caught:
        capture.capture("10.2.3.1", email_tap(chair, "cy@example.org"))
    assert caught.value.code == "source_places_limited"
    clock.advance(3600)
    assert capture.capture("10.2.3.1", email_tap(chair, "cy@example.org")).status == "queued"


def test_a_capped_tap_answers_429_with_a_json_code(services: Services, chair: str) -> None:
    one_an_hour = rebuilt(services, settings=dataclasses.replace(services.settings, places_per_source_per_hour=1))
    with app_client(one_an_hour) as client:
        first = client.http.post(
            "/notify-me",
            body=json.dumps(email_tap(chair, "ada@example.org")),
            headers={"Content-Type": "application/json"},
        )
        second = client.http.post(
            "/notify-me",
            body=json.dumps(email_tap(chair, "bob@example.org")),
            headers={"Content-Type": "application/json"},
        )
    assert first.status_code == 202
    assert second.status_code == 429
    assert second.json_body["error"] == "source_places_limited"
    assert "Retry-After" in second.headers
