"""The dev console's JSON API and pages, in-process: Flask's test client, the app through chalice.test.Client,
and the emulator in this process. Jobs reach the notifier exactly as the local stack's pump delivers them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from chalice.test import Client
from flask.testing import FlaskClient

from chalicelib import wiring
from chalicelib.aws import Aws
from chalicelib.clock import parse_iso
from chalicelib.config import settings_from_env
from chalicelib.messages.wording import TONES
from chalicelib.queue.messages import Job, parse
from chalicelib.support_desk import TOLD
from chalicelib.webhooks import verify
from chalicelib.wiring import Services
from devstack import demo, outbox
from devstack.clocks import FixedClock
from devstack.console import create_console
from devstack.fake_model import FakeBedrock
from devstack.stack import ApiAnswer, ConsoleClock, InProcessApi, Stack, verify_sender
from tests.notices import confirm_by_email
from tests.support import REGION, app_client, tap_link

ORIGIN = "http://127.0.0.1:8001"
THROW = "WW-THROW-OAT"
PRODUCT = {
    "name": "Oatmeal merino throw",
    "threshold": 1,
    "hold_window_s": 900,
    "offer_window_s": 3600,
    "voice": "warm and plain",
    "checkout_url": "http://127.0.0.1:8001/checkout?sku={sku}&reservation={reservation_id}",
}


@pytest.fixture
def stack_clock(clock: FixedClock) -> ConsoleClock:
    """The stack's clock over the test's fixed clock."""
    return ConsoleClock(clock)


@pytest.fixture
def stack_services(session: boto3.session.Session, env: dict[str, str], stack_clock: ConsoleClock) -> Services:
    """Services as the local stack builds them: on the stack's clock, sender verified, sends stamped."""
    services = Services(
        settings_from_env(env), aws=Aws(REGION, session=session), clock=stack_clock, model=FakeBedrock()
    )
    verify_sender(services)
    outbox.record_sends(stack_clock)
    return services


@pytest.fixture
def api(stack_services: Services) -> Iterator[Client]:
    """The app, in this process, on the stack's services."""
    with app_client(stack_services) as test_client:
        yield test_client


@pytest.fixture
def stack(stack_services: Services, stack_clock: ConsoleClock, api: Client) -> Stack:
    """The stack's engine; a failed job is retried at once so redrive can be seen within a test."""
    return Stack(stack_services, stack_clock, InProcessApi(api), retry_after_s=0)


@pytest.fixture
def console(stack: Stack) -> FlaskClient:
    """The console's Flask test client."""
    return create_console(stack, origins=[ORIGIN]).test_client()


@pytest.fixture
def throw(stack_services: Services) -> str:
    """A sold-out product in the catalogue."""
    stack_services.tables.catalog.upsert(THROW, dict(PRODUCT))
    return THROW


class RecordingApi:
    """Stands in for the API: keeps what was sent and answers as told."""

    def __init__(self, status: int = 202, body: Any = None) -> None:
        self.status = status
        self.body = body if body is not None else {"status": "restock"}
        self.sent: list[tuple[str, str, str | None, dict[str, str]]] = []

    def request(
        self, method: str, path: str, body: str | None = None, headers: Mapping[str, str] | None = None
    ) -> ApiAnswer:
        self.sent.append((method, path, body, dict(headers or {})))
        return ApiAnswer(self.status, self.body, {})


def tap(api: Client, sku: str, channel: str, contact: str) -> Any:
    body = json.dumps({"sku": sku, "channel": channel, "contact": contact})
    response = api.http.post("/notify-me", headers={"Content-Type": "application/json"}, body=body)
    assert response.status_code == 202, response.body
    if channel == "email":
        # The shopper confirms their address from the confirmation email (double opt-in), as on the console.
        confirm_by_email(api, wiring.current(), contact)
    return response.json_body


def post(console: FlaskClient, path: str, body: Any = None, **kwargs: Any) -> Any:
    if body is None:
        return console.post(path, **kwargs)
    return console.post(path, data=json.dumps(body), content_type="application/json", **kwargs)


