"""SES feedback against the emulator: a hard bounce or a complaint opts the address out everywhere, once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.feedback import AUDIT_PARTITION
from chalicelib.tables.requests import Request
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock, key_of
from tests.notices import email_outbox, plenty, sms_outbox, two_lists
from tests.ses_events import bounce, complaint, delivery, via_sns

SKU = "CHAIR-WALNUT"
LAMP = "LAMP-BRASS"
ADA = "ada@example.com"


@pytest.fixture
def shop(services: Services, clock: FixedClock) -> Services:
    """A shop selling two products; Ada waits for both by email, ahead of a shopper waiting by SMS for the chair."""
    return two_lists(services, clock.now(), first=ADA, then="+447400900001")


def facts(services: Services, kind: str) -> list[dict[str, Any]]:
    return [f for f in services.tables.audit.for_sku(AUDIT_PARTITION) if f["kind"] == kind]


def places_of(services: Services, contact: str) -> list[Request]:
    return services.exits.places(key_of(services, contact))


def test_a_hard_bounce_suppresses_the_address_and_takes_it_off_every_list(shop: Services, clock: FixedClock) -> None:
    report = shop.feedback.handle([via_sns(bounce(ADA))])

    assert report.counts == {"hard_bounce": 1}
    record = shop.tables.optout.get(key_of(shop, ADA))
    assert record is not None and record["source"] == "bounce"
    assert places_of(shop, ADA) == []
    leaves = [f for sku in (SKU, LAMP) for f in shop.tables.audit.for_sku(sku) if f["kind"] == "leave"]
    assert {(f["sku"], f["reason"]) for f in leaves} == {(SKU, "bounce"), (LAMP, "bounce")}
    (fact,) = facts(shop, "email_hard_bounce")
    assert fact["contact_key"] == key_of(shop, ADA) and fact["suppressed"] is True
    assert ADA not in str(fact), "the address itself is never stored"

    # A restock now tells the next person only, and a new tap by the address is acknowledged but not queued.
    job = add_restock(shop, SKU, 2, clock.now())
    shop.notifier.handle(job, plenty)
    assert [number for number, _ in sms_outbox()] == ["+447400900001"]
    assert email_outbox() == []
    outcome = shop.capture.capture("192.0.2.1", {"sku": SKU, "channel": "email", "contact": "Ada@Example.com"})
    assert outcome.status == "acknowledged"


def test_a_complaint_suppresses_the_address_with_its_own_source(shop: Services) -> None:
    assert shop.feedback.handle([via_sns(complaint(ADA))]).counts == {"complaint": 1}
    assert shop.tables.optout.get(key_of(shop, ADA))["source"] == "complaint"
    assert places_of(shop, ADA) == []
    assert len(facts(shop, "email_complaint")) == 1


@pytest.mark.parametrize(("bounce_type", "subtype"), [("Transient", "MailboxFull"), ("Undetermined", "Undetermined")])
def test_a_soft_bounce_is_counted_and_suppresses_nothing(shop: Services, bounce_type: str, subtype: str) -> None:
    report = shop.feedback.handle([via_sns(bounce(ADA, bounce_type, subtype))])
    assert report.counts == {"soft_bounce": 1}
    assert shop.tables.optout.get(key_of(shop, ADA)) is None
    assert len(places_of(shop, ADA)) == 2
    (fact,) = facts(shop, "email_soft_bounce")
    assert (fact["bounce_type"], fact["bounce_subtype"], fact["suppressed"]) == (bounce_type, subtype, False)


def test_a_delivery_is_counted_and_changes_nothing_else(shop: Services) -> None:
    assert shop.feedback.handle([via_sns(delivery(ADA))]).counts == {"delivery": 1}
    assert shop.tables.optout.get(key_of(shop, ADA)) is None
    assert len(places_of(shop, ADA)) == 2


@pytest.mark.parametrize("record", [bounce(ADA), complaint(ADA), bounce(ADA, "Transient", "General"), delivery(ADA)])
def test_a_redelivered_event_is_acted_on_once(shop: Services, clock: FixedClock, record: dict[str, Any]) -> None:
    body = via_sns(record)
    first = shop.feedback.handle([body])
    clock.advance(30)
    again = shop.feedback.handle([body])
    assert again.counts == {"repeated": 1}
    assert sum(first.counts.values()) == 1
    assert len(shop.tables.audit.for_sku(AUDIT_PARTITION)) == (0 if record["eventType"] == "Delivery" else 1)
    suppressed = shop.tables.optout.get(key_of(shop, ADA))
    if suppressed is not None:
        assert int(suppressed["at"]) == int(clock.now()) - 30, "the first suppression is kept"


def test_a_bounce_for_another_email_of_the_same_address_counts_again(shop: Services) -> None:
    shop.feedback.handle([via_sns(bounce(ADA, "Transient", "General", message_id="m-1"))])
    report = shop.feedback.handle([via_sns(bounce(ADA, "Transient", "General", message_id="m-2"))])
    assert report.counts == {"soft_bounce": 1}
    assert len(facts(shop, "email_soft_bounce")) == 2


def test_unreadable_messages_are_dropped_and_the_rest_of_the_batch_is_acted_on(
    shop: Services, caplog: pytest.LogCaptureFixture
) -> None:
    odd = bounce("not an address", "Permanent", "General")
    report = shop.feedback.handle(["{oops", via_sns(odd), via_sns(complaint(ADA))])
    assert report.counts == {"dropped": 2, "complaint": 1}
    assert shop.tables.optout.get(key_of(shop, ADA))["source"] == "complaint"
    assert "not an address" not in caplog.text and ADA not in caplog.text


def test_the_feedback_function_reads_its_queue_messages(client: Client, shop: Services) -> None:
    event = client.events.generate_sqs_event(message_bodies=[via_sns(bounce(ADA))], queue_name="bisn-ses-feedback")
    client.lambda_.invoke("feedback", event)
    assert shop.tables.optout.get(key_of(shop, ADA))["source"] == "bounce"


def test_an_event_published_to_the_feedback_topic_reaches_the_queue_and_is_acted_on(shop: Services) -> None:
    # The local stack subscribes the queue to the topic from infra/template.json; SNS wraps the record as it would.
    sns, sqs = shop.aws.sns, shop.aws.sqs
    (topic,) = [t["TopicArn"] for t in sns.list_topics()["Topics"] if t["TopicArn"].endswith(":bisn-ses-feedback")]
    sns.publish(TopicArn=topic, Message=json.dumps(complaint(ADA)))
    url = sqs.get_queue_url(QueueName=shop.settings.feedback_queue_name)["QueueUrl"]
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert shop.feedback.handle([message["Body"]]).counts == {"complaint": 1}
    assert shop.tables.optout.get(key_of(shop, ADA))["source"] == "complaint"


def test_the_local_stack_has_the_configuration_set_every_email_goes_out_under(shop: Services) -> None:
    names = shop.aws.sesv2.list_configuration_sets()["ConfigurationSets"]
    assert shop.settings.ses_configuration_set in names
