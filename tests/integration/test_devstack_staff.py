"""The local stack's staff pool on moto server: the API reads the pool's keys over HTTP, as in production."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import boto3
import pytest
from moto.server import ThreadedMotoServer

from chalicelib.admin.auth import TokenRefused, TokenVerifier, urllib_fetch
from chalicelib.admin.signin import SignedIn, SignIn, SignInFailed
from devstack.staff import DEV_PASSWORD, OWNER_EMAIL, SUPPORT_EMAIL, staff_pool
from tests.support import REGION


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def emulator() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_the_dev_staff_sign_in_and_their_tokens_verify_against_the_served_keys(emulator: str) -> None:
    session = boto3.session.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    settings = staff_pool(session, "bisn", emulator)
    cognito = session.client("cognito-idp", endpoint_url=emulator)
    jwks_url = settings["ADMIN_JWKS_URL"]
    assert jwks_url == f"{emulator}/{settings['ADMIN_USER_POOL_ID']}/.well-known/jwks.json"
    verifier = TokenVerifier(
        region=REGION,
        pool_id=settings["ADMIN_USER_POOL_ID"],
        client_id=settings["ADMIN_CLIENT_ID"],
        fetch=lambda _issuer_url: urllib_fetch(jwks_url),
        now=time.time,
    )
    sign_in = SignIn(cognito=cognito, client_id=settings["ADMIN_CLIENT_ID"], verifier=verifier)
    owner = sign_in.start({"email": OWNER_EMAIL, "password": DEV_PASSWORD})
    helper = sign_in.start({"email": SUPPORT_EMAIL, "password": DEV_PASSWORD})
    assert isinstance(owner, SignedIn) and isinstance(helper, SignedIn)
    assert (owner.role, helper.role) == ("owner", "support")
    with pytest.raises(SignInFailed):
        sign_in.start({"email": OWNER_EMAIL, "password": "Wrong-password-1"})
    with pytest.raises(TokenRefused):
        verifier.verify(owner.id_token[:-6] + "AAAAAA")
