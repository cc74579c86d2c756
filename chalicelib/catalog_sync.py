"""Catalogue sync: mirror the store's product feed into bisn-catalog every 15 minutes.

The feed is JSON, fetched from CATALOG_URL (HTTPS with `Authorization: Bearer <CATALOG_TOKEN>`, or a
`file:` URL in the local stage). Its schema:

    {"products": [                      (a bare JSON array of products is accepted too)
      {"sku": "WW-THROW-OAT",           required; letters, digits and . _ : / - ; at most 64
       "name": "Oatmeal merino throw",  required; at most 200 characters; no web or email address or host, price,
                                        discount or promise (chalicelib/wording.check_name)
       "threshold": 1,                  units in stock before anyone is told; 1..10000, default 1
       "hold_window_s": 900,            how long a tapped link holds a unit; 60..86400, default 900
       "offer_window_s": 3600,          how long a notice's link stays live; 300..604800, default 3600
       "voice": "warm",                 tone of the message copy, one of wording.TONES, default "friendly"; free
                                        text (at most 200 characters) is kept as the first tone or near word it
                                        names ("warm and plain" -> "warm"), and refused when it names none
       "checkout_url": "https://shop.example/checkout?sku={sku}&reservation={reservation_id}",
                                        required; http(s); must contain {reservation_id}; may contain {sku}
       "product_url": "https://shop.example/products/oat-throw",   optional; the product's page, absolute http(s)
       "image_url": "https://shop.example/images/oat-throw.jpg",   optional; its picture, absolute http(s)
       "price": "89.00", "currency": "GBP"}                         optional, together; a decimal string and an
                                        ISO 4217 code, shown in the shopper's language in messages
    ]}

A stage on Shopify or WooCommerce (PLATFORM) reads the platform's own catalogue instead (chalicelib/platforms):
each variant with a SKU becomes a product with its name (checked as a feed's is), product URL, image, price and the platform's ids; its
threshold and windows are the shop's own settings (defaults at first, then whatever staff set), never the
platform's. The platform's product webhooks apply the same entries between syncs (`apply_store_entries`).

Other keys are ignored. A malformed entry is skipped and reported; the rest are still applied. A product
that vanishes from the feed is marked discontinued (nobody can join its list; people already waiting
keep their places and are told if it comes back), never deleted. Only products the feed created are
ever discontinued: ones added by hand (the dev console, staff) are left alone. A feed that cannot be
read, or that lists no usable product, changes nothing.

The feed is streamed (chalicelib/feed_stream.py: no limit on its length, one on each entry's) and applied a
batch at a time: one BatchGetItem per batch, and a write only for a product whose fields changed, the batch's
writes made together (WRITERS at once). A run that nears its deadline saves its place in the feed (bisn-throttle)
and the next run carries on from there; only the run that reads the feed to its end discontinues anything. A
feed broken part-way keeps what was applied before the fault and discontinues nothing. A product whose write is
refused (throttled past the client's retries, a service fault) stops the run after its batch: the others in the
batch stay written, and the saved place is that product's, so the next run compares and writes it again.
"""

from __future__ import annotations

import logging
import re
import string
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import urlparse

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.capture import parse_sku
from chalicelib.clock import Clock, Deadline
from chalicelib.errors import BadRequest
from chalicelib.feed_stream import FeedSyntaxError, feed_entries
from chalicelib.messages.wording import DEFAULT_TONE, check_name, check_voice
from chalicelib.metrics import STORE_CREDENTIALS_REFUSED, MetricsFactory
from chalicelib.platforms.base import CatalogEntry, Catalogue, CatalogUnavailable
from chalicelib.tables.base import error_code
from chalicelib.tables.catalog import CatalogTable, Product
from chalicelib.tables.throttle import SavedStates

logger = logging.getLogger(__name__)

