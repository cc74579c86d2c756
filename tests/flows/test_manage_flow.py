"""The shopper's own page (/me/{token}): places in line, leaving, switching channel, and CSRF refusals."""

from __future__ import annotations

import time
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from chalicelib.confirm import CodeKey, switch_key
from chalicelib.contacts import contact_key
from chalicelib.queue.messages import SwitchCode
from chalicelib.tables.requests import Request
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import join_request
from tests.notices import email_outbox, verify_sender
from tests.scenes import Scene, scene
from tests.support import queued_messages

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


class Forms(HTMLParser):
    """The forms of a page, each as its hidden and named inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "form":
            self.forms.append({})
        elif tag == "input" and self.forms and values.get("name"):
            self.forms[-1][str(values["name"])] = str(values.get("value") or "")


def forms(body: bytes) -> list[dict[str, str]]:
    parser = Forms()
    parser.feed(body.decode())
    return parser.forms


def form_for(body: bytes, action: str, sku: str | None = None) -> dict[str, str]:
    return next(f for f in forms(body) if f.get("action") == action and (sku is None or f.get("sku") == sku))


def me(services: Services, request: Request) -> str:
    return f"/me/{services.tokens.manage(request.contact_key)}"


def post(client: Client, url: str, fields: dict[str, str], **headers: str) -> Any:
    return client.http.post(url, headers={**FORM, **headers}, body=urlencode(fields))


def place_line(client: Client, url: str) -> str:
    page = client.http.get(url).body.decode()
    return page.split('class="status">', 1)[1].split("<", 1)[0]


def test_the_page_shows_each_place_and_it_moves_up_as_others_leave_or_are_served(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=4)
    url = me(services, s.requests[3])
    assert place_line(client, url) == "3 people are ahead of you in line."
    # The first person leaves from their own page.
    first = client.http.get(me(services, s.requests[0]))
    left = post(client, me(services, s.requests[0]), form_for(first.body, "leave", s.sku))
    assert left.status_code == 303
    assert place_line(client, url) == "2 people are ahead of you in line."
    # The second person is served: told, taps the link, buys.
    token = s.offer(1)
    s.tap(token)
    assert place_line(client, url) == "2 people are ahead of you in line."  # a hold still counts until it is bought
    services.moves.convert(s.row(token), "order-1", clock.now())
    assert place_line(client, url) == "1 person is ahead of you in line."
    assert s.waiting_count() == 2


def test_once_someone_behind_leaves_the_page_gives_the_range_it_is_sure_of(
    client: Client, services: Services, clock: FixedClock
) -> None:
    # The place is read from the line's figures, never by counting (chalicelib/line.py): a leave behind the
    # second person cannot be told from one ahead, so the page says only what it knows, and says it is a bound.
    s = scene(services, clock, units=1, people=3)
    last = me(services, s.requests[2])
    left = post(client, last, form_for(client.http.get(last).body, "leave", s.sku))
    assert left.status_code == 303
    assert place_line(client, me(services, s.requests[1])) == "At most 1 person is ahead of you in line."
    assert services.tables.requests.position(s.sku, s.requests[1].joined_ts) == 2


def test_the_page_says_when_a_link_was_sent_or_a_unit_is_held(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=2, people=1)
    services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    join_request(services, "LAMP", s.requests[0].contact, clock.now())
    token = s.offer(0)
    page = client.http.get(me(services, s.requests[0])).body.decode()
    assert "Walnut dining chair" in page and "We sent you a link to reserve one; it works until" in page
    assert "Brass lamp" in page and "You are first in line." in page
    s.tap(token)
    page = client.http.get(me(services, s.requests[0])).body.decode()
    assert "One is held for you until" in page


def test_leaving_from_the_page_redirects_back_with_a_note(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=2)
    url = me(services, s.requests[0])
    response = post(client, url, form_for(client.http.get(url).body, "leave", s.sku))
    token = url.rsplit("/", 1)[1]
    assert response.status_code == 303
    assert response.headers["Location"] == f"{token}?done=left"
    after = client.http.get(f"{url}?done=left").body.decode()
    assert "You have left that list." in after
    assert "You are not waiting for anything right now." in after
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts) is None
    assert s.waiting_count() == 1


def test_stop_everything_from_the_page(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    url = me(services, s.requests[0])
    response = post(client, url, form_for(client.http.get(url).body, "stop"))
    assert response.status_code == 303
    assert services.tables.optout.get(s.requests[0].contact_key)["source"] == "unsubscribe"
    page = client.http.get(url).body.decode()
    assert "You have unsubscribed" in page
    # Nothing is left on the page for a stranger with its link to see or change, so it offers no switching off.
    assert [f["action"] for f in forms(client.http.get(url).body)] == []
    assert "Switch off my links" not in page


def test_stop_texts_opens_the_page_on_its_stop_form(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    url = me(services, s.requests[0])
    plain = [f["action"] for f in forms(client.http.get(url).body)]
    assert plain[0] == "leave" and "stop" in plain[1:]  # the places first, stopping further down
    stop_first = client.http.get(f"{url}?stop")
    assert stop_first.status_code == 200
    actions = [f["action"] for f in forms(stop_first.body)]
    assert actions[0] == "stop" and sorted(actions) == sorted(plain)  # the same forms, stopping first
    response = post(client, url, form_for(stop_first.body, "stop"))
    assert response.status_code == 303
    assert services.tables.optout.get(s.requests[0].contact_key)["source"] == "unsubscribe"


def unchanged(s: Scene) -> tuple[Any, ...]:
    return ([s.services.tables.requests.get(s.sku, r.joined_ts) for r in s.requests], s.waiting_count())


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda f, other: {k: v for k, v in f.items() if k != "form_token"}, id="no form token"),
        pytest.param(lambda f, other: {**f, "form_token": "1.deadbeef"}, id="made-up token"),
        pytest.param(lambda f, other: {**f, "form_token": other["form_token"]}, id="someone else's token"),
        pytest.param(lambda f, other: {**f, "action": "stop"}, id="token for another action"),
    ],
)
def test_a_forged_form_is_refused_and_changes_nothing(
    client: Client, services: Services, clock: FixedClock, forge: Any
) -> None:
    s = scene(services, clock, units=1, people=2)
    mine = form_for(client.http.get(me(services, s.requests[0])).body, "leave", s.sku)
    theirs = form_for(client.http.get(me(services, s.requests[1])).body, "leave", s.sku)
    before = unchanged(s)
    response = post(client, me(services, s.requests[0]), forge(mine, theirs))
    assert response.status_code == 403
    assert "try that again" in response.body.decode()
    assert unchanged(s) == before
    assert services.tables.optout.get(s.requests[0].contact_key) is None


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}],
    ids=["foreign origin", "cross-site fetch"],
)
def test_a_form_posted_from_another_site_is_refused(
    client: Client, services: Services, clock: FixedClock, headers: dict[str, str]
) -> None:
    s = scene(services, clock, units=1, people=1)
    url = me(services, s.requests[0])
    fields = form_for(client.http.get(url).body, "leave", s.sku)
    before = unchanged(s)
    assert post(client, url, fields, **headers).status_code == 403
    assert unchanged(s) == before
    assert post(client, url, fields, Origin="http://127.0.0.1:8000").status_code == 303


def test_a_page_left_open_too_long_asks_for_a_reload(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    url = me(services, s.requests[0])
    fields = form_for(client.http.get(url).body, "leave", s.sku)
    clock.advance(2 * 3600 + 1)
    response = post(client, url, fields)
    assert response.status_code == 403
    assert "open too long" in response.body.decode()
    assert s.waiting_count() == 1


def code_for(services: Services, request: Request) -> str:
    """The code the notifier sends for this person's pending switch (derived, never stored)."""
    pending = services.tables.pending_steps.pending_switch(switch_key(request.contact_key), services.clock.now())
    assert pending is not None
    return CodeKey(services.secrets.get("TOKEN_KEY")).code(str(pending["nonce"]))


