"""The notifier when the provider refuses: one recipient it never takes does not hold up the restock, and a
throttle is back-pressure, never a failed job."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError

from chalicelib.dispatch import MAX_REFUSALS_IN_A_ROW
from chalicelib.messages.senders import THROTTLE_ATTEMPTS, EmailSender, Senders, SmsSender
from chalicelib.metrics import NOTICES_UNDELIVERABLE, SENDS_THROTTLED, skip_metric
from chalicelib.notifier import (
    THROTTLED_RETRY_S,
    SendFailed,
    SkipReason,
    skip_reason,
)
from chalicelib.queue.messages import Job
from chalicelib.support_desk import UNDELIVERABLE
from chalicelib.tables.restocks import Restock
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_request, add_restock, joined, key_of
from tests.notices import (
    BAD_NUMBER,
    OPTED_OUT,
    THROTTLED,
    FlakySns,
    drain,
    email_outbox,
    plenty,
    selling_the_chair,
    told,
    waiting_by_sms,
)
from tests.support import queued_jobs, rebuilt

SKU = "CHAIR-WALNUT"


@pytest.fixture
def shop(services: Services) -> Services:
    """A shop selling the chair, with its From address verified in SES."""
    return selling_the_chair(services, SKU)


def line_up(services: Services, clock: FixedClock, count: int, start: int = 0) -> list[str]:
    """`count` shoppers waiting for the chair by SMS, one second apart; their numbers in queue order."""
    return waiting_by_sms(services, SKU, clock.now(), count, start)


def over(shop: Services, sns: Any = None, sesv2: Any = None) -> Services:
    """The shop sending through these provider doubles, with the sender's back-off waits not slept."""
    senders = Senders(
        SmsSender(sns or shop.aws.sns),
        EmailSender(sesv2 or shop.aws.sesv2, shop.settings.ses_from),
        sms_per_second=1000,
        email_per_second=1000,
        sleep=lambda _s: None,
    )
    return rebuilt(shop, senders=senders)


def audit(services: Services, kind: str) -> list[dict[str, Any]]:
    return [fact for fact in services.tables.audit.for_sku(SKU) if fact["kind"] == kind]


def restock(services: Services, job: Job) -> Restock:
    row = services.tables.restocks.get(job.sku, job.restock_ts)
    assert row is not None
    return row


def offers(services: Services, job: Job) -> list[dict[str, Any]]:
    rows = services.tables.reservations.table.scan()["Items"]
    return [r for r in rows if r["restock_id"] == job.restock_id]


def test_a_number_sns_refuses_is_passed_over_and_its_unit_goes_to_the_next_person(
    shop: Services, clock: FixedClock
) -> None:
    numbers = line_up(shop, clock, 5)
    flaky = FlakySns(shop.aws.sns, {numbers[0]: 99}, BAD_NUMBER)
    shop = over(shop, sns=flaky)
    job = add_restock(shop, SKU, 3, clock.now())

    shop.notifier.handle(job, plenty)  # the job succeeds
    drain(shop)  # and any top-up it queued for the unit that came back

    assert flaky.refused == [numbers[0]], "asked once: a refusal of the recipient is never asked again"
    assert Counter(told()) == Counter(numbers[1:4]), "everyone reachable is told, in order, up to the units"
    refused = shop.tables.requests.get(SKU, joined(0, clock.now()))
    assert refused is not None
    # The place is kept for later restocks, waiting, and marked for this restock so nothing offers it again.
    assert refused.state == "waiting" and refused.offer_token is None
    assert refused.last_notified_restock == job.restock_id
    assert refused.undeliverable_restock == job.restock_id
    assert all(r["request_joined_ts"] != refused.joined_ts for r in offers(shop, job))
    assert len(offers(shop, job)) == 3 and restock(shop, job).units_offerable == 0
    [fact] = audit(shop, "notice_undeliverable")
    assert fact["contact_key"] == key_of(shop, numbers[0]) and fact["error"] == "InvalidParameter"
    assert fact["rolled_back"] is True and int(fact["position"]) == 1
    assert not audit(shop, "send_failed")
    # "Why was I not told?": the support desk says the provider refused the contact, and what became of the unit.
    [verdict] = shop.desk.explain(SKU, numbers[0]).restocks
    assert verdict.verdict == UNDELIVERABLE and verdict.position == 1
    assert "InvalidParameter" in verdict.detail and "next person" in verdict.detail


def test_a_redelivered_job_neither_resends_nor_reoffers_the_undeliverable_person(
    shop: Services, clock: FixedClock
) -> None:
    numbers = line_up(shop, clock, 3)
    flaky = FlakySns(shop.aws.sns, {numbers[0]: 99}, OPTED_OUT)
    shop = over(shop, sns=flaky)
    job = add_restock(shop, SKU, 3, clock.now())
    shop.notifier.handle(job, plenty)
    drain(shop)
    assert Counter(told()) == Counter(numbers[1:])

    again = shop.notifier.handle(job, plenty)

    assert flaky.refused == [numbers[0]]
    assert Counter(told()) == Counter(numbers[1:])
    # It resumes at the restock's cursor, past them: refused for this restock for good, they are not read again.
    assert not again.skipped
    assert not again.metrics.get(skip_metric(SkipReason.UNDELIVERABLE))
    assert len(audit(shop, "notice_undeliverable")) == 1
    # A later restock may tell them: the mark is for this restock only.
    refused = shop.tables.requests.get(SKU, joined(0, clock.now()))
    assert refused is not None and skip_reason(refused, "a-later-restock", set()) is None


