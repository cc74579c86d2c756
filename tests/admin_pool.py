"""A staff user pool on the emulator, as infra/template.json defines it, and real id tokens from it.

moto's cognito-idp signs every pool's tokens with its one fixed key (moto/cognitoidp/resources/jwks-private.json)
and serves the public half at `https://cognito-idp.<region>.amazonaws.com/<pool>/.well-known/jwks.json`, the path
Cognito publishes it at ("Verifying a JSON Web Token", Amazon Cognito Developer Guide). Under mock_aws that URL is
answered in process for the `requests` library, so the tests read the keys through the same HTTP path the app
uses in production.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

PASSWORD = "Staff-password-1"


def jwks_over_http(url: str) -> bytes:
    """GET the JWKS (mock_aws answers it in process)."""
    answer = requests.get(url, timeout=5)
    answer.raise_for_status()
    return answer.content


@dataclass(frozen=True)
class Pool:
    """A staff pool, its app client, and a way to get tokens."""

    cognito: Any
    pool_id: str
    client_id: str

    def add(self, email: str, group: str | None) -> None:
        """A confirmed staff member with PASSWORD, in `group` (None: in no group)."""
        self.cognito.admin_create_user(
            UserPoolId=self.pool_id,
            Username=email,
            UserAttributes=[{"Name": "email", "Value": email}, {"Name": "email_verified", "Value": "true"}],
            MessageAction="SUPPRESS",
        )
        self.cognito.admin_set_user_password(UserPoolId=self.pool_id, Username=email, Password=PASSWORD, Permanent=True)
        if group is not None:
            self.cognito.admin_add_user_to_group(UserPoolId=self.pool_id, Username=email, GroupName=group)

    def id_token(self, email: str) -> str:
        """A real id token from InitiateAuth USER_PASSWORD_AUTH."""
        answer = self.cognito.initiate_auth(
            ClientId=self.client_id,
            AuthFlow="USER_PASSWORD_AUTH",
            AuthParameters={"USERNAME": email, "PASSWORD": PASSWORD},
        )
        return str(answer["AuthenticationResult"]["IdToken"])


def staff_pool(cognito: Any, name: str = "bisn-staff", mfa: str = "OPTIONAL") -> Pool:
    """The template's pool: email usernames, MFA `mfa` (software tokens; the template's AdminMfa, ON by default),
    an app client without a secret allowing USER_PASSWORD_AUTH and REFRESH_TOKEN_AUTH, and the groups owner and
    support."""
    pool_id = cognito.create_user_pool(
        PoolName=name,
        UsernameAttributes=["email"],
        MfaConfiguration=mfa,
        AdminCreateUserConfig={"AllowAdminCreateUserOnly": True},
    )["UserPool"]["Id"]
    if mfa != "OFF":
        cognito.set_user_pool_mfa_config(
            UserPoolId=pool_id, SoftwareTokenMfaConfiguration={"Enabled": True}, MfaConfiguration=mfa
        )
    client_id = cognito.create_user_pool_client(
        UserPoolId=pool_id,
        ClientName="dashboard",
        GenerateSecret=False,
        ExplicitAuthFlows=["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
    )["UserPoolClient"]["ClientId"]
    for group in ("owner", "support"):
        cognito.create_group(UserPoolId=pool_id, GroupName=group)
    return Pool(cognito, pool_id, client_id)
