"""Every way a Notify-me tap can be refused: a clear 4xx, and nothing written."""

from __future__ import annotations

import json
from typing import Any

import boto3
from chalice.test import Client

from chalicelib.unknown_skus import DIGEST_CAP
from chalicelib.wiring import Services
from devstack.clocks import FixedClock

JSON = {"Content-Type": "application/json"}
GOOD = {"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 123456"}


def post(client: Client, body: str | bytes, content_type: str = "application/json", **headers: str) -> Any:
    return client.http.post("/notify-me", headers={"Content-Type": content_type, **headers}, body=body)


def stored(services: Services, sku: str = "CHAIR-WALNUT") -> list[dict[str, Any]]:
    return services.tables.requests.table.scan()["Items"] if sku else []


def test_bad_input_gets_400_with_a_code_and_nothing_is_stored(client: Client, services: Services, chair: str) -> None:
    # One end to end; every kind of bad body is in tests/unit/test_tap_refusals.py.
    response = post(client, json.dumps({**GOOD, "contact": "12"}))
    assert response.status_code == 400
    assert response.json_body["error"] == "invalid_phone"
    assert response.json_body["reason"] == "too_short"  # what is wrong with it, under the stable code
    assert response.json_body["message"]
    assert stored(services) == []


def test_invalid_utf8_gets_400(client: Client, services: Services, chair: str) -> None:
    response = post(client, b'{"sku": "\xff\xfe"}')
    assert response.status_code == 400
    assert response.json_body["error"] == "invalid_body"


def test_an_oversized_body_gets_413(client: Client, services: Services, chair: str) -> None:
    response = post(client, json.dumps({**GOOD, "padding": "x" * 5000}))
    assert response.status_code == 413
    assert response.json_body["error"] == "payload_too_large"
    assert stored(services) == []


def test_a_form_encoded_tap_works_without_javascript(client: Client, services: Services, chair: str) -> None:
    # From a page of a storefront on the CORS allow-list (a no-JavaScript form posts cross-origin to the API).
    response = post(
        client,
        "sku=CHAIR-WALNUT&channel=email&contact=ada%40example.com&name=Ada",
        "application/x-www-form-urlencoded",
        Origin=services.settings.cors_origins[0],
    )
    assert response.status_code == 202
    assert response.json_body == {"status": "received", "channel": "email", "confirm_email": True}


def subscribe_staff_inbox(session: boto3.session.Session, services: Services) -> str:
    sqs = session.client("sqs")
    url = sqs.create_queue(QueueName="staff-inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    session.client("sns").subscribe(TopicArn=services.settings.alert_topic_arn, Protocol="sqs", Endpoint=arn)
    return url


def staff_messages(session: boto3.session.Session, url: str) -> list[dict[str, Any]]:
    received = session.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in received]


def test_unknown_sku_is_404_recorded_and_staff_told_once_after_the_window(
    client: Client, services: Services, session: boto3.session.Session, clock: FixedClock
) -> None:
    inbox = subscribe_staff_inbox(session, services)
    threshold = services.settings.unknown_sku_alert_threshold
    for i in range(threshold + 3):
        response = post(client, json.dumps({**GOOD, "sku": "LAMP-OLD", "contact": f"0740012{i:04d}"}))
        assert response.status_code == 404
        assert response.json_body["error"] == "unknown_sku"
    attempts = services.tables.audit.for_sku("LAMP-OLD")
    assert [a["kind"] for a in attempts] == ["unknown_sku"] * (threshold + 3)
    assert all("contact" not in a and len(a["contact_key"]) == 40 for a in attempts)
    assert stored(services) == []
    assert services.sweep.run()["unknown_sku_digests"] == 0, "the window is still open"
    clock.advance(services.settings.unknown_sku_window_s)
    assert services.sweep.run()["unknown_sku_digests"] == 1
    assert services.sweep.run()["unknown_sku_digests"] == 0, "one digest per window"
    [alert] = staff_messages(session, inbox)
    assert "1 unknown SKU" in alert["Subject"]
    assert "- LAMP-OLD" in alert["Message"]


def test_unknown_skus_are_told_again_in_a_later_window(
    client: Client, services: Services, session: boto3.session.Session, clock: FixedClock
) -> None:
    inbox = subscribe_staff_inbox(session, services)
    threshold = services.settings.unknown_sku_alert_threshold
    for window in range(2):
        for i in range(threshold):
            post(client, json.dumps({**GOOD, "sku": "LAMP-OLD", "contact": f"074001{window}{i:04d}"}))
        clock.advance(services.settings.unknown_sku_window_s)
        services.sweep.run()
    assert len(staff_messages(session, inbox)) == 2


