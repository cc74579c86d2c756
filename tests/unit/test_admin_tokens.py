"""The dashboard's id-token check (chalicelib/admin/auth.py) against tokens made here with a generated RSA key.

The signatures come from the `cryptography` package (RSASSA-PKCS1-v1_5 with SHA-256, RFC 8017 §8.2); the
claims are those Cognito puts in an id token ("Verifying a JSON Web Token", Amazon Cognito Developer Guide).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from chalicelib.admin.auth import (
    RsaKey,
    TokenRefused,
    TokenVerifier,
    parse_jwks,
    pkcs1_v15_sha256_valid,
)
from chalicelib.web.errors import error_status

REGION, POOL, CLIENT = "eu-west-2", "eu-west-2_AbC123", "client123"
ISSUER = f"https://cognito-idp.{REGION}.amazonaws.com/{POOL}"
NOW = 1_800_000_000
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def uint(value: int) -> str:
    return b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def jwks(*keys: tuple[str, Any]) -> bytes:
    return json.dumps(
        {
            "keys": [
                {
                    "kty": "RSA",
                    "alg": "RS256",
                    "use": "sig",
                    "kid": kid,
                    "n": uint(k.public_key().public_numbers().n),
                    "e": uint(k.public_key().public_numbers().e),
                }
                for kid, k in keys
            ]
        }
    ).encode()


def token(claims: dict[str, Any] | None = None, *, key: Any = KEY, header: dict[str, Any] | None = None) -> str:
    body = {
        "iss": ISSUER,
        "aud": CLIENT,
        "token_use": "id",
        "sub": "staff-sub-1",
        "email": "owner@shop.example",
        "cognito:groups": ["owner"],
        "iat": NOW - 10,
        "exp": NOW + 3600,
        **(claims or {}),
    }
    head = header or {"alg": "RS256", "kid": "k1"}
    signing_input = f"{b64(json.dumps(head).encode())}.{b64(json.dumps(body).encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64(signature)}"


class Fetches:
    def __init__(self, document: bytes) -> None:
        self.document = document
        self.urls: list[str] = []

    def __call__(self, url: str) -> bytes:
        self.urls.append(url)
        return self.document


def verifier(fetch: Any = None, now: float = NOW) -> TokenVerifier:
    return TokenVerifier(
        region=REGION, pool_id=POOL, client_id=CLIENT, fetch=fetch or Fetches(jwks(("k1", KEY))), now=lambda: now
    )


def test_a_good_token_names_the_staff_member_and_their_role() -> None:
    staff = verifier().staff(token())
    assert (staff.sub, staff.email, staff.role) == ("staff-sub-1", "owner@shop.example", "owner")
    assert verifier().staff(token({"cognito:groups": ["support"]})).role == "support"
    assert verifier().staff(token({"cognito:groups": ["support", "owner"]})).role == "owner"


def test_the_keys_are_fetched_once_from_the_issuer() -> None:
    fetch = Fetches(jwks(("k1", KEY)))
    check = verifier(fetch)
    check.verify(token())
    check.verify(token())
    assert fetch.urls == [f"{ISSUER}/.well-known/jwks.json"]


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"iss": "https://cognito-idp.eu-west-2.amazonaws.com/eu-west-2_Other"}, "another pool"),
        ({"aud": "another-client"}, "another app client"),
        ({"token_use": "access"}, "an access token"),
        ({"exp": NOW - 61}, "expired past the leeway"),
        ({"iat": NOW + 61}, "issued in the future"),
        ({"exp": None}, "no expiry"),
        ({"exp": "soon"}, "an expiry that is not a number"),
        ({"cognito:groups": []}, "in no staff group"),
        ({"cognito:groups": ["admins"]}, "in another group"),
    ],
)
def test_claims_that_do_not_fit_are_refused(claims: dict[str, Any], why: str) -> None:
    with pytest.raises(TokenRefused):
        verifier().staff(token(claims))


def test_the_leeway_is_a_minute() -> None:
    verifier().verify(token({"exp": NOW - 59}))


@pytest.mark.parametrize(
    "made",
    [
        lambda: token(key=OTHER),  # signed by a key not in the JWKS under that kid
        lambda: token(header={"alg": "RS256", "kid": "unknown"}),
        lambda: token(header={"alg": "none", "kid": "k1"}),
        lambda: token(header={"alg": "HS256", "kid": "k1"}),
        lambda: token(header={"alg": "RS512", "kid": "k1"}),
        lambda: token().rsplit(".", 1)[0] + ".",  # no signature
        lambda: token()[:-4] + "AAAA",  # signature altered
        lambda: "a.b",
        lambda: "not a token",
        lambda: token() + ".extra",
        lambda: "!!!." + token().split(".", 1)[1],
    ],
)
def test_forged_and_malformed_tokens_are_refused(made: Any) -> None:
    with pytest.raises(TokenRefused):
        verifier().verify(made())


def test_a_changed_claim_breaks_the_signature() -> None:
    head, body, signature = token({"cognito:groups": ["support"]}).split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["cognito:groups"] = ["owner"]
    with pytest.raises(TokenRefused):
        verifier().verify(f"{head}.{b64(json.dumps(claims).encode())}.{signature}")


def test_the_verification_compares_the_whole_encoding() -> None:
    numbers = KEY.public_key().public_numbers()
    key = RsaKey(n=numbers.n, e=numbers.e)
    message = b"signed bytes"
    good = KEY.sign(message, padding.PKCS1v15(), hashes.SHA256())
    assert pkcs1_v15_sha256_valid(key, message, good)
    assert not pkcs1_v15_sha256_valid(key, b"other bytes", good)
    # A signature of the right length that is not below the modulus, and one a byte short.
    assert not pkcs1_v15_sha256_valid(key, message, (numbers.n).to_bytes(256, "big"))
    assert not pkcs1_v15_sha256_valid(key, message, good[1:])
    # The same hash signed with SHA-1's DigestInfo (another encoding) is not accepted for SHA-256.
    sha1_signed = KEY.sign(message, padding.PKCS1v15(), hashes.SHA1())
    assert not pkcs1_v15_sha256_valid(key, message, sha1_signed)


def test_parse_jwks_keeps_rsa_signing_keys_only() -> None:
    document = json.loads(jwks(("k1", KEY)))
    document["keys"] += [
        {"kty": "EC", "kid": "ec", "crv": "P-256", "x": "AA", "y": "AA"},
        {**document["keys"][0], "kid": "enc", "use": "enc"},
        {**document["keys"][0], "kid": "ps", "alg": "PS256"},
    ]
    assert set(parse_jwks(document)) == {"k1"}


def test_a_stage_without_a_pool_refuses_everything_and_fetches_nothing() -> None:
    fetch = Fetches(jwks(("k1", KEY)))
    check = TokenVerifier(region=REGION, pool_id=POOL, client_id=CLIENT, fetch=fetch, now=lambda: NOW, enabled=False)
    with pytest.raises(TokenRefused):
        check.verify(token())
    assert fetch.urls == []


class _Pool:
    """A Cognito client whose group listing fails as a throttled or unreachable pool does."""

    class exceptions:  # boto3 names its modelled errors this way
        class UserNotFoundException(Exception):
            pass

    def admin_list_groups_for_user(self, **_: Any) -> Any:
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"}}, "List")


def test_a_role_that_cannot_be_read_now_refuses_the_request_rather_than_trust_the_token() -> None:
    from chalicelib.admin.auth import StaffGroups
    from chalicelib.errors import Busy

    with pytest.raises(Busy) as refused:
        StaffGroups(cognito=_Pool(), pool_id="eu-west-2_AbC123").of("someone")
    assert (error_status(refused.value), refused.value.code) == (503, "roles_unavailable")
