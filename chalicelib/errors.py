"""Domain errors: a refusal's kind (its class) and stable error code. The HTTP status each kind is answered with
belongs to the entry points (chalicelib/web/errors.py ERROR_STATUS), not to the domain."""

from __future__ import annotations


class DomainError(Exception):
    """A refusal the caller can act on: never a 5xx."""

    code = "bad_request"

    reason: str | None = None  # a finer cause under a stable code, answered as `reason` (e.g. a number too short)
    # Words for the shopper in their own language, answered as `note` (the widget shows it as it is; "" hides it).
    note: str | None = None

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

    code = "payload_too_large"


class UnknownSku(DomainError):
    """The SKU is not in the catalogue."""

    code = "unknown_sku"


class Discontinued(DomainError):
    """The SKU is in the catalogue but no longer sold, so nobody can join its list."""

    code = "discontinued"


class OnBackorder(DomainError):
    """The store sells the product on backorder, so it is not sold out, and the shop offers no waiting list for it:
    `reason` is what the widget offers instead ("preorder": the `note` that it can be ordered now; "none": nothing,
    an empty `note`)."""

    code = "on_backorder"

    def __init__(self, message: str, *, offer: str, note: str | None = None) -> None:
        super().__init__(message, reason=offer)
        self.note = note


class RateLimited(DomainError):
    """One source sent too many requests in the current window."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after_s: int, *, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after_s = retry_after_s


class Forbidden(DomainError):
    """The request came from somewhere that may not make it (e.g. a cross-site form post)."""

    code = "forbidden"


class InvalidSignature(DomainError):
    """A webhook whose signature is missing, wrong or stale."""

    code = "invalid_signature"


class Busy(DomainError):
    """Too many simultaneous writes to one record to finish now; the caller should retry shortly."""

    code = "busy"


class NotFound(DomainError):
    """A referenced record does not exist."""

    code = "not_found"


class FormRefused(DomainError):
    """A shopper page's form that did not come from the shopper's own, recent page, or is not what the page posts."""

    code = "form_refused"


class Conflict(DomainError):
    """The request is well formed but contradicts the record's state."""

    code = "conflict"
