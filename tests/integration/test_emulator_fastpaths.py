"""The emulator's fast paths change how much work it does, never what it answers.

The correctness suite runs with the bookkeeping ones only; this module puts the parse ones in for its own tests
and takes them out after.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import moto
import pytest
from botocore.exceptions import ClientError

from devstack import moto_patches

TABLE = "bisn-requests"


@pytest.fixture(autouse=True, scope="module")
def speed_patches() -> Iterator[None]:
    """Every speed patch, in place for this module's tests only (the bookkeeping ones stay after)."""
    moto_patches.install(fidelity=True, speed=True)
    yield
    moto_patches.uninstall_speed()


def key(joined_ts: str) -> dict[str, Any]:
    return {"sku": {"S": "A"}, "joined_ts": {"S": joined_ts}}


def error_code(raised: pytest.ExceptionInfo[ClientError]) -> str:
    return str(raised.value.response["Error"]["Code"])


def test_every_fast_path_is_in_place_on_the_pinned_emulator() -> None:
    # A moto upgrade turns them all off (slower, never wrong): this says it is time to look at them again.
    assert moto.__version__ == moto_patches.PINNED_MOTO
    assert len(moto_patches.install(fidelity=True, speed=True)) == 8


def test_scalar_values_of_every_kind_come_back_as_written(session: boto3.session.Session) -> None:
    ddb = session.client("dynamodb")
    item = {
        **key("1"),
        "n": {"N": "-12.50"},
        "yes": {"BOOL": True},
        "none": {"NULL": True},
        "blob": {"B": b"\x00\xffbytes"},
        "tags": {"SS": ["a", "b"]},
        "nested": {"M": {"n": {"N": "7"}, "l": {"L": [{"S": "x"}, {"BOOL": False}]}}},
    }
    ddb.put_item(TableName=TABLE, Item=item)
    got = ddb.get_item(TableName=TABLE, Key=key("1"), ConsistentRead=True)["Item"]
    assert got["n"] == {"N": "-12.50"} and got["yes"] == {"BOOL": True} and got["none"] == {"NULL": True}
    assert got["blob"] == {"B": b"\x00\xffbytes"}
    assert sorted(got["tags"]["SS"]) == ["a", "b"]
    assert got["nested"] == item["nested"]


def test_one_condition_text_with_different_values_is_judged_on_each_call_s_values(
    session: boto3.session.Session,
) -> None:
    ddb = session.client("dynamodb")
    ddb.put_item(TableName=TABLE, Item={**key("1"), "state": {"S": "waiting"}})

    def move(expected: str, to: str) -> None:
        ddb.update_item(
            TableName=TABLE,
            Key=key("1"),
            UpdateExpression="SET #s = :to",
            ConditionExpression="#s = :expected",
            ExpressionAttributeNames={"#s": "state"},
            ExpressionAttributeValues={":to": {"S": to}, ":expected": {"S": expected}},
        )

    move("waiting", "offered")
    with pytest.raises(ClientError) as raised:
        move("waiting", "held")  # the same text, but the item is no longer waiting
    assert error_code(raised) == "ConditionalCheckFailedException"
    move("offered", "held")
    assert ddb.get_item(TableName=TABLE, Key=key("1"))["Item"]["state"] == {"S": "held"}


def test_an_update_valid_with_one_name_is_still_refused_when_the_name_points_at_the_key(
    session: boto3.session.Session,
) -> None:
    ddb = session.client("dynamodb")
    ddb.put_item(TableName=TABLE, Item={**key("1"), "state": {"S": "waiting"}})

    def update(name: str) -> None:
        ddb.update_item(
            TableName=TABLE,
            Key=key("1"),
            UpdateExpression="SET #a = :v",
            ExpressionAttributeNames={"#a": name},
            ExpressionAttributeValues={":v": {"S": "x"}},
        )

    update("state")
    with pytest.raises(ClientError) as raised:
        update("sku")
    assert error_code(raised) == "ValidationException"