def messages(console: FlaskClient) -> list[dict[str, Any]]:
    response = console.get("/api/outbox")
    assert response.status_code == 200
    return response.get_json()["messages"]


def notices(console: FlaskClient) -> list[dict[str, Any]]:
    """The outbox's messages less the emails asking shoppers to confirm their address."""
    return [m for m in messages(console) if m.get("kind") != "confirmation"]


def confirmations(console: FlaskClient) -> list[dict[str, Any]]:
    """The outbox's emails asking shoppers to confirm their address (double opt-in)."""
    return [m for m in messages(console) if m.get("kind") == "confirmation"]


def restock_and_notify(console: FlaskClient, sku: str, available: int) -> dict[str, Any]:
    answer = post(console, "/api/restock", {"sku": sku, "available": available})
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["api"]["status"] == 202, answer.get_json()
    return post(console, "/api/run/notifier").get_json()


# --- outbox


def test_outbox_starts_empty(console: FlaskClient) -> None:
    assert console.get("/api/outbox").get_json() == {"messages": []}


def test_outbox_lists_sms_email_and_alerts_oldest_first(
    console: FlaskClient, stack_services: Services, clock: FixedClock
) -> None:
    aws = stack_services.aws
    aws.sns.publish(PhoneNumber="+447400123456", Message="Back in stock: http://127.0.0.1:8000/reserve/abc.def")
    clock.advance(5)
    aws.sesv2.send_email(
        FromEmailAddress=stack_services.settings.ses_from,
        Destination={"ToAddresses": ["grace@example.com"]},
        Content={
            "Simple": {
                "Subject": {"Data": "It's back"},
                "Body": {"Text": {"Data": "Plain words"}, "Html": {"Data": "<p>Rich <b>words</b></p>"}},
                "Headers": [{"Name": "List-Unsubscribe", "Value": "<http://127.0.0.1:8000/unsubscribe/tok>"}],
            }
        },
    )
    clock.advance(5)
    stack_services.alerts.send("Unknown SKU asked for", "Five taps named SKU NOPE.")

    sms, mail, alert = messages(console)

    assert [sms["channel"], mail["channel"], alert["channel"]] == ["sms", "email", "alert"]
    assert sms["sent_at"] < mail["sent_at"] < alert["sent_at"]
    assert sms["to"] == "+447400123456" and sms["subject"] is None
    assert mail["to"] == "grace@example.com"
    assert (mail["subject"], mail["body"], mail["html"]) == ("It's back", "Plain words", "<p>Rich <b>words</b></p>")
    assert mail["links"]["unsubscribe"] == "http://127.0.0.1:8000/unsubscribe/tok"
    assert alert["subject"] == "Unknown SKU asked for" and alert["to"] == "bisn-alerts"
    assert "html" not in sms


def test_unknown_sku_taps_reach_staff_once_in_the_outbox_after_their_window(console: FlaskClient, api: Client) -> None:
    for n in range(7):
        body = json.dumps({"sku": "NOT-SOLD", "channel": "sms", "contact": f"07400 12345{n}"})
        assert api.http.post("/notify-me", headers={"Content-Type": "application/json"}, body=body).status_code == 404
    assert [m for m in messages(console) if m["channel"] == "alert"] == [], "the window is still open"

    post(console, "/api/clock/advance", {"minutes": 60})
    assert post(console, "/api/run/sweep").get_json()["result"]["unknown_sku_digests"] == 1
    assert post(console, "/api/run/sweep").get_json()["result"]["unknown_sku_digests"] == 0
    alerts = [m for m in messages(console) if m["channel"] == "alert"]

    assert len(alerts) == 1
    assert "unknown SKU" in alerts[0]["subject"] and "NOT-SOLD" in alerts[0]["body"]


