"""The outbox: every SMS, email and staff alert the emulator accepted, read from moto's own backends.

moto keeps what was sent but not when, and for SES v2 "Simple" emails it keeps only one body part.
`record_sends` therefore stamps each accepted message with the stack's time and keeps the parts and
headers of SES v2 emails as sent. Dev-only: this wraps the emulator, never the app.
"""

from __future__ import annotations

import email
import email.policy
import functools
import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from chalicelib.clock import Clock, SystemClock
from devstack.stage import ACCOUNT_ID

_lock = threading.Lock()
_stamps: dict[str, tuple[float, int]] = {}
_parts: dict[str, dict[str, Any]] = {}
_sequence = itertools.count()
_clock: list[Clock] = [SystemClock()]

LINK = re.compile(r"https?://[^\s\"'<>]+?/(reserve|r|confirm|unsubscribe|me|m)/([A-Za-z0-9_\-.]+)")
# The short forms (/r/, /m/: random ids looked up in a table) are the same links as the signed ones.
LINK_NAMES = {
    "reserve": "reserve",
    "r": "reserve",
    "confirm": "confirm",
    "unsubscribe": "unsubscribe",
    "me": "manage",
    "m": "manage",
}


@dataclass
class Sent:
    """One message as the emulator accepted it."""

    id: str
    channel: str  # "sms" | "email" | "alert"
    to: str
    subject: str | None
    body: str
    html: str | None = None
    sender: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    sent_at: float = 0.0
    order: int = 0

    def links(self) -> dict[str, str]:
        """The reserve, confirm, manage and unsubscribe links in the message (first of each)."""
        found: dict[str, str] = {}
        for text in (self.body, self.html or "", " ".join(self.headers.values())):
            for match in LINK.finditer(text):
                name = LINK_NAMES[match.group(1)]
                url = match.group(0).rstrip(".")
                found.setdefault(name, url)
        return found

    def to_json(self) -> dict[str, Any]:
        """The message as the console's JSON API gives it."""
        data: dict[str, Any] = {
            "id": self.id,
            "channel": self.channel,
            "to": self.to,
            "subject": self.subject,
            "body": self.body,
            "sent_at": round(self.sent_at, 3),
        }
        if self.html is not None:
            data["html"] = self.html
        if self.sender:
            data["from"] = self.sender
        if self.headers:
            data["headers"] = dict(self.headers)
        data["links"] = self.links()
        return data


def _stamp(message_id: str) -> None:
    with _lock:
        _stamps.setdefault(message_id, (_clock[0].now(), next(_sequence)))


