"""Staff sign-in through the Cognito user pool: InitiateAuth (USER_PASSWORD_AUTH) and its challenges.

Field names are botocore's cognito-idp model (InitiateAuth, RespondToAuthChallenge, AssociateSoftwareToken,
VerifySoftwareToken). A pool with MFA on (the template's default, `AdminMfa`) answers a member who has no
authenticator yet with MFA_SETUP: the key comes from AssociateSoftwareToken on the challenge's session, and only
a code from it (VerifySoftwareToken) lets RespondToAuthChallenge issue tokens, so nobody signs in on a password
alone. An unknown user and a wrong
password get the same answer, so the sign-in form never tells a stranger which addresses are staff.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from botocore.exceptions import ClientError

from chalicelib.admin.auth import TokenRefused, TokenVerifier
from chalicelib.errors import BadRequest, DomainError, NotFound, RateLimited
from chalicelib.tables.base import error_code

# The challenges the dashboard's form can answer, and the ChallengeResponses key each answer goes in.
ANSWERS = {
    "NEW_PASSWORD_REQUIRED": "NEW_PASSWORD",
    "SOFTWARE_TOKEN_MFA": "SOFTWARE_TOKEN_MFA_CODE",
    "MFA_SETUP": "",  # its code goes to VerifySoftwareToken, not in ChallengeResponses
}
# The name an authenticator app shows next to the dashboard's codes.
ISSUER = "Back in stock dashboard"
# Refusals that mean "these credentials do not sign in" (the same answer for each).
REFUSED = {
    "NotAuthorizedException",
    "UserNotFoundException",
    "UserNotConfirmedException",
    "PasswordResetRequiredException",
    "CodeMismatchException",
    "ExpiredCodeException",
    "EnableSoftwareTokenMFAException",  # VerifySoftwareToken's answer to a wrong code
}


class SignInFailed(DomainError):
    """Wrong email, password or code (never which)."""

    code = "sign_in_failed"


@dataclass(frozen=True)
class SignedIn:
    """A finished sign-in."""

    id_token: str
    expires_in: int
    role: str
    email: str

    def body(self) -> dict[str, Any]:
        """The JSON answer."""
        return {"id_token": self.id_token, "expires_in": self.expires_in, "role": self.role, "email": self.email}


@dataclass(frozen=True)
class Challenge:
    """A further step Cognito asks for before it issues tokens."""

    challenge: str
    session: str
    secret: str = ""  # MFA_SETUP only: the authenticator key to add, and whose it is
    email: str = ""

    def body(self) -> dict[str, Any]:
        """The JSON answer; MFA_SETUP's carries the key and its otpauth URI (Key Uri Format) for the app."""
        answer: dict[str, Any] = {"challenge": self.challenge, "session": self.session}
        if self.secret:
            label = quote(f"{ISSUER}:{self.email}", safe=":@")
            answer["secret"] = self.secret
            answer["otpauth"] = f"otpauth://totp/{label}?secret={self.secret}&issuer={quote(ISSUER)}"
        return answer


def _text(data: Mapping[str, Any], name: str, limit: int = 2048) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value or len(value) > limit:
        raise BadRequest(f"`{name}` is required (a string of at most {limit} characters).", code="invalid_field")
    return value


@dataclass(frozen=True, kw_only=True, eq=False)
class SignIn:
    """Password sign-in against one app client (no client secret) of the staff pool."""

    cognito: Any
    client_id: str
    verifier: TokenVerifier

    def start(self, data: Mapping[str, Any]) -> SignedIn | Challenge:
        """POST /admin/api/session: email and password."""
        email, password = _text(data, "email", 320), _text(data, "password", 256)
        return self._call(
            "initiate_auth",
            email,
            ClientId=self.client_id,
            AuthFlow="USER_PASSWORD_AUTH",
            AuthParameters={"USERNAME": email, "PASSWORD": password},
        )

    def answer(self, data: Mapping[str, Any]) -> SignedIn | Challenge:
        """POST /admin/api/session/challenge: a new password or a code from an authenticator app."""
        challenge = _text(data, "challenge", 64)
        key = ANSWERS.get(challenge)
        if key is None:
            raise BadRequest(f"`challenge` must be one of {', '.join(ANSWERS)}.", code="invalid_field")
        session, email, answer = _text(data, "session", 4096), _text(data, "email", 320), _text(data, "answer", 256)
        if challenge == "MFA_SETUP":
            # The code proves the app holds the key; Cognito then takes the setup as the second factor.
            verified = self._cognito(
                "verify_software_token", Session=session, UserCode=answer, FriendlyDeviceName="dashboard"
            )
            if verified.get("Status") != "SUCCESS":
                raise SignInFailed("That email, password or code did not sign in.")
            return self._call(
                "respond_to_auth_challenge",
                email,
                ClientId=self.client_id,
                ChallengeName="MFA_SETUP",
                Session=str(verified.get("Session", "")),
                ChallengeResponses={"USERNAME": email},
            )
        return self._call(
            "respond_to_auth_challenge",
            email,
            ClientId=self.client_id,
            ChallengeName=challenge,
            Session=session,
            ChallengeResponses={"USERNAME": email, key: answer},
        )

    def _call(self, operation: str, email: str, **kwargs: Any) -> SignedIn | Challenge:
        answer = self._cognito(operation, **kwargs)
        result = answer.get("AuthenticationResult")
        if result:
            try:
                staff = self.verifier.staff(str(result["IdToken"]))
            except TokenRefused as exc:
                # Signed in, but in neither staff group: no dashboard for them.
                raise SignInFailed("That email, password or code did not sign in.") from exc
            return SignedIn(str(result["IdToken"]), int(result.get("ExpiresIn", 3600)), staff.role, staff.email)
        name = str(answer.get("ChallengeName", ""))
        if name not in ANSWERS:
            raise SignInFailed(f"This sign-in needs a step the dashboard does not offer ({name}).")
        if name == "MFA_SETUP":
            key = self._cognito("associate_software_token", Session=str(answer.get("Session", "")))
            return Challenge(name, str(key.get("Session", "")), str(key["SecretCode"]), email)
        return Challenge(name, str(answer.get("Session", "")))

    def _cognito(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        if not self.client_id:
            # A stage without the staff pool (ADMIN_USER_POOL_ID / ADMIN_CLIENT_ID unset) has no dashboard to sign in to.
            raise NotFound("This stage has no dashboard: it has no staff user pool.", code="no_dashboard")
        try:
            answer: dict[str, Any] = getattr(self.cognito, operation)(**kwargs)
        except ClientError as exc:
            code = error_code(exc)
            if code in REFUSED:
                raise SignInFailed("That email, password or code did not sign in.") from exc
            if code in ("InvalidPasswordException", "PasswordHistoryPolicyViolationException"):
                raise BadRequest("That new password does not meet the pool's password policy.", code=code) from exc
            if code == "TooManyRequestsException":
                raise RateLimited("Too many sign-in attempts; wait a minute and try again.", 60) from exc
            raise
        return answer
