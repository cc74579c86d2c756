"""Facts recorded many at a time: 25 to a transaction, each a conditional put, so the audit stays append-only."""

from __future__ import annotations

from typing import Any
from unittest.mock import Mock

import boto3

from chalicelib.config import Settings
from chalicelib.tables.audit import APPEND_ONLY, FACTS_PER_TRANSACTION, AuditTable

REGION = "eu-west-2"
TABLE = "bisn-audit"


def audit_with_client() -> tuple[AuditTable, Mock]:
    """An AuditTable on a table double whose client accepts every transaction."""
    session = boto3.session.Session(region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    client = Mock(spec=session.client("dynamodb"))
    client.transact_write_items.return_value = {}
    table = Mock(spec=type(session.resource("dynamodb").Table(TABLE)))
    table.name = TABLE
    table.meta.client = client
    return AuditTable(table, retention_s=Settings.audit_retention_days * 86400), client


def facts(audit: AuditTable, n: int) -> list[dict[str, Any]]:
    return [audit.fact("CHAIR", "notice_sent", 1_000.0, position=i) for i in range(n)]


def transactions(client: Mock) -> list[list[dict[str, Any]]]:
    return [call.kwargs["TransactItems"] for call in client.transact_write_items.call_args_list]


def test_sixty_facts_go_in_three_transactions_of_at_most_twenty_five() -> None:
    audit, client = audit_with_client()
    rows = facts(audit, 60)
    audit.record_many(rows)
    sent = transactions(client)
    assert [len(items) for items in sent] == [FACTS_PER_TRANSACTION, FACTS_PER_TRANSACTION, 10]
    assert [item["Put"]["Item"] for items in sent for item in items] == rows


def test_every_fact_is_a_put_that_never_overwrites() -> None:
    audit, client = audit_with_client()
    audit.record_many(facts(audit, 3))
    [items] = transactions(client)
    assert all(set(item) == {"Put"} and item["Put"]["ConditionExpression"] == APPEND_ONLY for item in items)
    assert {item["Put"]["TableName"] for item in items} == {TABLE}


def test_nothing_to_record_makes_no_call() -> None:
    audit, client = audit_with_client()
    audit.record_many([])
    client.transact_write_items.assert_not_called()


def test_a_thousand_facts_stamped_in_one_instant_never_share_a_key() -> None:
    audit, _ = audit_with_client()
    keys = {row["ts"] for row in facts(audit, 1000)}
    assert len(keys) == 1000
