"""The notifier against the emulator: fair order, an exact cap, the skips, and exactly-once under retries."""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from chalicelib.i18n import LANGUAGES
from chalicelib.link_ids import is_link_id
from chalicelib.messages.senders import EmailSender, Senders, SmsSender
from chalicelib.messages.sms import sms_segments
from chalicelib.metrics import (
    NOTICES_SENT,
    SEND_FAILURES,
    UNITS_OFFERABLE,
    UNITS_TOTAL,
    skip_metric,
)
from chalicelib.notifier import (
    AFTER_OFFER_COMMITTED,
    OFFER_BATCH,
    SendFailed,
    SkipReason,
    StopReason,
    UnknownRestock,
)
from chalicelib.queue.messages import Job
from chalicelib.tables.restocks import Restock
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from tests.builders import add_many_requests, add_request, add_restock, joined, key_of, make_offer
from tests.notices import (
    FlakySns,
    email_outbox,
    plenty,
    selling_the_chair,
    sms_outbox,
    told,
    waiting_by_sms,
)
from tests.support import CHAIR, CrashAt, InjectedCrash, queued_jobs, rebuilt

SKU = "CHAIR-WALNUT"


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    """The local stage's settings with send rates no test here waits on: these tests are about what the walk reads,
    writes and sends, and at the stage's 10 SMS a second a 300-unit restock would spend 30 s asleep. The rates
    themselves are tested in tests/unit/test_senders.py and, at the stage's own figures, test_last_look.py."""
    return {**env, "SMS_PER_SECOND": "1000", "EMAIL_PER_SECOND": "1000"}


@pytest.fixture
def shop(services: Services) -> Services:
    """A shop selling the chair, with its From address verified in SES."""
    return selling_the_chair(services, SKU)


def line_up(services: Services, clock: FixedClock, count: int, start: int = 0) -> list[str]:
    """`count` shoppers waiting for the chair by SMS, one second apart; their numbers in queue order."""
    return waiting_by_sms(services, SKU, clock.now(), count, start)


def refuse_sms(shop: Services, refusals: dict[str, int]) -> tuple[Services, FlakySns]:
    """The shop sending through an SMS provider that refuses these numbers so many times each, and the provider."""
    flaky = FlakySns(shop.aws.sns, refusals)
    senders = Senders(
        SmsSender(flaky), EmailSender(shop.aws.sesv2, shop.settings.ses_from), sms_per_second=50, email_per_second=50
    )
    return rebuilt(shop, senders=senders), flaky


def restock_item(services: Services, job: Job) -> Restock:
    restock = services.tables.restocks.get(job.sku, job.restock_ts)
    assert restock is not None
    return restock


def offers(services: Services, job: Job) -> list[dict[str, Any]]:
    rows = services.tables.reservations.table.scan()["Items"]
    return [r for r in rows if r["restock_id"] == job.restock_id]


def audit(services: Services, kind: str) -> list[dict[str, Any]]:
    return [fact for fact in services.tables.audit.for_sku(SKU) if fact["kind"] == kind]


def test_notices_go_oldest_first_with_ties_broken_by_the_suffix(shop: Services, clock: FixedClock) -> None:
    now = clock.now()
    for contact, stamp in [
        ("+447400900003", joined(5, now, "00000b")),
        ("+447400900002", joined(5, now, "00000a")),
        ("+447400900004", joined(5, now, "00000c")),
        ("+447400900001", joined(4, now, "ffffff")),
    ]:
        add_request(shop, SKU, contact, stamp, now)
    job = add_restock(shop, SKU, 3, now)

    outcome = shop.notifier.handle(job, plenty)

    assert outcome.notices == 3
    assert sorted(told()) == ["+447400900001", "+447400900002", "+447400900003"]
    sent = sorted(audit(shop, "notice_sent"), key=lambda f: int(f["position"]))
    assert [(int(f["position"]), f["contact_key"]) for f in sent] == [
        (1, key_of(shop, "+447400900001")),
        (2, key_of(shop, "+447400900002")),
        (3, key_of(shop, "+447400900003")),
    ]
    assert shop.tables.requests.get(SKU, joined(5, now, "00000c")).state == "waiting"


