"""Importing a waiting list from another back-in-stock app (docs/IMPORT.md): the rows chalicelib/imports.py accepts
become places, each written by capture's own transaction, so every rule a tap meets holds for them too.

Per SKU: the product must be catalogued and sold; one batch read of the people's uniqueness items and one of the
suppression list pass over those already on the list (reported, never written twice) and those who opted out; the
line counts the places about to go in without tickets (chalicelib/line.py); then each place is one transaction,
several at a time. A place keeps its original join time as its join stamp, so it stands among the people already
waiting by when each asked. A crash midway loses nothing: a re-run finds the places written and writes the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby

from chalicelib.capture import CaptureService, NewPlace
from chalicelib.clock import Clock
from chalicelib.config import Settings
from chalicelib.contacts import match_keys
from chalicelib.errors import DomainError
from chalicelib.i18n import DEFAULT_LANGUAGE
from chalicelib.imports import ImportRow, ParsedFile, Refusal, RowRules, format_named, parse_file
from chalicelib.messages.senders import EMAIL
from chalicelib.tables.base import Tx
from chalicelib.tables.catalog import shard_for
from chalicelib.tables.requests import UniqueItem, new_joined_ts
from chalicelib.tables.store import Tables

log = logging.getLogger(__name__)

ALREADY = "already on the list"
LEFT = "was told of a restock on this list and left it; not placed again"
OPTED_OUT = "opted out: nobody who opted out is added"
IMPORTED_BEFORE = "imported before and left the list since; not placed again"
# How long an import remembers each person it placed on a list, so that running the file again (or another export
# naming them) never puts back someone who left: a shop's switch-over, with room to spare.
IMPORT_MEMORY_DAYS = 400


def import_memory_key(sku: str, contact_key: str) -> str:
    """The throttle-table key that remembers an import placed this person (keyed hash) on this SKU's list."""
    return f"import#{sku}#{contact_key}"


# Places written at once: each is its own small transaction, and they touch different items but for the product's
# 16 waiting shards, which a conflict retries (capture's `_join`).
IMPORT_WORKERS = 8


@dataclass(frozen=True)
class ImportReport:
    """What an import did (or, with `dry_run`, would do): rows read, places written, and each row not written."""

    format: str
    dry_run: bool
    rows: int
    imported: int
    confirmations_owed: int  # imported email places that owe their address a confirmation email
    already: list[Refusal] = field(default_factory=list)  # rows whose person is on the list already
    refused: list[Refusal] = field(default_factory=list)

    def body(self) -> dict[str, object]:
        """The report as JSON (the dashboard's answer, `bisn import --json`)."""
        return {
            "format": self.format,
            "dry_run": self.dry_run,
            "rows": self.rows,
            "imported": self.imported,
            "confirmations_owed": self.confirmations_owed,
            "already": [{"line": r.line, "reason": r.reason} for r in self.already],
            "refused": [{"line": r.line, "reason": r.reason} for r in self.refused],
        }


@dataclass
class _Tally:
    imported: int = 0
    owed: int = 0
    already: list[Refusal] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, eq=False)
