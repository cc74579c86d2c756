"""Delivery adapters: SMS through SNS, email through SES v2, each paced by a per-channel rate limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib.config import ConfigError

SMS = "sms"
EMAIL = "email"
STOP_LINE = "Reply STOP to opt out"


@dataclass(frozen=True)
class Notice:
    """One message ready to go: the text for SMS; subject, text, HTML and unsubscribe link for email."""

    channel: str
    to: str
    text: str
    subject: str = ""
    html: str = ""
    unsubscribe_url: str = ""


class RateLimiter:
    """A token bucket: on average `per_second` sends, with bursts of up to one second's worth."""

    def __init__(
        self,
        per_second: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if per_second <= 0:
            raise ConfigError(f"a send rate must be above zero, got {per_second}")
        self.per_second = per_second
        self.capacity = max(1.0, per_second)
        self._tokens = self.capacity
        self._monotonic = monotonic
        self._sleep = sleep
        self._last = monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token, waiting until it is due; returns how long this caller waited."""
        with self._lock:
            now = self._monotonic()
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.per_second)
            self._last = now
            # Taking the token before sleeping books this caller's slot, so waiters queue up in order.
            self._tokens -= 1
            wait = -self._tokens / self.per_second if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


class SmsSender:
    """SMS through SNS Publish to an E.164 number, as transactional (not promotional) traffic."""

    def __init__(self, sns: Any) -> None:
        self.sns = sns

    def send(self, notice: Notice) -> str:
        """Publish one SMS; returns the SNS message id."""
        response = self.sns.publish(
            PhoneNumber=notice.to,
            Message=notice.text,
            MessageAttributes={
                # Transactional: the route built for reliable delivery; a notice with a time limit is not marketing.
                "AWS.SNS.SMS.SMSType": {"DataType": "String", "StringValue": "Transactional"},
            },
        )
        return str(response["MessageId"])


class EmailSender:
    """Email through SES v2 SendEmail: text and HTML parts, with RFC 8058 one-click unsubscribe headers."""

    def __init__(self, sesv2: Any, from_address: str) -> None:
        self.sesv2 = sesv2
        self.from_address = from_address

    def request(self, notice: Notice) -> dict[str, Any]:
        """The SendEmail parameters for one notice."""
        return {
            "FromEmailAddress": self.from_address,
            "Destination": {"ToAddresses": [notice.to]},
            "Content": {
                "Simple": {
                    "Subject": {"Data": notice.subject, "Charset": "UTF-8"},
                    "Body": {
                        "Text": {"Data": notice.text, "Charset": "UTF-8"},
                        "Html": {"Data": notice.html, "Charset": "UTF-8"},
                    },
                    "Headers": [
                        {"Name": "List-Unsubscribe", "Value": f"<{notice.unsubscribe_url}>"},
                        {"Name": "List-Unsubscribe-Post", "Value": "List-Unsubscribe=One-Click"},
                    ],
                }
            },
        }

    def send(self, notice: Notice) -> str:
        """Send one email; returns the SES message id."""
        return str(self.sesv2.send_email(**self.request(notice))["MessageId"])


class Senders:
    """Routes a notice to its channel's sender, after waiting for that channel's rate limit."""

    def __init__(self, sms: SmsSender, email: EmailSender, *, sms_per_second: float, email_per_second: float) -> None:
        self._senders: dict[str, SmsSender | EmailSender] = {SMS: sms, EMAIL: email}
        self._limits = {SMS: RateLimiter(sms_per_second), EMAIL: RateLimiter(email_per_second)}

    def send(self, notice: Notice) -> str:
        """Deliver one notice; returns the provider's message id. Raises whatever the provider raised."""
        sender = self._senders.get(notice.channel)
        if sender is None:
            raise ValueError(f"no sender for channel {notice.channel!r}")
        self._limits[notice.channel].acquire()
        return sender.send(notice)