def test_the_cap_is_exact(shop: Services, clock: FixedClock) -> None:
    numbers = line_up(shop, clock, 10)
    job = add_restock(shop, SKU, 4, clock.now())

    outcome = shop.notifier.handle(job, plenty)

    assert outcome.notices == 4 and outcome.stopped == StopReason.UNITS_EXHAUSTED
    assert sorted(told()) == numbers[:4]
    assert int(restock_item(shop, job).units_offerable) == 0
    assert int(restock_item(shop, job).units_available) == 4
    rows = offers(shop, job)
    assert len(rows) == 4 and {r["state"] for r in rows} == {"offered"}
    assert all(int(r["due_at"]) == int(clock.now()) + CHAIR["offer_window_s"] for r in rows)
    states = Counter(r.state for r in shop.tables.requests.queue(SKU))
    assert states == {"offered": 4, "waiting": 6}
    assert outcome.metrics[NOTICES_SENT] == 4
    assert outcome.metrics[UNITS_TOTAL] == 4 and outcome.metrics[UNITS_OFFERABLE] == 4


def test_every_skip_reason_is_audited_and_counted(shop: Services, clock: FixedClock) -> None:
    now = clock.now()
    job = add_restock(shop, SKU, 5, now)
    other = add_restock(shop, SKU, 1, now - 86400, webhook_id="wh_old")
    add_request(shop, SKU, "+447400800001", joined(1, now), now)
    shop.tables.optout.add(key_of(shop, "+447400800001"), "stop", now)
    add_request(shop, SKU, "+447400800002", joined(2, now), now, last_notified_restock=job.restock_id)
    add_request(shop, SKU, "+447400800003", joined(3, now), now, state="converted")
    add_request(
        shop, SKU, "+447400800004", joined(4, now), now, state="offered", last_notified_restock=other.restock_id
    )
    add_request(
        shop, SKU, "+447400800005", joined(5, now), now, state="reserved", last_notified_restock=other.restock_id
    )
    add_request(shop, SKU, "+447400800006", joined(6, now), now)
    add_request(shop, SKU, "Ada@Example.com", joined(7, now), now, name="Ada")

    outcome = shop.notifier.handle(job, plenty)

    assert outcome.notices == 2 and outcome.stopped == StopReason.QUEUE_END
    assert told() == ["+447400800006"]
    assert [m.destinations["ToAddresses"] for m in email_outbox()] == [["Ada@Example.com"]]
    expected = {
        key_of(shop, "+447400800001"): SkipReason.OPTED_OUT,
        key_of(shop, "+447400800002"): SkipReason.ALREADY_NOTIFIED,
        key_of(shop, "+447400800003"): SkipReason.CONVERTED,
        key_of(shop, "+447400800004"): SkipReason.HOLDING_OFFER,
        key_of(shop, "+447400800005"): SkipReason.HOLDING_UNIT,
    }
    skipped = {f["contact_key"]: f["reason"] for f in audit(shop, "notice_skipped")}
    assert skipped == expected
    assert all(f["restock_id"] == job.restock_id for f in audit(shop, "notice_skipped"))
    assert outcome.skipped == Counter(expected.values())
    for reason in expected.values():
        assert outcome.metrics[skip_metric(reason)] == 1
    assert int(restock_item(shop, job).units_offerable) == 3


def test_an_opted_out_contact_is_never_messaged_even_while_queued(shop: Services, clock: FixedClock) -> None:
    [number] = line_up(shop, clock, 1)
    shop.tables.optout.add(key_of(shop, number), "unsubscribe", clock.now())
    outcome = shop.notifier.handle(add_restock(shop, SKU, 3, clock.now()), plenty)
    assert outcome.notices == 0 and told() == []


