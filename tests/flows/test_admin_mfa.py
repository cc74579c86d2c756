"""Staff sign-in on a pool with MFA required (the template's AdminMfa, ON by default): no password alone gets a
token; a member without an authenticator sets one up in the sign-in itself (MFA_SETUP), then gives its code every
time (SOFTWARE_TOKEN_MFA)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from tests.admin_pool import Pool, jwks_over_http, staff_pool
from tests.support import REGION, app_client

OWNER = "owner@shop.example"
TEMPORARY = "Temporary-pass-1"
CHOSEN = "A-new-password-2"


def totp(secret: str, at: float | None = None) -> str:
    """The six-digit code an authenticator app shows for `secret` (RFC 6238: HMAC-SHA1, 30-second steps)."""
    key = base64.b32decode(secret + "=" * (-len(secret) % 8), casefold=True)
    digest = hmac.new(key, struct.pack(">Q", int((time.time() if at is None else at) // 30)), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    return f"{(struct.unpack('>I', digest[offset : offset + 4])[0] & 0x7FFFFFFF) % 1_000_000:06d}"


@pytest.fixture
def pool(session: Any, monkeypatch: pytest.MonkeyPatch) -> Pool:
    # The emulator checks codes against the key it handed out only when asked to, as Cognito always does.
    monkeypatch.setenv("MOTO_COGNITO_IDP_USER_POOL_ENABLE_TOTP", "true")
    staff = staff_pool(session.client("cognito-idp", region_name=REGION), mfa="ON")
    staff.cognito.admin_create_user(
        UserPoolId=staff.pool_id, Username=OWNER, TemporaryPassword=TEMPORARY, MessageAction="SUPPRESS"
    )
    staff.cognito.admin_add_user_to_group(UserPoolId=staff.pool_id, Username=OWNER, GroupName="owner")
    return staff


@pytest.fixture
def api(session: Any, clock: FixedClock, env: dict[str, str], pool: Pool) -> Iterator[Client]:
    settings = settings_from_env({**env, "ADMIN_USER_POOL_ID": pool.pool_id, "ADMIN_CLIENT_ID": pool.client_id})
    services = Services(
        settings, aws=Aws(REGION, session=session), clock=clock, model=FakeBedrock(), jwks_fetch=jwks_over_http
    )
    with app_client(services) as test_client:
        yield test_client


def call(api: Client, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    answer = api.http.post(path, headers={"Content-Type": "application/json"}, body=json.dumps(body))
    return answer.status_code, json.loads(answer.body)


def step(api: Client, previous: dict[str, Any], answer: str) -> tuple[int, dict[str, Any]]:
    body = {"email": OWNER, "session": previous["session"], "challenge": previous["challenge"], "answer": answer}
    return call(api, "/admin/api/session/challenge", body)


def set_up(api: Client) -> tuple[str, dict[str, Any]]:
    """First sign-in up to the authenticator step: the key handed out and that step's answer."""
    _, first = call(api, "/admin/api/session", {"email": OWNER, "password": TEMPORARY})
    assert first["challenge"] == "NEW_PASSWORD_REQUIRED"
    status, setup = step(api, first, CHOSEN)
    assert status == 200 and setup["challenge"] == "MFA_SETUP", setup
    return str(setup["secret"]), setup


def test_a_new_owner_gets_no_token_until_an_authenticator_is_set_up(api: Client) -> None:
    secret, setup = set_up(api)
    assert "id_token" not in setup and setup["session"]
    assert setup["otpauth"] == (
        f"otpauth://totp/Back%20in%20stock%20dashboard:owner@shop.example?secret={secret}"
        "&issuer=Back%20in%20stock%20dashboard"
    )
    status, done = step(api, setup, totp(secret))
    assert status == 200, done
    assert (done["role"], done["email"]) == ("owner", OWNER) and done["id_token"]
    me = api.http.get("/admin/api/me", headers={"Authorization": f"Bearer {done['id_token']}"})
    assert me.status_code == 200


def test_a_wrong_code_at_setup_is_refused_like_a_wrong_password(api: Client) -> None:
    secret, setup = set_up(api)
    wrong = f"{(int(totp(secret)) + 1) % 1_000_000:06d}"
    status, refused = step(api, setup, wrong)
    assert (status, refused["error"]) == (401, "sign_in_failed")
    assert "id_token" not in refused


def test_once_set_up_every_password_sign_in_asks_for_the_code(api: Client) -> None:
    secret, setup = set_up(api)
    assert step(api, setup, totp(secret))[0] == 200
    status, again = call(api, "/admin/api/session", {"email": OWNER, "password": CHOSEN})
    assert (status, again["challenge"]) == (200, "SOFTWARE_TOKEN_MFA") and "id_token" not in again
    assert step(api, again, f"{(int(totp(secret)) + 1) % 1_000_000:06d}")[0] == 401
    status, again = call(api, "/admin/api/session", {"email": OWNER, "password": CHOSEN})
    status, done = step(api, again, totp(secret))
    assert (status, done["role"]) == (200, "owner")