def switch_with_code(client: Client, services: Services, request: Request, contact: str) -> Any:
    """Ask to switch, then enter the code sent to the new contact, as the shopper does."""
    url = me(services, request)
    asked = post(client, url, {**form_for(client.http.get(url).body, "switch"), "contact": contact})
    assert asked.status_code == 303, asked.body
    assert asked.headers["Location"].endswith("?done=code_sent")
    page = client.http.get(url).body
    return post(client, url, {**form_for(page, "code"), "code": code_for(services, request)})


def test_switching_to_email_keeps_every_place(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=3)
    services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    join_request(services, "LAMP", s.requests[2].contact, clock.now())
    response = switch_with_code(client, services, s.requests[2], "Ada@Example.com")
    assert response.status_code == 303
    new_key = contact_key("ada@example.com", services.hash_key)
    assert response.headers["Location"] == f"{services.tokens.manage(new_key)}?done=switched"
    moved = services.tables.requests.get(s.sku, s.requests[2].joined_ts)
    assert (moved.channel, moved.contact, moved.contact_key) == ("email", "Ada@example.com", new_key)
    assert services.tables.requests.unique(s.sku, new_key).ref == s.requests[2].joined_ts
    assert services.tables.requests.unique(s.sku, s.requests[2].contact_key) is None
    assert services.tables.requests.position(s.sku, s.requests[2].joined_ts) == 3
    page = client.http.get(f"/me/{response.headers['Location']}").body.decode()
    assert "your notices now go to the contact shown below" in page
    assert "A•••@example.com" in page and "Brass lamp" in page and "2 people are ahead of you in line" in page
    assert s.waiting_count() == 3


