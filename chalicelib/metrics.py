"""CloudWatch metrics in Embedded Metric Format (Powertools), buffered per invocation and flushed once."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

NOTICES_SENT = "NoticesSent"
UNITS_TOTAL = "UnitsTotal"
UNITS_OFFERABLE = "UnitsOfferableAtStart"
SEND_FAILURES = "SendFailures"
NOTICES_UNCONFIRMED = "NoticesUnconfirmed"  # the provider may have sent it; its answer was lost
NOTICES_UNDELIVERABLE = "NoticesUndeliverable"  # refused for the recipient: their unit goes onward
SENDS_THROTTLED = "SendsThrottled"  # still throttled after the sender's tries: rolled back, told later
FALLBACK_COPY = "FallbackCopyUsed"
CONTINUATIONS = "ContinuationsQueued"
# Live offers beyond the units of a restock, read right after the notifier took its last units (invariant 5):
# 0 whenever the check ran and the rule held; the `notices-over-units` alarm fires on anything above 0.
NOTICES_OVER_UNITS = "NoticesOverUnits"
SMS_DELIVERY_FAILURES = "SmsDeliveryFailures"  # SMS SNS accepted and could not deliver (chalicelib/sms_feedback.py)
# A code SMS refused because the shop sent NON_NOTICE_SMS_PER_DAY of them today (chalicelib/messages/sms_caps.py): real
# shoppers are being turned away, or someone is pumping SMS through the codes.
NON_NOTICE_SMS_REFUSED = "NonNoticeSmsRefused"
# An email that is not a restock notice (a confirmation, a re-subscribe email, a code) refused by one of its caps per
# address, per client address or shop-wide (chalicelib/messages/email_caps.py): someone is using the shop to flood inboxes,
# or real shoppers are asking for more than the caps allow.
NON_NOTICE_EMAIL_REFUSED = "NonNoticeEmailRefused"
# A store (Shopify, WooCommerce) answered and refused our API credentials (chalicelib/platforms/base.py
# StoreCredentialsRefused): at a store hold's placing or release, a catalogue sync or its store check, or a
# reconciliation. The store is up and nothing the app retries will help until the shop fixes its key or app, so it is
# counted apart from a store that is down and has an alarm of its own.
STORE_CREDENTIALS_REFUSED = "StoreCredentialsRefused"


def skip_metric(reason: str) -> str:
    """The metric name counting skips for one reason, e.g. 'opted_out' -> 'NoticeSkippedOptedOut'."""
    return "NoticeSkipped" + "".join(part.capitalize() for part in reason.split("_"))


class Metrics:
    """One invocation's metrics: counted from any thread, written as one EMF document when flushed."""

    def __init__(self, namespace: str, service: str, *, enabled: bool) -> None:
        self.namespace = namespace
        self.service = service
        self.enabled = enabled
        self._counts: Counter[str] = Counter()
        self._metadata: dict[str, Any] = {}
        self._lock = threading.Lock()

    def count(self, name: str, value: int = 1) -> None:
        """Add to a counter (every metric is reported as a Count, so values are whole numbers)."""
        with self._lock:
            self._counts[name] += value

    def gauge(self, name: str, value: int) -> None:
        """Set a value that is reported as it stands at flush time (e.g. units of a restock)."""
        with self._lock:
            self._counts[name] = value

    def metadata(self, key: str, value: Any) -> None:
        """Attach a searchable, non-dimension fact (e.g. the restock id) to this invocation's document."""
        with self._lock:
            self._metadata[key] = value

    @property
    def totals(self) -> dict[str, float]:
        """What has been counted so far."""
        with self._lock:
            return dict(self._counts)

    def document(self) -> dict[str, Any]:
        """The EMF document for what was counted (no dimensions beyond the service: restocks are metadata)."""
        # Imported here, not at the top: a cold start pays for it only on the paths that use it.
        from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

        # A metric set of its own per invocation: Powertools' Metrics class keeps process-wide state.
        provider = EphemeralMetrics(
            namespace=self.namespace, service=self.service, metric_set={}, dimension_set={}, metadata_set={}
        )
        with self._lock:
            for name, value in sorted(self._counts.items()):
                provider.add_metric(name=name, unit=MetricUnit.Count, value=value)
            for key, value in self._metadata.items():
                provider.add_metadata(key=key, value=value)
        provider.add_dimension(name="service", value=self.service)
        return dict(provider.serialize_metric_set())

    def flush(self) -> dict[str, float]:
        """Write the document to stdout (CloudWatch picks EMF up from the log) unless disabled; returns the totals."""
        totals = self.totals
        if self.enabled and totals:
            print(json.dumps(self.document(), separators=(",", ":")), flush=True)
        with self._lock:
            self._counts.clear()
            self._metadata.clear()
        return totals


class MetricsFactory:
    """Starts a fresh Metrics buffer for each invocation, with the stage's namespace."""

    def __init__(self, namespace: str, service: str = "bisn", *, enabled: bool = True) -> None:
        self.namespace = namespace
        self.service = service
        self.enabled = enabled

    def start(self) -> Metrics:
        """A new, empty buffer."""
        return Metrics(self.namespace, self.service, enabled=self.enabled)
