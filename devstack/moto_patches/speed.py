"""Speed patches: take out work the embedded emulator does that DynamoDB does not, so its costs look more like
DynamoDB's. They come in two groups:

- Bookkeeping (BOOKKEEPING): how moto moves data, never how it decides. A scalar attribute value passes through
  the response serialiser and request parser as the wire form it already is, an update expression's syntax tree
  is copied node by node rather than through the pickle protocol, a new item's size is added up once, and a tree
  pass builds its map of node types to handlers once and asks each node type's questions once rather than at every
  node. No condition, update or key is parsed or evaluated differently, so the correctness suite (`make test`)
  runs with these: they were most of its time in the emulator (about a quarter of a storm's, in the serialiser alone).
- Parses (PARSES): cached parses of condition and update texts, and a transaction item's condition checked once.
  They change how a condition is evaluated, so the correctness suite runs without them; `make dev` and
  `make bench` use them.

tests/integration/test_emulator_fastpaths.py installs every one to check they answer exactly as moto does.

Each fast path here is meant to keep moto's answers exactly as they were and is written against the moto
version pinned in requirements-dev.txt (PINNED_MOTO in this package's __init__); on any other version none
is installed, so an upgrade makes the emulator slower, never wrong. Everything runs under the emulator's one lock except the
response serialiser and the request-side expression checks, which only read what they share.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import re
import threading
from collections.abc import Callable
from typing import Any

_CACHE_LIMIT = 4096
_STATE = threading.local()
_installed: list[str] = []
_MISSING = object()
# (owner, attribute, what the owner's own __dict__ held before) for every attribute a fast path replaced.
_replaced: list[tuple[Any, str, Any]] = []
# How many entries of _replaced and _installed the bookkeeping group alone accounts for, once it is in.
_bookkeeping_mark: list[tuple[int, int]] = []


def _untyped(module: str) -> Any:
    """A moto module that opts out of type checking whole (a `# type: ignore` first line), so mypy sees none of its
    names: it is reached as Any, as it is."""
    return importlib.import_module(module)


def _set(owner: Any, name: str, value: Any) -> None:
    """Replace one attribute of a class, remembering what was there so that uninstall() can put it back."""
    _replaced.append((owner, name, vars(owner).get(name, _MISSING)))
    setattr(owner, name, value)


def installed() -> list[str]:
    """Names of the fast paths in place (empty when none are, or on an unpinned moto)."""
    return list(_installed)


def install_bookkeeping() -> None:
    """Put the bookkeeping fast paths in place, once (idempotent). The caller checks the moto version."""
    if _bookkeeping_mark:
        return
    if _installed:
        raise RuntimeError("the bookkeeping fast paths go in before the parse ones, or not at all")
    for fast_path in BOOKKEEPING:
        fast_path()
    _bookkeeping_mark.append((len(_replaced), len(_installed)))


def install() -> None:
    """Put every fast path in place, once (idempotent). The caller checks the moto version."""
    install_bookkeeping()
    if len(_installed) > _bookkeeping_mark[0][1]:
        return
    for fast_path in PARSES:
        fast_path()


def uninstall() -> None:
    """Take the parse fast paths out again, newest first, leaving the bookkeeping group (if it was in) as it was."""
    replaced, installed_names = _bookkeeping_mark[0] if _bookkeeping_mark else (0, 0)
    while len(_replaced) > replaced:
        owner, name, before = _replaced.pop()
        if before is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, before)
    del _installed[installed_names:]


_PLAIN = {"S": str, "N": str, "BOOL": bool, "NULL": bool}


def _plain(shape: Any, value: Any) -> bool:
    """A string, number, boolean or null attribute value: the same on the wire as in moto's hands."""
    if shape.name != "AttributeValue" or not isinstance(value, dict) or len(value) != 1:
        return False
    ((kind, inner),) = value.items()
    return isinstance(inner, _PLAIN.get(kind, ()))


