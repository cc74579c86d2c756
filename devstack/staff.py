"""The dashboard's staff pool on the local emulator: the pool, app client and groups infra/template.json defines,
and a first owner (and a support member) with known dev-only passwords, printed in the banner (docs/ADMIN.md).

The emulator (moto's cognito-idp) signs id tokens with its one fixed key and serves the public half at
`<emulator>/<pool id>/.well-known/jwks.json`; the API reads it there (ADMIN_JWKS_URL) and checks each token as
in production: signature, issuer, audience, expiry.
"""

from __future__ import annotations

from typing import Any

OWNER_EMAIL = "owner@walnut-and-wool.test"
SUPPORT_EMAIL = "support@walnut-and-wool.test"
DEV_PASSWORD = "Dev-only-staff-1"  # the local stage only: this emulator is reachable from this machine alone


def staff_pool(session: Any, prefix: str, emulator_url: str) -> dict[str, str]:
    """Create the staff pool with its two members; the API settings that name it."""
    cognito = session.client("cognito-idp", endpoint_url=emulator_url)
    pool_id = cognito.create_user_pool(
        PoolName=f"{prefix}-staff",
        UsernameAttributes=["email"],
        AutoVerifiedAttributes=["email"],
        # Deployed pools require an authenticator (the template's AdminMfa, ON by default); here the dev accounts
        # sign in with their printed password alone, and one can still add an authenticator to try that step.
        MfaConfiguration="OPTIONAL",
        AdminCreateUserConfig={"AllowAdminCreateUserOnly": True},
    )["UserPool"]["Id"]
    client_id = cognito.create_user_pool_client(
        UserPoolId=pool_id,
        ClientName=f"{prefix}-dashboard",
        GenerateSecret=False,
        ExplicitAuthFlows=["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
    )["UserPoolClient"]["ClientId"]
    for group in ("owner", "support"):
        cognito.create_group(UserPoolId=pool_id, GroupName=group)
    for email, group in ((OWNER_EMAIL, "owner"), (SUPPORT_EMAIL, "support")):
        cognito.admin_create_user(
            UserPoolId=pool_id,
            Username=email,
            UserAttributes=[{"Name": "email", "Value": email}, {"Name": "email_verified", "Value": "true"}],
            MessageAction="SUPPRESS",
        )
        cognito.admin_set_user_password(UserPoolId=pool_id, Username=email, Password=DEV_PASSWORD, Permanent=True)
        cognito.admin_add_user_to_group(UserPoolId=pool_id, Username=email, GroupName=group)
    return {
        "ADMIN_USER_POOL_ID": pool_id,
        "ADMIN_CLIENT_ID": client_id,
        "ADMIN_JWKS_URL": f"{emulator_url.rstrip('/')}/{pool_id}/.well-known/jwks.json",
    }