class ImportService:
    """Reads an export and writes its places through capture."""

    settings: Settings
    tables: Tables
    capture: CaptureService
    clock: Clock
    hash_key: str
    workers: int = IMPORT_WORKERS

    def parse(self, text: str, format_name: str) -> ParsedFile:
        """The file's rows, accepted or refused (BadRequest for an unknown format or an unreadable file)."""
        rules = RowRules(
            default_region=self.settings.default_phone_region,
            sms_countries=self.settings.sms_allowed_countries,
            now=self.clock.now(),
        )
        return parse_file(text, format_named(format_name), rules)

    def run(
        self,
        text: str,
        format_name: str,
        *,
        dry_run: bool = False,
        progress: Callable[[int], None] | None = None,
        source: str = "",
    ) -> ImportReport:
        """Import a file (`dry_run`: check it against the catalogue and the lists, write nothing). `progress` is told
        of every row handled; `source` names who brought the file in each place's audit fact (no contact is logged)."""
        parsed = self.parse(text, format_name)
        tally = _Tally(refused=list(parsed.refused))
        if progress is not None and parsed.refused:
            progress(len(parsed.refused))
        for sku, group in groupby(parsed.rows, key=lambda r: r.sku):
            rows = list(group)
            self._import_sku(sku, rows, tally, format_name, dry_run=dry_run, source=source, progress=progress)
        log.info(
            "import %s: %d rows, %d placed, %d already, %d refused%s",
            format_name,
            parsed.total,
            tally.imported,
            len(tally.already),
            len(tally.refused),
            " (dry run)" if dry_run else "",
        )
        return ImportReport(
            format=format_name,
            dry_run=dry_run,
            rows=parsed.total,
            imported=tally.imported,
            confirmations_owed=tally.owed,
            already=sorted(tally.already, key=lambda r: r.line),
            refused=sorted(tally.refused, key=lambda r: r.line),
        )

    def _import_sku(
        self,
        sku: str,
        rows: list[ImportRow],
        tally: _Tally,
        format_name: str,
        *,
        dry_run: bool,
        source: str,
        progress: Callable[[int], None] | None,
    ) -> None:
        def done(n: int) -> None:
            if progress is not None:
                progress(n)

        product = self.tables.catalog.get(sku, consistent=True)
        if product is None or product.discontinued:
            why = f"SKU {sku} is not in the catalogue" if product is None else f"SKU {sku} is no longer sold"
            tally.refused += [Refusal(r.line, why) for r in rows]
            done(len(rows))
            return
        to_write = list(self._not_yet_placed(sku, rows, tally))
        done(len(rows) - len(to_write))
        owed = [self._owes(row) for row in to_write]
        if dry_run:
            tally.imported += len(to_write)
            tally.owed += sum(owed)
            done(len(to_write))
            return
        now = self.clock.now()
        if to_write:
            line_ttl = int(now) + (self.settings.request_ttl_days + 1) * 86400
            self.tables.line_tickets.note_inserted(sku, len(to_write), line_ttl)
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="import") as pool:
            outcomes = pool.map(lambda row: self._write(row, now, format_name, source), to_write)
            for row, owes, outcome in zip(to_write, owed, outcomes, strict=True):
                if outcome == "queued":
                    tally.imported += 1
                    tally.owed += owes
                elif outcome == "already":
                    tally.already.append(Refusal(row.line, ALREADY))
                elif outcome == "suppressed":
                    tally.refused.append(Refusal(row.line, OPTED_OUT))
                elif outcome == "imported_before":
                    tally.refused.append(Refusal(row.line, IMPORTED_BEFORE))
                else:
                    tally.refused.append(Refusal(row.line, outcome))
                done(1)

    def _not_yet_placed(self, sku: str, rows: list[ImportRow], tally: _Tally) -> Iterator[ImportRow]:
        """The rows whose person holds no uniqueness item for `sku` and has not opted out, read in batches; the others
        go to the tally (a person on the list is "already", whoever placed them)."""
        keys = {row.line: match_keys(row.contact, self.hash_key) for row in rows}
        every = [k for ks in keys.values() for k in ks]
        uniques = self.tables.requests.uniques(sku, every)
        suppressed = self.tables.optout.suppressed_among(list(dict.fromkeys(every)))
        for row in rows:
            found: list[UniqueItem] = [uniques[k] for k in keys[row.line] if k in uniques]
            if any(u.ref for u in found):
                tally.already.append(Refusal(row.line, ALREADY))
            elif found:
                tally.refused.append(Refusal(row.line, LEFT))
            elif suppressed.intersection(keys[row.line]):
                tally.refused.append(Refusal(row.line, OPTED_OUT))
            else:
                yield row

    def _owes(self, row: ImportRow) -> bool:
        """Whether the place waits for its address to confirm it: email under double opt-in, unless the file says
        this address confirmed its consent."""
        return self.settings.email_double_opt_in and row.contact.channel == EMAIL and not row.confirmed

    def _place(self, row: ImportRow, now: float) -> NewPlace:
        key = match_keys(row.contact, self.hash_key)[0]
        unconfirmed = self._owes(row)
        days = self.settings.email_confirm_days if unconfirmed else self.settings.request_ttl_days
        return NewPlace(
            sku=row.sku,
            # The original join time is the place in line (invariant 1): the earlier ask stands ahead.
            joined_ts=new_joined_ts(row.joined_at),
            channel=row.contact.channel,
            contact=row.contact.address,
            contact_key=key,
            name=row.name,
            lang=DEFAULT_LANGUAGE,
            ttl=int(now) + days * 86400,
            now=now,
            unconfirmed=unconfirmed,
            owes=unconfirmed,
            ticket=None,
            burnt_before=0,
            waiting_shard=shard_for(key),
            consent_source=row.consent_source,
        )

    def _write(self, row: ImportRow, now: float, format_name: str, source: str) -> str:
        """One place written: "queued", "already", "suppressed", "imported_before", or the reason the catalogue
        refused it."""
        place = self._place(row, now)
        fact = self.tables.audit.record_item(
            row.sku,
            "place_imported",
            now,
            contact_key=place.contact_key,
            channel=place.channel,
            joined_ts=place.joined_ts,
            consent_source=row.consent_source,
            confirmed=not place.unconfirmed,
            format=format_name,
            source=source,
        )
        try:
            once = self.tables.seen_events.remember_item(
                import_memory_key(row.sku, place.contact_key), int(now) + IMPORT_MEMORY_DAYS * 86400
            )
            return self.capture.join_imported(row.contact, place, Tx().add("fact", fact), once=once)
        except DomainError as refusal:
            return refusal.message
