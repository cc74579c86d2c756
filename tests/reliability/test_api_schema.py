"""The public API against docs/openapi.yaml: generated requests to every documented operation, in-process.

Schemathesis generates requests from the document (valid ones and deliberately invalid ones) and sends
them to the Chalice app through Chalice's own API Gateway emulation (tests/reliability/wsgi.py). Every
answer must be a documented status (never a 5xx), with a documented content type, headers and body.

To reach past the first refusal, the adapter plays the shop's part: it signs each webhook body with the
stage's secret (as the platform would; the body itself is whatever was generated) and puts half of the
generated SKUs in the catalogue. The per-address rate limit answers some taps with 429, which is
documented. The clock moves three seconds per request.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Iterator
from urllib.parse import parse_qs

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from chalicelib.capture import SKU_PATTERN
from chalicelib.webhooks import sign
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.greedy_routes import GREEDY, GreedyRouteMatcher
from tests.reliability.tally import count
from tests.reliability.wsgi import ChaliceWsgi
from tests.support import CHAIR, ROOT, installed

EXAMPLES = 100  # per operation, plus the document's own examples and schemathesis's boundary cases
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

schema = schemathesis.openapi.from_path(ROOT / "docs" / "openapi.yaml")


@schema.hook("filter_path_parameters")
def only_paths_the_greedy_resource_takes(context: schemathesis.HookContext, path_parameters: dict[str, object]) -> bool:
    """The greedy resource's cases are the paths no other route serves, as docs/openapi.yaml says: API Gateway
    sends `/widget.js` to the widget, never to `/{proxy+}`. The generator also draws strings from the app's own
    code, so it does name served paths; those are the other operations' cases, not this one's."""
    operation = context.operation
    if operation is None or operation.path != GREEDY:
        return True
    from app import app

    matched = GreedyRouteMatcher(list(app.routes)).match_route("/" + str(path_parameters.get("proxy+", "")))
    return bool(matched.route == GREEDY)


class Platform:
    """What stands between the generator and the app: the shop's signing and its catalogue."""

    def __init__(self, services: Services, clock: FixedClock) -> None:
        self.services = services
        self.clock = clock

    def __call__(self, method: str, target: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        self.clock.advance(3)
        if target.startswith("/webhooks/") and "webhook-signature" not in headers:
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                return headers  # unsigned: the app must refuse it with 401
            secret = self.services.webhook_secrets()[0]
            headers = {**headers, **sign(secret, text, f"msg_{uuid.uuid4().hex}")}
        if target.startswith("/notify-me") and method == "POST":
            self._stock(body, headers.get("content-type", ""))
        return headers

    def _stock(self, body: bytes, content_type: str) -> None:
        """Put the tap's SKU in the catalogue for half of the SKUs, so capture goes on past the lookup."""
        try:
            text = body.decode("utf-8")
            data = dict(parse_qs(text)) if "urlencoded" in content_type else json.loads(text)
        except (UnicodeDecodeError, ValueError, TypeError):
            return
        sku = data.get("sku") if isinstance(data, dict) else None
        sku = sku[-1] if isinstance(sku, list) and sku else sku
        if isinstance(sku, str) and SKU_PATTERN.match(sku) and zlib.crc32(sku.encode()) % 2 == 0:
            self.services.tables.catalog.upsert(sku, dict(CHAIR))


@pytest.fixture
def app_under_test(services: Services, clock: FixedClock) -> Iterator[ChaliceWsgi]:
    """The Chalice app as a WSGI application, on the emulator, with the platform's part played."""
    from app import app

    wsgi = ChaliceWsgi(app, ROOT, before=Platform(services, clock))
    try:
        with installed(services):
            yield wsgi
    finally:
        for status, n in wsgi.statuses.items():
            count(f"schemathesis answers {status // 100}xx", n)


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_is_documented_and_none_is_a_server_error(case: schemathesis.Case, app_under_test) -> None:
    response = case.call(app=app_under_test)
    case.validate_response(response, checks=CHECKS)