def test_a_notice_is_tied_to_its_sku_and_reservation_through_its_reserve_link(
    console: FlaskClient, api: Client, throw: str
) -> None:
    tap(api, throw, "sms", "07400 123456")

    assert restock_and_notify(console, throw, 1)["processed"] == 1

    [notice] = messages(console)
    assert notice["channel"] == "sms" and notice["to"] == "+447400123456"
    assert notice["sku"] == throw
    assert notice["reservation"]["state"] == "offered"
    assert notice["links"]["reserve"].startswith("http://127.0.0.1:8000/r/")  # the offer's short link


# --- delivering jobs to the notifier


def test_run_notifier_with_no_jobs_processes_none(console: FlaskClient) -> None:
    assert post(console, "/api/run/notifier").get_json() == {"processed": 0, "failed": 0, "available": True}


def recording_stack(stack: Stack, handler: Any) -> Stack:
    return Stack(stack.services, stack.clock, stack.api, entry_point=lambda name: handler, retry_after_s=0)


def test_each_job_reaches_the_notifier_as_an_sqs_event_and_is_then_deleted(stack: Stack) -> None:
    seen: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        assert context.get_remaining_time_in_millis() > 0
        seen.append(event)

    jobs = [Job(THROW, "rs_1", "ts_1"), Job(THROW, "rs_1", "ts_1", kind="topup")]
    for job in jobs:
        stack.services.jobs.send(job)

    result = recording_stack(stack, handler).run_notifier()

    assert result == {"processed": 2, "failed": 0, "available": True}
    assert [parse(e["Records"][0]["body"]) for e in seen] == jobs
    record = seen[0]["Records"][0]
    assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"].endswith(":bisn-jobs")
    assert stack.queue_depths() == {"pending": 0, "in_flight": 0, "dead_lettered": 0}


def test_a_failing_job_is_retried_and_dead_lettered_after_five_receives(stack: Stack) -> None:
    calls: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        calls.append(event["Records"][0]["attributes"]["ApproximateReceiveCount"])
        raise RuntimeError("the notifier crashed")

    stack.services.jobs.send(Job(THROW, "rs_1", "ts_1"))

    result = recording_stack(stack, handler).run_notifier()

    assert result == {"processed": 0, "failed": 5, "available": True}
    assert calls == ["1", "2", "3", "4", "5"]
    assert stack.queue_depths() == {"pending": 0, "in_flight": 0, "dead_lettered": 1}


def test_a_job_reported_as_a_batch_item_failure_stays_on_the_queue(stack: Stack) -> None:
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}

    stack.services.jobs.send(Job(THROW, "rs_1", "ts_1"))
    slow_retry = Stack(stack.services, stack.clock, stack.api, entry_point=lambda name: handler, retry_after_s=30)

    assert slow_retry.run_notifier() == {"processed": 0, "failed": 1, "available": True}
    assert slow_retry.queue_depths()["in_flight"] == 1


def test_without_a_notifier_jobs_stay_queued_and_none_is_reported(stack: Stack) -> None:
    stack.services.jobs.send(Job(THROW, "rs_1", "ts_1"))
    bare = Stack(stack.services, stack.clock, stack.api, entry_point=lambda name: None)

    result = bare.run_notifier()

    assert result["processed"] == 0 and result["available"] is False
    assert bare.queue_depths()["pending"] == 1
    assert bare.run_sweep()["processed"] == 0


# --- the sweep


