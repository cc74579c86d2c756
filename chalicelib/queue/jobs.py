"""The bisn-jobs queue: how a message (chalicelib/queue/messages.py) is sent to the notifier."""

from __future__ import annotations

import threading
from typing import Any

from chalicelib.queue.messages import Message, to_body

# The sweep re-sends the message of a proof owed for over this long (the tap was cut short), looking back this far.
PROOF_OWED_AFTER_S = 60
PROOF_OWED_LOOKBACK_DAYS = 1


class JobQueue:
    """Sends jobs to the notifier's queue (its URL looked up once)."""

    def __init__(self, sqs: Any, queue_name: str) -> None:
        self.sqs = sqs
        self.queue_name = queue_name
        self._url: str | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The queue URL."""
        with self._lock:
            if self._url is None:
                self._url = str(self.sqs.get_queue_url(QueueName=self.queue_name)["QueueUrl"])
            return self._url

    def send(self, message: Message, delay_s: int = 0) -> str:
        """Put one message on the queue; returns the SQS message id."""
        kwargs: dict[str, Any] = {"QueueUrl": self.url, "MessageBody": to_body(message)}
        if delay_s:
            kwargs["DelaySeconds"] = max(0, min(900, delay_s))
        return str(self.sqs.send_message(**kwargs)["MessageId"])
