"""docs/openapi.yaml documents exactly the routes app.py serves."""

from __future__ import annotations

import yaml

from tests.support import ROOT


def documented() -> dict[str, set[str]]:
    spec = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())
    return {
        path: {m.upper() for m in ops if m in {"get", "head", "post", "put", "delete", "options", "patch"}}
        for path, ops in spec["paths"].items()
    }


def served() -> dict[str, set[str]]:
    from app import app

    return {path: set(methods) for path, methods in app.routes.items()}


def test_every_served_route_is_documented() -> None:
    docs = documented()
    for path, methods in served().items():
        assert path in docs, f"{path} is served but not in docs/openapi.yaml"
        assert methods <= docs[path], f"{path}: {methods - docs[path]} served but not documented"


def test_every_documented_route_is_served() -> None:
    routes = served()
    for path, methods in documented().items():
        assert path in routes, f"{path} is documented but not served"
        assert methods <= routes[path], f"{path}: {methods - routes[path]} documented but not served"


def test_the_spec_is_valid_openapi() -> None:
    from openapi_spec_validator import validate

    validate(yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text()))
