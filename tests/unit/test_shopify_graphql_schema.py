"""Every GraphQL document the Shopify connector sends, validated against Shopify's published Admin API schema.

The schema is the one Shopify publishes for the pinned API_VERSION (tests/fixtures/shopify/admin_<version>.graphql.gz;
its source, checksum and the command that regenerates it are in tests/fixtures/shopify/README.md), and graphql-core
validates each document as a GraphQL server does before running it: every field, argument, input type, fragment
type condition and variable definition must exist in Shopify's schema with the type used.

The documents are found, not listed: every module-level string in chalicelib/platforms/shopify*.py that is a
GraphQL operation. The connector is then driven through every call that reaches Shopify against the in-memory shop,
and every document it sends must be one of those, with variables that Shopify's schema coerces.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from graphql import (
    DocumentNode,
    GraphQLSchema,
    NonNullTypeNode,
    OperationDefinitionNode,
    parse,
    validate,
)
from graphql.execution.values import get_variable_values

from chalicelib.platforms.base import HoldRequest, StoreUnavailable
from chalicelib.platforms.levels import StockQuery
from chalicelib.platforms.shopify import API_VERSION, CATALOG_QUERY
from chalicelib.platforms.shopify_levels import ShopifyLevels
from devstack.clocks import FixedClock
from devstack.fake_shopify import FakeShopify
from support.shopify_schema import fixture_path, load_schema
from tests.platforms import shopify_connector

PLATFORMS = Path(__file__).resolve().parents[2] / "chalicelib" / "platforms"
NOW = 1_800_000_000.0
SKU = "WW-THROW-OAT"
# A string that starts like a GraphQL operation is one, and must parse: a typo in its syntax must not hide it here.
_LOOKS_LIKE_OPERATION = re.compile(r"^\s*(query|mutation|subscription)\b|^\s*\{")


def _connector_modules() -> list[ModuleType]:
    return [importlib.import_module(f"chalicelib.platforms.{p.stem}") for p in sorted(PLATFORMS.glob("shopify*.py"))]


def _connector_documents() -> dict[str, str]:
    """module.NAME -> document, for every module-level string of the connector's modules that is an operation."""
    found: dict[str, str] = {}
    for module in _connector_modules():
        for name, value in vars(module).items():
            if isinstance(value, str) and _LOOKS_LIKE_OPERATION.match(value):
                found[f"{module.__name__}.{name}"] = value
    return found


DOCUMENTS = _connector_documents()


@pytest.fixture(scope="module")
def schema() -> GraphQLSchema:
    return load_schema(API_VERSION)


def _operation(document: DocumentNode) -> OperationDefinitionNode:
    [operation] = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    return operation


def _schema_errors(schema: GraphQLSchema, text: str) -> list[str]:
    return [error.message for error in validate(schema, parse(text))]


def _variable_errors(schema: GraphQLSchema, text: str, variables: dict[str, Any]) -> list[str]:
    """What Shopify would refuse in the variables: names the operation does not define, required ones missing, and
    values its schema does not coerce (a wrong scalar, an input field the input type does not have)."""
    operation = _operation(parse(text))
    definitions = operation.variable_definitions or ()
    defined = {d.variable.name.value for d in definitions}
    required = {
        d.variable.name.value for d in definitions if isinstance(d.type, NonNullTypeNode) and not d.default_value
    }
    errors = [f"${name} is not defined by the operation" for name in sorted(set(variables) - defined)]
    errors += [f"${name} is required and was not sent" for name in sorted(required - set(variables))]
    coerced = get_variable_values(schema, definitions, variables)
    if isinstance(coerced, list):
        errors += [error.message for error in coerced]
    return errors


def test_the_fixture_is_the_pinned_version(schema: GraphQLSchema) -> None:
    assert fixture_path(API_VERSION).is_file()
    assert schema.query_type is not None and schema.mutation_type is not None
    # The roots the connector's documents start from, so a fixture of the wrong API (Storefront's) is not mistaken.
    assert {"productVariants", "draftOrders", "draftOrder", "nodes", "shop"} <= set(schema.query_type.fields)
    assert {"draftOrderCreate", "draftOrderDelete"} <= set(schema.mutation_type.fields)


