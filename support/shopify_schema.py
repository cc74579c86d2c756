"""Shopify's published Admin GraphQL schema, made into the compact fixture the connector's documents are checked against.

Shopify publishes each Admin API version's schema as a GraphQL introspection result in the npm package
@shopify/dev-mcp (dist/data/admin_<version>.json.gz). This turns one into the fixture
tests/fixtures/shopify/admin_<version>.graphql.gz: the same schema printed as SDL (every type, field, argument,
input field, enum value, interface, union member and directive exactly as published) without descriptions and
deprecation reasons, which validation never reads and which make up most of the published file.

Regenerate when chalicelib/platforms/shopify.py's API_VERSION changes (tests/fixtures/shopify/README.md):

    cd /tmp && npm pack @shopify/dev-mcp@<package version> \\
        && tar xzf shopify-dev-mcp-<package version>.tgz package/dist/data/admin_<version>.json.gz
    .venv/bin/python -m support.shopify_schema /tmp/package/dist/data/admin_<version>.json.gz

Dev-only: graphql-core comes from requirements-dev.txt, and nothing here ships to Lambda.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from graphql import GraphQLSchema, build_client_schema, build_schema, print_schema

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "shopify"
_SOURCE_NAME = re.compile(r"^admin_(\d{4}-\d{2})\.json\.gz$")

# The keys of the introspection result graphql-core reads to build a schema; Shopify's extras (componentName,
# accessRestricted, requiredAccess, isPrivatelyDocumented, the package's offline_scopes) and the prose are dropped.
_DROPPED = frozenset({"description", "deprecationReason"})


def fixture_path(version: str) -> Path:
    """Where the fixture of one Admin API version is kept."""
    return FIXTURES / f"admin_{version}.graphql.gz"


def compact_sdl(introspection: dict[str, Any]) -> str:
    """The published introspection result as SDL, without descriptions or deprecation reasons."""
    schema = build_client_schema(_without_prose(introspection["data"]))
    return print_schema(schema) + "\n"


def _without_prose(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_prose(v) for k, v in value.items() if k not in _DROPPED}
    if isinstance(value, list):
        return [_without_prose(v) for v in value]
    return value


@cache
def load_schema(version: str) -> GraphQLSchema:
    """The fixture's schema, built once per process (building it reads some 2,900 types)."""
    with gzip.open(fixture_path(version), "rt", encoding="utf-8") as sdl:
        return build_schema(sdl.read(), assume_valid=True, no_location=True)


def write_fixture(source: Path) -> Path:
    """Write the fixture for the version named by `source` (admin_<version>.json.gz); returns its path."""
    match = _SOURCE_NAME.match(source.name)
    if match is None:
        raise SystemExit(f"{source.name}: expected the package's admin_<version>.json.gz")
    raw = source.read_bytes()
    sdl = compact_sdl(json.loads(gzip.decompress(raw)))
    target = fixture_path(match.group(1))
    # mtime=0 so the same source always gives the same bytes, and a regeneration shows no diff unless Shopify's
    # schema changed.
    target.write_bytes(gzip.compress(sdl.encode("utf-8"), compresslevel=9, mtime=0))
    print(f"{target} ({target.stat().st_size} bytes) from {source.name} sha256 {hashlib.sha256(raw).hexdigest()}")
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("source", type=Path, help="the package's dist/data/admin_<version>.json.gz")
    write_fixture(parser.parse_args(argv).source)


if __name__ == "__main__":
    main()
