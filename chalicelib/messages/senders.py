"""Delivery adapters: SMS through SNS, email through SES v2, each paced by a per-channel rate limit."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as NoConnection

from chalicelib.config import ConfigError

log = logging.getLogger(__name__)

SMS = "sms"
EMAIL = "email"
STOP_LINE = "Reply STOP to opt out"

# Answers that prove the provider refused the request before doing anything: safe to ask again. SES v2
# SendEmail's TooManyRequestsException (HTTP 429) and SNS Publish's Throttled (ThrottledException) are in
# botocore's service models (data/sesv2/…/service-2.json, data/sns/…/service-2.json); the rest are the codes
# botocore's standard retry mode treats as throttling.
THROTTLED = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "Throttled",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
    }
)
# The provider's own failures (HTTP 5xx): SNS Publish's InternalError (500, its service model) and the codes
# botocore's standard retry mode retries as transient. AWS answers them without acting on the request.
SERVER_FAULTS = frozenset({"InternalError", "InternalFailure", "InternalServerError", "ServiceUnavailable"})
ATTEMPTS = 3  # tries per notice for answers that prove nothing was sent
THROTTLE_ATTEMPTS = 5  # a throttle is back-pressure: the tries wait longer (0.4, 0.8, 1.6, 3.2 s) before giving up

# Refusals that are about this one recipient, never about our account or our request: the same notice to
# anyone else would go, and the same notice to them will never go. Anything not listed here is not the
# recipient's fault (a sandboxed, paused or suspended account, an unverified sender, a malformed request) and
# fails the job instead, so one misconfiguration never marks everyone undeliverable.
#
# SES v2 SendEmail (botocore data/sesv2/…/service-2.json, errors of SendEmail; the SES API reference's
# SendEmail page): MessageRejected is the refusal of this message to its recipient ("an invalid recipient
# address rejects the entire message"; in the sandbox, a recipient that is not verified). Not listed, as they
# are about the account or the sender: MailFromDomainNotVerifiedException, AccountSuspendedException,
# SendingPausedException, LimitExceededException, NotFoundException (the configuration set), BadRequestException.
SES_RECIPIENT_REFUSALS = frozenset({"MessageRejected"})
# SNS Publish (botocore data/sns/…/service-2.json): OptedOut (OptedOutException, "the specified phone number
# opted out of receiving SMS messages from your account"). InvalidParameter and ParameterValueInvalid are
# about whichever parameter was wrong, so they count only when the message names the PhoneNumber parameter
# (SNS answers a number it cannot send to with "Invalid parameter: PhoneNumber Reason: …"); EndpointDisabled
# is for mobile push endpoints, never a phone number.
SNS_RECIPIENT_REFUSALS = frozenset({"OptedOut"})
SNS_PARAMETER_REFUSALS = frozenset({"InvalidParameter", "ParameterValueInvalid"})


def maybe_sent(error: BaseException) -> bool:
    """True when the request may have reached the provider and been accepted, with the answer lost on the way
    back (a read timeout, a connection closed mid-answer). Such a notice is never sent again automatically:
    a second message would reach the shopper twice and the first link would be dead (invariant 6)."""
    return isinstance(error, HTTPClientError) and not isinstance(error, NoConnection)


def error_code(error: BaseException) -> str:
    """The provider's error code, or the exception's name when there was no answer at all."""
    response = getattr(error, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return str(code or type(error).__name__)


def throttled(error: BaseException) -> bool:
    """The provider answered that it is throttling: back-pressure, nothing was sent."""
    return isinstance(error, ClientError) and error_code(error) in THROTTLED


def _never_reached(error: BaseException) -> bool:
    """No connection was made, the provider throttled, or it failed on its side (5xx): nothing was sent."""
    if isinstance(error, NoConnection) or throttled(error):
        return True
    return isinstance(error, ClientError) and error_code(error) in SERVER_FAULTS


def refused_recipient(channel: str, error: BaseException) -> bool:
    """True when the provider refused this notice for its recipient alone (SES_RECIPIENT_REFUSALS,
    SNS_RECIPIENT_REFUSALS): sending it again will never work, and nobody else's notice is affected."""
    if not isinstance(error, ClientError):
        return False
    code = error_code(error)
    if channel == EMAIL:
        return code in SES_RECIPIENT_REFUSALS
    if channel == SMS:
        message = str(error.response.get("Error", {}).get("Message") or "")
        return code in SNS_RECIPIENT_REFUSALS or (code in SNS_PARAMETER_REFUSALS and "PhoneNumber" in message)
    return False


