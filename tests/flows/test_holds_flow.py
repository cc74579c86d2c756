"""A shopper's link, the shop's orders webhook and the minute sweep, through the HTTP API and the schedule."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

from chalice.test import Client

from chalicelib.webhooks import sign
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.scenes import level_falls_to, scene
from tests.support import CHAIR, queued_jobs, stored, tap_link

SHOP = "Walnut &amp; Wool (demo shop)"  # the local stage's SHOP_NAME, as the pages escape it


def tap(client: Client, services: Services, token_id: str) -> Any:
    return tap_link(client, services.tokens.reserve(token_id))


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def page(response: Any) -> str:
    assert response.headers["Content-Type"].startswith("text/html")
    return response.body.decode()


def order(
    client: Client, services: Services, body: Any, *, secret: str | None = None, webhook_id: str = "msg_1"
) -> Any:
    text = body if isinstance(body, str) else json.dumps(body)
    headers = sign(secret or services.webhook_secrets()[0], text, webhook_id)
    return client.http.post(
        "/webhooks/orders", headers={"Content-Type": "application/json", **headers}, body=text.encode()
    )


def test_tap_redirects_to_checkout_and_a_second_tap_redirects_again(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock)
    token_id = s.offer()
    first = tap(client, services, token_id)
    again = tap(client, services, token_id)
    expected = f"https://shop.example/checkout?sku=CHAIR-WALNUT&reservation={token_id}"
    assert (first.status_code, first.headers["Location"]) == (303, expected)
    assert (again.status_code, again.headers["Location"]) == (303, expected)
    assert first.headers["Cache-Control"] == "no-store"
    assert first.headers["Referrer-Policy"] == "no-referrer"
    assert "Continue to checkout" in page(first)
    assert s.counters() == (1, 1)
    assert s.audit_kinds()["hold"] == 1


def test_opening_a_link_holds_nothing_and_writes_nothing(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock)
    token_id = s.offer()
    link = f"/reserve/{services.tokens.reserve(token_id)}"
    before = stored(services)
    opened = client.http.get(link)
    head = client.http.head(link)
    assert stored(services) == before, "a scanner's GET or HEAD writes nothing"
    assert s.row(token_id).state == "offered" and s.counters() == (2, 1)
    assert opened.status_code == 200
    body = page(opened)
    assert "Walnut dining chair is back in stock" in body and "Hold one for me" in body and SHOP in body
    assert '<form id="go" method="post" action="' in body
    assert (head.status_code, head.body) == (200, b"")
    assert {k: v for k, v in head.headers.items() if k.lower() != "content-length"} == {
        k: v for k, v in opened.headers.items() if k.lower() != "content-length"
    }


def test_no_script_on_an_opened_links_page_sends_its_form_only_its_button_does(
    client: Client, services: Services, clock: FixedClock
) -> None:
    # A link scanner that runs scripts (a sandbox opening every link in a message) must start no hold: the page may
    # run scripts (times in the shopper's zone), but none that submits, clicks or otherwise sends the form.
    s = scene(services, clock)
    token_id = s.offer()
    token = services.tokens.reserve(token_id)
    offered = page(client.http.get(f"/reserve/{token}"))
    assert tap(client, services, token_id).status_code == 303
    held = page(client.http.get(f"/reserve/{token}"))
    for body, button in ((offered, "Hold one for me"), (held, "Go to checkout")):
        assert f'<form id="go" method="post" action="{token}"><button type=submit>{button}</button></form>' in body
        for script in re.findall(r"<script[^>]*>(.*?)</script>", body, re.S):
            sends = r"submit|click|\bform\b|forms|\"go\"|fetch|XMLHttpRequest|sendBeacon|location"
            assert not re.search(sends, script), script
        assert "<meta http-equiv" not in body.lower(), "no refresh may send the shopper (or a scanner) on"
    assert s.audit_kinds()["hold"] == 1  # the one press of the button


def test_the_page_allows_only_its_own_scripts(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock)
    opened = client.http.get(f"/reserve/{services.tokens.reserve(s.offer())}")
    # One script: it shows the offer's end in the shopper's own time zone (none sends the form).
    scripts = re.findall(r"<script>(.*?)</script>", page(opened))
    assert len(scripts) == 1
    digests = [base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() for script in scripts]
    policy = dict(d.strip().split(" ", 1) for d in opened.headers["Content-Security-Policy"].split(";"))
    assert policy["script-src"] == " ".join(f"'sha256-{d}'" for d in digests)
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in policy["script-src"] and "nonce" not in policy["script-src"]
    assert opened.headers["X-Frame-Options"] == "DENY" and opened.headers["Referrer-Policy"] == "no-referrer"
    assert opened.headers["Cache-Control"] == "no-store"


def test_opening_a_held_link_offers_checkout_and_writes_nothing(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock)
    token_id = s.offer()
    first = tap(client, services, token_id)
    link = f"/reserve/{services.tokens.reserve(token_id)}"
    before = stored(services)
    opened = client.http.get(link)
    assert stored(services) == before
    assert opened.status_code == 200
    assert "One Walnut dining chair is held for you" in page(opened) and "Go to checkout" in page(opened)
    again = client.http.post(link, headers=FORM, body=b"")
    assert (again.status_code, again.headers["Location"]) == (303, first.headers["Location"])
    assert s.counters() == (1, 1) and s.audit_kinds()["hold"] == 1


def test_a_tap_sent_from_another_site_holds_nothing(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock)
    token_id = s.offer()
    link = f"/reserve/{services.tokens.reserve(token_id)}"
    before = stored(services)
    foreign = client.http.post(link, headers={**FORM, "Origin": "https://evil.example"}, body=b"")
    fetched = client.http.post(link, headers={**FORM, "Sec-Fetch-Site": "cross-site"}, body=b"")
    assert (foreign.status_code, fetched.status_code) == (403, 403)
    assert "nothing was reserved" in page(foreign)
    assert stored(services) == before
    mine = client.http.post(link, headers={**FORM, "Origin": "http://127.0.0.1:8000"}, body=b"")
    assert mine.status_code == 303 and s.row(token_id).state == "held"


def test_checkout_url_values_are_url_encoded(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, sku="MUG/BLUE:2")
    location = tap(client, services, s.offer()).headers["Location"]
    assert location.startswith("https://shop.example/checkout?sku=MUG%2FBLUE%3A2&reservation=")


def test_units_at_zero_get_a_kind_just_gone_page(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock)
    token_id = s.offer()
    level_falls_to(s, 0)
    response = tap(client, services, token_id)
    assert response.status_code == 410
    body = page(response)
    assert "Just gone — you keep your place for next time" in body
    assert SHOP in body
    assert s.request().state == "waiting"


def test_lapsed_and_expired_links_get_the_expired_page_and_a_bought_one_says_so(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock)
    lapsed, held = s.offer(0), s.offer(1)
    tap(client, services, held)
    clock.advance(CHAIR["offer_window_s"])
    client.lambda_.invoke("sweep", client.events.generate_cw_event("aws.events", "Scheduled Event", {}, []))
    used = s.offer(2)
    tap(client, services, used)
    assert order(client, services, {"reservation_id": used, "order_id": "A-1"}).status_code == 200
    for token_id in (lapsed, held):
        response = tap(client, services, token_id)
        assert response.status_code == 410
        body = page(response)
        assert "This link has expired" in body
        assert SHOP in body
    # Opened again after the purchase, or tapped: bought, not expired.
    for response in (client.http.get(f"/reserve/{services.tokens.reserve(used)}"), tap(client, services, used)):
        assert response.status_code == 410
        body = page(response)
        assert "You bought this one" in body and "Thank you for your order" in body
        assert "This link has expired" not in body


def test_tampered_link_gets_a_400_page_and_an_unknown_one_a_404_page(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock)
    link = services.tokens.reserve(s.offer())
    tampered = client.http.get(f"/reserve/{link[:-3]}xyz")
    unknown = client.http.get(f"/reserve/{services.tokens.reserve('0' * 32)}")
    assert tampered.status_code == 400
    assert "This link is not complete" in page(tampered)
    assert unknown.status_code == 404
    assert "We cannot find this reservation" in page(unknown)
    assert SHOP in page(unknown)
    for path, status in ((f"/reserve/{link[:-3]}xyz", 400), (f"/reserve/{services.tokens.reserve('0' * 32)}", 404)):
        assert client.http.head(path).status_code == status
        assert client.http.post(path, headers=FORM, body=b"").status_code == status


def test_orders_webhook_converts_and_answers_redelivery(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock)
    token_id = s.offer()
    tap(client, services, token_id)
    body = {"reservation_id": token_id, "order_id": "A-1001"}
    first = order(client, services, body)
    again = order(client, services, body, webhook_id="msg_1")
    assert (first.status_code, first.json_body["status"]) == (200, "converted")
    assert (again.status_code, again.json_body["status"]) == (200, "already_converted")
    assert s.row(token_id).state == "converted"
    assert s.request().state == "converted"


def test_orders_webhook_on_an_expired_hold_answers_200_and_says_so(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock)
    token_id = s.offer()
    tap(client, services, token_id)
    clock.advance(CHAIR["hold_window_s"])
    services.sweep.run()
    response = order(client, services, {"reservation_id": token_id, "order_id": "A-1002"})
    assert response.status_code == 200
    assert response.json_body == {"status": "hold_expired", "reservation_id": token_id, "order_id": "A-1002"}


def test_orders_webhook_refusals_are_json_errors(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock)
    token_id = s.offer()
    cases = [
        (order(client, services, {"reservation_id": "f" * 32, "order_id": "1"}), 404, "unknown_reservation"),
        (order(client, services, {"reservation_id": token_id, "order_id": "1"}), 409, "not_held"),
        (order(client, services, "{not json"), 400, "invalid_json"),
        (order(client, services, {"reservation_id": token_id}), 400, "missing_field"),
        (
            order(client, services, {"reservation_id": token_id, "order_id": "1"}, secret="whsec_d3Jvbmctc2VjcmV0"),
            401,
            "invalid_signature",
        ),
    ]
    for response, status, code in cases:
        assert response.status_code == status
        assert response.json_body["error"] == code
        assert response.json_body["message"]
    unsigned = client.http.post(
        "/webhooks/orders",
        headers={"Content-Type": "application/json"},
        body=json.dumps({"reservation_id": token_id, "order_id": "1"}).encode(),
    )
    assert unsigned.status_code == 401


def test_scheduled_sweep_returns_units_and_queues_a_top_up(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock)
    s.offer(0)
    s.tap(s.offer(1))
    clock.advance(CHAIR["offer_window_s"])
    result = client.lambda_.invoke("sweep", client.events.generate_cw_event("aws.events", "Scheduled Event", {}, []))
    assert result.payload["lapsed"] == 1
    assert result.payload["expired"] == 1
    assert result.payload["topups"] == 1
    assert s.counters() == (2, 2)
    assert [j.kind for j in queued_jobs(services)] == ["topup"]
