"""Taking back an unsubscribe by link: the done page's Undo lifts that very opt-out and puts the person back at the
end of each line they left, once, inside its window, and never lifts an opt-out of another kind or a later one."""

from __future__ import annotations

import re
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.optout_service import UNDO_WINDOW_S
from chalicelib.tables.base import Tx
from chalicelib.tables.requests import Request, RequestState
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock, join_request, make_offer, put_restock
from tests.notices import verify_sender
from tests.support import CHAIR

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
ONE_CLICK = "List-Unsubscribe=One-Click"
ADA = "ada@example.com"
LAMP = "LAMP-BRASS"


def unsubscribe(client: Client, services: Services, request: Request) -> Any:
    url = f"/unsubscribe/{services.tokens.unsubscribe(request.contact_key)}"
    response = client.http.post(url, headers=FORM, body=ONE_CLICK)
    assert response.status_code == 200
    return response


def undo_path(response: Any) -> str:
    found = re.search(r'<form method="post" action="(undo/[^"]+)">', response.body.decode())
    assert found, response.body.decode()
    return f"/unsubscribe/{found.group(1)}"


def undo(client: Client, path: str) -> Any:
    return client.http.post(path, headers=FORM, body="")


def places(services: Services, key: str) -> list[tuple[str, str]]:
    return sorted((r.sku, r.joined_ts) for r in services.exits.places(key))


def source_of(services: Services, key: str) -> str | None:
    record = services.tables.optout.get(key)
    return str(record["source"]) if record else None


def told(services: Services, sku: str) -> list[str]:
    """Who was told about `sku`, in the order the notifier made their offers (sends run concurrently)."""
    sent = [f for f in services.tables.audit.for_sku(sku) if f["kind"] == "notice_sent"]
    return [str(f["contact_key"]) for f in sorted(sent, key=lambda f: int(f["position"]))]


@pytest.fixture
def lines(services: Services, clock: FixedClock, chair: str) -> dict[str, Request]:
    """Ada (email) first in the chair's line and the lamp's, with two people behind her in the chair's."""
    services.tables.catalog.upsert(LAMP, {**CHAIR, "name": "Brass lamp"})
    people = {"ada": join_request(services, chair, ADA, clock.now())}
    people["ada_lamp"] = join_request(services, LAMP, ADA, clock.now())
    for name, number in (("bob", "+447400100001"), ("cy", "+447400100002")):
        clock.advance(1)
        people[name] = join_request(services, chair, number, clock.now())
    return people


def test_undo_puts_the_shopper_back_at_the_end_of_each_line_and_a_restock_tells_them_in_that_order(
    client: Client, services: Services, clock: FixedClock, chair: str, lines: dict[str, Request]
) -> None:
    ada = lines["ada"].contact_key
    done = unsubscribe(client, services, lines["ada"])
    assert "Unsubscribed by mistake?" in done.body.decode()
    assert places(services, ada) == []
    # Someone joins while Ada is gone: Ada's old place is not hers to take back, the end of the line is.
    clock.advance(60)
    eve = join_request(services, chair, "+447400100003", clock.now())
    clock.advance(60)

    response = undo(client, undo_path(done))

    assert response.status_code == 200
    page = response.body.decode()
    assert "Your unsubscribe is undone" in page
    assert "You are back at the end of the line for" in page and "Brass lamp" in page
    assert services.tables.optout.get(ada) is None
    back = {r.sku: r for r in services.exits.places(ada)}
    assert set(back) == {chair, LAMP}
    assert back[chair].joined_ts > eve.joined_ts > lines["ada"].joined_ts
    # The link proved the address: no confirmation is asked for again.
    assert not back[chair].unconfirmed and not back[LAMP].unconfirmed
    assert services.tables.undo_records.undo_record(ada) is None

    verify_sender(services)
    services.notifier.handle(add_restock(services, chair, 4, clock.now()), lambda: 60_000)
    order = [lines["bob"].contact_key, lines["cy"].contact_key, eve.contact_key, ada]
    assert told(services, chair) == order


