"""The one way connectors reach a store: a small transport that tests and the local stack can replace.

Redirects are never followed (a redirect would carry the store's credentials to wherever it points), every call
has a timeout, and an answer is read up to a size limit. An HTTP error status is an answer, returned like any
other; only a store that could not be reached raises.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from chalicelib.platforms.base import StoreUnavailable

TIMEOUT_S = 8.0
MAX_RESPONSE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class HttpResponse:
    """A store's answer; header names are lower case."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


class Transport(Protocol):
    """Sends one request and returns the answer, whatever its status; StoreUnavailable if there was none."""

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        """One request."""
        ...


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class UrllibTransport:
    """The deployed transport: urllib, no redirects, a timeout and a size limit."""

    def __init__(self, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(_NoRedirect)

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        """One request; an HTTP error status is returned, not raised."""
        request = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                return HttpResponse(
                    int(response.status), self._limited(response.read(MAX_RESPONSE_BYTES + 1)), _lower(response.headers)
                )
        except urllib.error.HTTPError as exc:
            return HttpResponse(int(exc.code), self._limited(exc.read(MAX_RESPONSE_BYTES + 1)), _lower(exc.headers))
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            # The URL and the error's text may name the shop; the kind of failure is enough.
            raise StoreUnavailable(f"the store could not be reached: {type(exc).__name__}") from exc

    @staticmethod
    def _limited(data: bytes) -> bytes:
        if len(data) > MAX_RESPONSE_BYTES:
            raise StoreUnavailable(f"the store's answer is larger than {MAX_RESPONSE_BYTES} bytes")
        return data


def _lower(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers.items() if headers is not None else [])}


def retry_after_s(response: HttpResponse, default: float = 2.0) -> float:
    """The seconds a 429 or 503 asks us to wait (Retry-After in seconds), else `default`."""
    raw = response.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(raw)) if raw else default
    except ValueError:
        return default
