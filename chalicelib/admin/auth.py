"""Cognito id tokens checked in the app: RS256 against the pool's JWKS, issuer, audience, use and lifetime.

Pure Python, no JWT library: RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017 §8.2.2) is verified by computing
`signature ** e mod n` and comparing it, in constant time, with the whole encoding the signer must have made
(EMSA-PKCS1-v1_5, RFC 8017 §9.2): 0x00 0x01 FF..FF 0x00 || DigestInfo(SHA-256) || hash. The decrypted block is
never parsed, so no malformed padding can be accepted. Claims follow Cognito's "Verifying a JSON Web Token".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.errors import Busy

# DER of DigestInfo for SHA-256, the prefix of the hash in the encoded block (RFC 8017 §9.2, note 1).
SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")
# Clock skew tolerated between Cognito and this function, in seconds.
LEEWAY_S = 60
# The two groups a staff member may be in (infra/template.json); owner outranks support.
ROLES = ("owner", "support")

Fetch = Callable[[str], bytes]


class TokenRefused(Exception):
    """A token that must not be trusted; the message says why (for logs, never for the caller)."""


@dataclass(frozen=True)
class Staff:
    """A signed-in staff member, as their verified id token names them."""

    sub: str
    email: str
    role: str


def b64url_decode(text: str) -> bytes:
    """base64url without padding (RFC 7515 §2)."""
    # isalnum() alone takes letters and digits of every script, which base64 refuses with a ValueError.
    if not isinstance(text, str) or not text.isascii() or not all(c.isalnum() or c in "-_" for c in text):
        raise TokenRefused("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _uint(text: str) -> int:
    return int.from_bytes(b64url_decode(text), "big")


@dataclass(frozen=True)
class RsaKey:
    """One RSA public key of a JWKS."""

    n: int
    e: int

    @property
    def size(self) -> int:
        """Modulus length in bytes (k of RFC 8017)."""
        return (self.n.bit_length() + 7) // 8


def parse_jwks(document: Mapping[str, Any]) -> dict[str, RsaKey]:
    """kid -> key for every RSA signing key of a JWKS (RFC 7517); other keys are ignored."""
    keys: dict[str, RsaKey] = {}
    for jwk in document.get("keys", []):
        if not isinstance(jwk, Mapping) or jwk.get("kty") != "RSA" or jwk.get("use", "sig") != "sig":
            continue
        if jwk.get("alg", "RS256") != "RS256" or not isinstance(jwk.get("kid"), str):
            continue
        keys[jwk["kid"]] = RsaKey(n=_uint(jwk["n"]), e=_uint(jwk["e"]))
    return keys


def pkcs1_v15_sha256_valid(key: RsaKey, message: bytes, signature: bytes) -> bool:
    """RSASSA-PKCS1-v1_5-VERIFY with SHA-256 (RFC 8017 §8.2.2), comparing whole encodings in constant time."""
    k = key.size
    # The signature must be exactly k octets and a representative below n (§8.2.2 steps 1 and 2.b).
    if len(signature) != k or k < len(SHA256_DIGEST_INFO) + 32 + 11:
        return False
    s = int.from_bytes(signature, "big")
    if s >= key.n:
        return False
    encoded = pow(s, key.e, key.n).to_bytes(k, "big")
    t = SHA256_DIGEST_INFO + hashlib.sha256(message).digest()
    expected = b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t
    return hmac.compare_digest(encoded, expected)


def _json_part(text: str) -> dict[str, Any]:
    try:
        value = json.loads(b64url_decode(text))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TokenRefused("a part is not JSON") from exc
    if not isinstance(value, dict):
        raise TokenRefused("a part is not a JSON object")
    return value


class TokenVerifier:
    """Checks id tokens of one user pool and app client; the JWKS is fetched once per container."""

    def __init__(
        self,
        *,
        region: str,
        pool_id: str,
        client_id: str,
        fetch: Fetch,
        now: Callable[[], float],
        enabled: bool = True,
    ) -> None:
        # A stage without a staff pool has no dashboard: every token is refused, and no keys are ever fetched.
        self.enabled = enabled
        self.issuer = f"https://cognito-idp.{region}.amazonaws.com/{pool_id}"
        self.client_id = client_id
        self._fetch = fetch
        self._now = now
        self._keys: dict[str, RsaKey] | None = None
        self._lock = threading.Lock()

    @property
    def jwks_url(self) -> str:
        """Where the pool publishes its signing keys."""
        return f"{self.issuer}/.well-known/jwks.json"

    def _key(self, kid: str) -> RsaKey:
        with self._lock:
            if self._keys is None:
                self._keys = parse_jwks(json.loads(self._fetch(self.jwks_url)))
            keys = self._keys
        key = keys.get(kid)
        if key is None:
            raise TokenRefused("unknown kid")
        return key

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims when every check passes; TokenRefused otherwise."""
        if not self.enabled:
            raise TokenRefused("this stage has no staff user pool")
        parts = token.split(".") if isinstance(token, str) and token.isascii() else []
        if len(parts) != 3 or len(token) > 8192:
            raise TokenRefused("not a compact JWS")
        header = _json_part(parts[0])
        if header.get("alg") != "RS256":
            raise TokenRefused("alg is not RS256")
        key = self._key(str(header.get("kid", "")))
        if not pkcs1_v15_sha256_valid(key, f"{parts[0]}.{parts[1]}".encode("ascii"), b64url_decode(parts[2])):
            raise TokenRefused("bad signature")
        claims = _json_part(parts[1])
        if claims.get("iss") != self.issuer:
            raise TokenRefused("issued by another pool")
        if claims.get("token_use") != "id" or claims.get("aud") != self.client_id:
            raise TokenRefused("not an id token for this app client")
        now = self._now()
        exp, iat = claims.get("exp"), claims.get("iat")
        # bool is an int in Python, never a time.
        if not isinstance(exp, int) or not isinstance(iat, int) or isinstance(exp, bool) or isinstance(iat, bool):
            raise TokenRefused("no exp or iat")
        if now > exp + LEEWAY_S or iat > now + LEEWAY_S:
            raise TokenRefused("expired or not yet valid")
        return claims

    def staff(self, token: str, current_groups: Callable[[str], list[str]] | None = None) -> Staff:
        """The staff member a valid token names, with their highest role; TokenRefused without one.

        With `current_groups` the role comes from the groups the user is in now, read from the pool on every
        request: an id token keeps the `cognito:groups` it was issued with for its whole hour, so a member taken
        out of a group would otherwise keep its role until the token expires."""
        claims = self.verify(token)
        username = claims.get("cognito:username")
        if current_groups is not None:
            if not isinstance(username, str) or not username:
                raise TokenRefused("no cognito:username to read the groups of")
            groups: Any = current_groups(username)
        else:
            groups = claims.get("cognito:groups") or []
        role = next((r for r in ROLES if isinstance(groups, list) and r in groups), None)
        if role is None:
            raise TokenRefused("in no staff group")
        email = str(claims.get("email") or claims.get("cognito:username") or "")
        return Staff(sub=str(claims.get("sub", "")), email=email, role=role)


@dataclass(frozen=True)
class StaffGroups:
    """The groups a staff member is in now, read from the pool (AdminListGroupsForUser)."""

    cognito: Any
    pool_id: str

    def of(self, username: str) -> list[str]:
        """Every group `username` is in; none for a user the pool no longer has."""
        names: list[str] = []
        kwargs: dict[str, Any] = {"UserPoolId": self.pool_id, "Username": username, "Limit": 60}
        try:
            while True:
                answer = self.cognito.admin_list_groups_for_user(**kwargs)
                names += [str(g.get("GroupName")) for g in answer.get("Groups", [])]
                if not answer.get("NextToken"):
                    return names
                kwargs["NextToken"] = answer["NextToken"]
        except self.cognito.exceptions.UserNotFoundException:
            return []
        except (BotoCoreError, ClientError) as exc:
            # No role can be known: refuse the request (503, try again) rather than trust the token's claim.
            raise Busy("Could not check your role just now; please try again.", code="roles_unavailable") from exc


def urllib_fetch(url: str) -> bytes:
    """GET a JWKS over HTTPS (or from the local emulator), with a short timeout."""
    from urllib.request import urlopen

    with urlopen(url, timeout=5) as answer:
        return bytes(answer.read())
