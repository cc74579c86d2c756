"""Short links: a notice SMS carries the offer's own random id (/r/{id}) and the person's random manage id
(/m/{id}), each looked up with one GetItem; signed links already sent keep working on every route."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode, urlsplit

from chalice.test import Client

from chalicelib.link_ids import is_link_id, new_link_id
from chalicelib.messages.sms import sms_segments
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock
from tests.notices import drain, sms_outbox
from tests.support import stored

JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
# The reserve page's form posts from our own page (no Referer, so Origin "null"), as a browser does.
FROM_OUR_PAGE = {**FORM, "Origin": "null", "Sec-Fetch-Site": "same-origin"}
FORM_ACTION = re.compile(r'<form id="go" method="post" action="([^"]*)">')
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


def tap(client: Client, sku: str, number: str) -> None:
    body = {"sku": sku, "channel": "sms", "contact": number, "name": ""}
    response = client.http.post("/notify-me", headers=JSON, body=json.dumps(body))
    assert response.status_code == 202, response.body


def notice_links(services: Services, text: str) -> tuple[str, str]:
    """The paths of an SMS notice's reserve and manage links."""
    base = services.settings.public_base_url
    urls = [u for u in re.findall(r"https?://\S+", text) if u.startswith(base)]
    [reserve] = [urlsplit(u).path for u in urls if "/r/" in u]
    [manage] = [urlsplit(u).path for u in urls if "/m/" in u]
    return reserve, manage


def told_by_sms(client: Client, services: Services, clock: FixedClock, sku: str, *numbers: str) -> list[str]:
    for number in numbers:
        tap(client, sku, number)
        clock.advance(1)
    services.notifier.handle(add_restock(services, sku, len(numbers), clock.now()), lambda: 60_000)
    drain(services)
    return [text for _, text in sms_outbox()]


@contextmanager
def dynamodb_calls(services: Services) -> Iterator[list[str]]:
    """Every DynamoDB operation the app makes while the block runs, by name."""
    calls: list[str] = []
    events = services.aws.dynamodb.meta.client.meta.events

    def seen(model: Any, **_: Any) -> None:
        calls.append(model.name)

    events.register("before-call.dynamodb", seen)
    try:
        yield calls
    finally:
        events.unregister("before-call.dynamodb", seen)


def form_fields(page: bytes, action: str) -> dict[str, str]:
    """The hidden fields of the page's form for one action ("leave", "signout", ...)."""
    forms = re.findall(r"<form.*?</form>", page.decode(), re.S)
    return dict(HIDDEN.findall(next(f for f in forms if f'name="action" value="{action}"' in f)))


def test_a_notice_sms_has_short_links_and_its_reserve_link_holds_only_through_post(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    [text] = told_by_sms(client, services, clock, chair, "07400 123456")
    assert sms_segments(text) <= 2
    reserve, manage = notice_links(services, text)
    token_id = reserve.removeprefix("/r/")
    assert is_link_id(token_id) and is_link_id(manage.removeprefix("/m/"))
    assert services.tables.reservations.get(token_id) is not None  # the link is the row's own key

    # Opening it (a scanner, or the shopper) holds nothing: a page whose form posts back to the same link.
    before = stored(services)
    opened = client.http.get(reserve)
    assert opened.status_code == 200 and client.http.head(reserve).status_code == 200
    assert stored(services) == before
    [action] = FORM_ACTION.findall(opened.body.decode())
    held = client.http.post(f"/r/{action}", headers=FROM_OUR_PAGE, body=b"")
    assert held.status_code == 303
    row = services.tables.reservations.get(token_id)
    assert row is not None and row.state == "held"


def test_the_sms_manage_link_opens_the_persons_page_and_its_forms_work(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    [text] = told_by_sms(client, services, clock, chair, "07400 123456")
    _, manage = notice_links(services, text)
    page = client.http.get(manage)
    assert page.status_code == 200 and "Walnut dining chair" in page.body.decode()
    left = client.http.post(manage, headers=FORM, body=urlencode(form_fields(page.body, "leave")))
    assert left.status_code == 303 and left.headers["Location"].startswith(manage.removeprefix("/m/"))


def test_an_unknown_or_forged_id_gets_the_bad_link_page_for_one_read(client: Client, services: Services) -> None:
    for path, status in ((f"/r/{new_link_id()}", 404), (f"/m/{new_link_id()}", 400)):
        with dynamodb_calls(services) as calls:
            opened = client.http.get(path)
        assert opened.status_code == status and "text/html" in opened.headers["Content-Type"], path
        assert calls == ["GetItem"], (path, calls)  # the same single lookup whatever the id
        assert client.http.post(path, headers=FROM_OUR_PAGE, body=b"").status_code in (status, 403)
    # Wrong shapes are not looked up at all: they are read as signed tokens, and refused.
    for path in ("/r/short", f"/r/{new_link_id()}x", "/m/short"):
        with dynamodb_calls(services) as calls:
            assert client.http.get(path).status_code == 400, path
        assert calls == [], (path, calls)


def test_signing_out_everywhere_kills_the_old_manage_id_and_the_next_sms_carries_a_new_one(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    [first] = told_by_sms(client, services, clock, chair, "07400 123456")
    _, manage = notice_links(services, first)
    page = client.http.get(manage)
    signed_out = client.http.post(manage, headers=FORM, body=urlencode(form_fields(page.body, "signout")))
    assert signed_out.status_code == 200
    assert client.http.get(manage).status_code == 410  # "you signed out everywhere"

    # The next restock's SMS carries a new id, which works.
    services.tables.catalog.upsert("LAMP-BRASS", {"name": "Brass lamp", "threshold": 1})
    second = told_by_sms(client, services, clock, "LAMP-BRASS", "07400 123456")[-1]
    _, fresh = notice_links(services, second)
    assert fresh != manage and client.http.get(fresh).status_code == 200
    assert client.http.get(manage).status_code == 410


def test_an_sms_reuses_the_persons_manage_id_rather_than_writing_one_per_message(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    [first] = told_by_sms(client, services, clock, chair, "07400 123456")
    services.tables.catalog.upsert("LAMP-BRASS", {"name": "Brass lamp", "threshold": 1})
    second = told_by_sms(client, services, clock, "LAMP-BRASS", "07400 123456")[-1]
    assert notice_links(services, first)[1] == notice_links(services, second)[1]
    assert notice_links(services, first)[0] != notice_links(services, second)[0]


def test_signed_links_already_sent_keep_working_on_both_routes(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    text = told_by_sms(client, services, clock, chair, "07400 123456", "07400 654321")[0]
    first, _ = notice_links(services, text)
    token_id = first.removeprefix("/r/")
    key = services.tables.reservations.get(token_id)
    assert key is not None
    signed_reserve = services.tokens.reserve(token_id)
    signed_manage = services.tokens.manage(key.contact_key)
    for path in (f"/reserve/{signed_reserve}", f"/r/{signed_reserve}"):
        assert client.http.get(path).status_code == 200, path
    for path in (f"/me/{signed_manage}", f"/m/{signed_manage}"):
        assert client.http.get(path).status_code == 200, path
    # The short id on the long route works too, and the signed link holds through its form.
    assert client.http.get(f"/reserve/{token_id}").status_code == 200
    held = client.http.post(f"/reserve/{signed_reserve}", headers=FROM_OUR_PAGE, body=b"")
    assert held.status_code == 303
