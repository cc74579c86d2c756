"""Standard Webhooks signatures: verify what the shop platform sends (and sign, for the console and tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from chalicelib.errors import InvalidSignature
from chalicelib.web import json_object

MAX_WEBHOOK_BYTES = 16 * 1024


@dataclass(frozen=True)
class Delivery:
    """A verified webhook delivery."""

    webhook_id: str
    timestamp: float
    body: Any


def verify(raw: bytes | None, headers: Mapping[str, str], secrets: Sequence[str]) -> Delivery:
    """Check the signature against any configured secret (two during a rotation); InvalidSignature otherwise.

    The body is parsed only after the signature holds, so nothing unsigned is ever read.
    """
    # Imported here, not at the top: a cold start pays for it only on the paths that use it.
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    data = raw or b""
    lowered = {k.lower(): v for k, v in headers.items()}
    if len(data) > MAX_WEBHOOK_BYTES:
        raise InvalidSignature("The body is larger than any signed delivery we accept.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSignature("The body is not UTF-8, so its signature cannot match.") from exc
    for secret in secrets:
        try:
            Webhook(secret).verify(text, lowered, json_parse=False)
        except (WebhookVerificationError, ValueError, TypeError, IndexError):
            # ValueError/binascii.Error: a malformed signature header is a failed check, not a crash.
            continue
        return Delivery(lowered["webhook-id"], float(lowered["webhook-timestamp"]), text)
    raise InvalidSignature("The webhook signature is missing, wrong or outside the 5-minute window.")


def parse_json_body(delivery: Delivery) -> dict[str, Any]:
    """The verified body as one JSON object; BadRequest 'invalid_json' or 'invalid_body' otherwise."""
    return json_object(delivery.body)


def sign(secret: str, body: str, webhook_id: str, timestamp: float | None = None) -> dict[str, str]:
    """The three Standard Webhooks headers for a body, as a shop platform would send them."""
    from standardwebhooks.webhooks import Webhook

    at = datetime.fromtimestamp(timestamp, tz=UTC) if timestamp is not None else datetime.now(tz=UTC)
    signature = Webhook(secret).sign(webhook_id, at, body)
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }
