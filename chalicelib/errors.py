"""Domain errors. Each carries the HTTP status and stable error code that app.py answers with."""

from __future__ import annotations


class DomainError(Exception):
    """A refusal the caller can act on: never a 5xx."""

    status = 400
    code = "bad_request"

    reason: str | None = None  # a finer cause under a stable code, answered as `reason` (e.g. a number too short)

    def __init__(self, message: str, *, code: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        if reason:
            self.reason = reason


class BadRequest(DomainError):
    """Malformed or invalid input."""


class PayloadTooLarge(DomainError):
    """The body is larger than any legitimate request."""

    status = 413
    code = "payload_too_large"


class UnknownSku(DomainError):
    """The SKU is not in the catalogue."""

    status = 404
    code = "unknown_sku"


class Discontinued(DomainError):
    """The SKU is in the catalogue but no longer sold, so nobody can join its list."""

    status = 404
    code = "discontinued"


class RateLimited(DomainError):
    """One source sent too many requests in the current window."""

    status = 429
    code = "rate_limited"

    def __init__(self, message: str, retry_after_s: int, *, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after_s = retry_after_s


class Forbidden(DomainError):
    """The request came from somewhere that may not make it (e.g. a cross-site form post)."""

    status = 403
    code = "forbidden"


class InvalidSignature(DomainError):
    """A webhook whose signature is missing, wrong or stale."""

    status = 401
    code = "invalid_signature"


class Busy(DomainError):
    """Too many simultaneous writes to one record to finish now; the caller should retry shortly."""

    status = 503
    code = "busy"


class NotFound(DomainError):
    """A referenced record does not exist."""

    status = 404
    code = "not_found"


class Conflict(DomainError):
    """The request is well formed but contradicts the record's state."""

    status = 409
    code = "conflict"