def test_sweep_runs_as_if_at_the_given_time_without_moving_the_clock(stack: Stack, clock: FixedClock) -> None:
    seen: list[tuple[float, str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
        seen.append((wiring.current().clock.now(), event["time"]))
        return {"lapsed": 0}

    at = clock.now() + 7200
    result = recording_stack(stack, handler).run_sweep(at)

    assert seen[0][0] == at
    assert seen[0][1].endswith("Z")
    assert result == {"processed": 0, "available": True, "now": at, "result": {"lapsed": 0}}
    assert stack.clock.now() == clock.now()


@pytest.mark.parametrize("now", ["soon", True, -1, None])
def test_sweep_refuses_a_time_that_is_not_unix_seconds(console: FlaskClient, now: Any) -> None:
    response = post(console, "/api/run/sweep", {"now": now} if now is not None else [1])
    assert response.status_code == 400
    assert response.get_json()["error"] in ("invalid_field", "out_of_range", "invalid_body")


def test_an_unused_offer_lapses_in_the_sweep_and_passes_to_the_next_shopper(
    console: FlaskClient, api: Client, clock: FixedClock, throw: str
) -> None:
    tap(api, throw, "sms", "07400 123456")
    clock.advance(1)
    tap(api, throw, "email", "grace@example.com")
    restock_and_notify(console, throw, 1)
    first = console.get(f"/api/queue/{throw}").get_json()["entries"][0]

    swept = post(console, "/api/run/sweep", {"now": first["offer"]["offer_expires_at"] + 1}).get_json()
    post(console, "/api/run/notifier")

    assert swept["processed"] == 1
    queue = console.get(f"/api/queue/{throw}").get_json()
    assert [e["status"] for e in queue["entries"]] == ["lapsed", "offered"]
    assert queue["restock"]["offers"]["lapsed"] == 1 and queue["restock"]["offers"]["offered"] == 1
    assert all(queue["restock"]["checks"].values())
    [confirmation] = confirmations(console)
    assert (confirmation["to"], confirmation["sku"]) == ("grace@example.com", throw)
    assert [m["to"] for m in notices(console)] == ["+447400123456", "grace@example.com"]
    assert messages(console)[0] == confirmation, "the address was confirmed before the restock"


# --- restocks and orders, signed like the platform


def test_restock_sends_a_correctly_signed_inventory_webhook(stack: Stack) -> None:
    recording = RecordingApi(202, {"status": "restock", "restock_id": "rs_x"})
    signer = Stack(stack.services, stack.clock, recording, route_exists=lambda path, method: True)
    console = create_console(signer, origins=[ORIGIN]).test_client()

    answer = post(console, "/api/restock", {"sku": THROW, "available": 3}).get_json()

    [(method, path, body, headers)] = recording.sent
    assert (method, path) == ("POST", "/webhooks/inventory")
    delivery = verify(body.encode(), headers, stack.services.webhook_secrets())
    assert delivery.webhook_id == answer["webhook_id"]
    sent = json.loads(body)
    assert (sent["sku"], sent["available"]) == (THROW, 3)
    assert "occurred_at" in sent
    assert answer["api"] == {"status": 202, "body": {"status": "restock", "restock_id": "rs_x"}}


def test_a_restock_is_detected_by_the_api(console: FlaskClient, api: Client, throw: str) -> None:
    answer = post(console, "/api/restock", {"sku": throw, "available": 2}).get_json()

    assert answer["api"]["status"] == 202
    assert answer["api"]["body"]["status"] == "restock"
    assert console.get(f"/api/queue/{throw}").get_json()["restock"]["units_total"] == 2


def test_a_restock_says_what_the_level_did_and_one_below_the_threshold_tells_nobody(
    console: FlaskClient, api: Client, stack_services: Services
) -> None:
    stack_services.tables.catalog.upsert(THROW, {**PRODUCT, "threshold": 3})

    def restock(available: int) -> dict[str, Any]:
        answer = post(console, "/api/restock", {"sku": THROW, "available": available}).get_json()
        return {"api": answer["api"]["body"], **answer["meaning"]}

    assert restock(2) == {
        "api": {"status": "no_restock", "reason": "no_crossing"},
        "tone": "neutral",
        "text": "No restock: a level of 2 is below this product's notify threshold of 3, so nobody is told. A level of "
        "3 or more, rising from below it, opens a restock that tells one person per unit.",
    }
    opened = restock(3)
    assert (opened["api"]["status"], opened["tone"]) == ("restock", "ok")
    assert opened["text"] == (
        "A restock of 3 units: the notifier tells up to 3 people in line, one per unit, oldest first (an email place "
        "not confirmed yet is passed over)."
    )
    rose = restock(5)
    assert (rose["api"]["adjusted"], rose["tone"]) == ("topped_up", "neutral")
    assert rose["text"] == (
        "No new restock: the one already open follows the level: it rose, and the new units go to the next people "
        "in line."
    )
    assert (
        restock(5)["text"] == "No new restock: one is already open, and the level stays at or above the threshold of 3."
    )
    closed = restock(1)
    assert closed["text"].endswith("it fell below the threshold, so the restock is closed and no more offers are made.")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"available": 1}, "missing_field"),
        ({"sku": 12, "available": 1}, "invalid_field"),
        ({"sku": "has space", "available": 1}, "invalid_sku"),
        ({"sku": THROW}, "missing_field"),
        ({"sku": THROW, "available": -1}, "out_of_range"),
        ({"sku": THROW, "available": True}, "invalid_field"),
        ({"sku": THROW, "available": "3"}, "invalid_field"),
        ({"sku": THROW, "available": 2.5}, "invalid_field"),
    ],
)
def test_restock_refuses_bad_input(console: FlaskClient, body: dict[str, Any], error: str) -> None:
    response = post(console, "/api/restock", body)
    assert response.status_code == 400
    assert response.get_json()["error"] == error
    assert response.get_json()["message"]


