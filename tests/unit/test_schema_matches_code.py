"""The tables, keys and indexes of infra/template.json are exactly what the table classes use."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

from tests.code_paths import wired_tables
from tests.support import ROOT

TEMPLATE = json.loads((ROOT / "infra" / "template.json").read_text())
TABLES_DIR = ROOT / "chalicelib" / "tables"
# Project code that may query an index (what ships to Lambda, and the tools around it).
PROJECT_CODE = [p for d in ("chalicelib", "devstack", "support") for p in sorted((ROOT / d).rglob("*.py"))]


@dataclass
class Schema:
    """One template table: its key attributes, its indexes' key attributes, its TTL attribute."""

    keys: list[str]
    indexes: dict[str, list[str]]
    ttl: str | None


def template_schema() -> dict[str, Schema]:
    """Short table name -> schema, read from the template."""
    schema = {}
    for resource in TEMPLATE["Resources"].values():
        if resource["Type"] != "AWS::DynamoDB::Table":
            continue
        props = resource["Properties"]
        short = props["TableName"]["Fn::Sub"].removeprefix("${NamePrefix}-")
        ttl = props.get("TimeToLiveSpecification", {})
        schema[short] = Schema(
            keys=[k["AttributeName"] for k in props["KeySchema"]],
            indexes={
                i["IndexName"]: [k["AttributeName"] for k in i["KeySchema"]]
                for i in props.get("GlobalSecondaryIndexes", [])
            },
            ttl=ttl.get("AttributeName") if ttl.get("Enabled") else None,
        )
    return schema


table_classes = wired_tables


def _is_role(node: ast.ClassDef) -> bool:
    """Whether a class is one role over a shared table (a `TableRole`)."""
    return any(isinstance(base, ast.Name) and base.id == "TableRole" for base in node.bases)


def roles_defined() -> set[str]:
    """Every `TableRole` class under chalicelib/tables."""
    return {
        node.name
        for path in sorted(TABLES_DIR.glob("*.py"))
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef) and _is_role(node)
    }


def classes_defined() -> dict[str, Path]:
    """Every *Table class and every `TableRole` class under chalicelib/tables, with its module."""
    defined = {}
    for path in sorted(TABLES_DIR.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and (node.name.endswith("Table") or _is_role(node)):
                defined[node.name] = path
    return defined


@dataclass
class Usage:
    """What one module says about keys and indexes."""

    key_sets: list[tuple[int, set[str]]] = field(default_factory=list)  # Key={...} dict literals
    queries: list[tuple[int, str | None, set[str]]] = field(default_factory=list)  # (line, index, Key("x") names)
    mentions_ttl: bool = False


def _constant_keys(node: ast.Dict) -> set[str] | None:
    keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return keys if keys and len(keys) == len(node.keys) else None


def _key_names(node: ast.AST) -> set[str]:
    """Attributes named by boto3's Key("attr") conditions under `node`."""
    return {
        str(n.args[0].value)
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "Key"
        and n.args
        and isinstance(n.args[0], ast.Constant)
    }


KEYED_BUILDERS = ("tx_update", "tx_delete", "tx_check")


def _builder_key(call: ast.Call) -> ast.Dict | None:
    """The key literal a keyed item builder is given (`tx_update(self.name, {"sku": sku}, ...)`), if it is one."""
    if isinstance(call.func, ast.Name) and call.func.id in KEYED_BUILDERS and len(call.args) >= 2:
        key = call.args[1]
        return key if isinstance(key, ast.Dict) else None
    return None


def usage(source: str) -> Usage:
    """Keys and indexes one module uses."""
    found = Usage()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value == "ttl":
            found.mentions_ttl = True
        if isinstance(node, ast.Call):
            named = {kw.arg: kw.value for kw in node.keywords if kw.arg}
            if isinstance(named.get("Key"), ast.Dict):
                keys = _constant_keys(named["Key"])
                if keys:
                    found.key_sets.append((node.lineno, keys))
            # A transaction item's key is the second argument of its builder (chalicelib/tables/base.py).
            keyed = _builder_key(node)
            if keyed is not None:
                keys = _constant_keys(keyed)
                if keys:
                    found.key_sets.append((node.lineno, keys))
            if "KeyConditionExpression" in named:
                index = named.get("IndexName")
                name = str(index.value) if isinstance(index, ast.Constant) else None
                found.queries.append((node.lineno, name, _key_names(named["KeyConditionExpression"])))
        # A key built once for two uses (`key = {"sku": sku, ...}`, then a builder's and a write's `Key=key`).
        named_key = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "key" for t in node.targets
        )
        if named_key and isinstance(node.value, ast.Dict):
            keys = _constant_keys(node.value)
            if keys:
                found.key_sets.append((node.lineno, keys))
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "Key" and isinstance(value, ast.Dict):
                    keys = _constant_keys(value)
                    if keys:
                        found.key_sets.append((node.lineno, keys))
                is_keys = isinstance(key, ast.Constant) and key.value == "Keys"
                if is_keys and isinstance(value, ast.ListComp) and isinstance(value.elt, ast.Dict):
                    keys = _constant_keys(value.elt)
                    if keys:
                        found.key_sets.append((node.lineno, keys))
    return found


