"""What each Lambda function can reach in AWS, read from the code: entry point -> services -> table classes.

The reading follows `self.<attribute>.<method>(...)` through the types that constructors and
`Services` properties declare, so it sees what a code path may call without running it. It
over-approximates within one method (every branch counts), follows module-level helpers and methods
through their parameters' declared types, objects a method builds itself (`dispatch = Dispatch(...)`),
its own methods handed on as `self.<method>`, and callables that
`Services` wires as `self.<service>.<method>` references; a callable handed over any other way is not
followed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from tests.iam_rules import CALLS, TRANSACTION_ITEMS

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "chalicelib"


@dataclass(frozen=True)
class Need:
    """One permission a code path needs: an action on a table ('' for no table), or a query on an index."""

    table: str
    action: str
    index: str = ""


@dataclass
class ClassInfo:
    """A class of chalicelib: its methods and the declared types of its attributes."""

    name: str
    path: Path
    methods: dict[str, ast.FunctionDef]
    attribute_types: dict[str, str]
    table: str = ""  # the short table name, for table classes


@dataclass
class Reach:
    """Everything a code path needs, with one route to each need for the failure message."""

    needs: dict[Need, str] = field(default_factory=dict)

    def add(self, need: Need, route: str) -> None:
        """Record a need, keeping the first route that led to it."""
        self.needs.setdefault(need, route)


def _annotation_name(node: ast.expr | None) -> str:
    if node is None:
        return ""
    text = ast.unparse(node).strip("'\"")
    return text.split("|")[0].strip().split("[")[0].split(".")[-1]


def load_functions() -> dict[str, list[ast.FunctionDef]]:
    """Every module-level function under chalicelib, by name (a name may exist in several modules)."""
    functions: dict[str, list[ast.FunctionDef]] = {}
    for path in sorted(LIB.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef):
                functions.setdefault(node.name, []).append(node)
    return functions


def _bare_calls(body: ast.AST) -> list[str]:
    return [n.func.id for n in ast.walk(body) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def load_classes() -> dict[str, ClassInfo]:
    """Every class under chalicelib, with attribute types from __init__ parameters, dataclass fields and
    property returns."""
    classes: dict[str, ClassInfo] = {}
    for path in sorted(LIB.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef):
                continue
            methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
            types: dict[str, str] = {}
            for field_node in node.body:
                if isinstance(field_node, ast.AnnAssign) and isinstance(field_node.target, ast.Name):
                    types[field_node.target.id] = _annotation_name(field_node.annotation)
            init = methods.get("__init__")
            if init:
                for arg in init.args.args + init.args.kwonlyargs:
                    types[arg.arg] = _annotation_name(arg.annotation)
            for f in methods.values():
                if any(ast.unparse(d) in ("cached_property", "property") for d in f.decorator_list):
                    types[f.name] = _annotation_name(f.returns)
            classes[node.name] = ClassInfo(node.name, path, methods, types)
    for cls, short in wired_tables().items():
        if cls in classes:
            classes[cls].table = short
    return classes


def wired_tables() -> dict[str, str]:
    """Class name -> short table name, as chalicelib/tables/store.py builds each table class (a whole table's, or
    one role's over it)."""
    tree = ast.parse((LIB / "tables" / "store.py").read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr == "_table"
                    and inner.args
                    and isinstance(inner.args[0], ast.Constant)
                ):
                    found[node.func.id] = str(inner.args[0].value)
    return found


def _self_attribute_calls(body: ast.AST) -> list[tuple[tuple[str, ...], str]]:
    """(attribute path, method) for every `self.<attribute>[.<attribute>...].<method>` under `body`, called or
    passed on: `self.tables.requests.get` is (("tables", "requests"), "get")."""
    found = []
    for node in ast.walk(body):
        path: list[str] = []
        target = node.value if isinstance(node, ast.Attribute) else None
        while isinstance(target, ast.Attribute):
            path.insert(0, target.attr)
            target = target.value
        if path and isinstance(target, ast.Name) and target.id == "self":
            found.append((tuple(path), node.attr))  # type: ignore[union-attr]
    return found


def _value_calls(method: ast.FunctionDef) -> list[tuple[str, tuple[str, ...], str]]:
    """(declared class, attribute path, method) for every `<name>[.<attribute>...].<method>(...)` on a value the
    method is handed with a declared type (`walk: Walk`) or builds itself (`dispatch = Dispatch(...)`)."""
    types = {a.arg: _annotation_name(a.annotation) for a in method.args.args + method.args.kwonlyargs if a.annotation}
    for node in ast.walk(method):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
            types.update((t.id, node.value.func.id) for t in node.targets if isinstance(t, ast.Name))
    found = []
    for node in ast.walk(method):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        path: list[str] = []
        target = node.func.value
        while isinstance(target, ast.Attribute):
            path.insert(0, target.attr)
            target = target.value
        if isinstance(target, ast.Name) and target.id != "self" and target.id in types:
            found.append((types[target.id], tuple(path), node.func.attr))
    return found


def _self_calls(body: ast.AST) -> list[str]:
    return [
        node.func.attr
        for node in ast.walk(body)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    ]


# Builders of transaction items: calls on them build a request, they reach no collaborator.
BUILDERS = {"Tx"}


def _root_call(node: ast.expr) -> str:
    """The name of the call a chain of calls starts from (`Tx().add(...).add(...)` -> "Tx")."""
    while isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if not isinstance(func, ast.Attribute):
            return ""
        node = func.value
    return ""


def _builders(body: ast.AST) -> set[str]:
    """Local names that hold a transaction builder: parameters annotated as one, or names assigned one."""
    names = set()
    if isinstance(body, ast.FunctionDef):
        names |= {a.arg for a in body.args.args + body.args.kwonlyargs if _annotation_name(a.annotation) in BUILDERS}
    for node in ast.walk(body):
        if isinstance(node, ast.Assign) and _root_call(node.value) in BUILDERS:
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _other_calls(body: ast.AST) -> list[str]:
    """Method names called on a local value rather than on `self` or `self.<attribute>`."""
    builders = _builders(body)
    names = []
    for node in ast.walk(body):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
            if isinstance(target, ast.Name) and target.id != "self" and target.id not in builders:
                names.append(node.func.attr)
    return names


def _self_properties(body: ast.AST) -> list[str]:
    """Attributes read as `self.<name>` (a property body runs on first read)."""
    return [
        node.attr
        for node in ast.walk(body)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
    ]


def _index_names(method: ast.FunctionDef) -> list[str]:
    """IndexName constants given in a method, as keywords or in a kwargs dict."""
    names = []
    for node in ast.walk(method):
        if isinstance(node, ast.keyword) and node.arg == "IndexName" and isinstance(node.value, ast.Constant):
            names.append(str(node.value.value))
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "IndexName" and isinstance(value, ast.Constant):
                    names.append(str(value.value))
    return names


def _table_needs(table: str, method: ast.FunctionDef) -> list[Need]:
    needs = []
    dict_indexes = _index_names(method)
    for node in ast.walk(method):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "get_paginator" and node.args and isinstance(node.args[0], ast.Constant):
                name = str(node.args[0].value)
            if name not in CALLS:
                continue
            index = next(
                (
                    kw.value.value
                    for kw in node.keywords
                    if kw.arg == "IndexName" and isinstance(kw.value, ast.Constant)
                ),
                None,
            )
            if index is not None:
                needs.append(Need(table, "dynamodb:Query", str(index)))
            elif CALLS[name] == "dynamodb:Query" and dict_indexes:
                needs.extend(Need(table, "dynamodb:Query", i) for i in dict_indexes)
            else:
                needs.append(Need(table, CALLS[name]))
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value in TRANSACTION_ITEMS:
                    needs.append(Need(table, TRANSACTION_ITEMS[key.value]))
    return needs


def _direct_needs(method: ast.FunctionDef) -> list[Need]:
    """AWS calls a non-table class makes on a client it holds (SNS, SES, SQS, Bedrock, Secrets Manager)."""
    needs = []
    for node in ast.walk(method):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "get_paginator" and node.args and isinstance(node.args[0], ast.Constant):
                name = str(node.args[0].value)
            if name in CALLS and not CALLS[name].startswith("dynamodb:"):
                needs.append(Need("", CALLS[name]))
    return needs


class Reader:
    """Follows code paths through the classes of chalicelib."""

    def __init__(self) -> None:
        self.classes = load_classes()
        self.functions = load_functions()

    def reach_function(self, name: str, reach: Reach, route: str, seen: set) -> None:
        """Follow a module-level helper: calls on its parameters go to their declared classes."""
        for node in self.functions.get(name, []):
            if id(node) in seen:
                continue
            seen.add(id(node))
            here = f"{route} -> {name}()"
            types = {a.arg: _annotation_name(a.annotation) for a in node.args.args + node.args.kwonlyargs}
            for need in _direct_needs(node):
                reach.add(need, here)
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
                    target = call.func.value
                    kind = types.get(target.id, "") if isinstance(target, ast.Name) else ""
                    if kind in self.classes:
                        self.reach(kind, call.func.attr, reach, here, seen)
            for inner in _bare_calls(node):
                self.reach_function(inner, reach, here, seen)

    def _kind_of(self, info: ClassInfo, path: tuple[str, ...]) -> str:
        """The declared class at the end of `self.<a>.<b>...` (a property on the way runs when read)."""
        kind = info.attribute_types.get(path[0], "")
        for attribute in path[1:]:
            holder = self.classes.get(kind)
            if holder is None:
                return ""
            kind = holder.attribute_types.get(attribute, "")
        return kind

    def _kind_along(self, kind: str, path: tuple[str, ...]) -> str:
        """The declared class at the end of `<value of class kind>.<a>.<b>...`."""
        for attribute in path:
            holder = self.classes.get(kind)
            if holder is None:
                return ""
            kind = holder.attribute_types.get(attribute, "")
        return kind

    def reach(
        self, cls: str, method: str, reach: Reach | None = None, route: str = "", seen: set | None = None
    ) -> Reach:
        """Everything calling `cls.method` may need."""
        reach = reach if reach is not None else Reach()
        seen = seen if seen is not None else set()
        info = self.classes.get(cls)
        if info is None or (cls, method) in seen:
            return reach
        seen.add((cls, method))
        node = info.methods.get(method)
        if node is None:
            return reach
        here = f"{route} -> {cls}.{method}" if route else f"{cls}.{method}"
        if info.table:
            for need in _table_needs(info.table, node):
                reach.add(need, here)
        else:
            for need in _direct_needs(node):
                reach.add(need, here)
        for name in _self_calls(node):
            self.reach(cls, name, reach, here, seen)
        # A property runs when read; a method read without a call is handed on to run later (a thread pool's
        # task, say): both are followed.
        for name in set(_self_properties(node)):
            if name in info.methods:
                self.reach(cls, name, reach, here, seen)
        for path, name in _self_attribute_calls(node):
            kind = self._kind_of(info, path)
            if kind in self.classes:
                self.reach(kind, name, reach, here, seen)
        for name in _bare_calls(node):
            self.reach_function(name, reach, here, seen)
        # A value handed to the method or built by it (a walk and its dispatch, say): calls on it go to its class.
        for declared, path, name in _value_calls(node):
            kind = self._kind_along(declared, path)
            if kind in self.classes:
                self.reach(kind, name, reach, here, seen)
        # A collaborator picked from a container (`self._senders[channel].send(...)`): follow every
        # collaborator the constructor was given that has a method of that name.
        for name in _other_calls(node):
            for kind in set(info.attribute_types.values()):
                if kind in self.classes and name in self.classes[kind].methods:
                    self.reach(kind, name, reach, here, seen)
        return reach


def entry_points(app_source: str) -> dict[str, list[tuple[str, str]]]:
    """Lambda function name -> the (Services property, method) its handlers call; ("method", "") for a method of
    the services themselves."""
    functions: dict[str, list[tuple[str, str]]] = {}
    module = ast.parse(app_source).body
    # Undecorated module-level functions: helpers a handler calls by name (`_staff_json(...)`), read with it.
    helpers = {n.name: n for n in module if isinstance(n, ast.FunctionDef) and not n.decorator_list}
    for node in module:
        if not isinstance(node, ast.FunctionDef):
            continue
        function = None
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            kind = ast.unparse(call.func if call else decorator)
            if kind == "app.route":
                function = "api_handler"
            elif kind in ("app.schedule", "app.on_sqs_message", "app.on_dynamodb_record", "app.lambda_function"):
                named = [kw.value.value for kw in (call.keywords if call else []) if kw.arg == "name"]
                function = str(named[0]) if named else node.name
        if function is None:
            continue
        bodies, queue = [], [node]
        while queue:
            body = queue.pop()
            bodies.append(body)
            for inner in ast.walk(body):
                name = inner.func.id if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) else ""
                if name in helpers and helpers[name] not in bodies and helpers[name] not in queue:
                    queue.append(helpers[name])
        calls = functions.setdefault(function, [])
        for body in bodies:
            calls += _services_calls(body)
    return functions