@pytest.mark.parametrize(
    ("raw", "error"), [("{not json", "invalid_json"), ("[1, 2]", "invalid_body"), ("", "invalid_body")]
)
def test_restock_refuses_a_body_that_is_not_a_json_object(console: FlaskClient, raw: str, error: str) -> None:
    response = console.post("/api/restock", data=raw, content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"] == error


def test_without_an_inventory_webhook_restock_says_it_is_not_available(stack: Stack) -> None:
    bare = Stack(stack.services, stack.clock, RecordingApi(), route_exists=lambda path, method: False)
    console = create_console(bare, origins=[ORIGIN]).test_client()

    response = post(console, "/api/restock", {"sku": THROW, "available": 1})

    assert response.status_code == 501
    assert response.get_json()["error"] == "not_available"


def test_orders_need_a_reservation_id(console: FlaskClient) -> None:
    for body in ({}, {"reservation_id": ""}, {"reservation_id": 7}):
        response = post(console, "/api/orders", body)
        assert response.status_code == 400
        assert response.get_json()["error"] == "missing_field"


def test_the_whole_story_in_process_ends_converted_with_counters_that_add_up(
    console: FlaskClient, api: Client, clock: FixedClock, throw: str
) -> None:
    tap(api, throw, "sms", "07400 123456")
    clock.advance(1)
    tap(api, throw, "email", "grace@example.com")
    clock.advance(1)
    assert post(console, "/api/restock", {"sku": throw, "available": 1}).get_json()["api"]["status"] == 202
    clock.advance(1)
    assert post(console, "/api/run/notifier").get_json()["processed"] == 1
    [confirmation] = confirmations(console)
    assert confirmation["to"] == "grace@example.com" and "/confirm/" in confirmation["links"]["confirm"]
    [notice] = notices(console)
    assert notice["to"] == "+447400123456"
    clock.advance(1)

    reserve = tap_link(api, urlsplit(notice["links"]["reserve"]).path.removeprefix("/r/"))
    assert reserve.status_code == 303
    location = urlsplit(reserve.headers["Location"])
    assert location.path == "/checkout"
    reservation_id = parse_qs(location.query)["reservation"][0]
    checkout = console.get(f"/checkout?{location.query}")
    assert checkout.status_code == 200
    assert b"Oatmeal merino throw" in checkout.data and b"One unit is held for you" in checkout.data
    clock.advance(1)

    order = post(console, "/api/orders", {"reservation_id": reservation_id}).get_json()

    assert order["api"]["status"] == 200
    queue = console.get(f"/api/queue/{throw}").get_json()
    assert [(e["position"], e["status"]) for e in queue["entries"]] == [(None, "converted"), (1, "waiting")]
    restock = queue["restock"]
    assert (restock["units_total"], restock["units_available"], restock["units_offerable"]) == (1, 0, 0)
    assert restock["offers"]["converted"] == 1
    assert all(restock["checks"].values())
    kinds = [e["kind"] for e in console.get(f"/api/audit/{throw}").get_json()["events"]]
    assert (
        kinds.index("restock_detected") < kinds.index("notice_sent") < kinds.index("hold") < kinds.index("conversion")
    )


# --- queues


def test_queue_lists_the_waiting_list_in_join_order_with_masked_contacts(
    console: FlaskClient, api: Client, clock: FixedClock, throw: str
) -> None:
    tap(api, throw, "email", "grace@example.com")
    clock.advance(1)
    tap(api, throw, "sms", "07400 123456")

    queue = console.get(f"/api/queue/{throw}").get_json()

    assert queue["sku"] == throw
    assert [(e["position"], e["contact"], e["channel"], e["state"]) for e in queue["entries"]] == [
        (1, "g•••@example.com", "email", "waiting"),
        (2, "+4474•••••456", "sms", "waiting"),
    ]
    assert queue["entries"][0]["joined_ts"] < queue["entries"][1]["joined_ts"]
    assert queue["restock"] is None
    assert "grace@example.com" not in json.dumps(queue)


def test_queue_of_an_unknown_or_malformed_sku_is_refused(console: FlaskClient) -> None:
    unknown = console.get("/api/queue/NOT-SOLD")
    assert unknown.status_code == 404 and unknown.get_json()["error"] == "unknown_sku"
    malformed = console.get("/api/queue/has%20space")
    assert malformed.status_code == 400 and malformed.get_json()["error"] == "invalid_sku"


# --- the catalogue


def test_put_catalog_creates_a_product_then_updates_it(console: FlaskClient, stack_services: Services) -> None:
    created = console.put("/api/catalog/NEW-LAMP", json=PRODUCT)
    assert created.status_code == 201
    assert created.get_json()["product"]["name"] == PRODUCT["name"]

    updated = console.put("/api/catalog/NEW-LAMP", json={"threshold": 4, "voice": "brisk"})

    assert updated.status_code == 200
    product = stack_services.tables.catalog.get("NEW-LAMP")
    assert product is not None
    assert (product.threshold, product.voice, product.name) == (4, "plain", PRODUCT["name"])  # brisk: its tone
    assert product.checkout_url == PRODUCT["checkout_url"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({**PRODUCT, "colour": "red"}, "unknown_field"),
        ({**PRODUCT, "threshold": 0}, "out_of_range"),
        ({**PRODUCT, "threshold": "3"}, "invalid_field"),
        ({**PRODUCT, "threshold": True}, "invalid_field"),
        ({**PRODUCT, "hold_window_s": 10}, "out_of_range"),
        ({**PRODUCT, "offer_window_s": 10**9}, "out_of_range"),
        ({**PRODUCT, "name": ""}, "missing_field"),
        ({**PRODUCT, "name": "x" * 121}, "field_too_long"),
        ({**PRODUCT, "voice": 5}, "invalid_field"),
        ({**PRODUCT, "voice": "shouty"}, "invalid_field"),
        ({**PRODUCT, "name": "Lamp, see lamp．shop"}, "invalid_field"),
        ({**PRODUCT, "name": "Lamp - half price"}, "invalid_field"),
        ({**PRODUCT, "checkout_url": "ftp://shop.example/{reservation_id}"}, "invalid_field"),
        ({**PRODUCT, "checkout_url": "https://shop.example/{order_id}"}, "invalid_field"),
        ({**PRODUCT, "checkout_url": "https://shop.example/{sku"}, "invalid_field"),
        ({k: v for k, v in PRODUCT.items() if k != "checkout_url"}, "missing_field"),
        ({}, "missing_field"),
    ],
)
def test_put_catalog_refuses_bad_settings(
    console: FlaskClient, stack_services: Services, body: dict[str, Any], error: str
) -> None:
    response = console.put("/api/catalog/NEW-LAMP", json=body)
    assert response.status_code == 400
    assert response.get_json()["error"] == error
    assert stack_services.tables.catalog.get("NEW-LAMP") is None


