"""Every message on the jobs queue: one frozen dataclass per kind, its body on the wire, and where each goes.

The queue carries the notifier's restock jobs (kinds 'restock', 'topup', 'continue': `Job`) and five messages that
owe one send each, which only the notifier function may make (DESIGN §7): a place's confirmation email
(`ConfirmEmail`, chalicelib/confirm.py), a channel switch's code (`SwitchCode`, chalicelib/confirm.py), a pending
proof's re-subscribe email or code (`ResubscribeProof`, chalicelib/shopper/resubscribe.py), an opt-in link staff started
(`OptinLink`, chalicelib/shopper/optin.py) and an offer's reminder before it lapses (`LapseReminder`,
chalicelib/reminders.py). `parse` reads any body, `to_body` writes one, and a `MessageBus` built by
chalicelib/wiring.py hands each message to its one handler by its type.

Bodies are compact JSON exactly as they were before these types existed (a job's keys sorted; the others' `kind`
first, then their fields in order), so a message already waiting in a deployed queue or its DLQ still parses, and a
replayed one is the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from chalicelib.errors import BadRequest

JOB_KINDS = ("restock", "topup", "continue")


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


@dataclass(frozen=True)
class ConfirmEmail:
    """Send the place (`sku`, `joined_ts`) its owed confirmation email."""

    KIND: ClassVar[str] = "confirm"
    sku: str
    joined_ts: str


@dataclass(frozen=True)
class SwitchCode:
    """Send the code of the pending channel switch of contact `key`, derived from `nonce`."""

    KIND: ClassVar[str] = "code"
    key: str
    nonce: str


@dataclass(frozen=True)
class ResubscribeProof:
    """Send the owed message of the pending proof `key` (a re-subscribe email or code)."""

    KIND: ClassVar[str] = "resubscribe"
    key: str


@dataclass(frozen=True)
class OptinLink:
    """Send the link of the pending opt-in of contact `key` (it names no contact: the pending opt-in does)."""

    KIND: ClassVar[str] = "optin"
    key: str
    nonce: str


@dataclass(frozen=True)
class LapseReminder:
    """Send the offer `token_id` its one reminder before it lapses (it names no contact: the offer's place does)."""

    KIND: ClassVar[str] = "reminder"
    token_id: str


Owed = ConfirmEmail | SwitchCode | ResubscribeProof | OptinLink | LapseReminder
Message = Job | Owed
OWED: dict[str, type[Owed]] = {
    cls.KIND: cls for cls in (ConfirmEmail, SwitchCode, ResubscribeProof, OptinLink, LapseReminder)
}


def to_body(message: Message) -> str:
    """The message's body on the queue."""
    if isinstance(message, Job):
        body = asdict(message)
        # The cursor only exists on continuations; other bodies stay as they were.
        if not message.after:
            body.pop("after")
            body.pop("passed")
        return json.dumps(body, separators=(",", ":"), sort_keys=True)
    return json.dumps({"kind": message.KIND, **asdict(message)}, separators=(",", ":"))


def parse(body: str) -> Message:
    """The message a body carries; BadRequest (code invalid_job) for anything malformed, which the notifier raises
    so the message is retried and then parked in the DLQ intact."""
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BadRequest("message body is not JSON", code="invalid_job") from exc
    if not isinstance(data, dict):
        raise BadRequest("message body is not an object", code="invalid_job")
    # Jobs were first sent without a kind; such a body is a restock's first pass.
    kind = data.get("kind", "restock")
    if kind in JOB_KINDS:
        return _job(data, kind)
    owed = OWED.get(kind) if isinstance(kind, str) else None
    if owed is None:
        raise BadRequest(f"unknown message kind {kind!r}", code="invalid_job")
    names = [f.name for f in fields(owed)]
    values = _strings(data, names, f"a {kind} message needs {', '.join(names)}")
    return owed(**values)


def _job(data: dict[str, Any], kind: str) -> Job:
    sku, restock_id, restock_ts = _strings(
        data, ["sku", "restock_id", "restock_ts"], "job needs sku, restock_id and restock_ts"
    ).values()
    after = data.get("after", "")
    passed = data.get("passed", 0)
    if not isinstance(after, str) or isinstance(passed, bool) or not isinstance(passed, int) or passed < 0:
        raise BadRequest("job cursor must be a join stamp and a count", code="invalid_job")
    return Job(sku, restock_id, restock_ts, kind=kind, after=after, passed=passed)


def _strings(data: dict[str, Any], names: list[str], refusal: str) -> dict[str, str]:
    values = {name: data.get(name) for name in names}
    found = {name: value for name, value in values.items() if isinstance(value, str) and value}
    if len(found) < len(names):
        raise BadRequest(refusal, code="invalid_job")
    return found


# A handler gets its message and the time the delivery has left (milliseconds), which only a job's walk reads.
Handler = Callable[[Any, Callable[[], int]], object]


@dataclass(frozen=True)
class MessageBus:
    """Hands each message to the one handler of its type; the composition root supplies the handlers."""

    handlers: Mapping[type[Message], Handler]

    def handle(self, message: Message, remaining_ms: Callable[[], int]) -> object:
        """Run the message's handler; what it returns (a job's outcome, whether an owed message went)."""
        return self.handlers[type(message)](message, remaining_ms)
