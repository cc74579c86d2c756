"""One inbox is one person at capture: however a bot spells an address, the mailbox takes one place."""

from __future__ import annotations

from chalicelib.contacts import contact_key
from chalicelib.tables.requests import Request, unique_sk
from chalicelib.wiring import Services
from devstack.clocks import FixedClock


def email_tap(sku: str, contact: str) -> dict[str, str]:
    return {"sku": sku, "channel": "email", "contact": contact}


def test_forty_plus_addresses_of_one_gmail_inbox_get_one_place(services: Services, chair: str) -> None:
    spellings = [f"ada+drop{i}@gmail.com" for i in range(40)]
    outcomes = [services.capture.capture(f"10.1.0.{i}", email_tap(chair, raw)) for i, raw in enumerate(spellings)]
    assert [o.status for o in outcomes] == ["queued"] + ["already_queued"] * 39
    places = list(services.tables.requests.queue(chair))
    assert len(places) == 1
    # The one place sends to the address as it was first typed.
    assert places[0].contact == "ada+drop0@gmail.com"
    assert places[0].contact_key == contact_key("ada@gmail.com", services.hash_key)
    assert services.tables.catalog.waiting(chair) == 1


def test_gmail_dots_and_googlemail_are_one_mailbox(services: Services, chair: str) -> None:
    first = services.capture.capture("10.1.1.1", email_tap(chair, "ada.lovelace@gmail.com"))
    again = services.capture.capture("10.1.1.2", email_tap(chair, "A.DaLove.Lace@googlemail.com"))
    assert (first.status, again.status) == ("queued", "already_queued")
    assert len(list(services.tables.requests.queue(chair))) == 1


def test_dots_count_for_other_domains(services: Services, chair: str) -> None:
    outcomes = [
        services.capture.capture("10.1.2.1", email_tap(chair, "ada.lovelace@example.com")),
        services.capture.capture("10.1.2.2", email_tap(chair, "adalovelace@example.com")),
        services.capture.capture("10.1.2.3", email_tap(chair, "ada+x@example.com")),
    ]
    assert [o.status for o in outcomes] == ["queued"] * 3
    assert len(list(services.tables.requests.queue(chair))) == 3


def test_an_opt_out_suppresses_every_spelling_of_the_mailbox(services: Services, chair: str, clock: FixedClock) -> None:
    services.tables.optout.add(contact_key("ada@gmail.com", services.hash_key), "unsubscribe", clock.now())
    outcome = services.capture.capture("10.1.3.1", email_tap(chair, "a.da+again@gmail.com"))
    assert outcome.status == "acknowledged"
    assert list(services.tables.requests.queue(chair)) == []


def test_an_opt_out_stored_before_mailboxes_were_matched_still_suppresses_its_address(
    services: Services, chair: str, clock: FixedClock
) -> None:
    # Stored under the address lower-cased whole, as every opt-out was before.
    services.tables.optout.add(contact_key("ada+shop@gmail.com", services.hash_key), "unsubscribe", clock.now())
    outcome = services.capture.capture("10.1.4.1", email_tap(chair, "Ada+Shop@gmail.com"))
    assert outcome.status == "acknowledged"
    assert list(services.tables.requests.queue(chair)) == []


def test_a_place_stored_before_mailboxes_were_matched_is_kept_on_a_repeat_tap(
    services: Services, chair: str, clock: FixedClock
) -> None:
    # A place as capture stored it before: keyed by the whole address lower-cased.
    old_key = contact_key("ada+shop@gmail.com", services.hash_key)
    unique, request = services.tables.requests.join_items(
        Request.waiting(
            sku=chair,
            joined_ts="2026-01-01T00:00:00.000000Z-old",
            channel="email",
            contact="ada+shop@gmail.com",
            contact_key=old_key,
            name="",
            ttl=int(clock.now()) + 86400,
            now=clock.now(),
        )
    )
    services.tables.requests.table.put_item(Item=unique["Put"]["Item"])
    services.tables.requests.table.put_item(Item=request["Put"]["Item"])
    outcome = services.capture.capture("10.1.5.1", email_tap(chair, "ada+shop@gmail.com"))
    assert outcome.status == "already_queued"
    assert outcome.joined_ts == "2026-01-01T00:00:00.000000Z-old"
    assert len(list(services.tables.requests.queue(chair))) == 1
    new_key = contact_key("ada@gmail.com", services.hash_key)
    assert (
        services.tables.requests.table.get_item(Key={"sku": chair, "joined_ts": unique_sk(new_key)}).get("Item") is None
    )
