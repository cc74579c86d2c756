"""Notifier jobs on the bisn-jobs queue: what a job says, and how it is sent."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from typing import Any

from chalicelib.errors import BadRequest

KINDS = ("restock", "topup", "continue")
# A pending proof's owed message (chalicelib/resubscribe.py): a re-subscribe email or code, named by its key.
RESUBSCRIBE_KIND = "resubscribe"
# The sweep re-sends the message of a proof owed for over this long (the tap was cut short), looking back this far.
PROOF_OWED_AFTER_S = 60
PROOF_OWED_LOOKBACK_DAYS = 1


def resubscribe_message(proof_key: str) -> str:
    """The jobs-queue message that asks the notifier to send a pending proof's owed message."""
    return json.dumps({"kind": RESUBSCRIBE_KIND, "key": proof_key}, separators=(",", ":"))


def resubscribe_message_of(body: str) -> str | None:
    """The pending proof a jobs-queue message names, or None when the body is something else."""
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("kind") != RESUBSCRIBE_KIND:
        return None
    key = data.get("key")
    if not isinstance(key, str) or not key:
        raise BadRequest("a resubscribe message needs its key", code="invalid_job")
    return key


@dataclass(frozen=True)
class Job:
    """One unit of notifier work: tell the front of `sku`'s queue about restock `restock_id`.

    kind: 'restock' (first pass), 'topup' (units were freed) or 'continue' (a large restock's next slice).
    A 'continue' job resumes the walk after the request `after` (a joined_ts), with `passed` live requests
    already counted before it, so positions keep counting from where the previous slice stopped.
    """

    sku: str
    restock_id: str
    restock_ts: str
    kind: str = "restock"
    after: str = ""
    passed: int = 0

    def to_json(self) -> str:
        """The message body."""
        body = asdict(self)
        # The cursor only exists on continuations; other bodies stay as they were.
        if not self.after:
            body.pop("after")
            body.pop("passed")
        return json.dumps(body, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, body: str) -> Job:
        """Parse a message body; BadRequest for anything malformed (it will go to the DLQ)."""
        try:
            data: Any = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise BadRequest("job body is not JSON", code="invalid_job") from exc
        if not isinstance(data, dict):
            raise BadRequest("job body is not an object", code="invalid_job")
        fields = {k: data.get(k) for k in ("sku", "restock_id", "restock_ts")}
        if not all(isinstance(v, str) and v for v in fields.values()):
            raise BadRequest("job needs sku, restock_id and restock_ts", code="invalid_job")
        kind = data.get("kind", "restock")
        if kind not in KINDS:
            raise BadRequest(f"unknown job kind {kind!r}", code="invalid_job")
        after = data.get("after", "")
        passed = data.get("passed", 0)
        if not isinstance(after, str) or isinstance(passed, bool) or not isinstance(passed, int) or passed < 0:
            raise BadRequest("job cursor must be a join stamp and a count", code="invalid_job")
        return cls(kind=kind, after=after, passed=passed, **fields)  # type: ignore[arg-type]


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

    def send(self, job: Job, delay_s: int = 0) -> str:
        """Put one job on the queue; returns the SQS message id."""
        return self.send_body(job.to_json(), delay_s)

    def send_body(self, body: str, delay_s: int = 0) -> str:
        """Put one message on the queue (a job, or a confirmation or code message: chalicelib/confirm.py)."""
        kwargs: dict[str, Any] = {"QueueUrl": self.url, "MessageBody": body}
        if delay_s:
            kwargs["DelaySeconds"] = max(0, min(900, delay_s))
        return str(self.sqs.send_message(**kwargs)["MessageId"])