def test_put_catalog_needs_a_json_object_and_a_good_sku(console: FlaskClient, throw: str) -> None:
    assert console.put(f"/api/catalog/{throw}", data="[]", content_type="application/json").status_code == 400
    assert console.put(f"/api/catalog/{throw}", json={}).get_json()["error"] == "invalid_body"
    assert console.put("/api/catalog/bad%20sku", json=PRODUCT).get_json()["error"] == "invalid_sku"


# --- the clock, origins and pages


def test_advancing_the_clock_moves_the_time_the_notifier_and_sweep_see(
    console: FlaskClient, stack: Stack, clock: FixedClock
) -> None:
    answer = post(console, "/api/clock/advance", {"minutes": 20}).get_json()

    assert answer == {"now": clock.now() + 1200, "offset_s": 1200}
    assert wiring.current().clock.now() == clock.now() + 1200


def test_a_restock_after_advancing_the_clock_comes_after_the_places_taken_since(
    console: FlaskClient, api: Client, stack_services: Services, throw: str, clock: FixedClock
) -> None:
    post(console, "/api/clock/advance", {"minutes": 90})
    tap(api, throw, "sms", "07400 123456")  # joins at the stack's time, 90 minutes after the wall clock's
    clock.advance(1)  # the stack's base clock moves on by a second, as a real one would before the restock
    answer = post(console, "/api/restock", {"sku": throw, "available": 1}).get_json()
    assert parse_iso(answer["sent"]["occurred_at"]) == clock.now() + 5400
    post(console, "/api/run/notifier")

    found = stack_services.desk.explain(throw, "07400 123456")
    [restock] = found.restocks
    assert restock.restock_ts > str(found.joined_ts)
    assert parse_iso(restock.restock_ts.split("#")[0]) == pytest.approx(restock.detected_at, abs=1)
    assert (restock.verdict, restock.position) == (TOLD, 1)
    assert [m["to"] for m in notices(console)] == ["+447400123456"]


