"""The HTTP status each kind of refusal is answered with. A pure table: it imports no chalice, so the page modules
that choose a refusal page's status read it without loading the web framework."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chalicelib.errors import DomainError

# HTTP belongs to the entry points, not to the domain: the status each kind of refusal is answered with
# (docs/openapi.yaml), by the error's class or its nearest ancestor here. Classes are named, not imported, so that
# loading the app imports no service module (tests/unit/test_cold_start.py).
ERROR_STATUS: dict[str, int] = {
    "DomainError": 400,
    "BadRequest": 400,
    "PayloadTooLarge": 413,
    "UnknownSku": 404,  # also chalicelib.notifier.UnknownRestock, a NotFound
    "Discontinued": 404,
    "OnBackorder": 409,
    "RateLimited": 429,
    "Forbidden": 403,
    "InvalidSignature": 401,
    "Busy": 503,
    "NotFound": 404,
    "Conflict": 409,  # also chalicelib.manage.NotConfirmed
    "FormRefused": 403,  # chalicelib/manage.py
    "ChallengeFailed": 403,  # chalicelib/challenge.py
    "ChallengeUnavailable": 503,  # chalicelib/challenge.py
    "Unauthorized": 401,  # chalicelib/admin/api.py
    "SignInFailed": 401,  # chalicelib/admin/signin.py
    "StillHolding": 409,  # chalicelib/support_desk.py
    "UnknownProduct": 404,  # chalicelib/support_desk.py
}


def error_status(error: DomainError) -> int:
    """The HTTP status a refusal is answered with: its class's in ERROR_STATUS, or its nearest ancestor's."""
    for kind in type(error).__mro__:
        status = ERROR_STATUS.get(kind.__name__)
        if status is not None:
            return status
    return ERROR_STATUS["DomainError"]