def test_a_cancelled_transaction_still_names_the_failed_condition_and_writes_nothing(
    session: boto3.session.Session,
) -> None:
    ddb = session.client("dynamodb")
    ddb.put_item(TableName=TABLE, Item={**key("1"), "state": {"S": "offered"}})
    items = [
        {"Put": {"TableName": TABLE, "Item": {**key("2"), "state": {"S": "waiting"}}}},
        {
            "Update": {
                "TableName": TABLE,
                "Key": key("1"),
                "UpdateExpression": "SET #s = :held",
                "ConditionExpression": "#s = :waiting",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":held": {"S": "held"}, ":waiting": {"S": "waiting"}},
            }
        },
    ]
    for _ in range(2):  # the second time the condition's parse comes from the cache
        with pytest.raises(ClientError) as raised:
            ddb.transact_write_items(TransactItems=items)
        reasons = [r["Code"] for r in raised.value.response["CancellationReasons"]]
        assert reasons == ["None", "ConditionalCheckFailed"]
        assert "Item" not in ddb.get_item(TableName=TABLE, Key=key("2"))
        assert ddb.get_item(TableName=TABLE, Key=key("1"))["Item"]["state"] == {"S": "offered"}


def test_a_committed_transaction_writes_without_checking_twice(session: boto3.session.Session) -> None:
    ddb = session.client("dynamodb")
    items = [
        {
            "Put": {
                "TableName": TABLE,
                "Item": {**key(str(i)), "state": {"S": "waiting"}},
                "ConditionExpression": "attribute_not_exists(joined_ts)",
            }
        }
        for i in range(3)
    ]
    ddb.transact_write_items(TransactItems=items)
    assert ddb.scan(TableName=TABLE)["Count"] == 3
    # Outside a transaction a write checks its own condition again.
    with pytest.raises(ClientError) as raised:
        ddb.put_item(**items[0]["Put"])
    assert error_code(raised) == "ConditionalCheckFailedException"


def test_an_unused_expression_value_is_refused_every_time(session: boto3.session.Session) -> None:
    ddb = session.client("dynamodb")
    ddb.put_item(TableName=TABLE, Item={**key("1"), "state": {"S": "waiting"}})
    for values in ({":to": {"S": "x"}}, {":to": {"S": "x"}, ":unused": {"S": "y"}}) * 2:
        update = {
            "TableName": TABLE,
            "Key": key("1"),
            "UpdateExpression": "SET note = :to",
            "ConditionExpression": "attribute_exists(joined_ts)",
            "ExpressionAttributeValues": values,
        }
        if ":unused" not in values:
            ddb.update_item(**update)
            continue
        with pytest.raises(ClientError) as raised:
            ddb.update_item(**update)
        assert error_code(raised) == "ValidationException"


def test_an_item_over_400_kb_is_still_refused(session: boto3.session.Session) -> None:
    ddb = session.client("dynamodb")
    with pytest.raises(ClientError) as raised:
        ddb.put_item(TableName=TABLE, Item={**key("1"), "a": {"S": "x" * 200_000}, "b": {"S": "y" * 210_000}})
    assert error_code(raised) == "ValidationException"
    ddb.put_item(TableName=TABLE, Item={**key("1"), "a": {"S": "x" * 200_000}})
    assert len(ddb.get_item(TableName=TABLE, Key=key("1"))["Item"]["a"]["S"]) == 200_000


# Update expressions of every clause kind, valid and refused, each with the names and values it uses.
UPDATES: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    ("SET #s = :s, n = if_not_exists(n, :z) + :one REMOVE gone ADD c :one", {"#s": "state"}, {":s": "a"}),
    ("SET l = list_append(if_not_exists(l, :empty), :more), m.part = :s", {}, {":s": "a"}),
    ("SET l[0] = :s REMOVE l[1], l[2] DELETE tags :tag", {}, {":s": "a"}),
    ("SET #s = :s, #s = :s", {"#s": "state"}, {":s": "a"}),  # two actions on one path: refused
    ("SET m = :s REMOVE m.part", {}, {":s": "a"}),  # overlapping paths: refused
    ("SET joined_ts = :s", {}, {":s": "a"}),  # the key: refused
    ("ADD c :one SET n = n - :one", {}, {}),
]