def index_names_used(paths: list[Path]) -> dict[str, str]:
    """Every IndexName given as a literal in project code, with where."""
    used = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "IndexName" and isinstance(node.value, ast.Constant):
                used.setdefault(str(node.value.value), f"{path.relative_to(ROOT)}:{node.value.lineno}")
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "IndexName" and isinstance(value, ast.Constant):
                        used.setdefault(str(value.value), f"{path.relative_to(ROOT)}:{value.lineno}")
    return used


def test_every_table_class_maps_to_one_template_table_and_every_table_has_a_class() -> None:
    schema = template_schema()
    wired = table_classes()
    assert set(wired) == set(classes_defined()), "every table class is built in wiring.py, and only those"
    # A table is one *Table class's, or shared by roles only: never a whole-table class beside roles.
    whole = [short for cls, short in wired.items() if cls not in roles_defined()]
    shared = {short for cls, short in wired.items() if cls in roles_defined()}
    assert sorted(whole + sorted(shared)) == sorted(schema), "template tables and table classes differ"


def test_keys_the_code_reads_and_writes_by_are_the_template_keys() -> None:
    schema = template_schema()
    defined = classes_defined()
    for cls, short in table_classes().items():
        path = defined[cls]
        keys = set(schema[short].keys)
        found = usage(path.read_text())
        assert found.key_sets or found.queries, f"{path.name} never addresses an item by key"
        for line, used in found.key_sets:
            assert used == keys, (
                f"{path.name}:{line} addresses {short} by {sorted(used)}, the template by {sorted(keys)}"
            )
        for line, index, attrs in found.queries:
            allowed = set(schema[short].indexes[index]) if index in schema[short].indexes else keys
            assert index is None or index in schema[short].indexes, f"{path.name}:{line}: {short} has no index {index}"
            assert attrs <= allowed, (
                f"{path.name}:{line} queries {short}/{index} by {sorted(attrs)}, keys are {sorted(allowed)}"
            )


def test_every_index_the_code_queries_exists_and_every_template_index_is_queried() -> None:
    schema = template_schema()
    all_names = {i for s in schema.values() for i in s.indexes}
    for name, where in index_names_used(PROJECT_CODE).items():
        assert name in all_names, f"{where} queries index {name}, which infra/template.json does not define"
    # An index belongs to a table: it counts as used when that table's class queries it.
    defined = classes_defined()
    queried = {(short, name) for cls, short in table_classes().items() for name in index_names_used([defined[cls]])}
    unused = sorted(f"{t}/{i}" for t, s in schema.items() for i in s.indexes if (t, i) not in queried)
    assert unused == [], f"indexes no table class queries cost a write each time: {unused}"


def test_tables_the_code_stamps_with_a_ttl_expire_by_it_and_no_others() -> None:
    schema = template_schema()
    defined = classes_defined()
    for cls, short in table_classes().items():
        mentions = usage(defined[cls].read_text()).mentions_ttl
        assert (schema[short].ttl == "ttl") == mentions, (
            f"{short}: ttl in code {mentions}, in template {schema[short].ttl}"
        )


def test_the_usage_reader_sees_keys_queries_and_batch_keys() -> None:
    source = (
        "t.get_item(Key={'sku': s, 'joined_ts': j})\n"
        "t.query(IndexName='by-due', KeyConditionExpression=Key('due_key').eq(d) & Key('due_at').lte(n))\n"
        "req = {'T': {'Keys': [{'contact': k} for k in ks]}}\n"
    )
    found = usage(source)
    assert [keys for _, keys in found.key_sets] == [{"sku", "joined_ts"}, {"contact"}]
    assert [(index, attrs) for _, index, attrs in found.queries] == [("by-due", {"due_key", "due_at"})]
