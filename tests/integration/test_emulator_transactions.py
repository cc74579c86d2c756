"""The emulator's cheaper transaction snapshot rolls back exactly like a full copy would."""

from __future__ import annotations

import copy

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from tests.support import REGION


def put(table: str, **item: str) -> dict:
    return {"Put": {"TableName": table, "Item": {k: {"S": v} for k, v in item.items()}}}


def test_a_cancelled_transaction_leaves_every_named_item_as_it_was(session: boto3.session.Session) -> None:
    ddb = session.client("dynamodb")
    ddb.put_item(
        TableName="bisn-requests", Item={"sku": {"S": "A"}, "joined_ts": {"S": "1"}, "state": {"S": "waiting"}}
    )
    ddb.put_item(
        TableName="bisn-requests", Item={"sku": {"S": "A"}, "joined_ts": {"S": "2"}, "state": {"S": "waiting"}}
    )
    ddb.put_item(TableName="bisn-optout", Item={"contact": {"S": "k1"}, "source": {"S": "stop"}})
    items = [
        {
            "Update": {
                "TableName": "bisn-requests",
                "Key": {"sku": {"S": "A"}, "joined_ts": {"S": "1"}},
                "UpdateExpression": "SET #s = :o",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":o": {"S": "offered"}},
            }
        },
        {"Delete": {"TableName": "bisn-requests", "Key": {"sku": {"S": "A"}, "joined_ts": {"S": "2"}}}},
        put("bisn-requests", sku="A", joined_ts="3", state="waiting"),
        {"Delete": {"TableName": "bisn-optout", "Key": {"contact": {"S": "k1"}}}},
        put("bisn-optout", contact="k2", source="admin"),
        {
            "ConditionCheck": {
                "TableName": "bisn-optout",
                "Key": {"contact": {"S": "nobody"}},
                "ConditionExpression": "attribute_exists(contact)",
            }
        },
    ]
    with pytest.raises(ClientError) as raised:
        ddb.transact_write_items(TransactItems=items)
    assert raised.value.response["Error"]["Code"] == "TransactionCanceledException"

    requests = ddb.scan(TableName="bisn-requests")["Items"]
    assert sorted((i["joined_ts"]["S"], i["state"]["S"]) for i in requests) == [("1", "waiting"), ("2", "waiting")]
    assert [i["contact"]["S"] for i in ddb.scan(TableName="bisn-optout")["Items"]] == ["k1"]


def test_a_committed_transaction_keeps_all_its_changes(session: boto3.session.Session) -> None:
    ddb = session.client("dynamodb")
    ddb.transact_write_items(
        TransactItems=[put("bisn-requests", sku="A", joined_ts="1", state="w"), put("bisn-optout", contact="k")]
    )
    assert ddb.scan(TableName="bisn-requests")["Count"] == 1
    assert ddb.scan(TableName="bisn-optout")["Count"] == 1


def test_a_table_copied_outside_a_transaction_is_a_full_independent_copy(session: boto3.session.Session) -> None:
    ddb = session.client("dynamodb")
    ddb.put_item(TableName="bisn-optout", Item={"contact": {"S": "k1"}})
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables["bisn-optout"]
    clone = copy.deepcopy(table)
    ddb.put_item(TableName="bisn-optout", Item={"contact": {"S": "k2"}})
    assert len(clone.items) == 1 and len(table.items) == 2


def test_the_correctness_suite_runs_with_the_bookkeeping_patches_only() -> None:
    from devstack import moto_patches

    assert moto_patches.install(fidelity=True, speed=False, bookkeeping=True) == [
        "attribute values pass through",
        "syntax trees copied directly",
        "item size checked once",
        "traversal maps built once",
        "node types asked once",
    ]
