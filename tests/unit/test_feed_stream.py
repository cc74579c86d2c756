"""The feed read as it arrives: entries decoded one by one whatever the chunking, a limit per entry, none per feed."""

from __future__ import annotations

import json

import pytest

from chalicelib.feed_stream import MAX_ENTRY_CHARS, FeedSyntaxError, feed_entries

ENTRIES = [
    {"sku": "WW-A", "name": "Oatmeal merino throw \u00e9", "threshold": 12345},
    {"sku": "WW-B", "nested": {"list": [1, 2, {"x": "]}"}]}},
    "junk",
    123456789,
]


def in_chunks(raw: bytes, size: int) -> list[bytes]:
    return [raw[i : i + size] for i in range(0, len(raw), size)]


@pytest.mark.parametrize("size", [1, 2, 7, 64, 10_000])
@pytest.mark.parametrize(
    "document",
    [
        ENTRIES,
        {"products": ENTRIES},
        {"shop": {"name": "x", "products": []}, "products": ENTRIES, "generated": [1, 2]},
    ],
)
def test_entries_come_out_whole_however_the_bytes_are_cut(document: object, size: int) -> None:
    raw = json.dumps(document, indent=1, ensure_ascii=False).encode()
    assert list(feed_entries(in_chunks(raw, size))) == ENTRIES


def test_a_number_cut_at_a_chunk_edge_is_read_whole() -> None:
    assert list(feed_entries([b"[12", b"34, 5", b"6]"])) == [1234, 56]


@pytest.mark.parametrize("raw", [b"[]", b'{"products": []}', b' \n{"products":[]}\n'])
def test_an_empty_list_has_no_entries(raw: bytes) -> None:
    assert list(feed_entries(in_chunks(raw, 3))) == []


@pytest.mark.parametrize(
    "raw",
    [b"", b"42", b'"products"', b'{"items": []}', b'{"products": {}}', b"[1 2]", b"[1,", b"[1] x", b"\xff\xfe"],
)
def test_what_is_not_a_feed_is_refused(raw: bytes) -> None:
    with pytest.raises(FeedSyntaxError):
        list(feed_entries(in_chunks(raw, 2)))


def test_the_entries_before_a_fault_come_out_first() -> None:
    entries = feed_entries([b'[{"sku": "WW-A"}, {"sku": "WW-B"}, {"sku": ', b"}]"])
    assert next(entries) == {"sku": "WW-A"}
    assert next(entries) == {"sku": "WW-B"}
    with pytest.raises(FeedSyntaxError):
        next(entries)


def test_one_entry_past_the_limit_is_refused_and_a_long_feed_of_small_entries_is_not() -> None:
    small = {"sku": "WW-A", "description": "x" * 1000}
    raw = json.dumps([small] * 6000).encode()  # about 6 MB
    assert sum(1 for _ in feed_entries(in_chunks(raw, 65536))) == 6000
    big = json.dumps([{"sku": "WW-A", "description": "x" * MAX_ENTRY_CHARS}]).encode()
    with pytest.raises(FeedSyntaxError, match="longer than"):
        list(feed_entries(in_chunks(big, 65536)))