def test_the_same_job_delivered_twice_sends_nothing_new(shop: Services, clock: FixedClock) -> None:
    line_up(shop, clock, 5)
    job = add_restock(shop, SKU, 8, clock.now())  # units to spare, so the second delivery walks the whole queue
    shop.notifier.handle(job, plenty)
    before = list(told())

    again = shop.notifier.handle(job, plenty)

    assert again.notices == 0
    assert told() == before and len(before) == 5
    # It resumes where the first left off (the cursor on the restock): nobody is passed over, or audited, twice.
    assert again.skipped == {}
    assert not audit(shop, "notice_skipped")
    assert int(restock_item(shop, job).units_offerable) == 3
    assert len(offers(shop, job)) == 5


def test_a_redelivered_job_after_the_last_unit_reads_nothing_more(shop: Services, clock: FixedClock) -> None:
    line_up(shop, clock, 5)
    job = add_restock(shop, SKU, 3, clock.now())
    shop.notifier.handle(job, plenty)
    again = shop.notifier.handle(job, plenty)
    assert again.stopped == StopReason.NO_UNITS and again.notices == 0 and len(told()) == 3


def test_two_invocations_of_one_job_at_once_tell_each_person_once(shop: Services, clock: FixedClock) -> None:
    numbers = line_up(shop, clock, 30)
    job = add_restock(shop, SKU, 20, clock.now())
    notifier = shop.notifier
    barrier = threading.Barrier(2)
    outcomes = []

    def invoke() -> None:
        barrier.wait()
        outcomes.append(notifier.handle(job, plenty))

    threads = [threading.Thread(target=invoke) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(o.notices for o in outcomes) == 20
    assert sorted(told()) == numbers[:20]
    assert len(offers(shop, job)) == 20
    assert int(restock_item(shop, job).units_offerable) == 0


def test_a_failed_send_is_rolled_back_and_the_retry_sends_it_exactly_once(shop: Services, clock: FixedClock) -> None:
    numbers = line_up(shop, clock, 4)
    shop, flaky = refuse_sms(shop, {numbers[1]: 1})
    job = add_restock(shop, SKU, 3, clock.now())
    failing = shop.tables.requests.get(SKU, joined(1, clock.now()))

    with pytest.raises(SendFailed):
        shop.notifier.handle(job, plenty)

    assert flaky.refused == [numbers[1]]
    assert numbers[1] not in told()
    after = shop.tables.requests.get(SKU, failing.joined_ts)
    assert after.state == "waiting"
    assert after.last_notified_restock is None and after.offer_token is None
    assert all(r["request_joined_ts"] != failing.joined_ts for r in offers(shop, job))
    assert int(restock_item(shop, job).units_offerable) == 3 - len(offers(shop, job))
    [failure] = audit(shop, "send_failed")
    assert failure["contact_key"] == key_of(shop, numbers[1]) and failure["error"] == "AuthorizationError"
    assert failure["rolled_back"] is True

    retry = shop.notifier.handle(job, plenty)

    assert Counter(told()) == Counter(numbers[:3])
    assert retry.stopped == StopReason.UNITS_EXHAUSTED
    assert int(restock_item(shop, job).units_offerable) == 0
    assert len(offers(shop, job)) == 3


def test_a_failed_send_is_counted_in_the_emf_metrics(
    shop: Services, clock: FixedClock, capsys: pytest.CaptureFixture[str]
) -> None:
    numbers = line_up(shop, clock, 1)
    shop = rebuilt(shop, settings=replace(shop.settings, metrics_namespace="BackInStockTest", metrics_enabled=True))
    shop, _ = refuse_sms(shop, {numbers[0]: 1})
    job = add_restock(shop, SKU, 2, clock.now())
    with pytest.raises(SendFailed):
        shop.notifier.handle(job, plenty)

    [line] = capsys.readouterr().out.splitlines()
    document = json.loads(line)
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "BackInStockTest"
    assert document[SEND_FAILURES] == [1.0] and NOTICES_SENT not in document
    assert document["restock_id"] == job.restock_id
    assert int(restock_item(shop, job).units_offerable) == 2 and offers(shop, job) == []


def test_a_crash_between_transaction_and_send_sends_nothing_and_leaves_the_offers_to_lapse(
    shop: Services, clock: FixedClock
) -> None:
    numbers = line_up(shop, clock, 3)
    job = add_restock(shop, SKU, 2, clock.now())
    crashing = Services(
        shop.settings, aws=shop.aws, clock=clock, faults=CrashAt(AFTER_OFFER_COMMITTED), model=FakeBedrock()
    )

    with pytest.raises(InjectedCrash):
        crashing.notifier.handle(job, plenty)

    # Both units went in one batch: both offers stand, nobody was told, and the sweep will lapse them.
    assert told() == []
    rows = sorted(offers(shop, job), key=lambda r: r["request_joined_ts"])
    assert [r["request_joined_ts"] for r in rows] == [joined(0, clock.now()), joined(1, clock.now())]
    assert all(r["state"] == "offered" and int(r["due_at"]) == int(r["offer_expires_at"]) for r in rows)
    for i in (0, 1):
        request = shop.tables.requests.get(SKU, joined(i, clock.now()))
        assert request.state == "offered" and request.last_notified_restock == job.restock_id
    assert int(restock_item(shop, job).units_offerable) == 0

    # A unit comes back: the retry does not send the crashed offers, it tells the next person.
    shop.tables.restocks.table.update_item(
        Key={"sku": SKU, "restock_ts": job.restock_ts},
        UpdateExpression="ADD units_offerable :one",
        ExpressionAttributeValues={":one": 1},
    )
    retry = crashing.notifier.handle(job, plenty)

    assert told() == [numbers[2]]
    # The cursor moved past the crashed offers in their own transaction: the retry resumes after them.
    assert not retry.skipped
    assert int(restock_item(shop, job).units_offerable) == 0


class AfterFirstCommit:
    """A fault hook that runs `action` once, right after the notifier's first batch of offers commits."""

    def __init__(self, action: Any) -> None:
        self.action = action
        self.done = False

    def __call__(self, point: str) -> None:
        if point == AFTER_OFFER_COMMITTED and not self.done:
            self.done = True
            self.action()


def tables_of(items: list[dict[str, Any]]) -> set[str]:
    """The tables a transaction's items name."""
    return {next(iter(item.values()))["TableName"] for item in items}


class WireLog:
    """The DynamoDB requests one client sends, as they go on the wire, by operation."""

    def __init__(self, services: Services, *operations: str) -> None:
        self.events = services.tables.requests.table.meta.client.meta.events
        self.operations = operations
        self.bodies: dict[str, list[dict[str, Any]]] = {op: [] for op in operations}

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.bodies[model.name].append(json.loads(params["body"]))

    def transactions(self) -> list[list[dict[str, Any]]]:
        """The items of each TransactWriteItems sent."""
        return [body["TransactItems"] for body in self.bodies["TransactWriteItems"]]

    def __enter__(self) -> WireLog:
        for op in self.operations:
            self.events.register(f"before-call.dynamodb.{op}", self._record)
        return self

    def __exit__(self, *_: object) -> None:
        for op in self.operations:
            self.events.unregister(f"before-call.dynamodb.{op}", self._record)


def test_offers_are_committed_a_batch_per_transaction(shop: Services, clock: FixedClock) -> None:
    numbers = line_up(shop, clock, 100)
    job = add_restock(shop, SKU, 100, clock.now())

    with WireLog(shop, "TransactWriteItems") as wire:
        outcome = shop.notifier.handle(job, plenty)

    transactions = [len(items) for items in wire.transactions() if shop.tables.reservations.name in tables_of(items)]
    assert outcome.notices == 100 and sorted(told()) == numbers
    assert len(transactions) == math.ceil(100 / OFFER_BATCH)
    assert transactions[0] == 2 * OFFER_BATCH + 1 and max(transactions) <= 100
    assert int(restock_item(shop, job).units_offerable) == 0
    sent = sorted(audit(shop, "notice_sent"), key=lambda f: int(f["position"]))
    assert [int(f["position"]) for f in sent] == list(range(1, 101))
    assert [f["contact_key"] for f in sent] == [key_of(shop, n) for n in numbers]


def test_a_big_restock_reads_pages_sized_to_the_units_and_records_notices_a_batch_at_a_time(
    shop: Services, clock: FixedClock
) -> None:
    add_many_requests(shop, SKU, 300, clock.now() - 300)
    job = add_restock(shop, SKU, 300, clock.now())

    with WireLog(shop, "Query", "TransactWriteItems") as wire:
        outcome = shop.notifier.handle(job, plenty)

    assert outcome.notices == 300
    queue_reads = [body["Limit"] for body in wire.bodies["Query"] if body["TableName"] == shop.tables.requests.name]
    # A short first page, so the first notices go out at once; then the units left, in one read.
    assert queue_reads[:2] == [100, 200] and len(queue_reads) <= 3
    fact_writes = [len(items) for items in wire.transactions() if tables_of(items) == {shop.tables.audit.name}]
    assert sum(fact_writes) == 300 and max(fact_writes) == 25 and len(fact_writes) == 12
    assert len(audit(shop, "notice_sent")) == 300


def test_notices_sent_before_a_failed_send_are_still_recorded(shop: Services, clock: FixedClock) -> None:
    numbers = line_up(shop, clock, 30)
    shop, _ = refuse_sms(shop, {numbers[29]: 1})
    job = add_restock(shop, SKU, 30, clock.now())

    with pytest.raises(SendFailed):
        shop.notifier.handle(job, plenty)

    recorded = {f["contact_key"] for f in audit(shop, "notice_sent")}
    assert recorded == {key_of(shop, n) for n in told()} and len(recorded) == 29


def test_a_request_told_meanwhile_by_another_notifier_is_skipped_and_the_rest_of_its_batch_offered(
    shop: Services, clock: FixedClock
) -> None:
    numbers = line_up(shop, clock, 60)
    job = add_restock(shop, SKU, 60, clock.now())
    late = OFFER_BATCH + 5  # in the second batch, read as waiting before the other notifier tells them
    restock = restock_item(shop, job)

    def other_notifier_tells_late() -> None:
        make_offer(shop, restock, shop.tables.requests.get(SKU, joined(late, clock.now())), clock.now())

    notifier = Services(
        shop.settings,
        aws=shop.aws,
        clock=clock,
        faults=AfterFirstCommit(other_notifier_tells_late),
        model=FakeBedrock(),
    ).notifier

    outcome = notifier.handle(job, plenty)

    expected = numbers[:late] + numbers[late + 1 :]
    assert outcome.notices == 59 and outcome.stopped == StopReason.QUEUE_END
    assert outcome.skipped == {SkipReason.ALREADY_NOTIFIED: 1}
    assert sorted(told()) == expected
    [skip] = audit(shop, "notice_skipped")
    assert skip["reason"] == SkipReason.ALREADY_NOTIFIED and skip["contact_key"] == key_of(shop, numbers[late])
    assert int(skip["position"]) == late + 1
    sent = sorted(audit(shop, "notice_sent"), key=lambda f: int(f["position"]))
    assert [f["contact_key"] for f in sent] == [key_of(shop, n) for n in expected]
    assert [int(f["position"]) for f in sent] == [p for p in range(1, 61) if p != late + 1]
    assert len(offers(shop, job)) == 60
    assert int(restock_item(shop, job).units_offerable) == 0


def test_a_batch_larger_than_the_units_left_offers_exactly_those_units_oldest_first(
    shop: Services, clock: FixedClock
) -> None:
    numbers = line_up(shop, clock, 40)
    job = add_restock(shop, SKU, 30, clock.now())

    def units_taken_elsewhere() -> None:
        # Three of the five units the walk still counts on go meanwhile (a fall in the shop's level, say).
        shop.tables.restocks.table.update_item(
            Key={"sku": SKU, "restock_ts": job.restock_ts},
            UpdateExpression="ADD units_offerable :minus",
            ExpressionAttributeValues={":minus": -3},
        )

    notifier = Services(
        shop.settings, aws=shop.aws, clock=clock, faults=AfterFirstCommit(units_taken_elsewhere), model=FakeBedrock()
    ).notifier

    outcome = notifier.handle(job, plenty)

    assert outcome.notices == OFFER_BATCH + 2 and outcome.stopped == StopReason.UNITS_EXHAUSTED
    assert sorted(told()) == numbers[: OFFER_BATCH + 2]
    assert int(restock_item(shop, job).units_offerable) == 0
    states = [r.state for r in shop.tables.requests.queue(SKU)]
    assert states == ["offered"] * (OFFER_BATCH + 2) + ["waiting"] * (40 - OFFER_BATCH - 2)
    assert not audit(shop, "notice_skipped")


def test_copy_is_written_once_per_restock_and_reused_by_top_ups(shop: Services, clock: FixedClock) -> None:
    bedrock = FakeBedrock()
    shop = rebuilt(shop, model=bedrock)
    numbers = line_up(shop, clock, 2)
    job = add_restock(shop, SKU, 1, clock.now())
    shop.notifier.handle(job, plenty)
    copies = restock_item(shop, job).copy
    assert copies is not None and set(copies) == set(LANGUAGES)  # every language from the one call
    copy = copies["en"]
    assert copy["source"] == "bedrock" and len(bedrock.calls) == 1

    # A unit comes back (a lapse): the sweep's top-up job tells the next person with the same words.
    shop.tables.restocks.table.update_item(
        Key={"sku": SKU, "restock_ts": job.restock_ts},
        UpdateExpression="ADD units_offerable :one",
        ExpressionAttributeValues={":one": 1},
    )
    shop.notifier.handle(Job(job.sku, job.restock_id, job.restock_ts, kind="topup"), plenty)

    assert len(bedrock.calls) == 1
    assert told() == numbers
    first, second = (text for _, text in sms_outbox())
    # The cached copy holds the placeholders; each message has the names put in.
    assert "{product}" in copy["sms"]
    prefix = f"{shop.settings.shop_name}: " + copy["sms"].split("{link}")[0].replace("{product}", "Walnut dining chair")
    assert first.startswith(prefix) and second.startswith(prefix)


def test_each_place_is_told_in_its_own_language_and_a_refused_language_alone_falls_back(
    shop: Services, clock: FixedClock
) -> None:
    # The model's German copy offers a discount (refused: that language gets its template); the others are used.
    answer = json.loads(FakeBedrock.written())
    answer["de"]["sms"] = "{product} ist wieder da, jetzt mit Rabatt: {link}"
    bedrock = FakeBedrock(text=json.dumps(answer))
    shop = rebuilt(shop, model=bedrock)
    now = clock.now()
    places = {"en": "+447400900001", "de": "+447400900002", "fr": "+447400900003"}
    for i, (lang, number) in enumerate(places.items()):
        add_request(shop, SKU, number, joined(i, now), now, lang=lang)
    job = add_restock(shop, SKU, 3, now)
    outcome = shop.notifier.handle(job, plenty)

    assert outcome.notices == 3 and len(bedrock.calls) == 1
    assert outcome.metrics["FallbackCopyUsed"] == 1  # German alone
    sent = dict(sms_outbox())
    assert "Good news: Walnut dining chair is back! Tap to hold one:" in sent[places["en"]]
    assert "Walnut dining chair ist wieder da. Sichern:" in sent[places["de"]]  # the German template
    assert "Rabatt" not in sent[places["de"]] and "Link gültig für 1 Stunde." in sent[places["de"]]
    assert "Walnut dining chair est de retour ! En garder un :" in sent[places["fr"]]
    assert "Lien valable 1 heure." in sent[places["fr"]]
    copies = restock_item(shop, job).copy
    assert copies is not None
    assert copies["de"]["source"] == "template" and copies["en"]["source"] == copies["fr"]["source"] == "bedrock"


def test_a_failing_model_still_sends_the_template(shop: Services, clock: FixedClock) -> None:
    shop = rebuilt(shop, model=FakeBedrock(error=TimeoutError("model took too long")))
    line_up(shop, clock, 1)
    job = add_restock(shop, SKU, 1, clock.now())
    outcome = shop.notifier.handle(job, plenty)
    # One fallback counted per language: the whole answer was lost.
    assert outcome.notices == 1 and outcome.metrics["FallbackCopyUsed"] == len(LANGUAGES)
    copies = restock_item(shop, job).copy
    assert copies is not None and all(copies[lang]["source"] == "template" for lang in LANGUAGES)
    [(_, text)] = sms_outbox()
    assert "Walnut dining chair is back" in text


@pytest.mark.parametrize("two_way", [False, True])
def test_each_sms_is_short_names_the_shop_and_window_has_its_own_links_and_an_honest_opt_out(
    shop: Services, clock: FixedClock, two_way: bool
) -> None:
    shop = rebuilt(shop, settings=replace(shop.settings, sms_two_way=two_way))
    numbers = line_up(shop, clock, 2)
    job = add_restock(shop, SKU, 2, clock.now())
    shop.notifier.handle(job, plenty)

    rows = {r["contact_key"]: r for r in offers(shop, job)}
    base = shop.settings.public_base_url
    for number, text in sms_outbox():
        assert number in numbers
        lines = text.split("\n")
        assert lines[0].startswith(f"{shop.settings.shop_name}: ")
        assert "Link valid for 1 hour." in lines  # the product's offer window
        if two_way:
            assert lines[-1] == "Reply STOP to opt out"
            manage = lines[-2].removeprefix(f"Manage: {base}/m/")
        else:
            assert "STOP" not in text  # no reply reaches a one-way sender: the manage link is the opt-out
            # "Stop texts" opens their page on its stop form (?stop).
            assert lines[-1].endswith("?stop")
            manage = lines[-1].removeprefix(f"Stop texts: {base}/m/").removesuffix("?stop")
        assert sms_segments(text) <= 2
        # Both links are short random ids: the offer row's own id, and the person's manage id in the opt-out table.
        reserve = text.split(f"{base}/r/")[1].split()[0]
        assert reserve == rows[key_of(shop, number)]["token_id"] and is_link_id(reserve)
        assert is_link_id(manage) and shop.manage.read_token(manage) == key_of(shop, number)


def test_an_email_carries_its_reserve_manage_and_unsubscribe_links(shop: Services, clock: FixedClock) -> None:
    add_request(shop, SKU, "ada@example.com", joined(0, clock.now()), clock.now(), name="Ada")
    job = add_restock(shop, SKU, 1, clock.now())
    shop.notifier.handle(job, plenty)

    [message] = email_outbox()
    assert message.source == shop.settings.ses_from
    assert message.destinations == {"ToAddresses": ["ada@example.com"]}
    assert message.subject == "Walnut dining chair is back in stock"
    base = shop.settings.public_base_url
    [row] = offers(shop, job)
    # The reserve link is short (the row's own random id); the manage link stays signed (an email has room).
    reserve = message.body.split(f'href="{base}/r/')[1].split('"')[0]
    assert reserve == row["token_id"]
    unsubscribe = message.body.split(f'href="{base}/unsubscribe/')[1].split('"')[0]
    assert shop.tokens.read_unsubscribe(unsubscribe).value == key_of(shop, "ada@example.com")
    assert f'href="{base}/me/' in message.body
    assert "Hi Ada," in message.body
    [fact] = audit(shop, "notice_sent")
    assert fact["channel"] == "email" and fact["message_id"] == message.id and fact["position"] == 1


def test_a_closed_restock_tells_nobody(shop: Services, clock: FixedClock) -> None:
    line_up(shop, clock, 2)
    job = add_restock(shop, SKU, 2, clock.now(), state="closed")
    outcome = shop.notifier.handle(job, plenty)
    assert outcome.stopped == StopReason.RESTOCK_CLOSED and told() == []


def test_a_job_for_an_unknown_restock_fails_so_it_reaches_the_dead_letter_queue(shop: Services) -> None:
    with pytest.raises(UnknownRestock):
        shop.notifier.handle(Job(SKU, "rs_000000000000000000000000", "2026-01-01T00:00:00.000000Z#00000000"), plenty)


class AnswerLost:
    """An SMS provider that accepts chosen numbers and then loses the answer (a read timeout on the way back)."""

    def __init__(self, real: Any, lost: set[str]) -> None:
        self.real = real
        self.lost = set(lost)
        self.calls: list[str] = []

    def publish(self, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import ReadTimeoutError

        number = kwargs.get("PhoneNumber", "")
        self.calls.append(number)
        answer = dict(self.real.publish(**kwargs))
        if number in self.lost:
            raise ReadTimeoutError(endpoint_url="https://sns.eu-west-2.amazonaws.com/")
        return answer


def test_a_send_whose_answer_was_lost_is_kept_and_never_sent_again(shop: Services, clock: FixedClock) -> None:
    numbers = line_up(shop, clock, 3)
    provider = AnswerLost(shop.aws.sns, {numbers[1]})
    shop = rebuilt(
        shop,
        senders=Senders(
            SmsSender(provider),
            EmailSender(shop.aws.sesv2, shop.settings.ses_from),
            sms_per_second=50,
            email_per_second=50,
        ),
    )
    job = add_restock(shop, SKU, 3, clock.now())

    outcome = shop.notifier.handle(job, plenty)  # no failure: the job is done
    shop.notifier.handle(job, plenty)  # and a redelivery of it sends nothing more

    assert provider.calls.count(numbers[1]) == 1
    assert Counter(told()) == Counter(numbers)
    assert outcome.notices == 2
    row = next(r for r in offers(shop, job) if r["contact_key"] == key_of(shop, numbers[1]))
    assert row["state"] == "offered", "the link that may have reached the shopper still works"
    [fact] = audit(shop, "notice_unconfirmed")
    assert (fact["token_id"], fact["error"]) == (row["token_id"], "ReadTimeoutError")
    assert audit(shop, "send_failed") == []
    assert int(restock_item(shop, job).units_offerable) == 0


def test_someone_who_opts_out_after_their_offer_was_made_is_not_messaged(shop: Services, clock: FixedClock) -> None:
    numbers = line_up(shop, clock, 4)
    job = add_restock(shop, SKU, 3, clock.now())

    def unsubscribe_in_flight(point: str) -> None:
        if point == AFTER_OFFER_COMMITTED:
            # The shopper unsubscribes after the queue page was read, while their notice waits its turn.
            shop.optouts.opt_out(key_of(shop, numbers[1]), "unsubscribe")

    shop = rebuilt(shop, faults=unsubscribe_in_flight)
    shop.notifier.handle(job, plenty)
    assert numbers[1] not in told()
    for queued in queued_jobs(shop):  # the unit comes back, and its top-up tells the next person
        shop.notifier.handle(queued, plenty)
    assert Counter(told()) == Counter([numbers[0], numbers[2], numbers[3]])
