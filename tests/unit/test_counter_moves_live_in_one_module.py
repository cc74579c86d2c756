"""Every counter move of DESIGN §4 is built in chalicelib/counters.py, and nowhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import ROOT

LIB = ROOT / "chalicelib"
RESTOCKS = LIB / "tables" / "restocks.py"


def counter_builders() -> set[str]:
    """RestocksTable's item builders whose Update moves a counter (units_*, unseen_sales, a tally); the Put that
    opens a restock with its first counters is a new row, not a move."""
    tree = ast.parse(RESTOCKS.read_text())
    [table] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RestocksTable"]
    found = set()
    for method in table.body:
        if isinstance(method, ast.FunctionDef) and method.name.endswith("_item"):
            text = ast.unparse(method)
            if "'Put'" in text:
                continue
            if re.search(
                r"units_available|units_offerable|unseen_sales|UNSEEN_SALES|_sales_update|orders_on_expired_holds", text
            ):
                found.add(method.name)
    return found


def attributes_used() -> dict[Path, set[str]]:
    """Each module outside the tables with every attribute name it reads or calls, each module parsed once."""
    return {
        path: {node.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)}
        for path in sorted(LIB.rglob("*.py"))
        if path.parent.name != "tables"
    }


def callers(name: str, used: dict[Path, set[str]]) -> list[Path]:
    return [path for path, names in used.items() if name in names]


def test_the_restocks_table_builds_the_counter_items_the_design_lists() -> None:
    builders = counter_builders()
    # Notice sent, rolled back or lapsed; link tapped; hold expired; order placed; level rose, fell, closed,
    # or moved by our own sales; an order after its hold ended.
    for expected in ("take_offers_item", "release_offer_item", "hold_item", "return_hold_item", "sale_item"):
        assert expected in builders
    for expected in ("rise_item", "fall_item", "close_item", "sales_seen_item"):
        assert expected in builders


def test_only_the_counters_module_builds_a_counter_item() -> None:
    used = attributes_used()
    outside = {
        name: [str(p.relative_to(ROOT)) for p in callers(name, used) if p != LIB / "counters.py"]
        for name in counter_builders()
    }
    assert {name: paths for name, paths in outside.items() if paths} == {}