@pytest.mark.parametrize("body", [{}, {"minutes": 0}, {"minutes": -5}, {"minutes": "ten"}, {"minutes": 10**9}])
def test_the_clock_only_moves_forward_by_a_sensible_amount(console: FlaskClient, body: dict[str, Any]) -> None:
    response = post(console, "/api/clock/advance", body)
    assert response.status_code == 400
    assert response.get_json()["error"] in ("missing_field", "out_of_range", "invalid_field")


def test_changes_from_another_origin_are_refused(console: FlaskClient) -> None:
    response = post(console, "/api/run/notifier", headers={"Origin": "https://evil.example"})
    assert response.status_code == 403
    assert response.get_json()["error"] == "forbidden_origin"
    assert post(console, "/api/run/notifier", headers={"Origin": ORIGIN}).status_code == 200


def test_unknown_api_paths_answer_in_json(console: FlaskClient) -> None:
    response = console.get("/api/nothing-here")
    assert response.status_code == 404
    assert response.get_json()["error"] == "not_found"


def test_storefront_shows_sold_out_products_with_the_real_widget(console: FlaskClient, throw: str) -> None:
    page = console.get("/").get_data(as_text=True)

    assert 'src="http://127.0.0.1:8000/widget.js"' in page
    assert f'data-bisn-sku="{throw}"' in page
    assert "Sold out" in page and "Shop as" in page


def test_every_page_renders_and_links_to_the_apps_dashboard(console: FlaskClient, throw: str) -> None:
    for path in ("/", "/outbox", "/controls"):
        response = console.get(path)
        assert response.status_code == 200, path
        assert b'<main id="main">' in response.data
        assert b'<a href="http://127.0.0.1:8000/admin" id="dashboard-link"' in response.data
    storefront = console.get("/").get_data(as_text=True)
    assert f'href="http://127.0.0.1:8000/admin#waiting/{throw}"' in storefront