CHUNK_BYTES = 64 * 1024  # the feed is read this much at a time; no limit on its whole length (one entry has one)
TIMEOUT_S = 10
# A run stops starting new batches after this long, or with MARGIN_S of the Lambda's time left (a feed read's
# timeout and one batch's writes must still fit); the next run carries on from the saved place in the feed.
BUDGET_S = 45.0
MARGIN_S = TIMEOUT_S + 5.0
BATCH = 100  # products compared (one BatchGetItem) and written per step
# A batch's changed products are written as concurrent UpdateItems, not one TransactWriteItems: each product's
# write then stands or fails alone (a transaction cancels all 100 when one is refused, and one of a shopper's
# taps on any of them, a transaction on the same item, is a conflict that cancels it or the tap), and costs
# 1 write unit, not a transaction's 2. One boto3 resource per thread (chalicelib/aws.py), clients shared.
WRITERS = 8
CURSOR = "cursor#catalog-sync"
CURSOR_TTL_S = 7 * 86_400
MAX_NAME_LEN = 200
MAX_VOICE_LEN = 200
MAX_URL_LEN = 2000
PLACEHOLDERS = frozenset({"sku", "reservation_id"})
# (field, default, minimum, maximum) of the whole-number settings.
NUMBERS: tuple[tuple[str, int, int, int], ...] = (
    ("threshold", 1, 1, 10_000),
    ("hold_window_s", 900, 60, 86_400),
    ("offer_window_s", 3600, 300, 604_800),
)
SETTINGS = ("name", "threshold", "hold_window_s", "offer_window_s", "voice", "checkout_url")
# Optional feed fields: the product's page and picture, and its price in a currency (shown in messages).
LINKS = ("product_url", "image_url", "price", "currency")


class FeedError(Exception):
    """The feed as a whole could not be read or understood; nothing is changed. `credentials_refused`: a platform's
    catalogue, refused because the store refuses our credentials."""

    def __init__(self, message: str, *, credentials_refused: bool = False) -> None:
        super().__init__(message)
        self.credentials_refused = credentials_refused


@dataclass(frozen=True)
class FeedEntry:
    """One valid feed entry."""

    sku: str
    name: str
    threshold: int
    hold_window_s: int
    offer_window_s: int
    voice: str
    checkout_url: str
    product_url: str | None = None  # shown on the shopper's pages and emails
    image_url: str | None = None
    price: str | None = None  # a decimal string, in `currency`
    currency: str | None = None

    def settings(self) -> dict[str, Any]:
        """The catalogue fields this entry sets (a page or picture only when the entry names one)."""
        fields = {key: getattr(self, key) for key in SETTINGS}
        fields.update({key: value for key in LINKS if (value := getattr(self, key)) is not None})
        return fields


@dataclass(frozen=True)
class StoreProduct:
    """One variant from a platform's catalogue: what the platform knows of it, none of the shop's settings."""

    sku: str
    fields: dict[str, Any]
    threshold: None = None  # the platform sets no threshold: the one stored (or the default) stands

    def settings(self) -> dict[str, Any]:
        """The catalogue fields this entry sets."""
        return dict(self.fields)


# The platform id a platform's stock webhooks name instead of the SKU (mapped back through GSI by-store-item).
STORE_ITEM_IDS = ("shopify.inventory_item_id",)
STORE_ID = re.compile(r"^[a-z]+\.[a-z_]+$")
# ASCII digits only: str.isdigit() also takes "²" and "١٢", which int() then refuses when a connector uses the id.
STORE_ID_VALUE = re.compile(r"[0-9]{1,30}")
PRICE = re.compile(r"[0-9]+(\.[0-9]+)?")


def _optional_url(value: str | None, key: str) -> str | None:
    if value is None or value == "":
        return None
    parsed = urlparse(value)
    if len(value) > MAX_URL_LEN or parsed.scheme not in ("https", "http") or not parsed.netloc:
        raise BadRequest(f"{key} must be an absolute http(s) URL of at most {MAX_URL_LEN} characters")
    return value