def _outcome(ddb: Any, expression: str, names: dict[str, str], extra: dict[str, Any]) -> Any:
    values = {":z": {"N": "0"}, ":one": {"N": "1"}, ":empty": {"L": []}, ":more": {"L": [{"S": "x"}]}}
    values.update({k: {"S": v} for k, v in extra.items()})
    values[":tag"] = {"SS": ["a"]}
    used = {k: v for k, v in values.items() if k in expression}
    ddb.put_item(
        TableName=TABLE,
        Item={
            **key("1"),
            "n": {"N": "5"},
            "c": {"N": "1"},
            "gone": {"S": "x"},
            "tags": {"SS": ["a", "b"]},
            "l": {"L": [{"S": "p"}, {"S": "q"}, {"S": "r"}]},
            "m": {"M": {"part": {"S": "i"}}},
        },
    )
    update: dict[str, Any] = {"TableName": TABLE, "Key": key("1"), "UpdateExpression": expression}
    if names:
        update["ExpressionAttributeNames"] = names
    if used:
        update["ExpressionAttributeValues"] = used
    try:
        ddb.update_item(**update)
    except ClientError as refused:
        return ("refused", refused.response["Error"]["Code"], refused.response["Error"]["Message"])
    return ddb.get_item(TableName=TABLE, Key=key("1"), ConsistentRead=True)["Item"]


def test_the_walks_asking_each_node_type_once_answer_as_moto_s_own(session: boto3.session.Session) -> None:
    from devstack.moto_patches import speed

    nodes = speed._untyped("moto.dynamodb.parsing.ast_nodes")
    fast = {
        (owner, name): vars(owner)[name]
        for owner, name in ((nodes.DepthFirstTraverser, "traverse_node_recursively"), (nodes.Node, "find_clauses"))
    }
    moto_own = {(owner, name): before for owner, name, before in speed._replaced if (owner, name) in fast}
    assert set(moto_own) == set(fast)
    ddb = session.client("dynamodb")
    refused = 0
    for expression, names, values in UPDATES:
        answers = []
        for walks in (moto_own, fast):
            for (owner, name), function in walks.items():
                setattr(owner, name, function)
            answers.append(_outcome(ddb, expression, names, values))
        assert answers[0] == answers[1], expression
        refused += isinstance(answers[1], tuple)
    assert refused == 3, "the list holds three refused updates and four that apply"


def test_a_tree_copied_node_by_node_is_the_tree_moto_s_own_copy_makes() -> None:
    import copy
    import pickle

    from devstack.moto_patches import speed

    nodes = speed._untyped("moto.dynamodb.parsing.ast_nodes")
    parser = speed._untyped("moto.dynamodb.parsing.expressions").UpdateExpressionParser
    for expression, _, _ in UPDATES:
        tree = parser.make(expression)
        fast = copy.deepcopy(tree)
        # Without a __deepcopy__ of its own a node is copied through the pickle protocol, as moto does.
        own = pickle.loads(pickle.dumps(tree))
        assert _shape(fast, nodes.Node) == _shape(own, nodes.Node) == _shape(tree, nodes.Node), expression
        assert not _ids(fast, nodes.Node) & _ids(tree, nodes.Node), "a copy shares no node with its original"


def _shape(node: Any, node_class: type) -> Any:
    """A node's type, its plain fields, its children's shapes, and whether each child's parent is this node."""
    fields = {k: v for k, v in vars(node).items() if k not in ("children", "parent")}
    children = node.children or []
    return (
        type(node).__name__,
        sorted(fields.items()),
        [(_shape(c, node_class), c.parent is node) if isinstance(c, node_class) else ("value", c) for c in children],
    )


def _ids(node: Any, node_class: type) -> set[int]:
    found = {id(node)}
    for child in node.children or []:
        if isinstance(child, node_class):
            found |= _ids(child, node_class)
    return found