def test_switching_onto_a_contact_that_already_waits_keeps_the_earlier_place(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=3)
    # The same shopper joined earlier by phone (place 1) and later by email (after the others).
    by_email = services.capture.capture("1.2.3.4", {"sku": s.sku, "channel": "email", "contact": "ada@example.com"})
    assert services.tables.requests.position(s.sku, str(by_email.joined_ts)) == 4
    response = switch_with_code(client, services, s.requests[0], "ada@example.com")
    assert response.status_code == 303
    new_key = contact_key("ada@example.com", services.hash_key)
    assert services.tables.requests.get(s.sku, str(by_email.joined_ts)) is None
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts).contact_key == new_key
    assert services.tables.requests.unique(s.sku, new_key).ref == s.requests[0].joined_ts
    assert s.waiting_count() == 3


@pytest.mark.parametrize(
    ("contact", "message"),
    [
        ("07400 123456", "choose SMS"),
        ("not an address@", "not a valid email"),
        ("", "contact is required"),
        ("anä@bücher.de", "outside plain ASCII"),  # SES's envelope takes ASCII local parts only
    ],
)
def test_a_bad_switch_contact_gets_a_clear_page(
    client: Client, services: Services, clock: FixedClock, contact: str, message: str
) -> None:
    s = scene(services, clock, units=1, people=1)
    url = me(services, s.requests[0])
    response = post(client, url, {**form_for(client.http.get(url).body, "switch"), "contact": contact})
    assert response.status_code == 400
    assert message in response.body.decode()
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts).channel == "sms"


def test_switching_to_an_opted_out_contact_is_refused(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    services.tables.optout.add(contact_key("gone@example.com", services.hash_key), "unsubscribe", clock.now())
    url = me(services, s.requests[0])
    response = post(client, url, {**form_for(client.http.get(url).body, "switch"), "contact": "gone@example.com"})
    assert response.status_code == 400
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts).channel == "sms"


def test_after_unsubscribing_there_is_nothing_to_switch(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    s.tap(s.offer(0))  # a held unit stays on the page after unsubscribing
    url = me(services, s.requests[0])
    switch = form_for(client.http.get(url).body, "switch")
    services.optouts.opt_out(s.requests[0].contact_key, "unsubscribe")
    page = client.http.get(url).body
    assert "One is held for you until" in page.decode()
    assert [f["action"] for f in forms(page)] == ["leave", "signout"]
    response = post(client, url, {**switch, "contact": "ada@example.com"})
    assert response.status_code == 400
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts).channel == "sms"


