"""The support desk against the emulator: explain every reason, queue, demand, opt-outs, export, forget, DLQ."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from chalicelib.contacts import contact_key
from chalicelib.queue.messages import Job, to_body
from chalicelib.support_desk import (
    ALREADY_NOTIFIED,
    BEHIND_CAP,
    BOUGHT,
    HOLDING_VERDICT,
    IN_PROGRESS,
    NOT_ON_LIST,
    NOT_YET_JOINED,
    OPTED_OUT,
    TOLD,
    StillHolding,
)
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from support.lift import optout_remove
from tests.builders import join_request, put_restock
from tests.scenes import Scene, scene
from tests.support import CHAIR, queued_jobs

MINUTE = 60.0


def notify(s: Scene, restock: dict[str, Any], kind: str = "restock") -> None:
    s.services.notifier.handle(Job(s.sku, restock.restock_id, restock.restock_ts, kind=kind), lambda: 60_000)


def verdicts(services: Services, sku: str, contact: str) -> list[str]:
    return [r.verdict for r in services.desk.explain(sku, contact).restocks]


def test_explain_told_with_what_happened_next(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    notify(s, s.restock)
    token = s.request(0).offer_token
    clock.advance(MINUTE)
    s.tap(token)
    clock.advance(MINUTE)
    services.moves.convert(s.row(token), "order-7", clock.now())
    found = services.desk.explain(s.sku, "07400 100000")  # typed as the shopper would say it
    assert (found.state, found.place) == ("converted", None)
    [r] = found.restocks
    assert (r.verdict, r.position, r.channel) == (TOLD, 1, "sms")
    assert [f.split(" at ")[0] for f in r.follow_ups] == ["hold", "conversion"]


def test_explain_behind_the_cap(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    notify(s, s.restock)
    found = services.desk.explain(s.sku, s.requests[1].contact)
    assert found.place is not None and found.place.exact == 2
    [r] = found.restocks
    assert r.verdict == BEHIND_CAP
    assert "1 unit(s), 1 notice(s) went to people ahead" in r.detail


def test_explain_still_in_progress_while_units_are_left(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    assert verdicts(services, s.sku, s.requests[0].contact) == [IN_PROGRESS]


def test_explain_opted_out(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    services.optouts.opt_out(s.requests[1].contact_key, "stop")
    clock.advance(MINUTE)
    later = put_restock(services, s.sku, 1, clock.now(), webhook_id="wh_later")
    notify(s, later)
    found = services.desk.explain(s.sku, s.requests[1].contact)
    assert found.opted_out is not None and found.opted_out["source"] == "stop"
    assert found.state is None
    assert [r.verdict for r in found.restocks][-1] == OPTED_OUT
    assert any("left the list (stop)" in h for h in found.history)


def test_explain_opted_out_while_still_queued_comes_from_the_notifier(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    # Suppressed but the place not yet removed (a STOP the sync has not seen): the notifier skips them.
    services.tables.optout.add(s.requests[0].contact_key, "admin", clock.now())
    notify(s, s.restock)
    assert verdicts(services, s.sku, s.requests[0].contact) == [OPTED_OUT]


def test_explain_holding_a_unit_from_an_earlier_restock(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    notify(s, s.restock)
    s.tap(s.request(0).offer_token)
    clock.advance(MINUTE)
    second = put_restock(services, s.sku, 1, clock.now(), webhook_id="wh_second")
    notify(s, second)
    assert verdicts(services, s.sku, s.requests[0].contact) == [TOLD, HOLDING_VERDICT]
    assert verdicts(services, s.sku, s.requests[1].contact) == [BEHIND_CAP, TOLD]


def test_explain_bought_before_a_later_restock(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    notify(s, s.restock)
    token = s.request(0).offer_token
    s.tap(token)
    services.moves.convert(s.row(token), "order-9", clock.now())
    clock.advance(MINUTE)
    second = put_restock(services, s.sku, 1, clock.now(), webhook_id="wh_after_buying")
    notify(s, second)
    assert verdicts(services, s.sku, s.requests[0].contact) == [TOLD, BOUGHT]


def test_explain_told_then_lapsed_after_a_later_pass(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    notify(s, s.restock)
    clock.advance(2 * 3600)  # the link was never used: it lapses, and a top-up resumes at the restock's cursor
    services.sweep.run()
    [topup] = queued_jobs(services)
    notify(s, s.restock, kind=topup.kind)
    [r] = services.desk.explain(s.sku, s.requests[0].contact).restocks
    assert r.verdict == TOLD
    assert any(f.startswith("lapse at") for f in r.follow_ups)
    # The top-up started after them (they were settled for this restock), so it wrote no second fact about them.
    assert not any(f.startswith("later pass") for f in r.follow_ups)


def test_explain_already_notified_when_only_the_skip_is_on_record(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    # A notice whose own audit fact was never written (the send worked, the write after it failed).
    services.tables.audit.record(
        s.sku,
        "notice_skipped",
        clock.now(),
        restock_id=s.restock.restock_id,
        reason="already_notified",
        contact_key=s.requests[0].contact_key,
    )
    assert verdicts(services, s.sku, s.requests[0].contact) == [ALREADY_NOTIFIED]


def test_explain_not_yet_joined(services: Services, clock: FixedClock) -> None:
    services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    early = put_restock(services, "LAMP", 1, clock.now(), webhook_id="wh_early")
    clock.advance(MINUTE)
    join_request(services, "LAMP", "+447400100050", clock.now())
    found = services.desk.explain("LAMP", "+447400100050")
    assert [(r.restock_id, r.verdict) for r in found.restocks] == [(early.restock_id, NOT_YET_JOINED)]
    assert found.place is not None and found.place.exact == 1


def test_explain_not_on_the_list_after_leaving(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    services.exits.leave(s.request(1), reason="manage")
    clock.advance(MINUTE)
    later = put_restock(services, s.sku, 1, clock.now(), webhook_id="wh_after_leaving")
    notify(s, later)
    found = services.desk.explain(s.sku, s.requests[1].contact)
    assert [r.verdict for r in found.restocks][-1] == NOT_ON_LIST


def test_queue_lists_live_places_in_order_masked(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=3)
    s.offer(0)
    rows = services.desk.queue(s.sku)
    assert [(r.position, r.state) for r in rows] == [(1, "offered"), (2, "waiting"), (3, "waiting")]
    assert rows[0].contact == "+4474•••••000"
    assert all(r.contact not in {q.contact for q in s.requests} for r in rows)


def out_of_stock(services: Services, sku: str, name: str, clock: FixedClock) -> None:
    settings = {**CHAIR, "name": name}
    services.tables.catalog.sync_product(sku, settings, now=clock.now(), created=True, out_of_stock=None)


def ranking(services: Services) -> list[tuple[str, int]]:
    return [(r.sku, r.waiting) for r in services.desk.demand()]


def test_demand_ranking_follows_joins_serves_and_leaves(services: Services, clock: FixedClock) -> None:
    for sku, name in (("CHAIR", "Chair"), ("LAMP", "Lamp"), ("RUG", "Rug")):
        out_of_stock(services, sku, name, clock)

    def tap(sku: str, n: int) -> Any:
        return services.capture.capture("10.0.0.1", {"sku": sku, "channel": "sms", "contact": f"+4474001002{n:02d}"})

    for n in range(3):
        tap("LAMP", n)
    for n in range(2):
        tap("CHAIR", n)
    tap("RUG", 0)
    tap("LAMP", 0)  # a repeat tap keeps its place and counts once
    # Taps move only the waiting shards: the products listed show their shards' count at once; the index's own
    # order is rolled up by the sweep.
    services.sweep.run()
    assert ranking(services) == [("LAMP", 3), ("CHAIR", 2), ("RUG", 1)]
    # Two LAMP shoppers leave; one CHAIR shopper is served (told, holds, buys).
    for n in range(2):
        services.exits.leave_sku(services.desk.contact(f"+4474001002{n:02d}")[1], "LAMP", reason="manage")
    chair = put_restock(services, "CHAIR", 1, clock.now())
    services.notifier.handle(Job("CHAIR", chair.restock_id, chair.restock_ts), lambda: 60_000)
    [first] = [r for r in services.tables.requests.queue("CHAIR") if r.state == "offered"]
    services.holds.reserve(services.tokens.reserve(first.offer_token))
    services.moves.convert(services.tables.reservations.get(first.offer_token), "o-1", clock.now())
    services.sweep.run()
    assert sorted(ranking(services)) == [("CHAIR", 1), ("LAMP", 1), ("RUG", 1)]
    for n in range(1, 4):
        tap("RUG", n)
    services.sweep.run()
    assert ranking(services)[0] == ("RUG", 4)
    # Back in stock: it leaves the demand list (the index is sparse), whatever its count.
    services.tables.catalog.sync_product("RUG", {"name": "Rug"}, now=clock.now(), created=False, out_of_stock=False)
    assert "RUG" not in dict(ranking(services))


def test_optout_add_and_remove(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    result = services.desk.optout_add("07400 100000")
    assert result.newly and [e.sku for e in result.left] == [s.sku]
    assert services.tables.optout.get(s.requests[0].contact_key)["source"] == "admin"
    assert services.desk.optout_add("+447400100000").newly is False
    removal = optout_remove(services.desk, "+447400100000")
    assert (removal.removed, removal.sms_still_opted_out) == (True, False)
    assert services.tables.optout.get(s.requests[0].contact_key) is None
    # The emulator reports numbers ending in 99 as opted out at SNS (a STOP reply).
    services.desk.optout_add("+447400100099")
    assert optout_remove(services.desk, "+447400100099").sms_still_opted_out is True
    assert optout_remove(services.desk, "ada@example.com").sms_still_opted_out is None


def test_export_holds_everything_about_them(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    notify(s, s.restock)
    data = services.desk.export("+447400100000")
    assert data["contact"] == "+447400100000"
    assert [r["sku"] for r in data["requests"]] == [s.sku]
    assert [u["ref"] for u in data["uniqueness_items"]] == [s.requests[0].joined_ts]
    assert [o["state"] for o in data["offers_and_holds"]] == ["offered"]
    assert "notice_sent" in [f["kind"] for f in data["audit"]]
    assert data["opt_out"] is None
    json.dumps(data)  # JSON-ready


def everything_stored(session: boto3.session.Session) -> str:
    """Every item of every table, as text."""
    ddb = session.client("dynamodb")
    dump = []
    for name in ddb.list_tables()["TableNames"]:
        for page in ddb.get_paginator("scan").paginate(TableName=name):
            dump.append(json.dumps(page["Items"]))
    return "\n".join(dump)


@pytest.mark.parametrize("opted_out_first", [False, True])
def test_forget_leaves_no_personal_data_readable(
    session: boto3.session.Session, services: Services, clock: FixedClock, opted_out_first: bool
) -> None:
    s = scene(services, clock, units=1, people=2)
    services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    services.capture.capture("10.0.0.1", {"sku": "LAMP", "channel": "sms", "contact": "07400 100000", "name": "Ada"})
    services.capture.capture("10.0.0.1", {"sku": s.sku, "channel": "email", "contact": "Ada@Example.com"})
    notify(s, s.restock)  # a live offer to them, which must pass on
    if opted_out_first:
        services.tables.optout.add(s.requests[0].contact_key, "unsubscribe", clock.now())
    forms = ["+447400100000", "07400100000", "7400100000", "Ada@Example.com", "ada@example.com", "Ada"]
    assert any(f in everything_stored(session) for f in forms)
    phone = services.desk.forget("07400 100000")
    email = services.desk.forget("ada@example.com")
    stored = everything_stored(session)
    assert [f for f in forms if f in stored] == []
    assert (phone.requests_erased, phone.offers_released, email.requests_erased) == (2, 1, 1)
    assert phone.kept_optout is opted_out_first
    assert (services.tables.optout.get(s.requests[0].contact_key) is not None) is opted_out_first
    assert services.desk.export("+447400100000")["requests"] == []
    assert services.tables.requests.get(s.sku, s.requests[1].joined_ts).state == "waiting"
    [topup] = queued_jobs(services)
    assert topup.kind == "topup"


def test_forget_takes_their_keyed_hash_off_every_audit_fact_and_keeps_the_facts(
    services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=2)
    notify(s, s.restock)  # notice facts for the first person
    key, other = s.requests[0].contact_key, s.requests[1].contact_key
    named = services.tables.audit.for_contact(key)
    assert named, "the scene wrote facts naming them"
    facts_before = len(services.tables.audit.for_sku(s.sku))
    others_before = services.tables.audit.for_contact(other)

    report = services.desk.forget(s.requests[0].contact)

    # Every fact that named them, including the one the erasure itself wrote, no longer does.
    assert report.audit_facts_anonymised == len(named) + 1
    assert services.tables.audit.for_contact(key) == []
    assert key not in json.dumps(services.tables.audit.for_sku(s.sku), default=str)
    # The facts stay (the restock's story and other people's explanations are read from them).
    assert len(services.tables.audit.for_sku(s.sku)) == facts_before + 1
    assert services.tables.audit.for_contact(other) == others_before
    # A second run finds nothing left to change.
    assert services.desk.forget(s.requests[0].contact).audit_facts_anonymised == 0


def test_audit_facts_expire_after_the_retention(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    notify(s, s.restock)
    facts = services.tables.audit.for_sku(s.sku)
    assert facts
    retention = services.settings.audit_retention_days * 86400
    assert services.settings.audit_retention_days == 400
    assert all(int(f["ttl"]) == int(f["at"]) + retention for f in facts)


def test_forget_waits_for_a_hold_to_end(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    token = s.offer(0)
    s.tap(token)
    with pytest.raises(StillHolding):
        services.desk.forget(s.requests[0].contact)
    assert s.request(0).contact == s.requests[0].contact


def test_dlq_redrive_moves_dead_letters_back(services: Services) -> None:
    sqs = services.aws.sqs
    dlq = sqs.get_queue_url(QueueName=services.settings.dlq_name)["QueueUrl"]
    bodies = [to_body(Job("CHAIR", f"rs_{i}", "2026-01-01T00:00:00.000000Z#x", kind="topup")) for i in range(12)]
    for body in bodies:
        sqs.send_message(QueueUrl=dlq, MessageBody=body)
    report = services.desk.dlq_redrive(emulated=True)
    assert (report.method, report.waiting_before, report.moved) == ("receive-and-resend", 12, 12)
    assert sorted(to_body(j) for j in queued_jobs(services)) == sorted(bodies)
    assert sqs.receive_message(QueueUrl=dlq).get("Messages", []) == []


# Places and opt-outs stored before email taps were matched by mailbox carry the address lower-cased whole.
OLD_SPELLING = "ada.lovelace+shop@gmail.com"
TYPED = "Ada.Lovelace+shop@gmail.com"


def test_a_place_stored_before_mailbox_matching_is_explained_exported_and_forgotten(
    session: boto3.session.Session, services: Services, clock: FixedClock, chair: str
) -> None:
    old = join_request(services, chair, OLD_SPELLING, clock.now())
    assert old.contact_key == contact_key(OLD_SPELLING, services.hash_key)
    services.tables.optout.add(contact_key("adalovelace@gmail.com", services.hash_key), "unsubscribe", clock.now())
    desk = services.desk

    found = desk.explain(chair, TYPED)
    assert (found.state, found.joined_ts, found.contact_key) == ("waiting", old.joined_ts, old.contact_key)
    assert found.opted_out is not None and found.opted_out["source"] == "unsubscribe"

    data = desk.export(TYPED)
    assert [r["joined_ts"] for r in data["requests"]] == [old.joined_ts]
    assert [u["ref"] for u in data["uniqueness_items"]] == [old.joined_ts]
    assert data["contact_keys"] == [contact_key("adalovelace@gmail.com", services.hash_key), old.contact_key]
    assert [o["source"] for o in data["opt_outs"]] == ["unsubscribe"]

    report = desk.forget(TYPED)
    assert (report.requests_erased, report.uniqueness_items_erased, report.remaining) == (1, 1, 0)
    assert report.kept_optout
    assert OLD_SPELLING not in everything_stored(session)
    assert services.tables.requests.unique(chair, old.contact_key) is None
    assert services.tables.audit.for_contact(old.contact_key) == []
    assert desk.export(TYPED)["requests"] == []


def test_opting_out_and_lifting_by_hand_act_under_both_keys(services: Services, clock: FixedClock, chair: str) -> None:
    old = join_request(services, chair, OLD_SPELLING, clock.now())
    mailbox = contact_key("adalovelace@gmail.com", services.hash_key)
    result = services.desk.optout_add(TYPED)
    assert result.newly and [e.sku for e in result.left] == [chair]
    assert [p for p in services.exits.places(old.contact_key) if p.live] == []
    assert services.tables.optout.get(mailbox) is not None
    assert services.tables.optout.get(old.contact_key) is not None
    assert optout_remove(services.desk, TYPED).removed
    assert services.tables.optout.get(mailbox) is None
    assert services.tables.optout.get(old.contact_key) is None