def test_opening_the_undo_url_changes_nothing(client: Client, services: Services, lines: dict[str, Request]) -> None:
    ada = lines["ada"].contact_key
    path = undo_path(unsubscribe(client, services, lines["ada"]))
    before = (services.tables.optout.get(ada), places(services, ada), services.tables.undo_records.undo_record(ada))

    response = client.http.get(path)

    assert response.status_code == 200
    assert 'method="post"' in response.body.decode()
    after = (services.tables.optout.get(ada), places(services, ada), services.tables.undo_records.undo_record(ada))
    assert after == before
    assert after[0] is not None and after[1] == []


def test_undo_after_the_window_is_refused_and_changes_nothing(
    client: Client, services: Services, clock: FixedClock, lines: dict[str, Request]
) -> None:
    ada = lines["ada"].contact_key
    path = undo_path(unsubscribe(client, services, lines["ada"]))
    clock.advance(UNDO_WINDOW_S + 1)

    response = undo(client, path)

    assert response.status_code == 410
    assert "It is too late to undo" in response.body.decode()
    assert source_of(services, ada) == "unsubscribe"
    assert places(services, ada) == []


@pytest.mark.parametrize("source", ["bounce", "complaint"])
def test_undo_never_lifts_a_bounce_or_a_complaint(
    client: Client, services: Services, clock: FixedClock, lines: dict[str, Request], source: str
) -> None:
    ada = lines["ada"].contact_key
    path = undo_path(unsubscribe(client, services, lines["ada"]))
    # Within the window the unsubscribe is lifted (by staff) and the address then bounces or complains.
    services.tables.optout.remove(ada)
    services.tables.optout.add(ada, source, clock.now())

    response = undo(client, path)

    assert response.status_code == 409
    assert "We cannot undo this" in response.body.decode()
    assert source_of(services, ada) == source
    assert places(services, ada) == []
    # An unsubscribe by link on top of that opt-out offers no undo: there is nothing of its own to take back.
    again = unsubscribe(client, services, lines["ada"])
    assert "Unsubscribed by mistake?" not in again.body.decode()


def test_undo_twice_changes_nothing_more(
    client: Client, services: Services, chair: str, lines: dict[str, Request]
) -> None:
    ada = lines["ada"].contact_key
    path = undo_path(unsubscribe(client, services, lines["ada"]))
    assert undo(client, path).status_code == 200
    rejoined = places(services, ada)
    undone = [f for f in services.tables.audit.for_sku(chair) if f["kind"] == "unsubscribe_undone"]

    again = undo(client, path)

    assert again.status_code == 200
    assert "taken back already" in again.body.decode()
    assert places(services, ada) == rejoined
    assert [f for f in services.tables.audit.for_sku(chair) if f["kind"] == "unsubscribe_undone"] == undone


def test_an_undo_never_lifts_a_later_unsubscribe(
    client: Client, services: Services, clock: FixedClock, lines: dict[str, Request]
) -> None:
    ada = lines["ada"].contact_key
    first = undo_path(unsubscribe(client, services, lines["ada"]))
    assert undo(client, first).status_code == 200
    clock.advance(5)
    second = undo_path(unsubscribe(client, services, lines["ada"]))

    response = undo(client, first)

    assert response.status_code == 409
    assert "earlier unsubscribe" in response.body.decode()
    assert source_of(services, ada) == "unsubscribe"
    assert places(services, ada) == []
    # The newer unsubscribe's own undo still works.
    assert undo(client, second).status_code == 200
    assert services.tables.optout.get(ada) is None


def test_a_repeat_press_offers_the_same_undo(client: Client, services: Services, lines: dict[str, Request]) -> None:
    first = undo_path(unsubscribe(client, services, lines["ada"]))
    again = unsubscribe(client, services, lines["ada"])
    assert "already unsubscribed" in again.body.decode()
    assert undo(client, undo_path(again)).status_code == 200
    assert "taken back already" in undo(client, first).body.decode()


