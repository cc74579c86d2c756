"""An optional human check on the Notify-me tap for hot drops: Cloudflare Turnstile, verified server-side.

Off unless the stage sets TURNSTILE_SITE_KEY (and the TURNSTILE_SECRET secret); off locally, so the local stack
and the tests need no network. When on, a tap must carry the token the widget's Turnstile box produced (JSON field
`challenge`, or the form field `cf-turnstile-response` Turnstile itself adds to a form), and the token is checked
with Cloudflare's Siteverify API before anything else is read or written. A token is single-use and lives five
minutes (Cloudflare's "Validate the token" page, developers.cloudflare.com/turnstile/get-started/server-side-validation).
"""

from __future__ import annotations

import json
import logging
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from chalicelib.errors import BadRequest, DomainError

log = logging.getLogger(__name__)

SITEVERIFY_URL = "https://challenges.cloudflare.com/turnstile/v0/siteverify"
MAX_TOKEN_LEN = 2048  # Cloudflare documents a token of at most 2048 characters
TIMEOUT_S = 5.0
# The fields a tap may carry the token in: the widget's JSON, and Turnstile's own hidden input in a plain form.
TOKEN_FIELDS = ("challenge", "cf-turnstile-response")

# POSTs a form to a URL and returns the decoded JSON answer; the network in production, a fake in tests.
PostForm = Callable[[str, Mapping[str, str]], Mapping[str, Any]]


class ChallengeFailed(DomainError):
    """The tap's human check was missing or did not verify."""

    code = "challenge_failed"


class ChallengeUnavailable(DomainError):
    """Siteverify could not be asked: the tap is refused (failing open would let the bot through), honestly."""

    code = "challenge_unavailable"


def post_form(url: str, fields: Mapping[str, str]) -> Mapping[str, Any]:
    """POST `fields` form-encoded to `url` and read its JSON answer."""
    data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(url, data=data, method="POST")
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        answer = json.loads(response.read(65536).decode())
    if not isinstance(answer, dict):
        raise ValueError("siteverify answered something other than a JSON object")
    return answer


def token_of(data: Any) -> str:
    """The Turnstile token a tap's body carries, or BadRequest."""
    if not isinstance(data, Mapping):
        raise BadRequest("The body must be a JSON object.", code="invalid_body")
    for field in TOKEN_FIELDS:
        value = data.get(field)
        if value not in (None, ""):
            if not isinstance(value, str) or len(value) > MAX_TOKEN_LEN:
                raise ChallengeFailed("The human check's answer was not readable; please try again.")
            return value
    raise ChallengeFailed("Please complete the human check, then tap Notify me again.")


@dataclass(frozen=True, kw_only=True, eq=False)
class TurnstileCheck:
    """Verifies a tap's Turnstile token with Siteverify; `expected_hostnames` are where the widget may run (the
    shop's storefront origins and the API's own pages)."""

    secret: Callable[[], str]
    expected_hostnames: frozenset[str]
    post: PostForm | None = None  # None: the network (post_form)

    def verify(self, data: Any, remote_ip: str) -> None:
        """Return when the tap's token verifies; ChallengeFailed (403) or ChallengeUnavailable (503) otherwise."""
        token = token_of(data)
        fields = {"secret": self.secret(), "response": token}
        if remote_ip:
            fields["remoteip"] = remote_ip
        try:
            answer = (self.post or post_form)(SITEVERIFY_URL, fields)
        except Exception:
            log.warning("Turnstile siteverify could not be asked", exc_info=True)
            raise ChallengeUnavailable(
                "We could not check that you are a person just now; please try again in a moment."
            ) from None
        if answer.get("success") is not True:
            codes = answer.get("error-codes")
            log.info("a tap's human check failed: %s", codes if isinstance(codes, list) else "no error codes")
            raise ChallengeFailed("The human check did not pass; please try it again.")
        hostname = answer.get("hostname")
        if self.expected_hostnames and hostname not in self.expected_hostnames:
            # A token solved on another site's page (with our site key) is no proof that this shop's page was used.
            log.info("a tap's human check was solved on an unexpected host")
            raise ChallengeFailed("The human check did not pass; please try it again.")


def hostnames(urls: tuple[str, ...]) -> frozenset[str]:
    """The host names of these origins or URLs: where a Turnstile box on the shop's pages runs."""
    return frozenset(host for host in (urlparse(u.strip()).hostname for u in urls) if host)