def _attribute_values_pass_through() -> None:
    """A scalar attribute value is already in wire form; parsing or serialising it member by member changes nothing.

    Binary values (base64 on the wire, bytes inside), sets, lists and maps still take moto's own path.
    """
    from moto.core.parse import BaseJSONParser
    from moto.core.serialize import BaseJSONSerializer

    # Unannotated in moto: named here with what they take and give, so the calls below are checked as typed.
    serialise_structure: Callable[..., None] = BaseJSONSerializer._serialize_type_structure
    parse_structure: Callable[..., Any] = BaseJSONParser._parse_structure

    def serialise(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and _plain(shape, value):
            serialized[key] = value
            return
        serialise_structure(self, serialized, value, shape, key)

    def parse(self: Any, shape: Any, value: Any) -> Any:
        return dict(value) if _plain(shape, value) else parse_structure(self, shape, value)

    _set(BaseJSONSerializer, "_serialize_type_structure", serialise)
    _set(BaseJSONParser, "_parse_structure", parse)
    _installed.append("attribute values pass through")


def _transaction_conditions_checked_once() -> None:
    """moto checks each transaction item's condition, then has the write parse and check it again.

    The second check sees the same item (the transaction holds the lock, and one transaction names an item once),
    so the write goes ahead without it; a failed condition still cancels the transaction, from the first check.
    """
    from moto.dynamodb.models import DynamoDBBackend

    transact = DynamoDBBackend.transact_write_items

    @functools.wraps(transact)
    def transact_write_items(self: Any, *args: Any, **kwargs: Any) -> Any:
        _STATE.in_transaction = True
        try:
            return transact(self, *args, **kwargs)
        finally:
            _STATE.in_transaction = False

    def checked_already(write: Any) -> Any:
        @functools.wraps(write)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(_STATE, "in_transaction", False):
                kwargs["condition_expression"] = None
            return write(self, *args, **kwargs)

        return wrapper

    _set(DynamoDBBackend, "transact_write_items", transact_write_items)
    for name in ("put_item", "update_item", "delete_item"):
        _set(DynamoDBBackend, name, checked_already(getattr(DynamoDBBackend, name)))
    _installed.append("transaction conditions checked once")


_PLACEHOLDER = re.compile(r":[A-Za-z0-9_]+")


def _condition_parses_cached() -> None:
    """A condition parses to the same tree for the same text, names and values; evaluating it changes nothing.

    The key holds only the values the text names, so `:rid` shared by a batch's items hits while `:tok` differs.
    """
    from moto.dynamodb.comparisons import ConditionExpressionParser

    parse = ConditionExpressionParser.parse
    cache: dict[tuple[str, str, str], tuple[Any, list[str], list[str]]] = {}

    def cached_parse(self: Any) -> Any:
        text = self.condition_expression
        if not text:
            return parse(self)
        values = self.expression_attribute_values or {}
        named = sorted(set(_PLACEHOLDER.findall(text)))
        key = (
            text,
            json.dumps(self.expression_attribute_names or {}, sort_keys=True),
            json.dumps([(name, values.get(name)) for name in named], sort_keys=True, default=str),
        )
        hit = cache.get(key)
        if hit is None:
            tree = parse(self)  # raises for a bad expression, and nothing is cached
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            hit = cache[key] = (tree, list(self.expr_attr_names_found), list(self.expr_attr_values_found))
        # Callers read which names and values the expression used, to refuse unused ones as DynamoDB does.
        self.expr_attr_names_found = list(hit[1])
        self.expr_attr_values_found = list(hit[2])
        return hit[0]

    _set(ConditionExpressionParser, "parse", cached_parse)
    _installed.append("condition parses cached")


def _update_expressions_parsed_once() -> None:
    """Parse each update expression text once, and run its value-free checks once per text and names.

    The validator copies the parsed tree before it fills in values, so one parsed tree serves every call. The
    first three of its passes (action counts, overlapping paths, key attributes) read only the expression, the
    names and the table's keys; the passes that read the item and the values run every time.
    """
    UpdateExpressionParser = _untyped("moto.dynamodb.parsing.expressions").UpdateExpressionParser
    from moto.dynamodb.parsing.validators import UpdateExpressionValidator

    make = UpdateExpressionParser.make.__func__

    @functools.lru_cache(maxsize=256)
    def parsed(text: str) -> Any:
        return make(UpdateExpressionParser, text)

    _set(UpdateExpressionParser, "make", classmethod(lambda cls, text: parsed(text)))

    # Keyed by the parsed tree's id; the tree is held as the value so that id is never reused while cached.
    validated: dict[tuple[int, str, tuple[str, ...]], Any] = {}
    init = UpdateExpressionValidator.__init__
    processors = UpdateExpressionValidator.get_ast_processors
    validate = UpdateExpressionValidator.validate
    expression_only = 3

    def validator_init(
        self: Any,
        expression: Any,
        expression_attribute_names: Any,
        expression_attribute_values: Any,
        item: Any,
        table: Any,
    ) -> None:
        self._expression = expression
        names = json.dumps(expression_attribute_names or {}, sort_keys=True)
        self._checked_key = (id(expression), names, tuple(table.table_key_attrs))
        init(self, expression, expression_attribute_names, expression_attribute_values, item, table)

    def get_ast_processors(self: Any) -> Any:
        passes = processors(self)
        return passes[expression_only:] if getattr(self, "_checked_key", None) in validated else passes

    def checked_validate(self: Any) -> Any:
        tree = validate(self)  # raises for an invalid update, and nothing is remembered
        if len(validated) >= _CACHE_LIMIT:
            validated.clear()
        validated[self._checked_key] = self._expression
        return tree

    _set(UpdateExpressionValidator, "__init__", validator_init)
    _set(UpdateExpressionValidator, "get_ast_processors", get_ast_processors)
    _set(UpdateExpressionValidator, "validate", checked_validate)
    _installed.append("update expressions parsed once")


def _syntax_trees_copied_directly() -> None:
    """Copy an update expression's tree node by node instead of through the pickle protocol.

    The validator copies the parsed tree for every update it checks (it fills the copy in with values). A node holds
    strings, numbers, other nodes (its parent too) and lists of them: those are copied here directly, and anything
    else still goes through `copy.deepcopy` with the same memo, so a node reached twice is copied once.
    """
    Node = _untyped("moto.dynamodb.parsing.ast_nodes").Node
    atoms = {str, int, float, bool, type(None)}
    # Node's ABCMeta makes isinstance slow: each type is asked once whether it is a node.
    node_types: dict[type, bool] = {}

    def is_node(kind: type) -> bool:
        known = node_types.get(kind)
        if known is None:
            known = node_types[kind] = issubclass(kind, Node)
        return known

    def clone(node: Any, memo: dict[int, Any]) -> Any:
        done = memo.get(id(node))
        if done is not None:
            return done
        copied = object.__new__(type(node))
        memo[id(node)] = copied
        fields = copied.__dict__
        for name, value in node.__dict__.items():
            kind = type(value)
            if kind in atoms:
                fields[name] = value
            elif kind is list:
                fields[name] = [part if type(part) in atoms else copied_part(part, memo) for part in value]
            else:
                fields[name] = copied_part(value, memo)
        return copied

    def copied_part(value: Any, memo: dict[int, Any]) -> Any:
        return clone(value, memo) if is_node(type(value)) else copy.deepcopy(value, memo)

    _set(Node, "__deepcopy__", clone)
    _installed.append("syntax trees copied directly")


def _item_size_checked_once() -> None:
    """Check a new item's size once, as it is built, instead of re-adding every attribute at each insert."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
    from moto.dynamodb.models.utilities import bytesize

    limit = 405_000  # moto's limit for DynamoDB's 400 KB, unchanged

    def build(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
        self.hash_key = hash_key
        self.range_key = range_key
        built = LimitedSizeDict.__new__(LimitedSizeDict)
        size = 0
        for name, value in attrs.items():
            typed = DynamoType(value)
            size += bytesize(name) + typed.size()
            if size > limit:
                raise ItemSizeTooLarge
            dict.__setitem__(built, name, typed)
        self.attrs = built

    _set(Item, "__init__", build)
    _installed.append("item size checked once")


def _pass_map(walk: Any) -> dict[Any, Any]:
    """A tree pass's map of node types to handlers, built on first use and kept for the rest of its walk."""
    built: dict[Any, Any] | None = walk.__dict__.get("_built_map")
    if built is None:
        built = walk.__dict__["_built_map"] = type(walk)._processing_map(walk)
    return built


def _traversal_maps_built_once() -> None:
    """Build a tree pass's map of node types to handlers once per pass, not twice per node it visits.

    moto's traverser asks `_processing_map()` for a fresh dict at every node (once to test the node's type, once
    to pick its handler). The map depends only on the pass object, which is made for one expression and dropped,
    so the first map built serves the whole walk; the handlers run exactly as before, in the same order.
    """
    DepthFirstTraverser = _untyped("moto.dynamodb.parsing.ast_nodes").DepthFirstTraverser
    processing_map = _pass_map

    def nodes_to_be_processed(self: Any) -> tuple[Any, ...]:
        kinds: tuple[Any, ...] | None = self.__dict__.get("_built_kinds")
        if kinds is None:
            kinds = self.__dict__["_built_kinds"] = tuple(processing_map(self))
        return kinds

    def process(self: Any, node: Any) -> Any:
        for kind, handler in processing_map(self).items():
            if isinstance(node, kind):
                return handler(node)
        return None

    _set(DepthFirstTraverser, "nodes_to_be_processed", nodes_to_be_processed)
    _set(DepthFirstTraverser, "process", process)
    _installed.append("traversal maps built once")


def _node_types_asked_once() -> None:
    """Walk an update expression's syntax tree asking each node type's questions once, not at every node.

    moto's tree walks ask `isinstance` of its abstract node classes at every node they visit (is it a node, is it a
    kind this pass handles, which handler takes it, is it a clause to look inside): in a catalogue write, 17 items
    each validated in several passes, that is a sixth of the emulator's time. A type's answers never change, so
    they are kept by type. The walks visit the same nodes in the same order, call the same hooks and handlers, and
    build and return the same trees and clauses.
    """
    nodes = _untyped("moto.dynamodb.parsing.ast_nodes")
    node_class, traverser = nodes.Node, nodes.DepthFirstTraverser
    nested = (nodes.Expression, nodes.UpdateExpressionFunction)  # the nodes find_clauses looks inside
    no_hook = traverser.pre_processing_of_child
    is_node: dict[type, bool] = {}
    descends: dict[type, bool] = {}

    def handler_of(walk: Any, kind: type) -> Any:
        handlers: dict[type, Any] | None = walk.__dict__.get("_handler_by_type")
        if handlers is None:
            handlers = walk.__dict__["_handler_by_type"] = {}
        if kind not in handlers:
            # The first kind of the pass's map the node is an instance of, as moto's `process` picks it.
            handlers[kind] = next((h for k, h in _pass_map(walk).items() if issubclass(kind, k)), None)
        return handlers[kind]

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        kind = type(node)
        known = is_node.get(kind)
        if known is None:
            known = is_node[kind] = issubclass(kind, node_class)
        if not known:
            return node
        parent_node = node.parent
        if node.children is not None:
            hook = None if type(self).pre_processing_of_child is no_hook else self.pre_processing_of_child
            for i, child_node in enumerate(node.children):
                if hook is not None:
                    hook(node, i)
                self.traverse_node_recursively(child_node, i)
        handler = handler_of(self, kind)
        if handler is not None:
            node = handler(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
        return node

    def find_clauses(self: Any, clause_types: Any) -> list[Any]:
        clauses: list[Any] = []
        for child in self.children or []:
            kind = type(child)
            if kind in clause_types:
                clauses.append(child)
                continue
            inside = descends.get(kind)
            if inside is None:
                inside = descends[kind] = issubclass(kind, nested)
            if inside:
                clauses.extend(child.find_clauses(clause_types))
        return clauses

    _set(traverser, "traverse_node_recursively", traverse_node_recursively)
    _set(node_class, "find_clauses", find_clauses)
    _installed.append("node types asked once")


# How moto moves data, never how it decides: the correctness suite runs with these.
BOOKKEEPING = (
    _attribute_values_pass_through,
    _syntax_trees_copied_directly,
    _item_size_checked_once,
    _traversal_maps_built_once,
    _node_types_asked_once,
)
# How moto parses and checks expressions: make dev and make bench only.
PARSES = (_transaction_conditions_checked_once, _condition_parses_cached, _update_expressions_parsed_once)
