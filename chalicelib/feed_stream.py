"""Reading a product feed's entries one at a time as its bytes arrive, so a feed of any length is read in bounded memory.

The feed is `{"products": [entry, ...], ...}` or a bare `[entry, ...]` (chalicelib/catalog_sync.py). Each entry is
decoded on its own (json.JSONDecoder.raw_decode over a buffer), and no entry may be longer than MAX_ENTRY_CHARS:
the whole feed has no size limit, one entry does. Other top-level keys are read past (each under the same limit).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator
from typing import Any

MAX_ENTRY_CHARS = 64 * 1024
# Consumed text is dropped from the front of the buffer once this much has piled up (not on every entry: slicing
# a long buffer once per entry would cost as much as the feed is long, for every entry).
_COMPACT_AT = 256 * 1024
_WHITESPACE = " \t\n\r"


class FeedSyntaxError(Exception):
    """The feed is not a JSON array of products, or an object with one under "products"."""


class _Buffer:
    """Text decoded so far, with the position read up to; more is pulled from the chunks when a value needs it."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = json.JSONDecoder()
        self.text = ""
        self.pos = 0
        self.eof = False

    def _more(self) -> bool:
        if self.eof:
            return False
        if self.pos >= _COMPACT_AT:
            self.text, self.pos = self.text[self.pos :], 0
        try:
            chunk = next(self._chunks)
        except StopIteration:
            chunk, self.eof = b"", True
        try:
            self.text += self._decoder.decode(chunk, final=self.eof)
        except UnicodeDecodeError as exc:
            raise FeedSyntaxError("the feed is not UTF-8") from exc
        return True

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the feed)."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self._more():
                return ""

    def expect(self, allowed: str, what: str) -> str:
        """Take one of the `allowed` characters next, or refuse the feed naming `what` was expected."""
        found = self.peek()
        if not found or found not in allowed:
            raise FeedSyntaxError(f"the feed is not valid JSON: expected {what}")
        self.pos += 1
        return found

    def value(self) -> Any:
        """The next JSON value, read whole (at most MAX_ENTRY_CHARS long)."""
        self.peek()
        while True:
            try:
                value, end = self._json.raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                value, end = None, -1
            except RecursionError as exc:
                raise FeedSyntaxError("the feed is nested too deeply") from exc
            # A value that reaches the end of what has arrived may go on (a number, cut mid-digit): read more first.
            if end - self.pos > MAX_ENTRY_CHARS:
                raise FeedSyntaxError(f"an entry of the feed is longer than {MAX_ENTRY_CHARS} characters")
            if end != -1 and (end < len(self.text) or self.eof):
                self.pos = end
                return value
            if len(self.text) - self.pos > MAX_ENTRY_CHARS:
                raise FeedSyntaxError(f"an entry of the feed is longer than {MAX_ENTRY_CHARS} characters")
            if not self._more():
                if end != -1:
                    self.pos = end
                    return value
                raise FeedSyntaxError("the feed is not valid JSON")


def feed_entries(chunks: Iterable[bytes]) -> Iterator[Any]:
    """Each entry of the feed's product list, in order, decoded as it arrives; FeedSyntaxError for a feed that is
    not one (raised where the fault is met, after the entries before it)."""
    buffer = _Buffer(chunks)
    opening = buffer.expect("[{", 'a JSON array of products or {"products": [...]}')
    if opening == "[":
        yield from _array(buffer)
        _end(buffer)
        return
    listed = False
    if buffer.peek() == "}":
        buffer.pos += 1
    else:
        while True:
            key = buffer.value()
            if not isinstance(key, str):
                raise FeedSyntaxError("the feed is not valid JSON: an object key must be a string")
            buffer.expect(":", "':'")
            if key == "products" and not listed:
                if buffer.peek() != "[":
                    raise FeedSyntaxError('the feed\'s "products" must be a JSON array')
                buffer.pos += 1
                listed = True
                yield from _array(buffer)
            else:
                buffer.value()
            if buffer.expect(",}", "',' or '}'") == "}":
                break
    if not listed:
        raise FeedSyntaxError('the feed must be {"products": [...]} or a JSON array of products')
    _end(buffer)


def _array(buffer: _Buffer) -> Iterator[Any]:
    if buffer.peek() == "]":
        buffer.pos += 1
        return
    while True:
        yield buffer.value()
        if buffer.expect(",]", "',' or ']'") == "]":
            return


def _end(buffer: _Buffer) -> None:
    if buffer.peek():
        raise FeedSyntaxError("the feed has more after its JSON value")