def _wrap(cls: type, name: str, message_id: Callable[[Any], str | None]) -> None:
    original = getattr(cls, name)
    if getattr(original, "_bisn_outbox", False):
        return

    @functools.wraps(original)
    def stamped(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        mid = message_id(result)
        if mid:
            _stamp(mid)
        return result

    stamped._bisn_outbox = True  # type: ignore[attr-defined]
    setattr(cls, name, stamped)


def _keep_sesv2_parts() -> None:
    from moto.sesv2.responses import SESV2Response

    original = SESV2Response.send_email
    if getattr(original, "_bisn_outbox", False):
        return

    @functools.wraps(original)
    def keeping(self: Any) -> str:
        answer = original(self)
        try:
            message_id = json.loads(answer)["MessageId"]
            simple = (json.loads(self.body).get("Content") or {}).get("Simple") or {}
        except (ValueError, KeyError, TypeError, AttributeError):
            return answer
        if simple:
            body = simple.get("Body") or {}
            with _lock:
                _parts[message_id] = {
                    "text": (body.get("Text") or {}).get("Data"),
                    "html": (body.get("Html") or {}).get("Data"),
                    "headers": {h.get("Name", ""): h.get("Value", "") for h in simple.get("Headers") or []},
                }
        return answer

    keeping._bisn_outbox = True  # type: ignore[attr-defined]
    SESV2Response.send_email = keeping  # type: ignore[method-assign]


def record_sends(clock: Clock) -> None:
    """Stamp every message the emulator accepts from now on with `clock`'s time (idempotent)."""
    from moto.ses.models import SESBackend
    from moto.sns.models import SNSBackend

    _clock[0] = clock
    _wrap(SNSBackend, "publish", lambda result: str(result) if result else None)
    _wrap(SESBackend, "send_email", lambda result: getattr(result, "id", None))
    _wrap(SESBackend, "send_raw_email", lambda result: getattr(result, "id", None))
    _keep_sesv2_parts()


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script", "head"):
            self._skip += 1
        elif tag in ("br", "p", "div", "li", "tr", "h1", "h2", "h3"):
            self.chunks.append("\n")
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.chunks.append(f" {href} ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "head") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.chunks.append(data)


def html_to_text(markup: str) -> str:
    """A readable text version of an HTML email (used only when the text part was not kept)."""
    parser = _Text()
    parser.feed(markup)
    lines = [" ".join(line.split()) for line in "".join(parser.chunks).splitlines()]
    return "\n".join(line for line in lines if line)


def _destinations(value: Any) -> str:
    if isinstance(value, dict):
        addresses = [a for key in ("ToAddresses", "CcAddresses", "BccAddresses") for a in value.get(key, [])]
        return ", ".join(addresses)
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value or "")


def _raw_email(message: Any) -> Sent:
    parsed = email.message_from_string(message.raw_data, policy=email.policy.default)
    text = html = None
    for part in parsed.walk():
        kind = part.get_content_type()
        if kind == "text/plain" and text is None:
            text = part.get_content()
        elif kind == "text/html" and html is None:
            html = part.get_content()
    headers = {k: str(v) for k, v in parsed.items() if k.lower().startswith("list-")}
    return Sent(
        id=message.id,
        channel="email",
        to=_destinations(message.destinations) or str(parsed.get("To", "")),
        subject=str(parsed.get("Subject", "")),
        body=text if text is not None else html_to_text(html or ""),
        html=html,
        sender=str(message.source or parsed.get("From", "")),
        headers=headers,
    )


def _simple_email(message: Any) -> Sent:
    kept = _parts.get(message.id, {})
    html = kept.get("html")
    text = kept.get("text")
    if not kept:
        # Sent before the parts were kept: moto stored the HTML part when there was one, else the text.
        looks_html = "<" in message.body and ">" in message.body
        html = message.body if looks_html else None
        text = None if looks_html else message.body
    return Sent(
        id=message.id,
        channel="email",
        to=_destinations(message.destinations),
        subject=message.subject,
        body=text if text is not None else html_to_text(html or ""),
        html=html,
        sender=message.source,
        headers=dict(kept.get("headers", {})),
    )


def read(region: str, account: str = ACCOUNT_ID) -> list[Sent]:
    """Every SMS, email and topic message the emulator has accepted, oldest first."""
    from moto.ses.models import Message, RawMessage, ses_backends
    from moto.sns.models import sns_backends

    sns = sns_backends[account][region]
    ses = ses_backends[account][region]
    found: list[Sent] = []
    for message_id, (phone, text) in list(sns.sms_messages.items()):
        found.append(Sent(id=message_id, channel="sms", to=phone, subject=None, body=text))
    for topic in list(sns.topics.values()):
        for message_id, text, subject, _attributes, _group in list(topic.sent_notifications):
            found.append(Sent(id=message_id, channel="alert", to=topic.name, subject=subject, body=text))
    for message in list(ses.sent_messages):
        if isinstance(message, RawMessage):
            found.append(_raw_email(message))
        elif isinstance(message, Message):
            found.append(_simple_email(message))
    for sent in found:
        _stamp(sent.id)  # a message sent before stamping began is dated when first seen
        sent.sent_at, sent.order = _stamps[sent.id]
    found.sort(key=lambda s: (s.sent_at, s.order))
    return found