def _price(price: str | None, currency: str | None) -> tuple[str | None, str | None]:
    """A price as shoppers are shown it: a plain decimal string, in an ISO 4217 currency (both or neither)."""
    if price is not None:
        # Decimal() alone would also take "1e3", "1_000", " 12" and non-ASCII digits, shown to shoppers as given.
        if not PRICE.fullmatch(price):
            raise BadRequest("price must be a decimal number of 0 or more")
        try:
            amount = Decimal(price)
        except InvalidOperation as exc:
            raise BadRequest("price must be a decimal number") from exc
        if not amount.is_finite() or amount < 0 or len(price) > 20:
            raise BadRequest("price must be a decimal number of 0 or more")
    if currency is not None and not re.fullmatch(r"[A-Z]{3}", currency):
        raise BadRequest("currency must be an ISO 4217 code")
    return price, currency


def parse_store_entry(entry: CatalogEntry) -> StoreProduct:
    """Validate one platform catalogue entry (pure); BadRequest says what is wrong."""
    sku = parse_sku(entry.sku)
    name = check_name(_text({"name": entry.name}, "name", MAX_NAME_LEN))
    ids: dict[str, str] = {}
    for key, value in entry.ids.items():
        text = str(value)
        if not STORE_ID.match(key) or not STORE_ID_VALUE.fullmatch(text):
            raise BadRequest(f"platform id {key!r} must be a whole number")
        ids[key] = text
    price, currency = _price(entry.price, entry.currency)
    fields: dict[str, Any] = {
        "name": name,
        "product_url": _optional_url(entry.product_url, "product_url"),
        "image_url": _optional_url(entry.image_url, "image_url"),
        "price": price,
        "currency": currency,
        "store_ids": ids,
        "backorder": entry.backorder,
    }
    item = next((f"{key}:{ids[key]}" for key in STORE_ITEM_IDS if key in ids), None)
    if item is not None:
        fields["store_item"] = item
    product = next((f"{key}:{value}" for key, value in ids.items() if key.endswith(".product_id")), None)
    if product is not None:
        fields["store_product"] = product
    return StoreProduct(sku, {key: value for key, value in fields.items() if value is not None})


def parse_store_catalog(entries: Iterable[CatalogEntry]) -> tuple[list[StoreProduct], list[Skipped], set[str]]:
    """Valid platform entries, skipped ones, and every SKU named (as `parse_feed`)."""
    return _collect(((entry.sku or None, entry) for entry in entries), parse_store_entry, "catalogue")


@dataclass(frozen=True)
class Skipped:
    """A feed entry that was not applied, and why."""

    index: int
    sku: str | None
    reason: str


@dataclass
class SyncReport:
    """What one sync did."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    discontinued: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # changed products whose write failed: the next run retries
    error: str | None = None
    resumed_at: int = 0  # the feed entry this run began applying at (0: a new pass)
    stopped_at: int | None = None  # out of time: the feed entry the next run carries on at
    complete: bool = False  # the pass reached the feed's end and discontinued what it no longer lists
    store_problems: list[str] = field(default_factory=list)  # what the platform's store check found wrong

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form, for logs and the local stack."""
        return asdict(self)


def _text(entry: dict[str, Any], key: str, max_len: int, default: str | None = None) -> str:
    value = entry.get(key)
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{key} must be a non-empty string")
    value = value.strip()
    if len(value) > max_len:
        raise BadRequest(f"{key} must be at most {max_len} characters")
    if any(ord(c) < 32 for c in value):
        raise BadRequest(f"{key} may not contain control characters")
    return value


def _number(entry: dict[str, Any], key: str, default: int, minimum: int, maximum: int) -> int:
    value = entry.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{key} must be a whole number")
    if not minimum <= value <= maximum:
        raise BadRequest(f"{key} must be between {minimum} and {maximum}")
    return value


