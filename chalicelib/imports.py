"""Reading a waiting list another back-in-stock app exported (docs/IMPORT.md): each format's columns, and the rules a
row must meet before it may become a place. Pure: no AWS; chalicelib/importer.py writes what this accepts.

A row is refused with its line and a reason a shop can act on; every other row becomes an `ImportRow` keeping the
person's original join time (their place in line) and where their consent came from.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from chalicelib.capture import parse_name, parse_sku
from chalicelib.contacts import Contact, check_sms_number, normalise_contact
from chalicelib.errors import BadRequest
from chalicelib.messages.senders import EMAIL, SMS

# Join times we read: ISO-8601 (a date, or a date and time with or without seconds, fraction, Z or an offset; a
# time without a zone is UTC), and the "YYYY-MM-DD HH:MM[:SS]" spreadsheets write.
DATE_SHAPE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$")
# A clock a little ahead of ours is no reason to refuse a row; a join time further ahead is a mistake in the file.
FUTURE_SLACK_S = 300
EARLIEST_YEAR = 2000
MAX_CONSENT_LEN = 120
YES = frozenset({"yes", "y", "true", "1", "confirmed", "subscribed"})
NO = frozenset({"", "no", "n", "false", "0", "unconfirmed"})


@dataclass(frozen=True)
class Format:
    """One export's columns: for each field we read, the headers that may carry it (compared lower-cased, with
    spaces, dashes and underscores alike), and what the format says about consent."""

    name: str
    columns: Mapping[str, tuple[str, ...]]
    required: tuple[str, ...]
    # The consent source a row of this format records when it names none itself.
    consent: str = ""
    # Statuses (lower-cased) of a row still waiting in the old app, mapped to whether its email consent was
    # confirmed there; a status not listed is refused (told already, bought, unsubscribed). Empty: no status column.
    statuses: Mapping[str, bool] = field(default_factory=dict)


GENERIC = Format(
    name="generic",
    columns={
        "sku": ("sku",),
        "channel": ("channel",),
        "contact": ("contact",),
        "joined_at": ("joined at",),
        "consent_source": ("consent source",),
        "confirmed": ("confirmed",),
        "name": ("name",),
    },
    required=("sku", "channel", "contact", "joined_at", "consent_source"),
)

# Klaviyo documents no CSV export of back-in-stock subscribers; a shop exports the profiles of its "Subscribed to
# Back in Stock" metric. We read the profile export's `Email` and `Phone Number` and the columns a shop adds from
# that metric's event: the variant's `SKU` and the event's `Timestamp` (docs/IMPORT.md names the sources).
KLAVIYO = Format(
    name="klaviyo",
    columns={
        "sku": ("sku", "variant sku"),
        "email": ("email",),
        "phone": ("phone number",),
        "joined_at": ("timestamp", "subscribed at", "datetime"),
        "name": ("first name",),
    },
    required=("sku", "joined_at"),
    consent="klaviyo back in stock",
)

# Back In Stock Notifier for WooCommerce (codewoogeek, `cwginstocknotifier` posts): its subscribers screen shows
# Email, Status, Product and "Subscribed on"; the plugin ships no CSV export of its own, so a shop's export of
# that screen adds the product's `SKU` (docs/IMPORT.md).
CWGINSTOCK = Format(
    name="cwginstock",
    columns={
        "sku": ("sku",),
        "email": ("email", "cwginstock subscriber email"),
        "phone": ("phone", "cwginstock subscriber phone"),
        "joined_at": ("subscribed on", "date"),
        "status": ("status",),
        "name": ("name", "cwginstock subscriber name"),
    },
    required=("sku", "email", "joined_at"),
    consent="cwginstock subscription",
    # "Subscribed" says nothing of the plugin's own double opt-in (it is a setting), so it is not taken as
    # confirmed; "Waiting for Confirmation" is its double opt-in still waiting.
    statuses={
        "subscribed": False,
        "cwg_subscribed": False,
        "waiting for confirmation": False,
        "cwg_doubleoptin": False,
    },
)

# WooCommerce's Waitlist extension: its export's exact columns are not documented where we could read them; we
# accept the shape docs/IMPORT.md states (a row per person per product).
WOO_WAITLIST = Format(
    name="woo-waitlist",
    columns={
        "sku": ("sku", "product sku"),
        "email": ("email", "user email"),
        "joined_at": ("date added", "joined", "date"),
    },
    required=("sku", "email", "joined_at"),
    consent="woocommerce waitlist",
)

FORMATS: dict[str, Format] = {f.name: f for f in (KLAVIYO, CWGINSTOCK, WOO_WAITLIST, GENERIC)}


@dataclass(frozen=True)
class ImportRow:
    """One row accepted: a person to place on `sku`'s list at `joined_at` (Unix seconds)."""

    line: int
    sku: str
    contact: Contact
    joined_at: float
    consent_source: str
    confirmed: bool  # the file says this email address confirmed its consent
    name: str = ""


