"""The dashboard's JSON API through chalice.test.Client, signed in with real tokens from the emulator's Cognito.

Every endpoint, both roles, the tokens that must be refused (forged, expired, another pool's, signed by another
key, none), CSV downloads, and the audit fact each staff action leaves with the staff member's identity.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.events_out import OutboundEvent
from chalicelib.queue.messages import Job
from chalicelib.shopper.widget import PREORDER_NOTE
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from tests.admin_pool import PASSWORD, Pool, jwks_over_http, staff_pool
from tests.builders import add_request, join_request, joined, key_of
from tests.notices import drain, email_outbox, sms_outbox, verify_sender
from tests.scenes import Scene, scene
from tests.support import REGION, app_client

OWNER = "owner@shop.example"
HELPER = "desk@shop.example"
NOBODY = "left@shop.example"


@pytest.fixture
def pool(session: Any) -> Pool:
    staff = staff_pool(session.client("cognito-idp", region_name=REGION))
    staff.add(OWNER, "owner")
    staff.add(HELPER, "support")
    staff.add(NOBODY, None)
    return staff


@pytest.fixture
def admin_services(session: Any, clock: FixedClock, env: dict[str, str], pool: Pool) -> Services:
    settings = settings_from_env({**env, "ADMIN_USER_POOL_ID": pool.pool_id, "ADMIN_CLIENT_ID": pool.client_id})
    return Services(
        settings, aws=Aws(REGION, session=session), clock=clock, model=FakeBedrock(), jwks_fetch=jwks_over_http
    )


@pytest.fixture
def api(admin_services: Services) -> Iterator[Client]:
    with app_client(admin_services) as test_client:
        yield test_client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


def post(api: Client, path: str, token: str, body: dict[str, Any]) -> Any:
    return api.http.post(path, headers=bearer(token), body=json.dumps(body))


def get(api: Client, path: str, token: str) -> Any:
    return api.http.get(path, headers=bearer(token))


def staff_facts(services: Services) -> list[dict[str, Any]]:
    return services.tables.audit.for_sku("@staff")


def sold_one(services: Services, clock: FixedClock) -> Scene:
    """Three people wait for two chairs: both told by SMS, one taps and buys, one lets the offer lapse."""
    s = scene(services, clock, units=2, people=3)
    services.notifier.handle(Job(s.sku, s.restock.restock_id, s.restock.restock_ts), lambda: 60_000)
    first, second = s.request(0).offer_token, s.request(1).offer_token
    assert first and second
    assert s.tap(first).kind == "held"
    assert services.moves.convert(s.row(first), "order-1", clock.now()).result == "done"
    # Past its offer window (the tokens of the emulator's Cognito follow the real clock, so this one stays put).
    assert services.moves.lapse(s.row(second), clock.now() + 4000).result == "done"
    return s


# --- Sign-in


def test_sign_in_answers_an_id_token_with_the_role(api: Client, pool: Pool) -> None:
    answer = api.http.post(
        "/admin/api/session",
        headers={"Content-Type": "application/json"},
        body=json.dumps({"email": OWNER, "password": PASSWORD}),
    )
    assert answer.status_code == 200
    body = json.loads(answer.body)
    assert (body["role"], body["email"]) == ("owner", OWNER)
    me = get(api, "/admin/api/me", body["id_token"])
    assert json.loads(me.body) == {"email": OWNER, "role": "owner"}


@pytest.mark.parametrize("email", [OWNER, "stranger@shop.example"])
def test_a_wrong_password_and_an_unknown_user_get_the_same_refusal(api: Client, email: str) -> None:
    answer = api.http.post(
        "/admin/api/session",
        headers={"Content-Type": "application/json"},
        body=json.dumps({"email": email, "password": "Not-the-password-9"}),
    )
    assert answer.status_code == 401
    assert json.loads(answer.body)["error"] == "sign_in_failed"


def test_a_member_of_no_staff_group_cannot_sign_in(api: Client) -> None:
    answer = api.http.post(
        "/admin/api/session",
        headers={"Content-Type": "application/json"},
        body=json.dumps({"email": NOBODY, "password": PASSWORD}),
    )
    assert answer.status_code == 401


def test_a_new_staff_member_sets_a_password_through_the_challenge(api: Client, pool: Pool) -> None:
    pool.cognito.admin_create_user(
        UserPoolId=pool.pool_id,
        Username="new@shop.example",
        TemporaryPassword="Temporary-pass-1",
        MessageAction="SUPPRESS",
    )
    pool.cognito.admin_add_user_to_group(UserPoolId=pool.pool_id, Username="new@shop.example", GroupName="support")
    first = api.http.post(
        "/admin/api/session",
        headers={"Content-Type": "application/json"},
        body=json.dumps({"email": "new@shop.example", "password": "Temporary-pass-1"}),
    )
    step = json.loads(first.body)
    assert step["challenge"] == "NEW_PASSWORD_REQUIRED" and step["session"]
    done = api.http.post(
        "/admin/api/session/challenge",
        headers={"Content-Type": "application/json"},
        body=json.dumps(
            {
                "email": "new@shop.example",
                "session": step["session"],
                "challenge": step["challenge"],
                "answer": "A-new-password-2",
            }
        ),
    )
    assert done.status_code == 200
    assert json.loads(done.body)["role"] == "support"


# --- Tokens that must be refused


def _refused(api: Client, headers: dict[str, str]) -> None:
    answer = api.http.get("/admin/api/me", headers=headers)
    assert answer.status_code == 401, answer.body
    assert json.loads(answer.body)["error"] == "unauthorized"


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def test_no_token_and_not_a_token_are_refused(api: Client) -> None:
    _refused(api, {})
    _refused(api, {"Authorization": "Bearer"})
    _refused(api, {"Authorization": "Basic b3duZXI6cGFzcw=="})
    _refused(api, {"Authorization": "Bearer not.a.jwt"})


def test_a_token_with_letters_outside_ascii_is_refused_with_a_401(api: Client, pool: Pool) -> None:
    header, payload, signature = pool.id_token(OWNER).split(".")
    # Letters base64url never holds, in each part: str.isalnum() takes them, base64 and ASCII encoding do not.
    _refused(api, bearer(f"{header}.{payload}é.{signature}"))
    _refused(api, bearer(f"{header}.{payload}.{signature}é"))
    _refused(api, bearer(f"{header}é.{payload}.{signature}"))
    _refused(api, bearer("é.é.é"))


def test_a_forged_token_is_refused(api: Client, pool: Pool) -> None:
    token = pool.id_token(HELPER)
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["cognito:groups"] = ["owner"]
    _refused(api, bearer(f"{header}.{_b64(claims)}.{signature}"))
    # alg "none" with no signature.
    _refused(api, bearer(f"{_b64({'alg': 'none', 'kid': 'dummy'})}.{_b64(claims)}."))
    # HS256 keyed with the public modulus (the classic algorithm confusion).
    _refused(api, bearer(f"{_b64({'alg': 'HS256', 'kid': 'dummy'})}.{_b64(claims)}.{signature}"))


def test_a_token_signed_by_another_key_is_refused(api: Client, pool: Pool) -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    token = pool.id_token(OWNER)
    header, payload, _ = token.split(".")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signature = key.sign(f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    _refused(api, bearer(f"{header}.{payload}.{base64.urlsafe_b64encode(signature).decode().rstrip('=')}"))


def test_an_expired_token_is_refused(api: Client, pool: Pool, clock: FixedClock) -> None:
    token = pool.id_token(OWNER)
    assert get(api, "/admin/api/me", token).status_code == 200
    clock.advance(3600 + 120)  # moto's id tokens live an hour; the check allows a minute's skew
    _refused(api, bearer(token))


def test_another_pools_token_is_refused(api: Client, pool: Pool) -> None:
    other = staff_pool(pool.cognito, name="another-shop-staff")
    other.add(OWNER, "owner")
    _refused(api, bearer(other.id_token(OWNER)))


def test_taking_a_member_out_of_a_group_takes_effect_on_their_next_request(api: Client, pool: Pool) -> None:
    token = pool.id_token(OWNER)
    assert json.loads(get(api, "/admin/api/me", token).body)["role"] == "owner"
    # The token still says "owner" for the rest of its hour; the pool says otherwise now.
    pool.cognito.admin_remove_user_from_group(UserPoolId=pool.pool_id, Username=OWNER, GroupName="owner")
    pool.cognito.admin_add_user_to_group(UserPoolId=pool.pool_id, Username=OWNER, GroupName="support")
    assert json.loads(get(api, "/admin/api/me", token).body)["role"] == "support"
    refused = post(api, "/admin/api/contacts/export", token, {"contact": "+447400100000"})
    assert (refused.status_code, json.loads(refused.body)["error"]) == (403, "forbidden")
    pool.cognito.admin_remove_user_from_group(UserPoolId=pool.pool_id, Username=OWNER, GroupName="support")
    _refused(api, bearer(token))
    pool.cognito.admin_delete_user(UserPoolId=pool.pool_id, Username=OWNER)
    _refused(api, bearer(token))


def test_a_stage_without_a_staff_pool_refuses_every_token(
    session: Any, clock: FixedClock, env: dict[str, str], pool: Pool
) -> None:
    services = Services(settings_from_env(env), aws=Aws(REGION, session=session), clock=clock, model=FakeBedrock())
    with app_client(services) as client:
        _refused(client, bearer(pool.id_token(OWNER)))


# --- Reads


def test_demand_lists_the_most_wanted_with_new_joins_per_day(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    s = scene(admin_services, clock, units=1, people=3)
    admin_services.tables.catalog.sync_product(
        s.sku, {"name": "Walnut dining chair"}, now=clock.now(), created=False, out_of_stock=True
    )
    token = pool.id_token(HELPER)
    body = json.loads(get(api, "/admin/api/demand", token).body)
    [row] = body["skus"]
    advice = "A stock level of 1 tells the first confirmed person in line, one per unit; 3 tells all 3 confirmed."
    assert row == {
        "sku": s.sku,
        "name": "Walnut dining chair",
        "waiting": 3,
        "unconfirmed": 0,
        "new_in_period": 3,
        "threshold": 1,
        "notify_from": 1,
        "restock_hint": 3,
        "advice": advice,
    }
    assert len(body["daily"]) == 30 and sum(d["new"] for d in body["daily"]) == 3
    assert body["daily"][-1]["new"] == 3
    csv = get(api, "/admin/api/demand?format=csv", token)
    assert csv.headers["Content-Type"].startswith("text/csv")
    assert csv.body.decode().splitlines() == [
        "sku,name,waiting,unconfirmed,new_in_period,threshold,notify_from,restock_hint,advice",
        f'{s.sku},Walnut dining chair,3,0,3,1,1,3,"{advice}"',
    ]


def test_demand_counts_unconfirmed_email_places_apart_and_advises_by_the_threshold(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    sku = "LAMP-BRASS"
    catalog = admin_services.tables.catalog
    catalog.upsert(sku, {"name": "Brass lamp", "threshold": 2})
    catalog.sync_product(sku, {"name": "Brass lamp"}, now=clock.now(), created=False, out_of_stock=True)
    now = clock.now()
    # Two SMS places, then two email places that never confirmed; one of each joined 40 days ago, before the period.
    add_request(admin_services, sku, "+447400200000", joined(-40 * 86400, now, "a"), now)
    add_request(admin_services, sku, "old@example.com", joined(-40 * 86400 + 1, now, "b"), now, unconfirmed=True)
    add_request(admin_services, sku, "new@example.com", joined(-3600, now, "c"), now, unconfirmed=True)
    add_request(admin_services, sku, "+447400200001", joined(-60, now, "d"), now)
    token = pool.id_token(HELPER)
    [row] = json.loads(get(api, "/admin/api/demand", token).body)["skus"]
    # The place unconfirmed for 40 days is past any confirmation window: only the recent one is counted.
    assert (row["waiting"], row["unconfirmed"], row["new_in_period"]) == (4, 1, 2)
    assert (row["threshold"], row["notify_from"], row["restock_hint"]) == (2, 2, 3)
    assert row["advice"] == (
        "Below 2 units nobody is told (the notify threshold is 2). A stock level of 2 tells the first 2 confirmed "
        "people in line, one per unit; 3 tells all 3 confirmed. 1 unconfirmed email place is passed over until "
        "confirmed."
    )
    # A period of long ago is read apart from the recent days, and still counts today's unconfirmed place.
    old = json.loads(get(api, "/admin/api/demand?from=2020-01-01&to=2020-01-31", token).body)
    assert [(r["new_in_period"], r["unconfirmed"]) for r in old["skus"]] == [(0, 1)]
    # The waiting list marks the unconfirmed place and says why people behind it are told first.
    entries = json.loads(get(api, f"/admin/api/waiting/{sku}", token).body)["entries"]
    assert [(e["position"], e["unconfirmed"]) for e in entries] == [(1, False), (2, True), (3, True), (4, False)]
    assert entries[0]["note"] is None
    assert entries[2]["note"].startswith("An unconfirmed place is passed over at a restock until its email address")
    lines = get(api, f"/admin/api/waiting/{sku}?format=csv", token).body.decode().splitlines()
    assert lines[0] == "position,contact,channel,state,unconfirmed,joined_at,action"
    assert lines[2].split(",")[4] == "True"
    explained = json.loads(post(api, "/admin/api/contacts/explain", token, {"contact": "new@example.com"}).body)
    assert explained["places"] == [{"sku": sku, "state": "waiting", "position": 3, "unconfirmed": True}]


def test_demand_refuses_a_malformed_period(api: Client, pool: Pool) -> None:
    token = pool.id_token(HELPER)
    for query in ("from=2026-13-01", "from=2026-02-01&to=2026-01-01", "from=2020-01-01&to=2026-01-01", "to=yesterday"):
        answer = get(api, f"/admin/api/demand?{query}", token)
        assert answer.status_code == 400, query
        assert json.loads(answer.body)["error"] == "invalid_period"


def test_restocks_show_the_funnel_revenue_and_conversion_by_channel(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    s = sold_one(admin_services, clock)
    admin_services.tables.catalog.table.update_item(
        Key={"sku": s.sku},
        UpdateExpression="SET price = :p, currency = :c",
        ExpressionAttributeValues={":p": "249.50", ":c": "GBP"},
    )
    token = pool.id_token(HELPER)
    answer = get(api, "/admin/api/restocks", token)
    assert answer.status_code == 200, answer.body
    body = json.loads(answer.body)
    [row] = body["restocks"]
    assert {k: row[k] for k in ("restock_id", "units", "notified", "held", "bought", "lapsed", "expired")} == {
        "restock_id": s.restock.restock_id,
        "units": 2,
        "notified": 2,
        "held": 1,
        "bought": 1,
        "lapsed": 1,
        "expired": 0,
    }
    assert row["sold_out_seconds"] is None  # one of two units sold
    assert (row["revenue"], row["currency"]) == ("249.50", "GBP")
    assert body["by_channel"] == [{"channel": "sms", "notified": 2, "bought": 1, "rate": 0.5}]
    one = json.loads(get(api, f"/admin/api/restocks/{s.restock.restock_id}", token).body)
    assert one["funnel"] == [
        {"stage": "notified", "count": 2},
        {"stage": "held", "count": 1},
        {"stage": "bought", "count": 1},
    ]
    assert get(api, "/admin/api/restocks/no-such-restock", token).status_code == 404
    lines = get(api, "/admin/api/restocks?format=csv", token).body.decode().splitlines()
    assert lines[0].startswith("restock_id,sku,name,opened_at,units,notified,held,bought,lapsed,expired")
    assert len(lines) == 2


def test_the_waiting_list_is_masked_paged_and_a_row_can_be_removed(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    from tests.builders import add_many_requests

    admin_services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    add_many_requests(admin_services, "LAMP", 60, clock.now())
    token = pool.id_token(HELPER)
    first = json.loads(get(api, "/admin/api/waiting/LAMP", token).body)
    assert [e["position"] for e in first["entries"]] == list(range(1, 51))
    assert first["next"]
    assert all("•" in e["contact"] and e["action"] == "remove" for e in first["entries"])
    second = json.loads(get(api, f"/admin/api/waiting/LAMP?cursor={first['next']}", token).body)
    assert [e["position"] for e in second["entries"]] == list(range(51, 61))
    assert second["next"] is None
    ref = first["entries"][0]["ref"]
    assert json.loads(post(api, "/admin/api/waiting/LAMP/remove", token, {"ref": ref}).body) == {"status": "removed"}
    again = post(api, "/admin/api/waiting/LAMP/remove", token, {"ref": ref})
    assert again.status_code == 404
    assert get(api, "/admin/api/waiting/LAMP?cursor=nonsense!", token).status_code == 400
    assert get(api, "/admin/api/waiting/NOT-A-SKU", token).status_code == 404
    [fact] = [f for f in staff_facts(admin_services) if f["action"] == "remove"]
    assert (fact["staff_email"], fact["staff_role"], fact["product"]) == (HELPER, "support", "LAMP")
    assert get(api, "/admin/api/waiting/LAMP?format=csv", token).body.decode().splitlines()[0] == (
        "position,contact,channel,state,unconfirmed,joined_at,action"
    )


def test_operations_show_dead_letters_alarms_and_spend_and_redrive_them(
    api: Client, admin_services: Services, pool: Pool
) -> None:
    sqs = admin_services.aws.sqs
    dlq = sqs.get_queue_url(QueueName="bisn-jobs-dlq")["QueueUrl"]
    for i in range(3):
        sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"n": i}))
    dead_event = OutboundEvent(event_id="evt_1", type="bought", sku="CHAIR-WALNUT", occurred="2026-12-04T10:00:00Z")
    sqs.send_message(
        QueueUrl=sqs.get_queue_url(QueueName="bisn-events-dlq")["QueueUrl"], MessageBody=dead_event.to_body()
    )
    admin_services.aws.cloudwatch.put_metric_alarm(
        AlarmName="bisn-jobs-dead-letters",
        MetricName="ApproximateNumberOfMessagesVisible",
        Namespace="AWS/SQS",
        Statistic="Maximum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=0,
        ComparisonOperator="GreaterThanThreshold",
    )
    admin_services.aws.cloudwatch.set_alarm_state(
        AlarmName="bisn-jobs-dead-letters", StateValue="ALARM", StateReason="three dead letters"
    )
    admin_services.aws.sns.set_sms_attributes(attributes={"MonthlySpendLimit": "20"})
    token = pool.id_token(HELPER)
    body = json.loads(get(api, "/admin/api/operations", token).body)
    assert body["queues"] == [
        {"name": "bisn-jobs-dlq", "dlq_depth": 3},
        {"name": "bisn-ses-feedback-dlq", "dlq_depth": 0},
        {"name": "bisn-events-dlq", "dlq_depth": 1},
    ]
    assert body["alarms"] == [{"name": "bisn-jobs-dead-letters", "state": "ALARM"}]
    assert body["sms_spend"] == {"month_usd": 0.0, "limit_usd": 20.0}
    assert (body["sends_failed"], body["undeliverable"]) == (0, 0)
    moved = json.loads(post(api, "/admin/api/operations/redrive", token, {"queue": "bisn-jobs-dlq"}).body)
    assert moved["moved"] == 3
    assert post(api, "/admin/api/operations/redrive", token, {"queue": "bisn-jobs"}).status_code == 400
    [fact] = [f for f in staff_facts(admin_services) if f["action"] == "redrive"]
    assert (fact["staff_email"], fact["moved"]) == (HELPER, 3)
    # The outbound events' dead letters: listed (and left there), then moved back to the events queue.
    dead = json.loads(get(api, "/admin/api/operations/events", token).body)
    assert (dead["queue"], dead["waiting"]) == ("bisn-events-dlq", 1)
    assert dead["events"][0] | {"queued_at": None} == {
        "event_id": "evt_1",
        "readable": True,
        "type": "bought",
        "sku": "CHAIR-WALNUT",
        "occurred": "2026-12-04T10:00:00Z",
        "destination": "webhook",
        "queued_at": None,
    }
    assert "evt_1" in get(api, "/admin/api/operations/events?format=csv", token).body.decode()
    moved = json.loads(post(api, "/admin/api/operations/redrive", token, {"queue": "bisn-events-dlq"}).body)
    assert moved["moved"] == 1
    facts = [f for f in staff_facts(admin_services) if f["action"] == "redrive"]
    # Both redrives are written at the same moment of the test clock, so their facts may come back in either order.
    assert sorted((f["queue"], f["staff_email"]) for f in facts) == [
        ("bisn-events-dlq", HELPER),
        ("bisn-jobs-dlq", HELPER),
    ]


# --- Support actions and roles


def test_explain_tells_every_decision_with_the_contact_masked(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    s = scene(admin_services, clock, units=1, people=2)
    admin_services.notifier.handle(Job(s.sku, s.restock.restock_id, s.restock.restock_ts), lambda: 60_000)
    token = pool.id_token(HELPER)
    answer = post(api, "/admin/api/contacts/explain", token, {"contact": "07400 100001"})
    body = json.loads(answer.body)
    assert "+447400100001" not in answer.body.decode()
    assert body["opted_out"] is False
    assert body["places"] == [{"sku": s.sku, "state": "waiting", "position": 2, "unconfirmed": False}]
    [decision] = body["decisions"]
    assert "behind_cap" in decision["what"] and "1 notice(s) went to people ahead" in decision["why"]
    [fact] = [f for f in staff_facts(admin_services) if f["action"] == "explain"]
    assert fact["contact_key"] == key_of(admin_services, "+447400100001")
    assert "+447400100001" not in json.dumps(fact, default=str)


def test_support_may_opt_out_but_not_export_or_forget(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    s = scene(admin_services, clock, units=1, people=1)
    token = pool.id_token(HELPER)
    assert json.loads(post(api, "/admin/api/contacts/optout", token, {"contact": "+447400100000"}).body) == {
        "status": "opted_out"
    }
    assert admin_services.tables.optout.get(key_of(admin_services, "+447400100000")) is not None
    assert s.waiting_count() == 0
    for action, body in (("export", {}), ("forget", {"confirm": True})):
        refused = post(api, f"/admin/api/contacts/{action}", token, {"contact": "+447400100000", **body})
        assert refused.status_code == 403
        assert json.loads(refused.body)["error"] == "forbidden"
    assert [f["action"] for f in staff_facts(admin_services)] == ["optout"]


def test_the_owner_exports_then_forgets_with_a_confirm_step(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    scene(admin_services, clock, units=1, people=1)
    token = pool.id_token(OWNER)
    exported = json.loads(post(api, "/admin/api/contacts/export", token, {"contact": "07400 100000"}).body)
    assert exported["contact"] == "+447400100000"
    assert exported["data"]["requests"][0]["contact"] == "+447400100000"
    unconfirmed = post(api, "/admin/api/contacts/forget", token, {"contact": "+447400100000"})
    assert unconfirmed.status_code == 400
    assert json.loads(unconfirmed.body)["error"] == "confirm_required"
    done = post(api, "/admin/api/contacts/forget", token, {"contact": "+447400100000", "confirm": True})
    assert json.loads(done.body) == {"status": "forgotten"}
    key = key_of(admin_services, "+447400100000")
    assert admin_services.exits.places(key) == []
    assert admin_services.tables.audit.for_contact(key) == []
    facts = staff_facts(admin_services)
    assert sorted((f["action"], f["staff_email"]) for f in facts) == [("export", OWNER), ("forget", OWNER)]


def test_bad_bodies_are_clear_4xx(api: Client, pool: Pool) -> None:
    token = pool.id_token(OWNER)
    for body in ({}, {"contact": ""}, {"contact": 5}, {"contact": "x" * 400}):
        answer = post(api, "/admin/api/contacts/explain", token, body)
        assert answer.status_code == 400, body
    answer = api.http.post("/admin/api/contacts/explain", headers=bearer(token), body="{not json")
    assert answer.status_code == 400
    unreadable = post(api, "/admin/api/contacts/explain", token, {"contact": "not a contact"})
    assert unreadable.status_code == 400


def test_opt_in_texts_the_link_to_the_person_never_to_staff_and_its_use_names_who_started_it(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    token = pool.id_token(HELPER)
    key = key_of(admin_services, "+447400100000")
    not_out = post(api, "/admin/api/contacts/optin", token, {"contact": "+447400100000"})
    assert (not_out.status_code, json.loads(not_out.body)["error"]) == (409, "not_opted_out")
    post(api, "/admin/api/contacts/optout", token, {"contact": "+447400100000"})
    started = post(api, "/admin/api/contacts/optin", token, {"contact": "07400 100000", "lang": "de"})
    assert started.status_code == 200, started.body
    answer = json.loads(started.body)
    # A support member could otherwise press the link themselves: it goes to the contact, and only there.
    assert "link" not in answer and "/optin/" not in started.body.decode()
    assert (answer["status"], answer["channel"], answer["sms_stop"]) == ("link_sent", "sms", False)
    assert post(api, "/admin/api/contacts/optin", token, {"contact": "+447400100000"}).status_code == 429
    assert sms_outbox() == [], "the notifier sends it, as every message"
    drain(admin_services)
    [(number, text)] = sms_outbox()
    assert number == "+447400100000" and "wieder einzuschalten" in text
    found = re.search(r"http://127\.0\.0\.1:8000(/optin/\S+)", text)
    assert found, text
    path = found.group(1)
    page = api.http.get(path)
    assert page.status_code == 200 and b"Yes, send me messages again" in page.body
    assert admin_services.tables.optout.get(key) is not None  # opening the link changes nothing
    form = {"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://127.0.0.1:8000"}
    done = api.http.post(path, headers=form, body="")
    assert done.status_code == 200, done.body
    assert admin_services.tables.optout.get(key) is None
    assert api.http.post(path, headers=form, body="").status_code == 410  # used once
    assert api.http.post(path[:-3] + "abc", headers=form, body="").status_code == 400
    # One instant on the test clock: the facts' order within it is their keys' random suffix.
    assert sorted(f["action"] for f in staff_facts(admin_services)) == ["optin", "optout"]
    facts = {f["kind"]: f for f in admin_services.tables.audit.for_sku("@optin")}
    assert {"optin_started", "optin_link_sent", "optin"} <= set(facts)
    assert facts["optin"]["started_by"] == HELPER and facts["optin"]["contact_key"] == key


def opt_in_after_opting_out(api: Client, admin_services: Services, pool: Pool) -> dict[str, Any]:
    """Staff opt ada@example.com out, then start her opt-in: the answer to the opt-in."""
    verify_sender(admin_services)
    token = pool.id_token(OWNER)
    post(api, "/admin/api/contacts/optout", token, {"contact": "ada@example.com"})
    answer: dict[str, Any] = json.loads(
        post(api, "/admin/api/contacts/optin", token, {"contact": "ada@example.com"}).body
    )
    return answer


def test_opt_in_emails_the_link_to_an_address(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    answer = opt_in_after_opting_out(api, admin_services, pool)
    assert answer["status"] == "link_sent" and "link" not in answer
    drain(admin_services)
    [email] = email_outbox()
    assert "ada@example.com" in email.destinations["ToAddresses"]
    assert re.search(r'href="http://127\.0\.0\.1:8000/optin/[^"]+"', str(email.body)), email.body


def test_a_bounce_that_arrives_before_the_opt_in_link_goes_stops_it(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    # The opt-out is read again just before the send: one that stopped being the person's own choice after staff
    # started the opt-in (a bounce now stands in its place) gets no link, and the refusal is recorded once.
    answer = opt_in_after_opting_out(api, admin_services, pool)
    assert answer["status"] == "link_sent"
    key = key_of(admin_services, "ada@example.com")
    admin_services.tables.optout.remove(key)
    admin_services.tables.optout.add(key, "bounce", clock.now())
    drain(admin_services)
    assert email_outbox() == []
    kinds = [f["kind"] for f in admin_services.tables.audit.for_sku("@optin")]
    assert "optin_link_sent" not in kinds
    [refused] = [f for f in admin_services.tables.audit.for_sku("@optin") if f["kind"] == "optin_refused"]
    assert refused["reason"] == "changed" and refused["contact_key"] == key
    assert admin_services.tables.optout.get(key) is not None, "the bounce stands"


@pytest.mark.parametrize("source", ["bounce", "complaint", "invalid_number"])
def test_opt_in_is_refused_when_the_opt_out_was_not_the_persons_choice(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool, source: str
) -> None:
    key = key_of(admin_services, "+447400100000")
    admin_services.tables.optout.add(key, source, clock.now())
    answer = post(api, "/admin/api/contacts/optin", pool.id_token(OWNER), {"contact": "+447400100000"})
    assert answer.status_code == 409
    body = json.loads(answer.body)
    assert body["error"] == "not_their_choice" and body["message"]
    drain(admin_services)
    assert sms_outbox() == [] and admin_services.tables.optout.get(key) is not None


def test_a_stage_without_a_staff_pool_has_no_dashboard_to_sign_in_to(services: Services) -> None:
    # The default stage sets no ADMIN_USER_POOL_ID / ADMIN_CLIENT_ID: sign-in is a clear 404, never a 5xx.
    with app_client(services) as client:
        body = json.dumps({"email": "owner@example.com", "password": PASSWORD})
        answer = client.http.post("/admin/api/session", headers={"Content-Type": "application/json"}, body=body)
        assert answer.status_code == 404
        assert json.loads(answer.body)["error"] == "no_dashboard"
        assert client.http.get("/admin/api/me").status_code == 401


# An address typed as the shopper gives it, whose places and opt-outs from before email taps were matched by mailbox
# are stored under the address lower-cased whole, not under its mailbox (adalovelace@gmail.com).
TYPED = "Ada.Lovelace+shop@gmail.com"
OLD_SPELLING = "ada.lovelace+shop@gmail.com"


def test_the_dashboard_finds_exports_and_forgets_a_place_stored_before_mailbox_matching(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool
) -> None:
    admin_services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    old = join_request(admin_services, "LAMP", OLD_SPELLING, clock.now())
    token = pool.id_token(OWNER)
    explained = json.loads(post(api, "/admin/api/contacts/explain", token, {"contact": TYPED}).body)
    assert explained["places"] == [{"sku": "LAMP", "state": "waiting", "position": 1, "unconfirmed": False}]
    exported = json.loads(post(api, "/admin/api/contacts/export", token, {"contact": TYPED}).body)
    assert [r["joined_ts"] for r in exported["data"]["requests"]] == [old.joined_ts]
    done = post(api, "/admin/api/contacts/forget", token, {"contact": TYPED, "confirm": True})
    assert json.loads(done.body) == {"status": "forgotten"}
    assert admin_services.exits.places(old.contact_key) == []
    assert admin_services.tables.requests.unique("LAMP", old.contact_key) is None


@pytest.mark.parametrize("mailbox_too", [False, True])
def test_opting_back_in_from_the_dashboard_lifts_an_opt_out_stored_before_mailbox_matching(
    api: Client, admin_services: Services, clock: FixedClock, pool: Pool, mailbox_too: bool
) -> None:
    verify_sender(admin_services)
    old_key = key_of(admin_services, OLD_SPELLING)
    mailbox = key_of(admin_services, "adalovelace@gmail.com")
    admin_services.tables.optout.add(old_key, "unsubscribe", clock.now())
    if mailbox_too:
        admin_services.tables.optout.add(mailbox, "admin", clock.now())
    started = post(api, "/admin/api/contacts/optin", pool.id_token(OWNER), {"contact": TYPED})
    assert started.status_code == 200, started.body
    drain(admin_services)
    [email] = email_outbox()
    found = re.search(r'href="http://127\.0\.0\.1:8000(/optin/[^"]+)"', str(email.body))
    assert found, email.body
    form = {"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://127.0.0.1:8000"}
    assert api.http.post(found.group(1), headers=form, body="").status_code == 200
    assert admin_services.tables.optout.get(old_key) is None
    assert admin_services.tables.optout.get(mailbox) is None


def test_staff_choose_what_the_widget_offers_for_a_product_sold_on_backorder(
    api: Client, admin_services: Services, pool: Pool
) -> None:
    # As catalogue sync writes it for a Shopify CONTINUE variant or a WooCommerce product with backorders allowed.
    admin_services.tables.catalog.upsert("LAMP", {"name": "Brass lamp", "backorder": True})

    def tap(contact: str) -> Any:
        body = json.dumps({"sku": "LAMP", "channel": "email", "contact": contact})
        return api.http.post("/notify-me", headers={"Content-Type": "application/json"}, body=body)

    def refusal(contact: str) -> tuple[int, str, str, str]:
        answer = tap(contact)
        body = json.loads(answer.body)
        return answer.status_code, body["error"], body["reason"], body["note"]

    def shown() -> tuple[bool, str]:
        page = json.loads(get(api, "/admin/api/waiting/LAMP", token).body)
        return page["backorder"], page["backorder_offer"]

    # Nothing chosen yet: the store sells it, so the widget offers nothing (an empty note hides it).
    assert refusal("ada@example.com") == (409, "on_backorder", "none", "")
    token = pool.id_token(HELPER)
    assert shown() == (True, "none")  # the dashboard's waiting list reads the state and the choice
    chosen = post(api, "/admin/api/products/LAMP/backorder", token, {"offer": "preorder"})
    assert json.loads(chosen.body) == {
        "sku": "LAMP",
        "backorder": True,
        "offer": "preorder",
        "waiting_list_open": False,
    }
    assert refusal("ada@example.com") == (409, "on_backorder", "preorder", PREORDER_NOTE)
    assert shown() == (True, "preorder")
    opened = json.loads(post(api, "/admin/api/products/LAMP/backorder", token, {"offer": "notify"}).body)
    assert opened["waiting_list_open"] is True
    assert tap("ada@example.com").status_code == 202
    assert admin_services.tables.catalog.waiting("LAMP") == 1
    assert post(api, "/admin/api/products/LAMP/backorder", token, {"offer": "later"}).status_code == 400
    assert post(api, "/admin/api/products/NOT-A-SKU/backorder", token, {"offer": "none"}).status_code == 404
    facts = [f for f in staff_facts(admin_services) if f["action"] == "backorder_offer"]
    assert sorted((f["staff_email"], f["product"], f["offer"]) for f in facts) == [
        (HELPER, "LAMP", "notify"),
        (HELPER, "LAMP", "preorder"),
    ]