def _checkout_url(entry: dict[str, Any]) -> str:
    url = _text(entry, "checkout_url", MAX_URL_LEN)
    parsed = urlparse(url)
    if parsed.scheme not in ("https", "http") or not parsed.netloc:
        raise BadRequest("checkout_url must be an absolute http(s) URL")
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(url) if name is not None}
    except ValueError as exc:
        raise BadRequest("checkout_url has an unbalanced { or }") from exc
    unknown = names - PLACEHOLDERS
    if unknown:
        raise BadRequest(f"checkout_url may use only {{sku}} and {{reservation_id}}, not {sorted(unknown)}")
    if "reservation_id" not in names:
        raise BadRequest("checkout_url must contain {reservation_id}, so the checkout can report the order")
    return url


def _link(entry: dict[str, Any], key: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"{key} must be a string")
    return value.strip() if value is not None else None


def parse_product(entry: Any) -> FeedEntry:
    """Validate one feed entry (pure); BadRequest says what is wrong."""
    if not isinstance(entry, dict):
        raise BadRequest("an entry must be a JSON object")
    numbers = {key: _number(entry, key, default, lo, hi) for key, default, lo, hi in NUMBERS}
    price, currency = _price(_link(entry, "price") or None, _link(entry, "currency") or None)
    if (price is None) != (currency is None):
        raise BadRequest("price and currency go together: give both or neither")
    return FeedEntry(
        sku=parse_sku(entry.get("sku")),
        name=check_name(_text(entry, "name", MAX_NAME_LEN)),
        voice=check_voice(_text(entry, "voice", MAX_VOICE_LEN, default=DEFAULT_TONE)),
        checkout_url=_checkout_url(entry),
        product_url=_optional_url(_link(entry, "product_url"), "product_url"),
        image_url=_optional_url(_link(entry, "image_url"), "image_url"),
        price=price,
        currency=currency,
        **numbers,
    )


def parse_feed(raw: bytes) -> tuple[list[FeedEntry], list[Skipped], set[str]]:
    """Valid products, skipped entries, and every SKU the feed names (valid or not) (pure)."""
    return _collect(((_named_sku(entry), entry) for entry in _entries_of([raw])), parse_product, "feed")


def _entries_of(chunks: Iterable[bytes]) -> Iterator[Any]:
    """The feed's entries as they arrive; FeedError where the feed stops being one."""
    try:
        yield from feed_entries(chunks)
    except FeedSyntaxError as exc:
        raise FeedError(str(exc)) from exc


_Entry = TypeVar("_Entry")
_Parsed = TypeVar("_Parsed", "FeedEntry", "StoreProduct")


def _named_sku(entry: Any) -> str | None:
    raw_sku = entry.get("sku") if isinstance(entry, dict) else None
    return raw_sku if isinstance(raw_sku, str) and raw_sku else None


def _collect(
    entries: Iterable[tuple[str | None, _Entry]], parse: Callable[[_Entry], _Parsed], source: str
) -> tuple[list[_Parsed], list[Skipped], set[str]]:
    """Parse each entry: the valid products (the first of each SKU), the skipped entries and why, and every SKU
    named, valid or not (a product whose entry is broken this time is still listed: never discontinue it for a
    typo)."""
    products: list[_Parsed] = []
    skipped: list[Skipped] = []
    named: set[str] = set()
    seen: set[str] = set()
    for index, (sku, entry) in enumerate(entries):
        if sku:
            named.add(sku)
        try:
            product = parse(entry)
        except BadRequest as error:
            skipped.append(Skipped(index, sku, error.message))
            continue
        if product.sku in seen:
            skipped.append(Skipped(index, product.sku, f"the same sku appears earlier in the {source}"))
            continue
        seen.add(product.sku)
        products.append(product)
    return products, skipped, named


class Opener(Protocol):
    """What urllib's OpenerDirector offers: open a request with a timeout."""

    # Positional request, keyword timeout: as FeedReader calls it, and as OpenerDirector.open accepts.
    def open(self, request: urllib.request.Request, /, *, timeout: float) -> Any:
        """The response (a file-like object with `status` and `read`)."""
        ...


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: urllib would carry the bearer token to wherever the redirect points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        """No new request: the 3xx surfaces as an HTTPError."""
        return None


def default_opener() -> Opener:
    """urllib's opener, without redirects."""
    return urllib.request.build_opener(_NoRedirect)


