"""Every transaction is a `Tx` (chalicelib/tables/base.py) whose items are read back by name, and each table builds
only its own items: what another table must check in the same transaction is added by the service that runs it."""

from __future__ import annotations

import ast
from unittest.mock import Mock

from chalicelib.tables.catalog import WAITING_SHARDS, CatalogTable
from tests.support import ROOT

LIB = ROOT / "chalicelib"
BASE = LIB / "tables" / "base.py"


def transact_calls() -> list[str]:
    """Where `transact(...)`, the unnamed list runner under `Tx.run`, is called outside base.py."""
    found = []
    for path in sorted(LIB.rglob("*.py")):
        if path == BASE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name == "transact":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_module_runs_an_unnamed_list_of_items() -> None:
    assert transact_calls() == []


def catalog() -> CatalogTable:
    table = Mock()
    table.name = "bisn-catalog"
    return CatalogTable(table)


def test_the_idle_mark_items_are_the_catalogues_own() -> None:
    marks = catalog().idle_items("CHAIR", "2026-01-01T00:00:00Z", "r1")
    cleared = catalog().clear_idle_items("CHAIR", "2026-01-01T00:00:00Z")
    # The product and every shard; the restock's check that decides whether the mark may go is the caller's.
    assert len(marks) == len(cleared) == 1 + WAITING_SHARDS
    assert {next(iter(item.values()))["TableName"] for item in marks + cleared} == {"bisn-catalog"}