def test_made_up_skus_come_as_one_bounded_digest_with_no_link_in_it(
    services: Services, session: boto3.session.Session, clock: FixedClock
) -> None:
    inbox = subscribe_staff_inbox(session, services)
    threshold = services.settings.unknown_sku_alert_threshold
    skus = ["http://evil.example/x", *(f"MADE-UP-{n:03d}" for n in range(DIGEST_CAP + 9))]
    for sku in skus:
        for _ in range(threshold):
            services.unknown_skus.record(sku, clock.now())
    clock.advance(services.settings.unknown_sku_window_s)
    assert services.sweep.run()["unknown_sku_digests"] == 1
    [alert] = staff_messages(session, inbox)
    assert f"{len(skus)} unknown SKU" in alert["Subject"]
    assert "and 10 more unknown SKUs" in alert["Message"]
    assert "evil.example" not in alert["Message"] and "http://" not in alert["Message"]
    assert len([line for line in alert["Message"].splitlines() if line.startswith("- ")]) == DIGEST_CAP


def test_a_discontinued_product_cannot_be_joined(client: Client, services: Services, chair: str) -> None:
    services.tables.catalog.upsert(chair, {"discontinued": True})
    response = post(client, json.dumps(GOOD))
    assert response.status_code == 404
    assert response.json_body["error"] == "discontinued"
    assert stored(services) == []


def test_one_source_is_rate_limited_with_retry_after(client: Client, services: Services, chair: str) -> None:
    limit = services.settings.rate_limit_per_minute
    statuses = [post(client, json.dumps({**GOOD, "contact": f"0740011{i:04d}"})).status_code for i in range(limit)]
    assert statuses == [202] * limit
    refused = post(client, json.dumps({**GOOD, "contact": "07400 119999"}))
    assert refused.status_code == 429
    assert refused.json_body["error"] == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert len([i for i in stored(services) if not i["joined_ts"].startswith("U#")]) == limit


def test_repeat_taps_and_refusals_count_against_the_rate_limit(client: Client, services: Services, chair: str) -> None:
    limit = services.settings.rate_limit_per_minute
    for _ in range(limit):
        post(client, json.dumps(GOOD))
    assert post(client, json.dumps({**GOOD, "sku": "NOPE"})).status_code == 429
    assert post(client, json.dumps(GOOD)).status_code == 429


def test_the_rate_limit_resets_next_minute(client: Client, services: Services, chair: str, clock: FixedClock) -> None:
    for i in range(services.settings.rate_limit_per_minute):
        post(client, json.dumps({**GOOD, "contact": f"0740011{i:04d}"}))
    clock.advance(60)
    assert post(client, json.dumps({**GOOD, "contact": "07400 119999"})).status_code == 202


def test_storefront_origins_on_the_allow_list_get_cors(client: Client, services: Services, chair: str) -> None:
    allowed = post(client, json.dumps(GOOD), Origin="http://127.0.0.1:8001")
    assert allowed.headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:8001"
    other = post(client, json.dumps({**GOOD, "contact": "07400 123457"}), Origin="https://evil.example")
    assert "Access-Control-Allow-Origin" not in other.headers
    preflight = client.http.request("OPTIONS", "/notify-me", headers={"Origin": "http://127.0.0.1:8001"})
    assert preflight.status_code == 204
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]


def test_every_request_gets_a_ttl_of_ninety_days(
    client: Client, services: Services, chair: str, clock: FixedClock
) -> None:
    post(client, json.dumps(GOOD))
    for item in stored(services):
        assert int(item["ttl"]) == int(clock.now()) + 90 * 86400


def test_a_repeat_tap_extends_the_ttl_but_not_the_place_or_its_name(
    client: Client, services: Services, chair: str, clock: FixedClock
) -> None:
    post(client, json.dumps(GOOD))
    [before] = [i for i in stored(services) if not i["joined_ts"].startswith("U#")]
    clock.advance(86400)
    post(client, json.dumps({**GOOD, "name": "Ada"}))
    items = stored(services)
    assert len(items) == 2
    for item in items:
        assert int(item["ttl"]) == int(clock.now()) + 90 * 86400
    [after] = [i for i in items if not i["joined_ts"].startswith("U#")]
    assert after["joined_ts"] == before["joined_ts"]
    # Anyone who knows a contact can tap for it: a repeat tap never names, or renames, someone else's place.
    assert after.get("name", "") == before.get("name", "") == ""


def test_the_widget_script_is_served(client: Client) -> None:
    response = client.http.get("/widget.js")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/javascript")
    body = response.body.decode()
    assert "data-bisn-sku" in body
    assert "aria-live" in body


def test_an_unserved_or_odd_language_tag_is_no_error_and_falls_back(
    client: Client, services: Services, chair: str
) -> None:
    # A browser may send any tag: an unserved one is English, the Accept-Language header's first served one wins.
    assert (
        post(client, json.dumps({**GOOD, "lang": "pt-BR"}), **{"Accept-Language": "nl-BE, de;q=0.5"}).status_code == 202
    )
    assert [r["lang"] for r in stored(services) if "state" in r] == ["nl"]  # the place, not its uniqueness item