def test_the_connector_documents_are_found() -> None:
    assert DOCUMENTS, "no GraphQL operation found among chalicelib/platforms/shopify*.py's module constants"
    for name, text in DOCUMENTS.items():
        operation = _operation(parse(text))
        # Named, so that Shopify's logs and the fake's record say which of the connector's documents it was.
        assert operation.name is not None, f"{name} has no operation name"


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_each_document_validates_against_shopifys_schema(schema: GraphQLSchema, name: str) -> None:
    errors = _schema_errors(schema, DOCUMENTS[name])
    assert errors == [], f"{name} is not valid against Shopify's Admin API {API_VERSION} schema: {errors}"


def test_a_misspelt_field_is_caught(schema: GraphQLSchema) -> None:
    misspelt = CATALOG_QUERY.replace("onlineStoreUrl", "onlineStoreURL")
    assert misspelt != CATALOG_QUERY
    [error] = _schema_errors(schema, misspelt)
    assert error.startswith("Cannot query field 'onlineStoreURL' on type 'Product'.")


def test_a_misspelt_input_field_in_the_variables_is_caught(schema: GraphQLSchema) -> None:
    [create] = [text for text in DOCUMENTS.values() if "draftOrderCreate(" in text]
    variables: dict[str, dict[str, Any]] = {
        "input": {"lineItems": [{"variantId": "gid://shopify/ProductVariant/1", "quantity": 1}]}
    }
    assert _variable_errors(schema, create, variables) == []
    variables["input"]["reserveInventoryUtil"] = "2027-01-15T08:00:00Z"
    [error] = _variable_errors(schema, create, variables)
    assert "reserveInventoryUtil" in error and "DraftOrderInput" in error
    missing, coercion = _variable_errors(schema, create, {})
    assert missing == "$input is required and was not sent"
    assert "'$input'" in coercion and "DraftOrderInput!" in coercion


def test_the_fake_refuses_a_document_shopifys_schema_refuses(schema: GraphQLSchema) -> None:
    clock = FixedClock(NOW)
    shop = FakeShopify(clock=clock.now, now=clock.now)
    connector = shopify_connector(shop, clock)
    misspelt = CATALOG_QUERY.replace("onlineStoreUrl", "onlineStoreURL")
    with pytest.raises(StoreUnavailable, match="Cannot query field 'onlineStoreURL' on type 'Product'"):
        connector._graphql(misspelt, {"first": 1, "after": None})
    with pytest.raises(StoreUnavailable, match="DraftOrderDeleteInput"):
        connector._graphql(_by_root("draftOrderDelete("), {"input": {"draftOrderId": "gid://shopify/DraftOrder/1"}})


def _by_root(root: str) -> str:
    [text] = [text for text in DOCUMENTS.values() if root in text]
    return text


def test_every_document_the_connector_sends_is_one_of_them_and_its_variables_fit(schema: GraphQLSchema) -> None:
    clock = FixedClock(NOW)
    shop = FakeShopify(clock=clock.now, now=clock.now)
    # More variants than a catalogue page, so that a later page's `after` cursor is sent too.
    shop.add_product("Socks", [f"WW-SOCK-{n:02d}" for n in range(60)])
    shop.set_available(SKU, 1)  # a unit to hold
    connector = shopify_connector(shop, clock)

    entries = list(connector.read_catalog())
    hold = HoldRequest("r-1", SKU, shop.ids(SKU), int(NOW) + 900, product_name="Oatmeal merino throw")
    placed = connector.place_hold(hold)
    connector.release_hold("r-1", placed.ref)
    # More items than one level read takes, so that the read is split as it is for a real catalogue.
    assert ShopifyLevels(connector).read_levels([StockQuery(sku=e.sku, ids=e.ids) for e in entries])

    sent = [(request["query"], request.get("variables") or {}) for request in shop.requests]
    known = set(DOCUMENTS.values())
    strays = [text for text, _ in sent if text not in known]
    assert strays == [], "the connector sent a document that is not one of its module constants"
    # Every document found is sent by one of these calls, so each one's variables are checked below.
    assert {text for text, _ in sent} == known
    for text, variables in sent:
        name = _operation(parse(text)).name
        assert _variable_errors(schema, text, variables) == [], f"{name and name.value} sent {variables}"
    assert any(variables.get("after") for _, variables in sent), "no second catalogue page was read"