def test_the_views_the_dashboard_shows_are_not_the_consoles(console: FlaskClient, throw: str) -> None:
    # Waiting lists and decisions are the dashboard's (/admin on the API); the JSON stays for scripts and tests.
    for path in (f"/queue?sku={throw}", f"/audit?sku={throw}"):
        assert console.get(path).status_code == 404, path
    assert console.get(f"/api/queue/{throw}").status_code == 200
    assert console.get(f"/api/audit/{throw}").status_code == 200


def test_the_controls_offer_the_tones_only(console: FlaskClient) -> None:
    page = console.get("/controls").get_data(as_text=True)
    for tone in TONES:
        assert f'<option value="{tone}">' in page
    assert 'name="voice" maxlength' not in page


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("fake", "COPY_MODE=fake</code>, devstack/fake_model.py): its copy is the same whatever the tone."),
        ("template", "COPY_MODE=template</code>): the same whatever the tone."),
        ("bedrock", None),
    ],
)
def test_the_tone_picker_says_when_the_tone_changes_nothing_here(
    session: boto3.session.Session, env: dict[str, str], stack: Stack, mode: str, says: str | None
) -> None:
    settings = settings_from_env({**env, "COPY_MODE": mode})
    services = Services(settings, aws=Aws(REGION, session=session), clock=stack.clock, model=FakeBedrock())
    console = create_console(Stack(services, stack.clock, stack.api), origins=[ORIGIN]).test_client()
    page = " ".join(console.get("/controls").get_data(as_text=True).split())
    if says is None:
        assert 'id="voice-hint"' not in page
    else:
        assert says in page and 'aria-describedby="voice-hint"' in page


def test_the_controls_say_which_clock_each_part_keeps(console: FlaskClient) -> None:
    page = " ".join(console.get("/controls").get_data(as_text=True).split())
    # The API follows the stack clock (devstack/api.py --clock-file); only signatures and SQS keep the wall clock.
    assert "the API keeps the wall clock" not in page
    assert (
        "Moves the stack clock forward for the whole stack: the API (joins, offers, holds and their deadlines)" in page
    )
    assert "Webhook signatures and the job queue's retry timers keep the wall clock." in page
    assert "The stock reconciliation (every 5 minutes when deployed) does not run here" in page


def test_checkout_for_an_unknown_reservation_says_so(console: FlaskClient) -> None:
    response = console.get("/checkout?sku=X&reservation=nope")
    assert response.status_code == 404
    assert b"No such reservation" in response.data


def test_status_reports_capabilities_clock_and_queue_depths(console: FlaskClient) -> None:
    status = console.get("/api/status").get_json()

    assert status["capabilities"]["notify_me"] is True
    assert set(status["jobs"]) == {"pending", "in_flight", "dead_lettered"}
    assert status["api_base"] == "http://127.0.0.1:8000"


# --- the demo catalogue


def test_the_demo_catalogue_loads_through_the_apps_catalogue_sync(stack: Stack, stack_services: Services) -> None:
    skus = demo.load(stack, demo.DEMO_CATALOG)

    products = {p.sku: p for p in stack_services.tables.catalog.all()}
    assert sorted(skus) == sorted(products)
    assert len(products) >= 3
    assert all(p.checkout_url.startswith("http://127.0.0.1:8001/checkout?") for p in products.values())
    assert all(p.level in (None, 0) for p in products.values())


def test_without_catalogue_sync_the_demo_products_are_upserted_directly(stack: Stack, stack_services: Services) -> None:
    bare = Stack(stack.services, stack.clock, stack.api, entry_point=lambda name: None)

    skus = demo.load(bare, demo.DEMO_CATALOG)

    assert sorted(skus) == sorted(p.sku for p in stack_services.tables.catalog.all())
