"""The Chalice app as a WSGI application, in-process, through Chalice's own API Gateway emulation.

chalice.test.Client cannot answer the gateway's automatic CORS preflight (its body is None), so this
adapter talks to the same LocalGateway directly. Requests are served one at a time, like the test client.
"""

from __future__ import annotations

import base64
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from chalice import Chalice
from chalice.cli.factory import CLIFactory
from chalice.local import LocalGateway, LocalGatewayException

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
# Sees (method, target, headers, body) just before the app does, and returns the headers to send.
BeforeRequest = Callable[[str, str, dict[str, str], bytes], dict[str, str]]


class ChaliceWsgi:
    """Serve WSGI requests with the app behind the local API Gateway, counting the statuses it answers."""

    def __init__(self, app: Chalice, project_dir: Path, stage: str = "local", before: BeforeRequest | None = None):
        config = CLIFactory(str(project_dir)).create_config_obj(chalice_stage_name=stage)
        self.gateway = LocalGateway(app, config)
        self.before = before
        self.statuses: Counter[int] = Counter()
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = str(environ["REQUEST_METHOD"])
        # The raw target, so a percent-encoded token reaches the route as API Gateway would pass it.
        target = str(environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO") or "/")
        if "?" not in target and environ.get("QUERY_STRING"):
            target += "?" + str(environ["QUERY_STRING"])
        headers = {
            key[5:].replace("_", "-").lower(): str(value) for key, value in environ.items() if key.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = str(environ["CONTENT_TYPE"])
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        if self.before is not None:
            headers = self.before(method, target, headers, body)
        with self._lock:
            status, response_headers, payload = self._handle(method, target, headers, body)
        self.statuses[status] += 1
        reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Unknown"
        start_response(f"{status} {reason}", response_headers)
        return [payload]

    def _handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, list, bytes]:
        try:
            response = self.gateway.handle_request(method=method.upper(), path=target, headers=headers, body=body)
        except LocalGatewayException as refused:
            # What API Gateway itself answers (no route, a method the route lacks): never the app's 5xx.
            return refused.CODE, list(refused.headers.items()), refused.body or b""
        raw = response.get("body")
        if raw is None:
            payload = b""
        elif response.get("isBase64Encoded"):
            payload = base64.b64decode(raw)
        else:
            payload = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
        pairs = [(k, str(v)) for k, v in (response.get("headers") or {}).items()]
        for name, values in (response.get("multiValueHeaders") or {}).items():
            pairs.extend((name, str(v)) for v in values)
        return int(response["statusCode"]), pairs, payload