def _services_calls(body: ast.FunctionDef) -> list[tuple[str, str]]:
    """The (Services property, method) calls of one function's body, through `wiring.current()`, a name it is
    assigned to, or a name one of its properties is assigned to (`admin = wiring.current().admin`)."""
    aliases = {"wiring.current()"}
    properties: dict[str, str] = {}
    for inner in ast.walk(body):
        if isinstance(inner, ast.Assign) and ast.unparse(inner.value) == "wiring.current()":
            aliases.update(ast.unparse(t) for t in inner.targets)
    for inner in ast.walk(body):
        if not isinstance(inner, ast.Assign) or not isinstance(inner.value, ast.Attribute):
            continue
        if ast.unparse(inner.value.value) in aliases:
            properties.update((ast.unparse(t), inner.value.attr) for t in inner.targets)
    calls = []
    for inner in ast.walk(body):
        through_services = isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Attribute)
        if through_services and ast.unparse(inner.value.value) in aliases:
            calls.append((inner.value.attr, inner.attr))
        through_property = isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
        if through_property and inner.value.id in properties:
            calls.append((properties[inner.value.id], inner.attr))
        # A method of the services themselves (`services.handle_message(...)`): followed from its own body.
        direct = isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
        if direct and ast.unparse(inner.func.value) in aliases:
            calls.append((inner.func.attr, ""))
    return calls


def function_needs(reader: Reader, app_source: str) -> dict[str, Reach]:
    """Lambda function name -> everything its handlers may need."""
    found = {}
    for function, calls in entry_points(app_source).items():
        reach = Reach()
        for prop, method in calls:
            reader.reach("Services", prop, reach, f"{function}")
            kind = reader.classes["Services"].attribute_types.get(prop, "")
            reader.reach(kind, method, reach, f"{function} -> Services.{prop}")
        found[function] = reach
    return found
