"""Reading the store's stock levels on demand, for the reconciliation (chalicelib/reconcile.py).

Webhooks are hints that can be lost; the store's own level is the truth. A `LevelReader` reads the current level of
the SKUs it is given (only those: the reconciliation asks for the SKUs somebody is waiting for) in as few calls as
the platform allows, and reports them as the same `LevelReport`s its webhooks produce, so detection treats a read
exactly as it treats a delivery. Connectors make no AWS call here either.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode, urlparse, urlunparse

from chalicelib.platforms.base import LevelReport, StoreUnavailable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StockQuery:
    """One SKU whose level is wanted, with the platform's ids for it (the catalogue's `store_ids`)."""

    sku: str
    ids: Mapping[str, str] = field(default_factory=dict)


class LevelReader(Protocol):
    """A store whose current levels can be read in bulk."""

    def read_levels(self, items: Sequence[StockQuery]) -> list[LevelReport]:
        """The level now of each item the store knows and counts, each report naming its SKU (and its location,
        where the platform counts per location). An item the store does not know, or does not count stock for, is
        left out. StoreUnavailable when the store cannot be read now."""
        ...


# The stock feed is read in chunks of SKUs named in its query string, so a URL stays short and the feed's work grows
# with the SKUs waited for.
FEED_CHUNK = 100
MAX_FEED_BYTES = 2 * 1024 * 1024
MAX_FEED_LEVEL = 1_000_000


class StockFeed:
    """The generic platform's levels: the shop's optional stock feed (STOCK_FEED_URL, docs/PLATFORMS.md).

    `GET <url>?sku=A&sku=B...` (up to FEED_CHUNK SKUs a request) answers `{"levels": [{"sku", "available"}]}`. A feed
    that ignores the parameter and lists every SKU is read the same way: only the SKUs asked for are reported. The
    fetch is the catalogue feed's (chalicelib/catalog_sync.py FeedReader: https, the bearer token, no redirects).
    """

    def __init__(self, url: str, fetch: Callable[[str], bytes]) -> None:
        self.url = url
        self._fetch = fetch

    def read_levels(self, items: Sequence[StockQuery]) -> list[LevelReport]:
        """One request per FEED_CHUNK SKUs; StoreUnavailable when the feed cannot be read or is not its shape."""
        wanted = [item.sku for item in items]
        reports: list[LevelReport] = []
        for start in range(0, len(wanted), FEED_CHUNK):
            chunk = wanted[start : start + FEED_CHUNK]
            body = self._fetch(self.chunk_url(chunk))
            read = parse_stock_feed(body, set(chunk))
            if read.skipped:
                # A skipped entry's SKU is never reconciled, so the shop must hear of it, but one bad entry must
                # not stop the levels of the others.
                logger.warning(
                    "the stock feed has %d entries that are not {sku, available}: %s",
                    len(read.skipped),
                    "; ".join(read.skipped[:5]),
                )
            reports.extend(read.reports)
        return reports

    def chunk_url(self, skus: Sequence[str]) -> str:
        """The feed's URL with these SKUs added to its query (its own query parameters kept)."""
        parts = urlparse(self.url)
        if parts.scheme == "file":
            return self.url  # a local file has no query: it lists every SKU
        query = urlencode([("sku", sku) for sku in skus])
        return urlunparse(parts._replace(query=f"{parts.query}&{query}" if parts.query else query))


@dataclass(frozen=True)
class FeedLevels:
    """A stock feed's answer: the levels of the SKUs asked for, and why each malformed entry was skipped."""

    reports: list[LevelReport]
    skipped: list[str]


def parse_stock_feed(body: bytes, wanted: set[str]) -> FeedLevels:
    """The levels of the wanted SKUs in a stock feed's body (pure). An entry that is not a SKU and a whole number of
    units is skipped and named in `skipped` (an entry for a SKU not asked for is neither read nor malformed); a body
    that is not the feed's shape at all is StoreUnavailable."""
    if len(body) > MAX_FEED_BYTES:
        raise StoreUnavailable("the stock feed is larger than any answer for 100 SKUs")
    try:
        data: Any = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise StoreUnavailable("the stock feed is not JSON") from None
    levels = data.get("levels") if isinstance(data, dict) else None
    if not isinstance(levels, list):
        raise StoreUnavailable('the stock feed has no "levels" list')
    found: dict[str, int] = {}
    skipped: list[str] = []
    for index, entry in enumerate(levels):
        if not isinstance(entry, dict):
            skipped.append(f"entry {index} is not an object")
            continue
        sku, available = entry.get("sku"), entry.get("available")
        if not isinstance(sku, str) or not sku:
            skipped.append(f"entry {index} has no sku")
            continue
        if sku not in wanted:
            continue
        if isinstance(available, bool) or not isinstance(available, int) or available < 0:
            skipped.append(f"{sku[:64]!r}: available is not a whole number of units")
            continue
        found[sku] = min(available, MAX_FEED_LEVEL)
    reports = [LevelReport(available=n, occurred_at=None, sku=sku) for sku, n in sorted(found.items())]
    return FeedLevels(reports, skipped)


def feed_fetcher(token: Callable[[], str | None]) -> Callable[[str], bytes]:
    """GET a stock feed URL as the catalogue feed is fetched; StoreUnavailable for anything that stops it."""

    def fetch(url: str) -> bytes:
        # Imported here: catalog_sync is heavy and only a generic stage with a stock feed reads one.
        from chalicelib.catalog_sync import FeedError, FeedReader

        try:
            return FeedReader(url, token).read()
        except FeedError as exc:
            raise StoreUnavailable(f"the stock feed could not be read: {exc}") from None

    return fetch