@pytest.mark.parametrize("token", ["nonsense", "x" * 600])
def test_a_broken_undo_link_gets_an_honest_page(client: Client, token: str) -> None:
    for response in (client.http.get(f"/unsubscribe/undo/{token}"), undo(client, f"/unsubscribe/undo/{token}")):
        assert response.status_code == 400
        assert "text/html" in response.headers["Content-Type"]


def test_an_unsubscribe_token_is_not_an_undo_token(
    client: Client, services: Services, lines: dict[str, Request]
) -> None:
    ada = lines["ada"].contact_key
    unsubscribe(client, services, lines["ada"])
    response = undo(client, f"/unsubscribe/undo/{services.tokens.unsubscribe(ada)}")
    assert response.status_code == 400
    assert services.tables.optout.get(ada) is not None


def test_an_undo_posted_from_another_site_is_refused(
    client: Client, services: Services, lines: dict[str, Request]
) -> None:
    ada = lines["ada"].contact_key
    path = undo_path(unsubscribe(client, services, lines["ada"]))
    response = client.http.post(path, headers={**FORM, "Origin": "https://evil.example"}, body="")
    assert response.status_code == 403
    assert services.tables.optout.get(ada) is not None
    assert places(services, ada) == []


def test_a_list_that_no_longer_takes_the_place_is_named_and_the_others_are_joined(
    client: Client, services: Services, clock: FixedClock, chair: str, lines: dict[str, Request]
) -> None:
    ada = lines["ada"].contact_key
    path = undo_path(unsubscribe(client, services, lines["ada"]))
    services.tables.catalog.discontinue(LAMP, clock.now())

    response = undo(client, path)

    assert response.status_code == 200
    page = response.body.decode()
    assert "We could not put you back on the list for: Brass lamp" in page
    assert services.tables.optout.get(ada) is None
    assert [sku for sku, _ in places(services, ada)] == [chair]
    assert services.tables.undo_records.undo_record(ada) is None


def test_a_press_cut_short_after_the_lift_is_finished_by_the_next(
    client: Client, services: Services, clock: FixedClock, chair: str, lines: dict[str, Request]
) -> None:
    ada = lines["ada"].contact_key
    path = undo_path(unsubscribe(client, services, lines["ada"]))
    kept = services.tables.undo_records.undo_record(ada)
    assert kept is not None
    # The first press lifted the opt-out and stopped before joining any list.
    lift = (
        Tx()
        .add("optout", services.tables.optout.undo_item(ada, int(kept["at"])))
        .add("undo", services.tables.undo_records.lift_undo_item(ada, str(kept["nonce"]), clock.now()))
    )
    services.tables.run(lift)

    response = undo(client, path)

    assert response.status_code == 200
    assert [sku for sku, _ in places(services, ada)] == sorted([chair, LAMP])
    assert services.tables.undo_records.undo_record(ada) is None


def test_a_held_unit_stays_held_and_its_list_is_not_joined_again(
    client: Client, services: Services, clock: FixedClock, chair: str, lines: dict[str, Request]
) -> None:
    ada = lines["ada"].contact_key
    restock = put_restock(services, chair, 1, clock.now())
    token_id = make_offer(services, restock, lines["ada"], clock.now())
    services.holds.reserve(services.tokens.reserve(token_id))
    path = undo_path(unsubscribe(client, services, lines["ada"]))

    response = undo(client, path)

    assert response.status_code == 200
    assert "Brass lamp" in response.body.decode()
    held = services.tables.requests.get(chair, lines["ada"].joined_ts)
    assert held is not None and held.state == RequestState.RESERVED
    assert [sku for sku, _ in places(services, ada)] == [chair, LAMP]
    hold = services.tables.reservations.get(token_id)
    assert hold is not None and hold.state == "held"
