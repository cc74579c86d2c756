"""The Admin API access token a Shopify connector sends: an admin-created app's static one, or one obtained with a Dev
Dashboard app's client id and secret through the client credentials grant, cached and renewed before it expires.

Since 2026-01-01 a shop can no longer create an admin-created custom app; a new app comes from the Dev Dashboard (or
Shopify CLI) and has no token to copy: https://shopify.dev/docs/apps/build/authentication-authorization/legacy/admin-custom-apps
The grant (POST /admin/oauth/access_token, form-encoded grant_type=client_credentials, client_id, client_secret;
the answer is JSON with access_token, scope and expires_in in seconds, about a day):
https://shopify.dev/docs/apps/build/authentication-authorization/client-credentials-grant
https://shopify.dev/docs/apps/build/authentication-authorization/client-secrets
There is no refresh token: a new token is asked for with the same credentials.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlencode

from chalicelib.platforms.base import StoreCredentialsRefused, StoreUnavailable
from chalicelib.platforms.http import Transport

TOKEN_PATH = "/admin/oauth/access_token"
# Renewed while this much of its life is left, so a call never goes out with a token about to lapse on the way.
RENEW_BEFORE_S = 300.0
_ERROR_CODE = re.compile(r"^[a-z_]{1,60}$")


class AccessTokens(Protocol):
    """Where a connector's Admin API token comes from."""

    def current(self) -> str:
        """A token to send now (StoreUnavailable when none can be had)."""
        ...

    def refused(self, token: str) -> bool:
        """Shopify answered 401 to `token`: whether a fresh one is worth one more try."""
        ...


class StaticToken:
    """An admin-created app's token (shpat_…): it does not expire, and there is nothing fresher to fetch on a 401."""

    def __init__(self, token: Callable[[], str]) -> None:
        self._token = token

    def current(self) -> str:
        """The configured token (read through the secrets cache, so a rotation reaches a warm container)."""
        return self._token()

    def refused(self, token: str) -> bool:
        """Never retried: the same token would be refused again."""
        return False


class ClientCredentialsToken:
    """A Dev Dashboard app's token, obtained with the client credentials grant.

    One per connector, so per container: every call the connector makes shares it, and a lock makes concurrent
    callers wait for one grant instead of each asking for its own.
    """

    def __init__(
        self,
        *,
        shop_domain: str,
        client_id: str,
        client_secret: Callable[[], str],
        transport: Transport,
        clock: Callable[[], float] = time.time,
        renew_before_s: float = RENEW_BEFORE_S,
    ) -> None:
        self.shop_domain = shop_domain.strip().lower()
        self.client_id = client_id
        self._client_secret = client_secret
        self._transport = transport
        self._clock = clock
        self.renew_before_s = renew_before_s
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_at: float | None = None
        self.grants = 0  # tokens obtained so far by this container (logs and tests)

    def current(self) -> str:
        """The cached token, or a new one once less than `renew_before_s` of its life is left."""
        with self._lock:
            if self._token is not None and not self._due():
                return self._token
            self._token, self._expires_at = self._obtain()
            self.grants += 1
            return self._token

    def refused(self, token: str) -> bool:
        """Forget `token` (revoked, or lapsed earlier than its expires_in said), so the next call obtains another."""
        with self._lock:
            if self._token == token:
                self._token = None
                self._expires_at = None
        return True

    def _due(self) -> bool:
        # Without an expires_in the token is kept until Shopify refuses it, and the 401 path renews it.
        return self._expires_at is not None and self._expires_at - self._clock() < self.renew_before_s

    def _obtain(self) -> tuple[str, float | None]:
        asked_at = self._clock()
        body = urlencode(
            {"grant_type": "client_credentials", "client_id": self.client_id, "client_secret": self._client_secret()}
        ).encode("ascii")
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        response = self._transport.send("POST", f"https://{self.shop_domain}{TOKEN_PATH}", headers, body)
        answer = _json(response.body)
        if response.status != 200:
            # The OAuth error code (invalid_client, app_not_installed, shop_not_permitted...) says what to fix; the
            # description and the body may echo what was sent, so only a well-formed code is repeated.
            code = answer.get("error") if isinstance(answer, dict) else None
            named = f": {code}" if isinstance(code, str) and _ERROR_CODE.match(code) else ""
            if 400 <= response.status < 500 and response.status != 429:
                # Shopify is up and refuses these credentials (a wrong secret, an app not installed): the shop's
                # to fix, never a store that is down.
                raise StoreCredentialsRefused(
                    f"Shopify refused the app's client credentials (HTTP {response.status}{named})."
                )
            raise StoreUnavailable(f"Shopify did not issue an access token (HTTP {response.status}{named}).")
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(answer, dict) or not isinstance(token, str) or not token.strip():
            raise StoreUnavailable("Shopify's access token answer has no access_token.")
        lifetime = answer.get("expires_in")
        if isinstance(lifetime, bool) or not isinstance(lifetime, int | float) or lifetime <= 0:
            return token.strip(), None
        # Counted from when it was asked for: the time the answer took is already gone from its life.
        return token.strip(), asked_at + float(lifetime)


def _json(data: bytes) -> object:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