class FeedReader:
    """Fetches the feed's bytes from an https:// (or loopback http://) or file: URL."""

    def __init__(
        self,
        url: str,
        token: Callable[[], str | None],
        *,
        opener: Opener | None = None,
        base_dir: Path | None = None,
    ) -> None:
        self.url = url
        self.token = token
        self.opener = opener or default_opener()
        self.base_dir = base_dir

    def chunks(self) -> Iterator[bytes]:
        """The feed's bytes, CHUNK_BYTES at a time; FeedError for anything that stops us reading it (never the
        token), raised where it happens (a read can fail part-way)."""
        parsed = urlparse(self.url)
        if parsed.scheme == "file":
            yield from self._file_chunks(parsed.path)
            return
        if parsed.scheme not in ("https", "http"):
            raise FeedError(f"unsupported feed URL scheme {parsed.scheme!r}")
        headers = {"Accept": "application/json", "User-Agent": "bisn-catalog-sync"}
        token = self.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.url, headers=headers, method="GET")
        try:
            with self.opener.open(request, timeout=TIMEOUT_S) as response:
                status = int(getattr(response, "status", 200))
                if status != 200:
                    raise FeedError(f"the feed answered HTTP {status}")
                while chunk := response.read(CHUNK_BYTES):
                    yield chunk
        except urllib.error.HTTPError as exc:
            raise FeedError(f"the feed answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise FeedError(f"the feed could not be fetched: {type(exc).__name__}") from exc

    def read(self) -> bytes:
        """The whole feed (small feeds and tools only: the sync itself reads `chunks`)."""
        return b"".join(self.chunks())

    def _file_chunks(self, raw_path: str) -> Iterator[bytes]:
        # file:relative/path is resolved against the working directory (the repository root locally).
        path = Path(urllib.request.url2pathname(raw_path))
        if not path.is_absolute():
            path = (self.base_dir or Path.cwd()) / path
        try:
            with path.open("rb") as handle:
                while chunk := handle.read(CHUNK_BYTES):
                    yield chunk
        except OSError as exc:
            raise FeedError(f"the feed file {path} could not be read: {exc.strerror or type(exc).__name__}") from exc


@dataclass(frozen=True, kw_only=True, eq=False)
class CatalogSync:
    """Upserts the feed's products and discontinues the ones it no longer lists."""

    catalog: CatalogTable
    cursors: SavedStates  # where the last run stopped in the feed
    reader: FeedReader | None  # None when the stage has no CATALOG_URL: the report says so
    clock: Clock
    # Restock detection's re-evaluation: stock already on hand may meet a lowered threshold.
    threshold_changed: Callable[[str], object]
    store: Catalogue | None = None  # the platform's own catalogue (PLATFORM shopify or woocommerce), read instead
    batch_size: int = BATCH
    writers: int = WRITERS
    # Where refused store credentials are counted (STORE_CREDENTIALS_REFUSED); None counts nothing (a feed's stage
    # has no store credentials, and the bench and the sync's own tests read no platform).
    metrics: MetricsFactory | None = None

    def run(self, *, remaining_ms: Callable[[], int] | None = None, deadline: Deadline | None = None) -> SyncReport:
        """One run; the report says what changed and what was skipped. Never raises for a bad feed.

        The feed is read as it arrives and applied BATCH products at a time, from the place the last run stopped
        (saved in bisn-throttle). Before each batch the run looks at `deadline` (by default the earlier of BUDGET_S
        and the Lambda's remaining time, `remaining_ms`, less MARGIN_S); out of time, it saves the place of the
        batch it did not start and stops. Every run reads the feed from its start, so the run that reaches the end
        has seen every SKU the feed names: only then are products the feed no longer lists discontinued. A batch
        with a refused write stops the run too, its place saved at the first refused product.
        """
        report = SyncReport()
        if self.reader is None and self.store is None:
            report.error = "CATALOG_URL is not set for this stage"
            logger.warning("catalogue sync skipped: %s", report.error)
            return report
        if self._store_refuses(report):
            return report
        if deadline is None:
            deadline = Deadline.for_run(BUDGET_S, remaining_ms=remaining_ms, margin_s=MARGIN_S)
        # One pool for the run: its threads (and their boto3 resources) serve every batch.
        with ThreadPoolExecutor(max_workers=self.writers, thread_name_prefix="catalog-write") as pool:
            return self._run(report, deadline, pool)

    def _store_refuses(self, report: SyncReport) -> bool:
        """A platform that can check its own set-up (WooCommerce) is checked before every run: each problem is
        logged as an error for staff to fix, and refused credentials stop the run, as nothing could be read."""
        check = getattr(self.store, "check_store", None)
        if check is None:
            return False
        checks = check()
        report.store_problems = [str(problem) for problem in checks.get("problems", [])]
        for problem in report.store_problems:
            logger.error("store check: %s", problem)
        if checks.get("credentials") == "refused":
            report.error = report.store_problems[0] if report.store_problems else "credentials refused"
            self._count_refused()
            return True
        return False

    def _count_refused(self) -> None:
        if self.metrics is None:
            return
        buffer = self.metrics.start()
        buffer.count(STORE_CREDENTIALS_REFUSED)
        buffer.flush()

    def _flush(
        self,
        batch: list[tuple[int, FeedEntry | StoreProduct]],
        batch_at: int,
        deadline: Deadline,
        report: SyncReport,
        pool: ThreadPoolExecutor,
        started_at: int,
        now: float,
    ) -> SyncReport | None:
        """Write a batch's changed products, unless time is up; the run's report when it must stop here (out of
        time, or a write refused: the saved place is then that product), else None."""
        if deadline.passed():
            return self._stop(report, batch_at, started_at, now)
        refused_at = self._apply_batch(batch, now, report, pool)
        if refused_at is not None:
            return self._stop(report, refused_at, started_at, now)
        return None

    def _run(self, report: SyncReport, deadline: Deadline, pool: ThreadPoolExecutor) -> SyncReport:
        now = self.clock.now()
        state = self.cursors.get(CURSOR) or {}
        start = int(state.get("next") or 0)
        started_at = int(state.get("started_at") or now)
        report.resumed_at = start
        named: set[str] = set()
        seen: set[str] = set()
        usable = 0
        batch: list[tuple[int, FeedEntry | StoreProduct]] = []  # (feed index, product)
        batch_at = start  # the feed index of the first entry of `batch`
        index = -1
        try:
            for index, (sku, parsed) in enumerate(self._parsed()):
                if sku:
                    named.add(sku)
                if isinstance(parsed, BadRequest):
                    if index >= start:
                        report.skipped.append(Skipped(index, sku, parsed.message))
                    continue
                if parsed.sku in seen:
                    if index >= start:
                        source = "catalogue" if self.store is not None else "feed"
                        report.skipped.append(
                            Skipped(index, parsed.sku, f"the same sku appears earlier in the {source}")
                        )
                    continue
                seen.add(parsed.sku)
                usable += 1
                if index < start:
                    continue  # applied by an earlier run of this pass
                if not batch:
                    batch_at = index
                batch.append((index, parsed))
                if len(batch) >= self.batch_size:
                    stopped = self._flush(batch, batch_at, deadline, report, pool, started_at, now)
                    if stopped is not None:
                        return stopped
                    batch = []
            if batch:
                stopped = self._flush(batch, batch_at, deadline, report, pool, started_at, now)
                if stopped is not None:
                    return stopped
                batch = []
        except FeedError as error:
            report.error = str(error)
            logger.error("catalogue sync stopped, the feed could not be read: %s", report.error)
            if error.credentials_refused:
                self._count_refused()
            # What was applied stays applied (each product is written whole); the next run reads from here.
            resume_at = batch_at if batch else max(start, index + 1)
            if resume_at != start:
                self._save(resume_at, started_at, now)
            return report
        if not usable:
            # An empty or wholly broken feed is far likelier a fault upstream than a shop selling nothing.
            report.error = "the feed lists no usable product; nothing changed"
            logger.error("catalogue sync: %s (%d entries skipped)", report.error, len(report.skipped))
            self._save(0, None, now, finished=False)
            return report
        for sku, discontinued in self.catalog.synced():
            if sku in named or discontinued:
                continue
            if deadline.passed():
                # Every product is applied: the next run reads the feed again for its SKUs and goes on from here.
                return self._stop(report, index + 1, started_at, now)
            if self.catalog.discontinue(sku, now):
                report.discontinued.append(sku)
        report.complete = True
        self._save(0, None, now)
        self._log(report)
        return report

    def _parsed(self) -> Iterator[tuple[str | None, FeedEntry | StoreProduct | BadRequest]]:
        """Each feed (or platform catalogue) entry: the SKU it names, and the valid product or why it is not one."""
        if self.store is not None:
            try:
                for entry in self.store.read_catalog():
                    try:
                        yield entry.sku or None, parse_store_entry(entry)
                    except BadRequest as error:
                        yield entry.sku or None, error
            except CatalogUnavailable as error:
                raise FeedError(
                    f"the store's catalogue could not be read: {error}",
                    credentials_refused=error.credentials_refused,
                ) from error
            return
        assert self.reader is not None
        for raw in _entries_of(self.reader.chunks()):
            try:
                yield _named_sku(raw), parse_product(raw)
            except BadRequest as error:
                yield _named_sku(raw), error

    def _apply_batch(
        self,
        batch: Sequence[tuple[int, FeedEntry | StoreProduct]],
        now: float,
        report: SyncReport,
        pool: ThreadPoolExecutor,
    ) -> int | None:
        """Compare one batch with what is stored (one read per 100) and write only the products that changed, all
        at once; the feed index of the first product whose write was refused, or None when none was."""
        existing = self.catalog.get_many([product.sku for _, product in batch])
        refused = self._upsert(batch, existing, now, report, pool)
        if not refused:
            return None
        first = refused[0]
        report.error = (
            f"{len(refused)} product write(s) refused, the first {first.sku} ({first.reason});"
            " the next run carries on from it"
        )
        logger.error("catalogue sync: %s", report.error)
        return first.position

    def _stop(self, report: SyncReport, resume_at: int, started_at: int, now: float) -> SyncReport:
        report.stopped_at = resume_at
        self._save(resume_at, started_at, now)
        if not report.refused:
            logger.info("catalogue sync out of time; the next run carries on at feed entry %d", resume_at)
        self._log(report)
        return report

    def _save(self, resume_at: int, started_at: int | None, now: float, *, finished: bool = True) -> None:
        state: dict[str, Any] = {"next": resume_at or None, "started_at": started_at if resume_at else None}
        if not resume_at and finished:
            state["finished_at"] = int(now)
        self.cursors.save(CURSOR, state, int(now) + CURSOR_TTL_S)

    @staticmethod
    def _log(report: SyncReport) -> None:
        logger.info(
            "catalogue sync: %d created, %d updated, %d restored, %d discontinued, %d unchanged, %d skipped",
            len(report.created),
            len(report.updated),
            len(report.restored),
            len(report.discontinued),
            report.unchanged,
            len(report.skipped),
        )
        for skipped in report.skipped:
            logger.warning("catalogue feed entry %d (%s) skipped: %s", skipped.index, skipped.sku, skipped.reason)

    def apply_store_entries(self, entries: Sequence[CatalogEntry], removed_ids: Sequence[str]) -> SyncReport:
        """A platform's product webhook: apply its changed variants now, and discontinue a deleted product's SKUs.
        Variants it no longer lists are left for the next full sync, which sees the whole catalogue."""
        report = SyncReport()
        products, report.skipped, _ = parse_store_catalog(entries)
        now = self.clock.now()
        existing = {sku: item for sku in {p.sku for p in products} if (item := self.catalog.get(sku)) is not None}
        with ThreadPoolExecutor(max_workers=self.writers, thread_name_prefix="catalog-write") as pool:
            refused = self._upsert(list(enumerate(products)), existing, now, report, pool)
        if refused:
            # As before writes went together: the webhook is answered with the error, so the platform delivers it
            # again (the writes that went through compare unchanged then).
            raise refused[0].error
        for store_product in removed_ids:
            for sku in self.catalog.skus_of_store_product(store_product):
                if self.catalog.discontinue(sku, now):
                    report.discontinued.append(sku)
        for skipped in report.skipped:
            logger.warning("store product entry %d (%s) skipped: %s", skipped.index, skipped.sku, skipped.reason)
        return report

    def _upsert(
        self,
        products: Sequence[tuple[int, FeedEntry | StoreProduct]],
        existing: dict[str, Product],
        now: float,
        report: SyncReport,
        pool: ThreadPoolExecutor,
    ) -> list[_Refused]:
        """Write the changed products together; the refused ones, in order.

        A product is reported created, updated or restored only once its write has succeeded, and restock
        detection reconsiders it only then."""
        writes: list[tuple[int, str, _Write, Future[None]]] = []
        for position, product in products:
            write = self._write_for(product, existing.get(product.sku))
            if write is None:
                report.unchanged += 1
                continue
            future = pool.submit(
                self.catalog.sync_product,
                product.sku,
                write.settings,
                now=now,
                created=write.outcome == "created",
                out_of_stock=write.out_of_stock,
                marks=write.marks,
            )
            writes.append((position, product.sku, write, future))
        refused: list[_Refused] = []
        for position, sku, write, future in writes:
            try:
                future.result()
            except ClientError as error:
                refused.append(_Refused(position, sku, error_code(error) or "ClientError", error))
            except BotoCoreError as error:  # no answer at all (a connection or read timeout)
                refused.append(_Refused(position, sku, type(error).__name__, error))
            else:
                getattr(report, write.outcome).append(sku)
                if write.reconsider:
                    # The level did not move, so no webhook will come: without this, units already on the shelf
                    # would never be offered to the people waiting (invariant 7).
                    self.threshold_changed(sku)
        for one in refused:
            report.refused.append(one.sku)
            logger.error("catalogue sync: the write of %s was refused (%s)", one.sku, one.reason)
        return refused

    @staticmethod
    def _write_for(product: FeedEntry | StoreProduct, current: Product | None) -> _Write | None:
        """What to write for one product compared with what is stored; None when nothing changed."""
        settings = product.settings()
        if current is None:
            return _Write(settings, "created", out_of_stock=True, reconsider=False)
        discontinued = current.discontinued
        # A product stored without `backorder` is one the store does not sell on backorder (its item leaves it out).
        stored = {**current.to_item(), "backorder": current.backorder}
        changed = any(stored.get(key) != value for key, value in settings.items())
        if not changed and not discontinued and current.synced_at is not None:
            return None
        level = current.level
        threshold = current.threshold if product.threshold is None else product.threshold
        out_of_stock = level < threshold if level is not None else None
        backorder = bool(settings.get("backorder", current.backorder))
        return _Write(
            settings,
            "restored" if discontinued else "updated",
            out_of_stock=out_of_stock,
            reconsider=out_of_stock is False and current.threshold > threshold,
            marks=replace(current, backorder=backorder).backorder_mark != current.backorder_mark,
        )


@dataclass(frozen=True)
class _Write:
    """One changed product's write: its settings, the report list it goes on, and the stock facts it carries."""

    settings: dict[str, Any]
    outcome: Literal["created", "updated", "restored"]
    out_of_stock: bool | None  # a new product has no level yet, which counts as sold out
    reconsider: bool  # a lowered threshold with stock already on hand: restock detection looks again
    marks: bool = False  # the product's backorder opens or closes its list: its shards are written with it


@dataclass(frozen=True)
class _Refused:
    """A changed product whose write failed: where it is in the feed, and why."""

    position: int
    sku: str
    reason: str  # the AWS error code, or the client's error name when no answer came
    error: Exception