def test_an_old_or_broken_manage_link_gets_an_honest_page(client: Client, services: Services) -> None:
    key = contact_key("+447400100000", services.hash_key)

    class Signed100DaysAgo(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - 100 * 86400

    old = URLSafeTimedSerializer(services.secrets.get("TOKEN_KEY"), salt="manage", signer=Signed100DaysAgo)
    stale = str(old.dumps({"k": key}))
    assert client.http.get(f"/me/{stale}").status_code == 410
    assert post(client, f"/me/{stale}", {"action": "stop"}).status_code == 410
    assert client.http.get("/me/garbage").status_code == 400
    assert services.tables.optout.get(key) is None


def test_pages_forbid_framing_and_send_no_referrer(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    response = client.http.get(me(services, s.requests[0]))
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert response.headers["Cache-Control"] == "no-store"


def test_a_switch_needs_the_code_and_wrong_codes_are_capped(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=1)
    url = me(services, s.requests[0])
    asked = post(client, url, {**form_for(client.http.get(url).body, "switch"), "contact": "ada@example.com"})
    assert asked.status_code == 303
    place = services.tables.requests.get(s.sku, s.requests[0].joined_ts)
    assert place is not None and place.channel == "sms", "nothing moves before the code is entered"
    # The notifier sends the code to the new contact, once however often its message is delivered.
    [message] = queued_messages(services)
    assert isinstance(message, SwitchCode)
    verify_sender(services)
    assert services.message_bus.handle(message, lambda: 60_000) is True
    assert services.message_bus.handle(message, lambda: 60_000) is False
    [sent] = email_outbox()
    assert code_for(services, s.requests[0]) in str(sent.body)
    page = client.http.get(url).body
    assert "We sent a 6-digit code to a•••@example.com" in page.decode()
    code = code_for(services, s.requests[0])
    wrong = "000000" if code != "000000" else "111111"
    for _ in range(5):
        assert post(client, url, {**form_for(page, "code"), "code": wrong}).status_code == 400
    # Out of tries: even the right code no longer works.
    refused = post(client, url, {**form_for(page, "code"), "code": code})
    assert refused.status_code == 400 and "ask for a new one" in refused.body.decode()
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts).channel == "sms"


def test_signing_out_everywhere_refuses_every_older_link(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    url = me(services, s.requests[0])
    page = client.http.get(url).body.decode()
    assert "Switch off my links to this page" in page and "Sign out" not in page
    response = post(client, url, form_for(page.encode(), "signout"))
    assert response.status_code == 200 and "Your old links are switched off" in response.body.decode()
    old = client.http.get(url)
    assert old.status_code == 410 and "This link was switched off" in old.body.decode()
    assert post(client, url, {"action": "stop"}).status_code == 410
    # The next message carries a link at the new version, which works.
    fresh = f"/me/{services.manage.link_token(s.requests[0].contact_key)}"
    assert client.http.get(fresh).status_code == 200
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts) is not None


def test_a_switch_is_refused_by_an_opt_out_under_the_old_key_that_lands_after_the_pages_read(
    services: Services, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = scene(services, clock, units=1, people=1)
    typed = "Ada.Lovelace+shop@gmail.com"
    # Opt-outs stored before mailboxes were matched carry the address lower-cased whole.
    old_key = contact_key("ada.lovelace+shop@gmail.com", services.hash_key)
    read = services.tables.optout.get

    def opted_out_right_after_the_read(key: str) -> dict[str, Any] | None:
        found = read(key)
        if key == old_key:
            services.tables.optout.add(old_key, "unsubscribe", clock.now())
        return found

    monkeypatch.setattr(services.tables.optout, "get", opted_out_right_after_the_read)
    result = services.manage.switch(s.requests[0].contact_key, typed, channel="email")
    assert (result.moved, result.merged) == ([], [])
    place = services.tables.requests.get(s.sku, s.requests[0].joined_ts)
    assert place is not None and (place.channel, place.contact_key) == ("sms", s.requests[0].contact_key)
