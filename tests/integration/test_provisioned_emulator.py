"""The emulator each test gets (tests/emulator.py) answers as one started and provisioned for that test alone."""

from __future__ import annotations

import json

import boto3
from moto import mock_aws

from devstack.provision import provision
from tests.emulator import ProvisionedEmulator
from tests.notices import email_outbox, sms_outbox
from tests.support import REGION

# Set by AWS when a resource is made, so never the same on two emulators however alike they are (a stream's label
# and ARN name the moment it was enabled).
VOLATILE = {
    "CreationDateTime",
    "TableId",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "LatestStreamLabel",
    "LatestStreamArn",
}


def _stable(value: object) -> object:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE and k != "ResponseMetadata"}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def observed(session: boto3.session.Session) -> dict[str, object]:
    """Everything a test can read of the emulator's tables, queues, topics, outboxes and the other services."""
    ddb, sqs, sns = session.client("dynamodb"), session.client("sqs"), session.client("sns")
    sesv2 = session.client("sesv2")
    names = sorted(ddb.list_tables()["TableNames"])
    urls = sorted(sqs.list_queues().get("QueueUrls", []))
    return _stable(
        {
            "tables": {name: ddb.describe_table(TableName=name)["Table"] for name in names},
            "ttl": {name: ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"] for name in names},
            "items": {name: ddb.scan(TableName=name)["Items"] for name in names},
            "queues": {
                url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"] for url in urls
            },
            "topics": sorted(t["TopicArn"] for t in sns.list_topics()["Topics"]),
            # A subscription's ARN ends in an id of its own: the topic and endpoint say which it is.
            "subscriptions": sorted(
                (s["TopicArn"], s["Protocol"], s["Endpoint"]) for s in sns.list_subscriptions()["Subscriptions"]
            ),
            "opted_out": sorted(sns.list_phone_numbers_opted_out()["phoneNumbers"]),
            "sms_attributes": sns.get_sms_attributes()["attributes"],
            "sms_outbox": sms_outbox(),
            "email_outbox": len(email_outbox()),
            "identities": sesv2.list_email_identities()["EmailIdentities"],
            "configuration_sets": sesv2.list_configuration_sets()["ConfigurationSets"],
            "user_pools": session.client("cognito-idp").list_user_pools(MaxResults=60)["UserPools"],
            "secrets": session.client("secretsmanager").list_secrets()["SecretList"],
            "metrics": session.client("cloudwatch").list_metrics()["Metrics"],
        }
    )


def dirty(session: boto3.session.Session) -> None:
    """Write something everywhere a test might, including new resources and changed settings."""
    ddb, sqs, sns = session.client("dynamodb"), session.client("sqs"), session.client("sns")
    for name in ddb.list_tables()["TableNames"]:
        keys = ddb.describe_table(TableName=name)["Table"]["KeySchema"]
        ddb.put_item(TableName=name, Item={k["AttributeName"]: {"S": "x"} for k in keys})
    ddb.create_table(
        TableName="extra",
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    for url in sqs.list_queues()["QueueUrls"]:
        sqs.send_message(QueueUrl=url, MessageBody="left behind")
    sqs.set_queue_attributes(QueueUrl=sqs.list_queues()["QueueUrls"][0], Attributes={"VisibilityTimeout": "7"})
    sqs.create_queue(QueueName="extra")
    sns.create_topic(Name="extra")
    sns.publish(PhoneNumber="+447400123456", Message="left behind")
    sns.opt_in_phone_number(phoneNumber=sorted(sns.list_phone_numbers_opted_out()["phoneNumbers"])[0])
    sns.set_sms_attributes(attributes={"DefaultSMSType": "Promotional"})
    sesv2 = session.client("sesv2")
    sesv2.create_email_identity(EmailIdentity="shop.example")
    sesv2.send_email(
        FromEmailAddress="orders@shop.example",
        Destination={"ToAddresses": ["ada@example.com"]},
        Content={"Simple": {"Subject": {"Data": "left"}, "Body": {"Text": {"Data": "behind"}}}},
    )
    session.client("cognito-idp").create_user_pool(PoolName="extra")
    session.client("secretsmanager").create_secret(Name="extra", SecretString="x")
    session.client("cloudwatch").put_metric_data(Namespace="extra", MetricData=[{"MetricName": "m", "Value": 1.0}])


def test_each_test_gets_the_emulator_as_newly_provisioned_whatever_the_last_one_did(
    provisioned_emulator: ProvisionedEmulator,
) -> None:
    with mock_aws():
        alone = boto3.session.Session(region_name=REGION)
        provision(alone)
        expected = observed(alone)
    with provisioned_emulator.fresh() as first:
        assert observed(first) == expected
        dirty(first)
        assert observed(first) != expected
    with provisioned_emulator.fresh() as second:
        assert observed(second) == expected


def test_between_tests_nothing_is_left_for_one_that_starts_its_own_emulator(
    provisioned_emulator: ProvisionedEmulator,
) -> None:
    with provisioned_emulator.fresh() as session:
        dirty(session)
    with mock_aws():
        mine = boto3.session.Session(region_name=REGION)
        assert mine.client("dynamodb").list_tables()["TableNames"] == []
        assert mine.client("sqs").list_queues().get("QueueUrls", []) == []
        assert sms_outbox() == [] and email_outbox() == []


def test_a_hook_one_test_puts_on_its_session_is_not_on_the_next_ones(provisioned_emulator: ProvisionedEmulator) -> None:
    seen: list[str] = []
    with provisioned_emulator.fresh() as first:
        first.events.register("before-call", lambda model, **_: seen.append(model.name))
        first.client("sqs").list_queues()
    with provisioned_emulator.fresh() as second:
        second.client("sqs").list_queues()
    assert seen == ["ListQueues"]


def test_the_services_of_the_emulator_each_test_gets_still_reach_one_another(
    provisioned_emulator: ProvisionedEmulator,
) -> None:
    # Backends hold one another (SES v2 records its sends in SES's outbox; SNS delivers to SQS): each test's copy
    # must be wired to the copies it was given, or the outbox the tests read would stay empty.
    for _ in range(2):
        with provisioned_emulator.fresh() as session:
            sesv2, sns, sqs = session.client("sesv2"), session.client("sns"), session.client("sqs")
            sesv2.create_email_identity(EmailIdentity="shop.example")
            sesv2.send_email(
                FromEmailAddress="orders@shop.example",
                Destination={"ToAddresses": ["ada@example.com"]},
                Content={"Simple": {"Subject": {"Data": "Back"}, "Body": {"Text": {"Data": "in stock"}}}},
            )
            assert len(email_outbox()) == 1
            [topic] = [
                t["TopicArn"] for t in sns.list_topics()["Topics"] if t["TopicArn"].endswith(":bisn-ses-feedback")
            ]
            sns.publish(TopicArn=topic, Message="feedback")
            url = sqs.get_queue_url(QueueName="bisn-ses-feedback")["QueueUrl"]
            delivered = sqs.receive_message(QueueUrl=url).get("Messages", [])
            assert [json.loads(m["Body"])["Message"] for m in delivered] == ["feedback"]