def per_function_rate(configured: float, account_max: float | None, concurrency: int) -> float:
    """One notifier's share of an account-wide send rate (per second).

    `configured` is the stage's rate for the whole account (SMS_PER_SECOND, EMAIL_PER_SECOND), the ceiling;
    `account_max` the provider's own limit when known (SES GetAccount's SendQuota.MaxSendRate), which lowers
    it; the result is divided among the `concurrency` notifier invocations that may run at once, so together
    they never send faster than the account may.
    """
    if configured <= 0:
        raise ConfigError(f"a send rate must be above zero, got {configured}")
    if concurrency < 1:
        raise ConfigError(f"the notifier's concurrency must be at least 1, got {concurrency}")
    account = configured if account_max is None or account_max <= 0 else min(configured, account_max)
    return account / concurrency


def ses_max_send_rate(sesv2: Any) -> float | None:
    """The account's SES sending rate in this region (GetAccount's SendQuota.MaxSendRate), or None when it
    cannot be read: the stage's configured rate then stands alone."""
    try:
        quota = sesv2.get_account().get("SendQuota") or {}
    except Exception as error:
        log.warning("SES GetAccount failed (%s); sending at the stage's configured email rate", error_code(error))
        return None
    rate = quota.get("MaxSendRate")
    return float(rate) if isinstance(rate, int | float) and rate > 0 else None


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
    """SMS through SNS Publish to an E.164 number, as transactional (not promotional) traffic, from the stage's own
    origination number when it has one."""

    def __init__(self, sns: Any, origination_number: str = "") -> None:
        self.sns = sns
        self.origination_number = origination_number

    def request(self, notice: Notice) -> dict[str, Any]:
        """The Publish parameters for one SMS (message attributes as in the SNS guide, "Publishing to a mobile phone")."""
        attributes = {
            # Transactional: the route built for reliable delivery; a notice with a time limit is not marketing.
            "AWS.SNS.SMS.SMSType": {"DataType": "String", "StringValue": "Transactional"},
        }
        if self.origination_number:
            # Sent from this number, which receives replies (so "Reply STOP" reaches SNS's opt-out list).
            attributes["AWS.MM.SMS.OriginationNumber"] = {"DataType": "String", "StringValue": self.origination_number}
        return {"PhoneNumber": notice.to, "Message": notice.text, "MessageAttributes": attributes}

    def send(self, notice: Notice) -> str:
        """Publish one SMS; returns the SNS message id."""
        return str(self.sns.publish(**self.request(notice))["MessageId"])


class EmailSender:
    """Email through SES v2 SendEmail: text and HTML parts, with RFC 8058 one-click unsubscribe headers."""

    def __init__(self, sesv2: Any, from_address: str, configuration_set: str = "") -> None:
        self.sesv2 = sesv2
        self.from_address = from_address
        self.configuration_set = configuration_set

    def request(self, notice: Notice) -> dict[str, Any]:
        """The SendEmail parameters for one notice."""
        # The configuration set publishes this email's bounces, complaints and deliveries (chalicelib/feedback.py).
        under = {"ConfigurationSetName": self.configuration_set} if self.configuration_set else {}
        return {
            **under,
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
    """Routes a notice to its channel's sender, after waiting for that channel's rate limit.

    The providers' clients never retry on their own (a retry after a lost answer would send twice); this
    asks again, up to ATTEMPTS times, only after answers that prove nothing was sent (no connection, a
    5xx), and up to THROTTLE_ATTEMPTS times, waiting longer each time, after a throttle.
    """

    def __init__(
        self,
        sms: SmsSender,
        email: EmailSender,
        *,
        sms_per_second: float,
        email_per_second: float,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._senders: dict[str, SmsSender | EmailSender] = {SMS: sms, EMAIL: email}
        self._limits = {SMS: RateLimiter(sms_per_second), EMAIL: RateLimiter(email_per_second)}
        self._sleep = sleep

    def send(self, notice: Notice, *, just_before: Callable[[], None] | None = None) -> str:
        """Deliver one notice; returns the provider's message id. Raises whatever the provider raised.

        `just_before` runs after the rate limit's wait, right before each call to the provider (the last look
        at the suppression list); whatever it raises stops the send.
        """
        sender = self._senders.get(notice.channel)
        if sender is None:
            raise ValueError(f"no sender for channel {notice.channel!r}")
        for attempt in range(1, THROTTLE_ATTEMPTS + 1):
            self._limits[notice.channel].acquire()
            if just_before is not None:
                just_before()
            try:
                return sender.send(notice)
            except Exception as error:
                last = THROTTLE_ATTEMPTS if throttled(error) else ATTEMPTS
                if attempt >= last or not _never_reached(error):
                    raise
                self._sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")
