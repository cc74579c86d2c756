"""Signed links: reserve, unsubscribe, undo, manage, confirm and opt-in tokens (itsdangerous). Payloads carry ids, never contacts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# What Tokens is given: one key, the keys newest first, or a callable returning those (read through the secrets
# cache on every use, so a rotation reaches a warm container).
KeySource = str | Sequence[str] | Callable[[], Sequence[str]]

RESERVE = "reserve"
UNSUBSCRIBE = "unsubscribe"
MANAGE = "manage"
CONFIRM = "confirm"
OPTIN = "optin"
UNDO = "undo"


class TokenInvalid(Exception):
    """Tampered, truncated or foreign token."""


class TokenExpired(Exception):
    """A genuine token past its maximum age."""


class TokenRevoked(Exception):
    """A genuine manage token signed before its person signed out everywhere."""


@dataclass(frozen=True)
class Signed:
    """What a verified token said, and when it was signed (Unix seconds)."""

    value: str
    issued_at: float
    version: int = 0  # a manage token's per-person version (0 for tokens signed before versions existed)


def current_keys(source: KeySource) -> tuple[str, ...]:
    """The keys a source holds now, newest first."""
    keys = (source,) if isinstance(source, str) else tuple(source() if callable(source) else source)
    if not keys or not all(keys):
        raise ValueError("TOKEN_KEY holds no key")
    return keys


class Tokens:
    """Signs and verifies the six kinds of link with TOKEN_KEY (salted per kind).

    TOKEN_KEY may hold several keys during a rotation, newest first: links are signed with the newest and
    verified against every key listed, so a link signed with the old key keeps working until that key is
    dropped. itsdangerous takes its keys the other way round ("a list of keys, oldest to newest"; it signs
    with the last), so the list is reversed before it is handed over.
    """

    def __init__(self, keys: KeySource) -> None:
        self._source = keys
        # The keys the serializers were built from, and the serializers, swapped together (threads share them).
        self._built: tuple[tuple[str, ...], dict[str, Any]] = ((), {})

    def _current_keys(self) -> tuple[str, ...]:
        return current_keys(self._source)

    def _serializer(self, kind: str) -> Any:
        keys = self._current_keys()
        built_from, serializers = self._built
        if keys != built_from:
            # Imported here, not at the top: a cold start pays for it only on the paths that use it.
            from itsdangerous import URLSafeTimedSerializer

            oldest_first = list(reversed(keys))
            serializers = {
                k: URLSafeTimedSerializer(oldest_first, salt=k)
                for k in (RESERVE, UNSUBSCRIBE, MANAGE, CONFIRM, OPTIN, UNDO)
            }
            self._built = (keys, serializers)
        return serializers[kind]

    def _dump(self, kind: str, field: str, value: str, **extra: Any) -> str:
        return str(self._serializer(kind).dumps({field: value, **extra}))

    def _load(self, kind: str, field: str, token: str, max_age_s: int | None) -> Signed:
        data, issued = self._data(kind, token, max_age_s)
        value: Any = data.get(field)
        if not isinstance(value, str) or not value:
            raise TokenInvalid("token payload has no id")
        version: Any = data.get("v", 0)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise TokenInvalid("token version is not a count")
        return Signed(value, issued, version)

    def _data(self, kind: str, token: str, max_age_s: int | None) -> tuple[dict[str, Any], float]:
        if not token or len(token) > 512:
            raise TokenInvalid("token missing or too long")
        from itsdangerous import BadSignature, SignatureExpired

        serializer = self._serializer(kind)
        try:
            data, issued = serializer.loads(token, max_age=max_age_s, return_timestamp=True)
        except SignatureExpired as exc:
            raise TokenExpired(str(exc)) from exc
        except (BadSignature, ValueError, TypeError) as exc:
            raise TokenInvalid(str(exc)) from exc
        if not isinstance(data, dict):
            raise TokenInvalid("token payload is not an object")
        return data, issued.timestamp()

    def _two_texts(
        self, kind: str, token: str, max_age_s: int | None, fields: tuple[str, str], missing: str
    ) -> tuple[str, str]:
        """A token whose payload is two non-empty strings (a place's, an opt-in's); TokenInvalid(`missing`)."""
        data, _ = self._data(kind, token, max_age_s)
        first, second = _texts(data, fields, missing)
        return first, second

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

    def manage(self, contact_key: str, version: int = 0) -> str:
        """A 'my requests' link's token naming a contact by its keyed hash, at the person's current link version
        (signing out everywhere raises the version, and every token below it is refused)."""
        if version:
            return self._dump(MANAGE, "k", contact_key, v=int(version))
        return self._dump(MANAGE, "k", contact_key)

    def read_manage(self, token: str, max_age_s: int | None = None) -> Signed:
        """The contact key (and link version) of a manage token."""
        return self._load(MANAGE, "k", token, max_age_s)

    def confirm(self, sku: str, joined_ts: str) -> str:
        """A confirmation link's token naming one place (never a contact)."""
        return self._dump(CONFIRM, "s", sku, j=joined_ts)

    def read_confirm(self, token: str, max_age_s: int | None = None) -> tuple[str, str]:
        """The (sku, joined_ts) a confirm token names; TokenInvalid or TokenExpired."""
        return self._two_texts(CONFIRM, token, max_age_s, ("s", "j"), "token payload has no place")

    def optin(self, contact_key: str, nonce: str) -> str:
        """An opt-in link's token: a person (by keyed hash) and the nonce of the opt-in staff started for them."""
        return self._dump(OPTIN, "k", contact_key, n=nonce)

    def read_optin(self, token: str, max_age_s: int | None = None) -> tuple[str, str]:
        """The (contact key, nonce) an opt-in token names; TokenInvalid or TokenExpired."""
        return self._two_texts(OPTIN, token, max_age_s, ("k", "n"), "token payload has no opt-in")

    def undo(self, contact_key: str, at: int, nonce: str) -> str:
        """An unsubscribe's undo: the person (by keyed hash), the opt-out's written-at stamp and the nonce of the
        record kept for taking it back (chalicelib/shopper/undo.py)."""
        return self._dump(UNDO, "k", contact_key, a=int(at), n=nonce)

    def read_undo(self, token: str, max_age_s: int) -> tuple[str, int, str]:
        """The (contact key, opt-out stamp, nonce) an undo token names; TokenInvalid or TokenExpired."""
        data, _ = self._data(UNDO, token, max_age_s)
        key, nonce = _texts(data, ("k", "n"), "token payload has no undo")
        at = data.get("a")
        if isinstance(at, bool) or not isinstance(at, int):
            raise TokenInvalid("token payload has no opt-out stamp")
        return key, at, nonce


def _texts(data: dict[str, Any], fields: tuple[str, ...], missing: str) -> list[str]:
    """The payload's `fields`, each of which must be a non-empty string (a place's, an opt-in's, an undo's parts);
    TokenInvalid(`missing`) when any is not."""
    values = [data.get(name) for name in fields]
    if not all(isinstance(value, str) and value for value in values):
        raise TokenInvalid(missing)
    return [str(value) for value in values]