@dataclass(frozen=True)
class Refusal:
    """A row not imported: its line in the file (the header is line 1) and why."""

    line: int
    reason: str


@dataclass(frozen=True)
class ParsedFile:
    """What a file holds: the rows that may be imported, oldest join first, and the rows refused."""

    rows: list[ImportRow]
    refused: list[Refusal]
    total: int  # data rows read


def header_key(header: str) -> str:
    """A header as compared: lower-cased, BOM and outer space gone, runs of spaces, dashes and underscores one space."""
    return re.sub(r"[\s_-]+", " ", header.replace("\ufeff", "").strip().lower())


def parse_joined_at(raw: str, now: float) -> float:
    """A join time as Unix seconds; BadRequest when it is no date we read, in the future, or before 2000."""
    text = raw.strip()
    if not DATE_SHAPE.match(text):
        raise BadRequest(f"joined time {text!r} is not a date we read (ISO-8601, e.g. 2026-03-01T09:30:00Z)")
    moment = datetime.fromisoformat(text.replace(" ", "T").replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    at = moment.timestamp()
    if at > now + FUTURE_SLACK_S:
        raise BadRequest(f"joined time {text} is in the future")
    if moment.year < EARLIEST_YEAR:
        raise BadRequest(f"joined time {text} is before {EARLIEST_YEAR}")
    return at


def _columns(fmt: Format, headers: Iterable[str]) -> dict[str, int]:
    """Each field's column index in this file; BadRequest naming the columns a required field may come in."""
    seen = [header_key(h) for h in headers]
    found: dict[str, int] = {}
    for name, accepted in fmt.columns.items():
        for header in accepted:
            if header in seen:
                found[name] = seen.index(header)
                break
    missing = [name for name in fmt.required if name not in found]
    if fmt.name != GENERIC.name and "email" not in found and "phone" not in found:
        missing.append("email")
    if missing:
        wanted = "; ".join(" or ".join(repr(h) for h in fmt.columns[m]) for m in missing)
        raise BadRequest(f"This is not a {fmt.name} export: no column {wanted}.", code="import_columns")
    return found


def _consent_confirmed(raw: str) -> bool:
    value = raw.strip().lower()
    if value in YES:
        return True
    if value in NO:
        return False
    raise BadRequest(f"confirmed {raw!r} is neither yes nor no")


@dataclass(frozen=True, kw_only=True)
class RowRules:
    """What a row must meet beyond its format: the shop's phone region and the countries SMS may go to."""

    default_region: str
    sms_countries: tuple[str, ...]
    now: float


def _row(fmt: Format, cells: dict[str, str], line: int, rules: RowRules) -> ImportRow:
    """One data row, or BadRequest with the reason it is refused."""
    sku = parse_sku(cells.get("sku", "").strip())
    if fmt.statuses and "status" in cells:
        status = cells["status"].strip().lower()
        if status not in fmt.statuses:
            raise BadRequest(f"status {cells['status'].strip()!r} is not someone still waiting")
    if fmt.name == GENERIC.name:
        channel, raw = cells.get("channel", "").strip().lower(), cells.get("contact", "").strip()
        consent = cells.get("consent_source", "").strip()
        confirmed = _consent_confirmed(cells.get("confirmed", ""))
    else:
        email, phone = cells.get("email", "").strip(), cells.get("phone", "").strip()
        channel, raw = (EMAIL, email) if email else (SMS, phone)
        consent, confirmed = fmt.consent, False
        if channel == SMS:
            # The export records no consent to text this number; a shop that holds one imports it with the generic
            # format's consent_source.
            raise BadRequest("an SMS row needs its consent documented: use the generic format's consent_source")
    if channel not in (EMAIL, SMS):
        raise BadRequest(f"channel {channel!r} is neither email nor sms")
    if not raw:
        raise BadRequest("no contact")
    if not consent:
        raise BadRequest("no consent_source: where this person agreed to be told")
    if len(consent) > MAX_CONSENT_LEN:
        raise BadRequest(f"consent_source is longer than {MAX_CONSENT_LEN} characters")
    contact = normalise_contact(channel, raw, rules.default_region)
    if channel == SMS:
        check_sms_number(contact.address, rules.sms_countries)
    return ImportRow(
        line=line,
        sku=sku,
        contact=contact,
        joined_at=parse_joined_at(cells.get("joined_at", ""), rules.now),
        consent_source=consent,
        confirmed=confirmed and channel == EMAIL,
        name=_name(cells.get("name", "")),
    )


def _name(raw: str) -> str:
    """A name the file gives, kept only when a tap could have given it (else the place has none)."""
    try:
        return parse_name(raw)
    except BadRequest:
        return ""


def parse_file(text: str, fmt: Format, rules: RowRules) -> ParsedFile:
    """Every row of an export, accepted or refused (BadRequest only when the file as a whole is unreadable).

    One person appears once per SKU: a later row for the same contact and SKU is refused naming the row kept, the
    one with the earlier join time (the earlier ask keeps its place)."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    try:
        headers = next(reader)
    except StopIteration:
        raise BadRequest("The file is empty.", code="import_empty") from None
    except csv.Error as error:
        raise BadRequest(f"The file is not CSV we can read: {error}.", code="import_unreadable") from None
    columns = _columns(fmt, headers)
    rows: dict[tuple[str, str], ImportRow] = {}
    refused: list[Refusal] = []
    total = 0
    try:
        for record in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in record):
                continue
            total += 1
            cells = {name: (record[i] if i < len(record) else "") for name, i in columns.items()}
            try:
                row = _row(fmt, cells, line, rules)
            except BadRequest as refusal:
                refused.append(Refusal(line, refusal.message))
                continue
            same = (row.sku, row.contact.match)
            kept = rows.get(same)
            if kept is None:
                rows[same] = row
                continue
            first, second = (row, kept) if row.joined_at < kept.joined_at else (kept, row)
            rows[same] = first
            refused.append(Refusal(second.line, f"the same person for the same SKU as line {first.line}"))
    except csv.Error as error:
        raise BadRequest(f"The file is not CSV we can read: {error}.", code="import_unreadable") from None
    ordered = sorted(rows.values(), key=lambda r: (r.sku, r.joined_at, r.line))
    return ParsedFile(rows=ordered, refused=sorted(refused, key=lambda r: r.line), total=total)


def format_named(name: str) -> Format:
    """The format called `name`; BadRequest listing the formats there are."""
    found = FORMATS.get(name)
    if found is None:
        raise BadRequest(f"Unknown format {name!r}: use one of {', '.join(FORMATS)}.", code="import_format")
    return found