def test_two_hundred_units_for_two_hundred_people_with_the_oldest_refused_tell_the_other_199(
    shop: Services, clock: FixedClock
) -> None:
    numbers = line_up(shop, clock, 200)
    flaky = FlakySns(shop.aws.sns, {numbers[0]: 99}, BAD_NUMBER)
    shop = over(shop, sns=flaky)
    job = add_restock(shop, SKU, 200, clock.now())

    first = shop.notifier.handle(job, plenty)  # no exception: the job succeeds
    deliveries = drain(shop)  # with the top-up it may have queued for the unit that came back

    assert all(d.error is None for d in deliveries), "no job fails for a refused recipient"
    assert Counter(told()) == Counter(numbers[1:])
    assert flaky.refused == [numbers[0]]
    assert first.metrics.get(NOTICES_UNDELIVERABLE) == 1


def test_an_email_address_ses_rejects_is_passed_over(shop: Services, clock: FixedClock) -> None:
    now = clock.now()
    add_request(shop, SKU, "nobody@example.com", joined(0, now), now)
    add_request(shop, SKU, "ada@example.com", joined(1, now), now)

    class RejectingSes:
        """SES v2 refusing one recipient with MessageRejected (SendEmail's documented error, botocore's sesv2
        service model; the message is the one the SES sandbox gives an unverified recipient)."""

        def send_email(self, **kwargs: Any) -> dict[str, Any]:
            if kwargs["Destination"]["ToAddresses"] == ["nobody@example.com"]:
                error = {"Code": "MessageRejected", "Message": "Email address is not verified."}
                raise ClientError({"Error": error}, "SendEmail")
            return dict(shop.aws.sesv2.send_email(**kwargs))

    shop = over(shop, sesv2=RejectingSes())
    job = add_restock(shop, SKU, 1, now)

    shop.notifier.handle(job, plenty)
    drain(shop)

    assert [m.destinations["ToAddresses"] for m in email_outbox()] == [["ada@example.com"]]
    [fact] = audit(shop, "notice_undeliverable")
    assert fact["error"] == "MessageRejected" and fact["channel"] == "email"


def test_a_run_of_refusals_with_nothing_sent_is_taken_for_our_problem_and_fails_the_job(
    shop: Services, clock: FixedClock
) -> None:
    count = MAX_REFUSALS_IN_A_ROW + 2
    numbers = line_up(shop, clock, count)
    flaky = FlakySns(shop.aws.sns, dict.fromkeys(numbers, 99), OPTED_OUT)
    shop = over(shop, sns=flaky)
    job = add_restock(shop, SKU, count, clock.now())

    with pytest.raises(SendFailed):
        shop.notifier.handle(job, plenty)

    assert len(audit(shop, "notice_undeliverable")) == MAX_REFUSALS_IN_A_ROW
    assert len(audit(shop, "send_failed")) == 2
    assert not told()


def test_a_throttle_that_clears_is_asked_again_and_everyone_is_told_once(shop: Services, clock: FixedClock) -> None:
    numbers = line_up(shop, clock, 3)
    flaky = FlakySns(shop.aws.sns, {numbers[1]: THROTTLE_ATTEMPTS - 1}, THROTTLED)
    shop = over(shop, sns=flaky)
    job = add_restock(shop, SKU, 3, clock.now())

    outcome = shop.notifier.handle(job, plenty)

    assert outcome.notices == 3
    assert Counter(told()) == Counter(numbers)
    assert not audit(shop, "send_failed") and not audit(shop, "send_throttled")


def test_a_throttle_that_lasts_is_back_pressure_the_job_succeeds_and_a_later_one_tells_them(
    shop: Services, clock: FixedClock
) -> None:
    numbers = line_up(shop, clock, 3)
    flaky = FlakySns(shop.aws.sns, {numbers[0]: THROTTLE_ATTEMPTS}, THROTTLED)
    shop = over(shop, sns=flaky)
    job = add_restock(shop, SKU, 3, clock.now())
    queued_jobs(shop)  # the restock's own job is handled below

    outcome = shop.notifier.handle(job, plenty)  # no exception: the job succeeds

    assert outcome.metrics.get(SENDS_THROTTLED) == 1
    assert numbers[0] not in told()
    first = shop.tables.requests.get(SKU, joined(0, clock.now()))
    assert first is not None and first.state == "waiting" and first.last_notified_restock is None
    [fact] = audit(shop, "send_throttled")
    assert fact["error"] == "Throttled" and fact["rolled_back"] is True
    attributes = shop.aws.sqs.get_queue_attributes(QueueUrl=shop.jobs.url, AttributeNames=["All"])["Attributes"]
    assert int(attributes["ApproximateNumberOfMessagesDelayed"]) == 1, f"a top-up {THROTTLED_RETRY_S} s later"

    shop.notifier.handle(Job(SKU, job.restock_id, job.restock_ts, kind="topup"), plenty)

    assert Counter(told()) == Counter(numbers)
    assert restock(shop, job).units_offerable == 0
