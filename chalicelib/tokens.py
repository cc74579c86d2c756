"""Signed links: reserve, unsubscribe and manage tokens (itsdangerous). Payloads carry ids, never contacts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RESERVE = "reserve"
UNSUBSCRIBE = "unsubscribe"
MANAGE = "manage"


class TokenInvalid(Exception):
    """Tampered, truncated or foreign token."""


class TokenExpired(Exception):
    """A genuine token past its maximum age."""


@dataclass(frozen=True)
class Signed:
    """What a verified token said, and when it was signed (Unix seconds)."""

    value: str
    issued_at: float


class Tokens:
    """Signs and verifies the three kinds of link with one secret key (salted per kind)."""

    def __init__(self, key: str) -> None:
        # Imported here, not at the top: a cold start pays for it only on the paths that use it.
        from itsdangerous import URLSafeTimedSerializer

        self._serializers = {kind: URLSafeTimedSerializer(key, salt=kind) for kind in (RESERVE, UNSUBSCRIBE, MANAGE)}

    def _dump(self, kind: str, field: str, value: str) -> str:
        return str(self._serializers[kind].dumps({field: value}))

    def _load(self, kind: str, field: str, token: str, max_age_s: int | None) -> Signed:
        if not token or len(token) > 512:
            raise TokenInvalid("token missing or too long")
        from itsdangerous import BadSignature, SignatureExpired

        try:
            data, issued = self._serializers[kind].loads(token, max_age=max_age_s, return_timestamp=True)
        except SignatureExpired as exc:
            raise TokenExpired(str(exc)) from exc
        except (BadSignature, ValueError, TypeError) as exc:
            raise TokenInvalid(str(exc)) from exc
        value: Any = data.get(field) if isinstance(data, dict) else None
        if not isinstance(value, str) or not value:
            raise TokenInvalid("token payload has no id")
        return Signed(value, issued.timestamp())

    def reserve(self, token_id: str) -> str:
        """A reserve link's token naming one offer row."""
        return self._dump(RESERVE, "t", token_id)

    def read_reserve(self, token: str, max_age_s: int | None = None) -> Signed:
        """The offer row id of a reserve token; TokenInvalid or TokenExpired."""
        return self._load(RESERVE, "t", token, max_age_s)

    def unsubscribe(self, contact_key: str) -> str:
        """An unsubscribe link's token naming a contact by its keyed hash."""
        return self._dump(UNSUBSCRIBE, "k", contact_key)

    def read_unsubscribe(self, token: str) -> Signed:
        """The contact key of an unsubscribe token (these never expire: RFC 8058 links must keep working)."""
        return self._load(UNSUBSCRIBE, "k", token, None)

    def manage(self, contact_key: str) -> str:
        """A 'my requests' link's token naming a contact by its keyed hash."""
        return self._dump(MANAGE, "k", contact_key)

    def read_manage(self, token: str, max_age_s: int | None = None) -> Signed:
        """The contact key of a manage token."""
        return self._load(MANAGE, "k", token, max_age_s)
