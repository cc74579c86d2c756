"""What a shop's support staff can ask and do (the `bisn` CLI is only a thin layer over this).

No Lambda runs this: staff run it with their own AWS credentials, so it lives here, outside chalicelib/, and
never ships. It is built from the app's services (`Services.desk`), so it reads and writes exactly as they do.

Answers come from the facts the app keeps: the waiting lists, the restocks and their counters, the
opt-out table, and the append-only audit, where contacts appear only as keyed hashes. Staff type a
contact as the shopper gives it; it is normalised and hashed the way capture does, so the same
person is found however they write their number or address.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.clock import Clock, iso, parse_iso
from chalicelib.config import Settings
from chalicelib.contacts import Contact, mask, match_keys, normalise_any
from chalicelib.errors import DomainError
from chalicelib.leaving import ERASED, LEFT, RELEASED, QueueExits
from chalicelib.line import PlaceInLine, read_place
from chalicelib.notifier import SkipReason
from chalicelib.optout_service import OptOutResult, OptoutService
from chalicelib.tables.base import error_code, plain
from chalicelib.tables.catalog import Product
from chalicelib.tables.requests import Request, RequestState
from chalicelib.tables.restocks import Restock, RestockState
from chalicelib.tables.store import Tables

# Verdicts of `explain`, one per restock.
TOLD = "told"
BEHIND_CAP = "behind_cap"
OPTED_OUT = "opted_out"
ALREADY_NOTIFIED = "already_notified"
HOLDING_VERDICT = "holding"
NOT_YET_JOINED = "not_yet_joined"
NOT_ON_LIST = "not_on_list"
BOUGHT = "bought"
IN_PROGRESS = "in_progress"
UNDELIVERABLE = "undeliverable"
OTHER = "other"

# The notifier's skip reasons (audit `reason`) and what they mean for the shopper.
SKIP_VERDICTS: dict[SkipReason, tuple[str, str]] = {
    SkipReason.OPTED_OUT: (OPTED_OUT, "skipped: this contact had opted out"),
    SkipReason.ALREADY_NOTIFIED: (ALREADY_NOTIFIED, "skipped: already told about this restock"),
    SkipReason.HOLDING_OFFER: (HOLDING_VERDICT, "skipped: they still had an unused link from an earlier restock"),
    SkipReason.HOLDING_UNIT: (HOLDING_VERDICT, "skipped: they were holding a unit from an earlier restock"),
    SkipReason.CONVERTED: (BOUGHT, "skipped: they had already bought it"),
    SkipReason.NOT_WAITING: (OTHER, "skipped: their place was not waiting"),
    SkipReason.NO_CONTACT: (OTHER, "skipped: no usable contact on their place"),
    SkipReason.LEAVING: (NOT_ON_LIST, "skipped: they had asked to leave this list once their hold ended"),
    SkipReason.UNDELIVERABLE: (UNDELIVERABLE, "skipped: the provider had refused their notice of this restock"),
    SkipReason.UNCONFIRMED: (
        OTHER,
        "skipped: their email address had not confirmed the request yet (they keep their place; told once confirmed)",
    ),
}
PASS_NOTES = {
    "topup": " (on a top-up pass, when a unit came back)",
    "continue": " (on a later slice of a large restock)",
}
FOLLOW_UPS = ("hold", "lapse", "just_gone", "expiry", "conversion", "order_on_expired_hold", "leave")
LEAVE_KINDS = ("leave", "switch")
# Opting back in after an opt-out: the re-subscribe proof (written on the SKU it joined) and a staff-made opt-in link
# the person confirmed (written on its own partition, so it belongs to every SKU's story).
OPT_BACK_IN = {"resubscribed": "the proof sent to their contact came back", "optin": "their own opt-in link"}
# An unsubscribe by link taken back with the Undo on its done page (chalicelib/shopper/undo.py): one fact on each list the
# person joined again, at its end.
UNSUBSCRIBE_UNDONE = "unsubscribe_undone"
# How close a mistyped SKU must be to a catalogued one to be suggested (difflib's ratio, case ignored).
SUGGEST_CUTOFF = 0.75

# Error codes an emulator answers with for an operation it does not implement.
UNIMPLEMENTED_CODES = {
    "500",
    "InternalFailure",
    "InternalError",
    "NotImplemented",
    "UnsupportedOperation",
    "InvalidAction",
}


# A message move task's statuses that are final (RUNNING and CANCELLING are not): SQS API reference,
# ListMessageMoveTasksResultEntry.Status.
MOVE_TASK_ENDED = ("COMPLETED", "CANCELLED", "FAILED")


class StillHolding(DomainError):
    """Erasure must wait: the person holds a unit right now (it is theirs until bought or expired)."""

    code = "still_holding"


class UnknownProduct(DomainError):
    """The catalogue has no product with that SKU (a typo, or a product never synced)."""

    code = "unknown_sku"


# Told how many more items a long operation has handled (support/progress.py shows it).
ProgressHook = Callable[[int], None]


def _no_progress(done: int) -> None:
    pass


@dataclass(frozen=True)
class RestockVerdict:
    """One restock, and whether (and if not, why not) this person was told."""

    restock_id: str
    restock_ts: str
    detected_at: int
    units_total: int
    verdict: str
    detail: str
    position: int | None = None
    channel: str | None = None
    told_at: int | None = None
    follow_ups: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Explanation:
    """Everything support needs to answer "why was I (not) told?"."""

    sku: str
    product: str
    contact: str  # masked
    contact_key: str
    state: str | None  # their place's state, None when they have no place
    place: PlaceInLine | None  # where a live place stands, exact or a range (chalicelib/line.py)
    joined_ts: str | None
    opted_out: dict[str, Any] | None
    restocks: list[RestockVerdict]
    history: list[str]  # leaves, switches, and other facts about their place


@dataclass(frozen=True)
class QueueRow:
    """One place in a waiting list, contact masked."""

    position: int
    joined_ts: str
    state: str
    channel: str
    contact: str
    last_notified_restock: str | None
    # False for an email place whose address has not confirmed it: every restock passes it over until it does
    # (SkipReason.UNCONFIRMED), so someone lower in line may be told first.
    confirmed: bool = True


@dataclass(frozen=True)
class DemandRow:
    """One out-of-stock product and how many people wait for it."""

    sku: str
    name: str
    waiting: int
    level: int | None


@dataclass(frozen=True)
class ForgetReport:
    """What erasure removed and kept."""

    contact_key: str
    requests_erased: int
    uniqueness_items_erased: int
    offers_released: int
    kept_optout: bool
    remaining: int  # places still found afterwards (0 unless the index was behind; run again)
    audit_facts_anonymised: int = 0  # facts that named them by keyed hash and no longer do


@dataclass(frozen=True)
class RedriveReport:
    """How dead-lettered jobs went back to the job queue."""

    method: str  # "StartMessageMoveTask" or "receive-and-resend"
    source: str
    destination: str
    waiting_before: int
    moved: int | None  # known when moved by hand; AWS's task reports progress itself
    task_handle: str | None = None
    note: str = ""
    failed: int = 0  # messages the job queue refused; they stay on the dead-letter queue
    status: str | None = None  # the move task's last status, when it was followed (RUNNING, COMPLETED, ...)


def _verdict_for_skip(reason: str) -> tuple[str, str]:
    try:
        return SKIP_VERDICTS[SkipReason(reason)]
    except ValueError:
        # A reason from an older or newer notifier than this desk knows: shown as written.
        return (OTHER, f"skipped: {reason}")


@dataclass(frozen=True, kw_only=True, eq=False)
class SupportDesk:
    """Read and repair one shop's data on behalf of its shoppers."""

    settings: Settings
    tables: Tables
    exits: QueueExits
    optouts: OptoutService
    sns: Any
    sqs: Any
    clock: Clock
    hash_key: str

    def contact(self, raw: str) -> tuple[Contact, str]:
        """A contact as staff typed it, normalised as capture does, with its keyed hash; BadRequest if unreadable."""
        contact, keys = self.contact_keys(raw)
        return contact, keys[0]

    def contact_keys(self, raw: str) -> tuple[Contact, tuple[str, ...]]:
        """A contact as staff typed it with every keyed hash its data may be stored under: its mailbox's first, then,
        for an email whose spelling differs from its mailbox, the address lower-cased whole, which places and
        opt-outs stored before mailboxes were matched still carry (an erasure or export that missed them would
        leave a person's data behind)."""
        contact = normalise_any(raw, self.settings.default_phone_region)
        return contact, match_keys(contact, self.hash_key)

    def places(self, keys: tuple[str, ...]) -> list[Request]:
        """Every request one person has under any of their keys (any state), oldest SKU first."""
        return sorted((p for key in keys for p in self.exits.places(key)), key=lambda r: (r.sku, r.joined_ts))

    def facts(self, keys: tuple[str, ...]) -> list[dict[str, Any]]:
        """Every audit fact naming one person under any of their keys, in time order."""
        return sorted(
            (f for key in keys for f in self.tables.audit.for_contact(key)), key=lambda f: (str(f["ts"]), str(f["sku"]))
        )

    def opt_outs(self, keys: tuple[str, ...]) -> list[dict[str, Any]]:
        """The opt-out records stored under any of one person's keys, the mailbox's first."""
        return [record for record in map(self.tables.optout.get, keys) if record is not None]

    # --- explain

    def explain(self, sku: str, raw_contact: str, *, lookback_days: int = 30) -> Explanation:
        """Their place, and every restock since they joined (and `lookback_days` before), told or why not."""
        contact, keys = self.contact_keys(raw_contact)
        product = self.product(sku)
        found = [(key, request) for key in keys if (request := self.tables.requests.place_of(sku, key)) is not None]
        key, request = found[0] if found else (keys[0], None)
        state = str(request.state) if request else None
        # Two reads, whatever the list's length: never a count of everyone ahead.
        place = read_place(self.tables, request) if request and request.live else None
        facts = [f for f in self.facts(keys) if f.get("sku") == sku]
        joins = [request.joined_ts] if request else []
        joins += [str(f[k]) for f in facts for k in ("request_joined_ts", "joined_ts") if f.get(k)]
        first_join = min(joins) if joins else None
        opted = next(iter(self.opt_outs(keys)), None)
        start = first_join or iso(self.clock.now())
        since = iso(_at(start) - lookback_days * 86400)
        verdicts = [
            self._verdict(r, facts, first_join, opted, request)
            for r in self.tables.restocks.for_sku(sku, since_ts=since)
        ]
        facts_here = [*facts, *(f for f in self.facts(keys) if f.get("kind") == "optin")]
        history = [
            self._history_line(f)
            for f in sorted(facts_here, key=lambda f: str(f["ts"]))
            if f.get("kind") in (*LEAVE_KINDS, "optout", "forget", *OPT_BACK_IN, UNSUBSCRIBE_UNDONE)
        ]
        return Explanation(
            sku=sku,
            product=product.name or sku,
            contact=mask(contact.address),
            contact_key=key,
            state=state,
            place=place,
            joined_ts=request.joined_ts if request else None,
            opted_out=plain(opted) if opted else None,
            restocks=verdicts,
            history=history,
        )

    def _verdict(
        self,
        restock: Restock,
        facts: list[dict[str, Any]],
        first_join: str | None,
        opted: dict[str, Any] | None,
        request: Request | None,
    ) -> RestockVerdict:
        rid, rts = restock.restock_id, restock.restock_ts
        detected = restock.created_at if restock.created_at is not None else int(_at(rts))
        base: dict[str, Any] = {
            "restock_id": rid,
            "restock_ts": rts,
            "detected_at": detected,
            "units_total": restock.units_total,
        }
        mine = [f for f in facts if f.get("restock_id") == rid]
        sent = [f for f in mine if f.get("kind") == "notice_sent"]
        if sent:
            notice = sent[0]
            token = notice.get("token_id")
            follow = [
                _follow_up(f) for f in facts if f.get("kind") in FOLLOW_UPS and token and f.get("token_id") == token
            ]
            # Later passes over the same restock (top-ups) pass them by: say so, so nobody expects a second notice.
            follow += [
                f"later pass at {_short(int(f['at']))}: {_verdict_for_skip(str(f.get('reason', '')))[1]}"
                for f in mine
                if f.get("kind") == "notice_skipped"
            ]
            return RestockVerdict(
                **base,
                verdict=TOLD,
                detail=f"told by {notice.get('channel')} as number {notice.get('position')} in line"
                + PASS_NOTES.get(str(notice.get("job_kind", "")), ""),
                position=_int(notice.get("position")),
                channel=str(notice.get("channel")),
                told_at=_int(notice.get("at")),
                follow_ups=follow,
            )
        refused = [f for f in mine if f.get("kind") == "notice_undeliverable"]
        if refused:
            # The provider refused this contact for good (an address SES will not take, a number SNS rejects):
            # nothing reached them, their unit went to the next person, and their place stays for later restocks.
            fact = refused[0]
            return RestockVerdict(
                **base,
                verdict=UNDELIVERABLE,
                detail=f"not told: the {fact.get('channel')} provider refused this contact ({fact.get('error')}); "
                "the unit went to the next person and the place stays for later restocks: check the contact",
                position=_int(fact.get("position")),
                channel=str(fact.get("channel")),
            )
        skipped = [f for f in mine if f.get("kind") == "notice_skipped"]
        if skipped:
            verdict, detail = _verdict_for_skip(str(skipped[-1].get("reason", "")))
            return RestockVerdict(**base, verdict=verdict, detail=detail, position=_int(skipped[-1].get("position")))
        if first_join is None or _at(first_join) > detected:
            return RestockVerdict(**base, verdict=NOT_YET_JOINED, detail="not yet joined: the restock came first")
        left = [f for f in facts if f.get("kind") in ("leave", "optout", "forget") and int(f.get("at", 0)) <= detected]
        if opted is not None and int(opted.get("at", 0)) <= detected:
            return RestockVerdict(
                **base, verdict=OPTED_OUT, detail=f"opted out ({opted.get('source')}) before this restock"
            )
        if left and request is None:
            return RestockVerdict(
                **base, verdict=NOT_ON_LIST, detail=f"not on the list: left ({left[-1].get('reason')}) before it"
            )
        if restock.state != RestockState.CLOSED and restock.units_offerable > 0:
            return RestockVerdict(
                **base, verdict=IN_PROGRESS, detail="not told yet: units are still being offered down the line"
            )
        if left and request is not None and _at(request.joined_ts) > detected:
            # Their place now is a later one (an undone unsubscribe, an opt back in, a new tap): when this restock
            # went down the line they had left it.
            return RestockVerdict(
                **base,
                verdict=NOT_ON_LIST,
                detail=f"not on the list then: left ({left[-1].get('reason') or left[-1].get('kind')}) before it and "
                "joined again after",
            )
        told = self._told_count(restock.sku, detected, rid)
        return RestockVerdict(
            **base,
            verdict=BEHIND_CAP,
            detail=f"behind the cap: {base['units_total']} unit(s), {told} notice(s) went to people ahead",
        )

    def _told_count(self, sku: str, detected: int, restock_id: str) -> int:
        facts = self.tables.audit.for_sku_since(sku, iso(detected))
        return sum(1 for f in facts if f.get("kind") == "notice_sent" and f.get("restock_id") == restock_id)

    @staticmethod
    def _history_line(fact: dict[str, Any]) -> str:
        when = _short(int(fact.get("at", 0)))
        if fact.get("kind") == "switch":
            return f"{when} switched notices to {fact.get('channel')}"
        if fact.get("kind") in OPT_BACK_IN:
            return f"{when} opted back in ({OPT_BACK_IN[str(fact['kind'])]})"
        if fact.get("kind") == UNSUBSCRIBE_UNDONE:
            return f"{when} took back their unsubscribe (the Undo on its done page): back at the end of the line"
        return f"{when} left the list ({fact.get('reason') or fact.get('kind')})"

    def product(self, sku: str) -> Product:
        """The catalogue's product; UnknownProduct when there is none, so a mistyped SKU is not an empty answer."""
        product = self.tables.catalog.get(sku)
        if product is None:
            close = self.similar_skus(sku)
            raise UnknownProduct(
                f"no product with SKU {sku}" + (f"; did you mean {' or '.join(close)}?" if close else "")
            )
        return product

    def similar_skus(self, sku: str) -> list[str]:
        """Catalogued SKUs a mistyped one may have meant: the same letters in another case first, then close ones.
        Only on a miss, so reading the whole (small) catalogue costs nothing on a good answer."""
        known = [p.sku for p in self.tables.catalog.all()]
        folded = sku.casefold()
        same = [k for k in known if k.casefold() == folded]
        if same:
            return same
        by_folded = {k.casefold(): k for k in known}
        return [by_folded[k] for k in difflib.get_close_matches(folded, list(by_folded), n=3, cutoff=SUGGEST_CUTOFF)]

    def explain_all(self, raw_contact: str, *, lookback_days: int = 30) -> list[Explanation]:
        """`explain` for every product the person has a place on or a fact about (a SKU no longer catalogued is
        left out: there is no line to stand in)."""
        _, keys = self.contact_keys(raw_contact)
        skus = {p.sku for p in self.places(keys)} | {str(f["sku"]) for f in self.facts(keys)}
        products = self.tables.catalog.get_many(sorted(s for s in skus if not s.startswith("@")))
        return [self.explain(sku, raw_contact, lookback_days=lookback_days) for sku in sorted(products)]

    # --- queue and demand

    def queue(self, sku: str, *, limit: int | None = 50, progress: ProgressHook = _no_progress) -> list[QueueRow]:
        """The live waiting list, oldest first, contacts masked; all of it when `limit` is None."""
        self.product(sku)
        rows: list[QueueRow] = []
        for position, request in enumerate(self.tables.requests.queue(sku), start=1):
            rows.append(
                QueueRow(
                    position=position,
                    joined_ts=request.joined_ts,
                    state=str(request.state),
                    channel=request.channel,
                    contact=mask(request.contact),
                    last_notified_restock=request.last_notified_restock,
                    confirmed=not request.unconfirmed,
                )
            )
            progress(1)
            if limit is not None and len(rows) >= limit:
                break
        return rows

    def demand(self, *, limit: int = 20) -> list[DemandRow]:
        """Out-of-stock products ranked by people waiting (sparse index by-demand; never a scan)."""
        return [
            DemandRow(
                sku=p.sku,
                name=p.name or p.sku,
                waiting=p.waiting_count,
                level=p.level,
            )
            for p in self.tables.catalog.demand(limit=limit)
        ]

    # --- opt-outs

    def optout_add(self, raw_contact: str) -> OptOutResult:
        """Suppress a contact on their request (source 'admin') and take them off every list, under every key its
        places may carry, so a place from before mailboxes were matched leaves its list too."""
        _, keys = self.contact_keys(raw_contact)
        results = [self.optouts.opt_out(key, "admin") for key in keys]
        return OptOutResult(newly=any(r.newly for r in results), exits=[e for r in results for e in r.exits])

    # --- export and forget

    def export(self, raw_contact: str) -> dict[str, Any]:
        """Everything held about one person, as JSON-ready data."""
        contact, keys = self.contact_keys(raw_contact)
        places = self.places(keys)
        facts = self.facts(keys)
        skus = sorted({p.sku for p in places} | {str(f["sku"]) for f in facts})
        uniques = [u.to_item() for u in (self.tables.requests.unique(s, k) for s in skus for k in keys) if u]
        tokens = {p.offer_token for p in places if p.offer_token}
        tokens |= {str(f["token_id"]) for f in facts if f.get("token_id")}
        offers = [r.to_item() for r in map(self.tables.reservations.get, sorted(tokens)) if r and r.contact_key in keys]
        opted = self.opt_outs(keys)
        return plain(
            {
                "contact": contact.address,
                "channel": contact.channel,
                "contact_key": keys[0],
                # The mailbox's key, then the spelling's from before mailboxes were matched, where they differ.
                "contact_keys": list(keys),
                "exported_at": iso(self.clock.now()),
                "opt_out": opted[0] if opted else None,
                "opt_outs": opted,
                "requests": [p.to_item() for p in places],
                "uniqueness_items": uniques,
                "offers_and_holds": offers,
                "audit": facts,
            }
        )

    def forget(self, raw_contact: str) -> ForgetReport:
        """Erase a person: their places (live or bought), uniqueness items and contact; take their keyed hash off
        every audit fact; keep an opt-out's hash.

        Refused while they hold a unit: the hold belongs to a purchase in progress. Run it again after.
        """
        _, keys = self.contact_keys(raw_contact)
        places = self.places(keys)
        holds = [p for p in places if p.state == RequestState.RESERVED]
        if holds:
            ends = max(_int(self._hold_end(p)) or 0 for p in holds)
            raise StillHolding(
                f"They hold a unit until {_short(ends) if ends else 'the hold ends'}; nothing was erased. "
                "Run forget again after that (the hold ends on its own within the hold window)."
            )
        skus = sorted({p.sku for p in places} | {str(f["sku"]) for f in self.facts(keys)})
        uniques = [(sku, key) for sku in skus for key in keys if self.tables.requests.unique(sku, key)]
        exits = [e for key in keys for e in self.exits.leave_all(key, reason="forget", erase_finished=True)]
        # Uniqueness items hold only the keyed hash, but they are still this person's: none stay behind,
        # including any whose place was already tidied away.
        for sku in skus:
            for key in keys:
                self.tables.requests.drop_unique(sku, key, only_ref=None)
        # Last, so the facts the leaving itself wrote are anonymised too. The facts stay (counts and other
        # people's explanations read them); they expire with every fact after AUDIT_RETENTION_DAYS.
        anonymised = sum(self.tables.audit.anonymise_contact(key) for key in keys)
        remaining = len(self.places(keys)) + sum(
            1 for sku in skus for key in keys if self.tables.requests.unique(sku, key)
        )
        return ForgetReport(
            contact_key=keys[0],
            requests_erased=sum(1 for e in exits if e.outcome in (LEFT, RELEASED, ERASED)),
            uniqueness_items_erased=len(uniques),
            offers_released=sum(1 for e in exits if e.outcome == RELEASED),
            kept_optout=bool(self.opt_outs(keys)),
            remaining=remaining,
            audit_facts_anonymised=anonymised,
        )

    def _hold_end(self, place: Request) -> Any:
        row = self.tables.reservations.get(place.offer_token or "")
        return row.hold_expires_at if row else None

    # --- dead letters

    def dlq_redrive(
        self, *, emulated: bool, progress: ProgressHook = _no_progress, events: bool = False
    ) -> RedriveReport:
        """Move dead-lettered jobs back to the job queue (StartMessageMoveTask; by hand where an emulator lacks it);
        with `events`, dead-lettered outbound events back to the events queue.

        `progress` hears of each batch moved by hand; AWS's own task reports its progress through
        ListMessageMoveTasks instead.
        """
        settings = self.settings
        source, destination = (
            (settings.events_dlq_name, settings.events_queue_name)
            if events
            else (settings.dlq_name, settings.jobs_queue_name)
        )
        dlq_url = self.sqs.get_queue_url(QueueName=source)["QueueUrl"]
        jobs_url = self.sqs.get_queue_url(QueueName=destination)["QueueUrl"]
        dlq = self.sqs.get_queue_attributes(
            QueueUrl=dlq_url, AttributeNames=["QueueArn", "ApproximateNumberOfMessages"]
        )["Attributes"]
        jobs_arn = self.sqs.get_queue_attributes(QueueUrl=jobs_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        waiting = int(dlq.get("ApproximateNumberOfMessages", 0))
        by_hand = (dlq_url, jobs_url, dlq["QueueArn"], jobs_arn, waiting, progress)
        try:
            task = self.sqs.start_message_move_task(SourceArn=dlq["QueueArn"], DestinationArn=jobs_arn)
        except NotImplementedError:
            return self._redrive_by_hand(*by_hand)
        except ClientError as exc:
            if not emulated or error_code(exc) not in UNIMPLEMENTED_CODES:
                raise
            return self._redrive_by_hand(*by_hand)
        return RedriveReport(
            method="StartMessageMoveTask",
            source=dlq["QueueArn"],
            destination=jobs_arn,
            waiting_before=waiting,
            moved=None,
            task_handle=str(task.get("TaskHandle", "")),
            note="SQS moves the messages in the background; `aws sqs list-message-move-tasks` shows progress.",
        )

    def follow_move_task(
        self,
        report: RedriveReport,
        progress: ProgressHook = _no_progress,
        *,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = 2.0,
    ) -> RedriveReport:
        """Watch an SQS message move task (ListMessageMoveTasks) until it ends, telling `progress` of each move.

        The task runs in SQS whether or not anyone watches; this only reports it. Its counts are approximate,
        as SQS says.
        """
        moved = 0
        while True:
            tasks = self.sqs.list_message_move_tasks(SourceArn=report.source, MaxResults=10).get("Results", [])
            task = next((t for t in tasks if t.get("TaskHandle") == report.task_handle), None)
            if task is None:
                return replace(report, status="UNKNOWN", note="SQS no longer lists this move task.")
            now_moved = int(task.get("ApproximateNumberOfMessagesMoved", 0))
            if now_moved > moved:
                progress(now_moved - moved)
                moved = now_moved
            status = str(task.get("Status", ""))
            if status in MOVE_TASK_ENDED:
                note = f"The move task ended {status}" + (
                    f": {task['FailureReason']}" if task.get("FailureReason") else "."
                )
                return replace(report, status=status, moved=moved, note=note)
            sleep(poll_s)

    def _redrive_by_hand(
        self, dlq_url: str, jobs_url: str, source: str, destination: str, waiting: int, progress: ProgressHook
    ) -> RedriveReport:
        """Receive dead letters ten at a time, send them to their queue, then delete those sent.

        A crash between the send and the delete sends a message twice, never loses one: the notifier makes a
        repeated job harmless, and a repeated event keeps its id. A message the queue refuses is not deleted; it stays dead-lettered (hidden
        for the dead-letter queue's visibility timeout, so this loop ends) and is counted as failed.
        """
        moved = failed = 0
        while True:
            page = self.sqs.receive_message(
                QueueUrl=dlq_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
            )
            messages = page.get("Messages", [])
            if not messages:
                break
            entries = []
            for index, message in enumerate(messages):
                entry: dict[str, Any] = {"Id": str(index), "MessageBody": message["Body"]}
                if message.get("MessageAttributes"):
                    entry["MessageAttributes"] = message["MessageAttributes"]
                entries.append(entry)
            sent = self.sqs.send_message_batch(QueueUrl=jobs_url, Entries=entries)
            done = [messages[int(ok["Id"])] for ok in sent.get("Successful", [])]
            failed += len(sent.get("Failed", []))
            if done:
                self.sqs.delete_message_batch(
                    QueueUrl=dlq_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
                )
            moved += len(done)
            progress(len(done))
        note = (
            "This endpoint does not implement StartMessageMoveTask, so each message was received, "
            "re-sent to its queue and then deleted from the dead-letter queue."
        )
        if failed:
            note += f" The queue refused {failed} message(s); they stay on the dead-letter queue."
        return RedriveReport(
            method="receive-and-resend",
            source=source,
            destination=destination,
            waiting_before=waiting,
            moved=moved,
            note=note,
            failed=failed,
        )


def _follow_up(fact: dict[str, Any]) -> str:
    """What happened to a notice's offer afterwards, in a line."""
    line = f"{fact['kind']} at {_short(int(fact['at']))}"
    if fact.get("kind") == "leave":
        line = f"left the list ({fact.get('reason')}) at {_short(int(fact['at']))}; the offer went to the next person"
    return line


def _short(ts: int | float) -> str:
    """A moment for support staff to read: '2026-11-30T08:25:29Z'."""
    return iso(ts)[:19] + "Z"


def _at(stamp: str) -> float:
    """Unix seconds of a join or restock stamp ('<ISO-8601>#<suffix>')."""
    return parse_iso(stamp.split("#", 1)[0])


def _int(value: Any) -> int | None:
    return int(value) if value is not None else None
