"""Every kind of refusal is answered with its own HTTP status, from the one table at the edge (chalicelib/web/errors.py)."""

from __future__ import annotations

import pytest

from chalicelib import errors
from chalicelib.admin.api import Unauthorized
from chalicelib.admin.signin import SignInFailed
from chalicelib.challenge import ChallengeFailed, ChallengeUnavailable
from chalicelib.manage import FormRefused, NotConfirmed
from chalicelib.notifier import UnknownRestock
from chalicelib.support_desk import StillHolding, UnknownProduct
from chalicelib.web.errors import ERROR_STATUS, error_status
from chalicelib.web.responses import error_response

STATUSES: list[tuple[type[errors.DomainError], int]] = [
    (errors.DomainError, 400),
    (errors.BadRequest, 400),
    (errors.PayloadTooLarge, 413),
    (errors.UnknownSku, 404),
    (errors.Discontinued, 404),
    (errors.OnBackorder, 409),
    (errors.RateLimited, 429),
    (errors.Forbidden, 403),
    (errors.InvalidSignature, 401),
    (errors.Busy, 503),
    (errors.NotFound, 404),
    (errors.Conflict, 409),
    (UnknownRestock, 404),
    (NotConfirmed, 409),
    (FormRefused, 403),
    (ChallengeFailed, 403),
    (ChallengeUnavailable, 503),
    (Unauthorized, 401),
    (SignInFailed, 401),
    (StillHolding, 409),
    (UnknownProduct, 404),
]


@pytest.mark.parametrize(("kind", "status"), STATUSES)
def test_each_kind_of_refusal_has_its_status(kind: type[errors.DomainError], status: int) -> None:
    if kind is errors.RateLimited:
        error: errors.DomainError = errors.RateLimited("No.", 3)
    elif kind is errors.OnBackorder:
        error = errors.OnBackorder("No.", offer="none")
    else:
        error = kind("No.")
    assert error_status(error) == status
    assert error_response(error).status_code == status


def test_a_refusal_carries_no_status_of_its_own() -> None:
    # The domain names the kind of refusal; only the edge knows HTTP.
    for kind, _ in STATUSES:
        assert not hasattr(kind, "status"), kind


def test_every_kind_in_the_table_exists() -> None:
    named = {kind.__name__ for kind, _ in STATUSES}
    assert set(ERROR_STATUS) <= named
