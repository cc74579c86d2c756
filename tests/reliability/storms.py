"""Random storms: seeded sequences of everything that can happen to one product, played on one shop.

A storm is a list of operations (`Op`), generated from a seed by `generate(seed)`, played by `run(ops)` on a
`World` (tests/reliability/world.py) with a model of the store beside it, then settled (every window run out,
every job delivered) and checked with the settled invariant checker. A failing storm is shrunk to a short list
that still breaks the same invariant (`shrink`), and any seed can be replayed with its trace:

    .venv/bin/python -m tests.reliability.storms --seed 17
    .venv/bin/python -m tests.reliability.storms --seed 17 --shrink

The store model: one product (`CHAIR-WALNUT`) whose shelf level the storm moves. Restocks, rises, falls (walk-in
sales) and closes change the shelf and the platform reports each new level, signed, with `occurred_at`; an
order takes one unit off the shelf the moment its webhook is delivered (the platform's contract: the order
webhook arrives before any inventory report that reflects that sale), and the next report carries it. Before
settling, the platform reports the shelf once more, so the tables hear the store's last word.

The operation mix, as weights out of 100 (`WEIGHTS`):

| op | weight | what happens |
|---|---|---|
| `Tap(who, variant)` | 17 | a shopper taps Notify me: someone new, a repeat tap (`variant`: the same contact spelled another way), or a re-join after buying or leaving |
| `Restock(level)` | 8 | the shelf goes from below the threshold to `level` (1..6); nothing when it is not below |
| `Rise(by)` | 5 | the shelf rises by 1..3 |
| `Fall(by)` | 5 | walk-in sales: the shelf falls by 1..3 (not below 0) |
| `Close(to)` | 3 | the shelf falls below the threshold (to 0 or 1) |
| `LinkTap(pick, live)` | 12 | a shopper taps the reserve link of a messaged offer (`live`: one still offered) |
| `Order(pick, report)` | 7 | a held unit is bought; the shelf drops by one; `report`: the level is reported at once |
| `Leave(who)` | 3 | a shopper leaves the list from their own page |
| `OptOut(who)` | 3 | a shopper opts out with their unsubscribe link |
| `Sweep(advance)` | 7 | the clock moves 0..4000 s, then the minute's sweep runs |
| `Pump()` | 9 | every queued job is delivered to the notifier |
| `Advance(seconds)` | 2 | time passes |
| `Redeliver(what, pick)` | 6 | a platform retry of an earlier inventory or order webhook (same id and body), or SQS handing out a finished job again (2 each) |
| `CrashAt(point)` / `CutPower(call)` | 6 | the next operation crashes at a named fault point, or loses power before its k-th AWS call (3 each); a named crash is followed 7 times in 10 by an operation that can reach its point |
| `Throttle(who)` | 1 | one source spends its taps for the minute (a storm allows 5); the next tap is refused and writes nothing |
| `Settings(threshold, offer_window_s)` | 3 | staff lower or raise the threshold, or shorten the offer window, and the detector reconsiders the level |
| `Meanwhile(moment, what, pick)` | 3 | the next operation waits at `moment` (a named fault point, or "before <AWS operation>") while another invocation does `what` to its end (a pump, a pump whose offers then lapse, an opt-out, a tap, a link tap, a leave, a sweep); aimed like a crash |

`MODES` names two more mixes beside this one: "closes" (falls and closes under offers and holds) and "races"
(mostly work done meanwhile, aimed at the moments the notifier's and capture's guards are for): `generate(seed,
mode=...)`, `--mode` on the command line.

After every operation (and around the settling) the runner reads the counters, the offer rows, the level facts and
the suppression list (`invariants.Moment`) and holds the step to DESIGN's counter table (`step_violations`); it also
notes when each contact's suppression row is first seen, so that no offer sent after it goes unnoticed
(`told_after_suppression`).

Refusals (a `DomainError`, "just gone", "expired") are answers, not failures; any other exception fails the storm.
A crash is followed by what follows it in production (`World.attempt`, `World.pump`: the retry, the redelivery,
the next sweep); one armed for an operation that never reaches it is disarmed once that operation is over.

Storms share one provisioned emulator, emptied between them (`Emulator`); many storms can be spread over one
process per core (`storm_pool`). Shrinking keeps a smaller list when it still breaks the same invariant (the
violation's label, e.g. "6 exactly once"), trying halves, then smaller chunks, then single operations.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import boto3
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.ses.models import ses_backends
from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends

from chalicelib.clock import iso
from chalicelib.errors import DomainError, RateLimited
from chalicelib.tables.catalog import WAITING_SHARDS, shard_key
from chalicelib.tables.reservations import OfferState
from devstack.clocks import FixedClock
from infra.stages import stage_env
from tests.reliability.invariants import Moment, step_violations, told_after_suppression, violations
from tests.reliability.points import fault_points
from tests.reliability.tally import count
from tests.reliability.world import CRASHES, OUT_OF_THE_WAY, World, scan
from tests.support import CHAIR, REGION

SKU = "CHAIR-WALNUT"
LENGTH = 40

# Twelve people: eight by text message, four by email. `variant` spells the same contact another way.
PHONES = tuple(f"+4474001{n:05d}" for n in range(1, 9))
EMAILS = ("ada@example.com", "bo.lee@example.org", "cy.ng@example.net", "dee@example.com")
PEOPLE = PHONES + EMAILS
THROTTLE_SOURCE = "203.0.113.7"
RATE_LIMIT_PER_MINUTE = 5  # taps a minute from one source (each shopper taps from their own)

# After the storm: each round delivers the jobs, lets every offer and hold window run out, and sweeps.
PAST_EVERY_WINDOW_S = 3661
SETTLE_ROUNDS = 15


def spelled(who: int, variant: bool) -> str:
    """How person `who` types their contact: as stored, or another spelling of the same one."""
    contact = PEOPLE[who % len(PEOPLE)]
    if not variant:
        return contact
    if "@" in contact:
        return contact.upper()
    return "0" + contact[3:7] + " " + contact[7:]  # +447400100001 -> 07400 100001


# --- the operations


class Op:
    """One thing that happens during a storm; its repr is the Python that builds it again."""


@dataclass(frozen=True)
class Tap(Op):
    who: int
    variant: bool = False


@dataclass(frozen=True)
class Restock(Op):
    level: int


@dataclass(frozen=True)
class Rise(Op):
    by: int


@dataclass(frozen=True)
class Fall(Op):
    by: int


@dataclass(frozen=True)
class Close(Op):
    to: int = 0


@dataclass(frozen=True)
class LinkTap(Op):
    pick: int
    live: bool = True


@dataclass(frozen=True)
class Order(Op):
    pick: int
    report: bool = False


@dataclass(frozen=True)
class Leave(Op):
    who: int


@dataclass(frozen=True)
class OptOut(Op):
    who: int


@dataclass(frozen=True)
class Sweep(Op):
    advance: int = 0


@dataclass(frozen=True)
class Pump(Op):
    pass


@dataclass(frozen=True)
class Advance(Op):
    seconds: int


@dataclass(frozen=True)
class Redeliver(Op):
    what: str  # "inventory", "order" or "job"
    pick: int


@dataclass(frozen=True)
class CrashAt(Op):
    point: str


@dataclass(frozen=True)
class CutPower(Op):
    call: int


@dataclass(frozen=True)
class Throttle(Op):
    who: int


@dataclass(frozen=True)
class Settings(Op):
    threshold: int | None = None
    offer_window_s: int | None = None


@dataclass(frozen=True)
class Meanwhile(Op):
    """The next operation waits at `moment` (a named fault point, or "before <AWS operation>", its first call of
    it) while another invocation does `what` to its end: "pump", "optout", "tap", "linktap", "leave" or "sweep",
    with `pick` choosing the person or link."""

    moment: str
    what: str
    pick: int = 0


@dataclass(frozen=True)
class StoreDown(Op):
    """A platform world only: the store's next `calls` answers are errors (an outage)."""

    calls: int


@dataclass(frozen=True)
class WalkIn(Op):
    """A platform world only: somebody buys a unit on the storefront itself; the store's report follows (`Report`)."""


@dataclass(frozen=True)
class Report(Op):
    """A platform world only: the store reports its level as it stands now, stamped now. `late`: the report is held up
    on the way, to arrive after a newer one (`LateReport`, or after the settling)."""

    late: bool = False


@dataclass(frozen=True)
class ReportAgain(Op):
    """A platform world only: the platform delivers a level report it delivered before again (same id, same body)."""

    pick: int


@dataclass(frozen=True)
class LateReport(Op):
    """A platform world only: a report held up on the way arrives, after a newer one (one is sent first if none was)."""

    pick: int


# A platform storm's own operations, beside the generic storms' (OPS).
STORE_OPS: dict[str, type[Op]] = {cls.__name__: cls for cls in (StoreDown, WalkIn, Report, ReportAgain, LateReport)}


OPS: dict[str, type[Op]] = {
    cls.__name__: cls
    for cls in (
        Tap,
        Restock,
        Rise,
        Fall,
        Close,
        LinkTap,
        Order,
        Leave,
        OptOut,
        Sweep,
        Pump,
        Advance,
        Redeliver,
        CrashAt,
        CutPower,
        Throttle,
        Settings,
        Meanwhile,
    )
}

# Weights out of 100 (the module docstring's table). Redeliver and the two crashes are split evenly.
WEIGHTS: dict[str, int] = {
    "Tap": 17,
    "Restock": 8,
    "Rise": 5,
    "Fall": 5,
    "Close": 3,
    "LinkTap": 12,
    "Order": 7,
    "Leave": 3,
    "OptOut": 3,
    "Sweep": 7,
    "Pump": 9,
    "Advance": 2,
    "Redeliver": 6,
    "CrashAt": 3,
    "CutPower": 3,
    "Throttle": 1,
    "Settings": 3,
    "Meanwhile": 3,
}
assert sum(WEIGHTS.values()) == 100 and set(WEIGHTS) == set(OPS)

# Mixes that make one kind of trouble common, each played beside the general one (MODES):
# "closes": stock falls and closes while offers are out and their links are tapped (units owed to holders, offers
# stranded by a fall); "races": another invocation's work lands between two calls of an operation (a second walk
# of the same job before the first commits its offers, an opt-out between an offer and its message, a tap or a
# link tap in the middle of a walk).
CLOSES_WEIGHTS: dict[str, int] = {
    "Tap": 14,
    "Restock": 12,
    "Rise": 6,
    "Fall": 10,
    "Close": 10,
    "LinkTap": 18,
    "Order": 5,
    "Leave": 2,
    "OptOut": 2,
    "Sweep": 5,
    "Pump": 12,
    "Advance": 2,
    "Redeliver": 2,
}
RACES_WEIGHTS: dict[str, int] = {
    "Tap": 16,
    "Restock": 9,
    "Rise": 6,
    "Fall": 2,
    "Close": 2,
    "LinkTap": 10,
    "Order": 4,
    "Leave": 3,
    "OptOut": 5,
    "Sweep": 5,
    "Pump": 14,
    "Advance": 2,
    "Redeliver": 2,
    "Meanwhile": 20,
}
MODES: dict[str, dict[str, int]] = {"mixed": WEIGHTS, "closes": CLOSES_WEIGHTS, "races": RACES_WEIGHTS}
assert all(sum(mix.values()) == 100 and set(mix) <= set(OPS) for mix in MODES.values())

# Where another invocation's work may land (`Meanwhile`), beside the named fault points: a walk's look at the
# suppression list just after reading its page, and any operation's first transaction.
MEANWHILE_CALLS = ("before BatchGetItem", "before TransactWriteItems")
OFFER_COMMITTED = "notifier.after_offer_committed"
# "told, lapsed": another walk tells people and their offers run out unused before the step goes on, so they are
# waiting again, already told about this restock.
# "optout, cut short": an unsubscribe whose Lambda died just after writing the suppression row, before taking the
# person off any list; the person presses again once the step is over (the guards between are the notifier's own).
MEANWHILE_WORK = ("pump", "told, lapsed", "optout", "optout, cut short", "tap", "linktap", "leave", "sweep")
# The races mode's draws, most of them aimed at the moments its guards are for (None: any moment, any work).
RACES_MEANWHILE: tuple[tuple[str, str] | None, ...] = (
    ("before BatchGetItem", "pump"),
    ("before BatchGetItem", "told, lapsed"),
    ("before BatchGetItem", "optout"),
    (OFFER_COMMITTED, "optout"),
    (OFFER_COMMITTED, "optout, cut short"),
    ("before BatchGetItem", "optout, cut short"),
    ("before TransactWriteItems", "tap"),
    ("before TransactWriteItems", "linktap"),
    None,
)

# A storm on a platform world (Shopify, WooCommerce: `PlatformStorm`): the shop sets the storefront's stock and the
# platform's own webhook reports it; a link tap also holds the unit on the store; an order is the shopper paying the
# store's hold; somebody may buy on the storefront itself; the store may be down for a few calls. The store's own
# level reports (`Report`) are not drawn: they follow the operations that change the store's stock (STORE_CHANGES),
# sooner or later, as a real platform's do; some are held up on the way and arrive late, after a newer one
# (`LateReport`), and any may be delivered twice (`ReportAgain`). Settings, throttling and the generic redeliveries
# are the generic storms' business and are left out.
STORE_WEIGHTS: dict[str, int] = {
    "Tap": 15,
    "Restock": 10,
    "Rise": 5,
    "WalkIn": 4,
    "LinkTap": 17,
    "Order": 8,
    "Leave": 2,
    "OptOut": 2,
    "Sweep": 8,
    "Pump": 13,
    "Advance": 2,
    "CrashAt": 4,
    "CutPower": 2,
    "StoreDown": 3,
    "ReportAgain": 3,
    "LateReport": 2,
}
assert sum(STORE_WEIGHTS.values()) == 100 and set(STORE_WEIGHTS) <= set(OPS) | set(STORE_OPS)
STORE_LENGTH = 30
# The operations that can move the store's available stock: a tap placing a hold on the store, a sweep giving one
# back (or placing one a crash left), a payment, a walk-in sale. Most are followed by the store's report, within
# REPORT_WITHIN operations; a walk-in always is. A report is held up on the way (late) REPORT_LATE of the time.
STORE_CHANGES = ("LinkTap", "Sweep", "Order", "WalkIn")
REPORTED = 0.8
REPORT_WITHIN = 3
REPORT_LATE = 0.2


@cache
def crash_points() -> tuple[str, ...]:
    """The named fault points of the code, read from it (a new point joins the storms the day it is added)."""
    return tuple(sorted(fault_points()))


# --- the generator


# The operations that can reach a named fault point of each part of the code.
REACHES: dict[str, tuple[str, ...]] = {
    "detect": ("Restock", "Rise"),
    "notifier": ("Pump",),
    "reserve": ("LinkTap",),
    "orders": ("Order",),
    "leave": ("Leave", "OptOut"),
    "sweep": ("Sweep",),
    "store": ("LinkTap", "Sweep"),
}
AIMED = 0.7  # how often a named crash is followed by an operation that can reach its point
# The operations that make each call a moment of `Meanwhile` names.
CALLED_BY: dict[str, tuple[str, ...]] = {
    "before BatchGetItem": ("Pump",),
    "before TransactWriteItems": ("Pump", "Pump", "Tap", "LinkTap", "Sweep", "Restock"),
}


def generate(
    seed: int, length: int = LENGTH, *, weights: dict[str, int] | None = None, mode: str = "mixed"
) -> list[Op]:
    """`length` operations drawn from `random.Random(seed)` with the mix of `mode` (MODES; or `weights`).

    A named crash, or work meanwhile, is followed, AIMED of the time, by an operation that can reach its moment
    (a crash at a sweep point by a sweep, at a notifier point by a pump...), so most of them do happen.
    """
    rng = random.Random(seed)
    mix = weights or MODES[mode]
    names, chances = list(mix), list(mix.values())
    named: list[int] = []  # people who have tapped so far in this storm, so repeats and re-joins happen

    def someone_known() -> int:
        return rng.choice(named) if named else rng.randrange(len(PEOPLE))

    def draw(name: str) -> Op:
        if name == "Tap":
            fresh = [p for p in range(len(PEOPLE)) if p not in named]
            who = fresh[0] if fresh and (not named or rng.random() < 0.6) else someone_known()
            named.append(who)
            return Tap(who, variant=rng.random() < 0.15)
        if name == "Restock":
            return Restock(rng.randint(1, 6))
        if name == "Rise":
            return Rise(rng.randint(1, 3))
        if name == "Fall":
            return Fall(rng.randint(1, 3))
        if name == "Close":
            return Close(rng.choice((0, 0, 1)))
        if name == "LinkTap":
            return LinkTap(rng.randrange(100), live=rng.random() < 0.8)
        if name == "Order":
            return Order(rng.randrange(100), report=rng.random() < 0.5)
        if name == "Leave":
            return Leave(someone_known())
        if name == "OptOut":
            return OptOut(someone_known())
        if name == "Sweep":
            return Sweep(rng.randint(0, 4000))
        if name == "Pump":
            return Pump()
        if name == "Advance":
            return Advance(rng.choice((30, 600, 1000, 3700)))
        if name == "Redeliver":
            return Redeliver(rng.choice(("inventory", "order", "job")), rng.randrange(100))
        if name == "CrashAt":
            return CrashAt(rng.choice(crash_points()))
        if name == "CutPower":
            return CutPower(rng.randint(1, 15))
        if name == "Throttle":
            return Throttle(someone_known())
        if name == "Meanwhile":
            aimed = rng.choice(RACES_MEANWHILE) if mode == "races" and weights is None else None
            # The moments between a walk's read and its offers, and between an offer and its message, most often:
            # named points elsewhere are reached by fewer of the operations drawn.
            moment = rng.choice((*MEANWHILE_CALLS, OFFER_COMMITTED) if rng.random() < 0.6 else crash_points())
            what = rng.choice(MEANWHILE_WORK)
            if aimed is not None:
                moment, what = aimed
            pick = someone_known() if what in ("optout", "tap", "leave") else rng.randrange(100)
            return Meanwhile(moment, what, pick)
        if name == "StoreDown":
            return StoreDown(rng.randint(1, 4))
        if name == "WalkIn":
            return WalkIn()
        if name == "ReportAgain":
            return ReportAgain(rng.randrange(100))
        if name == "LateReport":
            return LateReport(rng.randrange(100))
        if rng.random() < 0.6:
            return Settings(threshold=rng.randint(1, 3))
        return Settings(offer_window_s=rng.choice((300, 600, 1800)))

    reports = "ReportAgain" in mix  # a platform storm: the store reports what changes its stock
    due: list[tuple[int, Report]] = []  # reports owed: (the length of `ops` at which each is played, the report)

    def drawn(op: Op) -> None:
        ops.append(op)
        name = type(op).__name__
        if reports and name in STORE_CHANGES and (name == "WalkIn" or rng.random() < REPORTED):
            due.append((len(ops) + rng.randint(0, REPORT_WITHIN), Report(late=rng.random() < REPORT_LATE)))
            due.sort(key=lambda owed: owed[0])

    ops: list[Op] = []
    while len(ops) < length:
        if due and due[0][0] <= len(ops):
            ops.append(due.pop(0)[1])
            continue
        op = draw(rng.choices(names, chances)[0])
        drawn(op)
        if isinstance(op, CrashAt | Meanwhile) and len(ops) < length and rng.random() < AIMED:
            moment = op.point if isinstance(op, CrashAt) else op.moment
            reaching = CALLED_BY.get(moment) or REACHES.get(moment.split(".", 1)[0])
            if reaching:
                drawn(draw(rng.choice(reaching)))
    return ops


# --- one emulator, reused between storms


def _reset_backends() -> None:
    """Empty every table and queue and the outbox of the emulator, keeping what was provisioned."""
    for table in dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables.values():
        table.items.clear()
    for queue in sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues.values():
        queue._messages = []
        queue._pending_messages = set()
        queue.deleted_messages = set()
    sns = sns_backends[DEFAULT_ACCOUNT_ID][REGION]
    sns.sms_messages.clear()
    # The emulator starts with a few sample numbers that replied STOP; nobody in a storm did.
    sns.opt_out_numbers.clear()
    ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages.clear()


def storm_env() -> dict[str, str]:
    """The local stage, with send pacing out of the way (a storm sends a few dozen notices in no time at all)
    and a small rate limit, so spending a source's minute costs a few taps rather than twenty."""
    return {
        **stage_env("local"),
        "AWS_DEFAULT_REGION": REGION,
        "SMS_PER_SECOND": "10000",
        "EMAIL_PER_SECOND": "10000",
        "RATE_LIMIT_PER_MINUTE": str(RATE_LIMIT_PER_MINUTE),
        **OUT_OF_THE_WAY,  # a storm taps a few numbers many times (tests/reliability/world.py)
    }


class Emulator:
    """One provisioned emulator; `world()` hands out a shop on it with every table, queue and outbox empty.

    Provisioning costs about 0.3 s, as much as a whole storm, so storms share one and empty it in between.
    Each storm's services are built anew, so no cache of an earlier storm survives; the AWS clients and the
    fault plan (emptied) are kept.
    """

    def __init__(self, session: boto3.session.Session, platform: str | None = None) -> None:
        self.session = session
        self.platform = platform  # None: the generic store; "shopify" or "woocommerce": devstack's fake of it
        self.current: World | None = None

    def world(self) -> World:
        """A fresh shop with the product in the catalogue and nothing else anywhere."""
        _reset_backends()
        clock = FixedClock(float(int(time.time())))
        # After the first, new services (every cache empty) on the same AWS clients, which cost more to build.
        if self.current is None:
            w = World.build(self.session, storm_env(), clock, platform=self.platform)
        else:
            w = self.current.again(clock)
        w.product()
        self.current = w
        return w


@contextmanager
def emulator(platform: str | None = None) -> Iterator[Emulator]:
    """An emulator for the block, provisioned from infra/template.json (its shops on `platform`, if named)."""
    from devstack import moto_patches
    from devstack.provision import provision

    # As the correctness suite runs (tests/conftest.py): fidelity and bookkeeping only, in every worker process.
    moto_patches.install(fidelity=True, speed=False, bookkeeping=True)
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        provision(session)
        bench = Emulator(session, platform)
        try:
            yield bench
        finally:
            if bench.current is not None:
                bench.current.detach()


# --- playing a storm


@dataclass
class Result:
    """What one storm came to: its violations (empty when every invariant held) and what each op did."""

    ops: list[Op]
    violations: list[str]
    trace: list[str] = field(default_factory=list)
    crashes: int = 0

    @property
    def failed(self) -> bool:
        """Whether any invariant broke (or an operation failed with an unexpected exception)."""
        return bool(self.violations)


def label(violation: str) -> str:
    """The invariant a violation line names ("4 oversell", "6 exactly once", "! RuntimeError")."""
    return violation.split(":", 1)[0]


class Storm:
    """Plays operations on one World beside a model of the store's shelf."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.shelf = 0
        self.threshold = int(CHAIR["threshold"])
        self.inventory_sent: list[tuple[str, str]] = []  # (webhook id, body) of every inventory webhook
        self.orders_sent: list[tuple[str, str]] = []  # (webhook id, body) of every orders webhook
        self.trace: list[str] = []
        self.problems: list[str] = []  # unexpected exceptions, and refusals that should have been answers
        self.meanwhile_said: list[str] = []  # what work run meanwhile did, for the trace line of the op it waited on
        self.pressed_again: list[OptOut] = []  # opt-outs cut short meanwhile, finished once the step is over
        # Contact key -> the offers sent up to the moment its suppression row was first seen (told_after_suppression).
        self.sent_before: dict[str, set[str]] = {}

    @property
    def services(self) -> Any:
        return self.w.services

    # --- the platform

    def report(self) -> str:
        """The platform reports the shelf's level, signed, stamped with when it changed."""
        # One second per report: every event is strictly newer than the last, so a retried old one is stale.
        self.w.clock.advance(1)
        webhook_id = f"msg_inventory_{len(self.inventory_sent) + 1}"
        body = json.dumps({"sku": SKU, "available": self.shelf, "occurred_at": iso(self.w.clock.now())})
        self.inventory_sent.append((webhook_id, body))
        return self._deliver_inventory(webhook_id, body)

    def _deliver_inventory(self, webhook_id: str, body: str) -> str:
        outcome = self.w.attempt("inventory webhook", lambda: self.w.deliver_inventory(body, webhook_id))
        return " ".join(str(v) for k, v in outcome.body().items() if k != "restock_id")

    def set_shelf(self, level: int) -> str:
        level = max(0, level)
        if level == self.shelf:
            return f"shelf stays at {level}"
        before, self.shelf = self.shelf, level
        return f"shelf {before}->{level}: {self.report()}"

    # --- reading what there is to act on (through the observer, never cut), in an order that does not
    # --- depend on random token ids, so a seed replays the same storm

    def _rows(self, state: str | None = None) -> list[dict[str, Any]]:
        rows = [r for r in scan(self.w.table("reservations")) if state is None or r["state"] == state]
        return sorted(rows, key=lambda r: (str(r["restock_ts"]), str(r["request_joined_ts"]), str(r["token_id"])))

    def _messaged(self, live: bool) -> list[str]:
        rows = {str(r["token_id"]): r for r in self._rows()}
        sent = [rows[t] for t in dict.fromkeys(self.w.sent_tokens()) if t in rows]
        if live:
            sent = [r for r in sent if r["state"] == OfferState.OFFERED]
        sent.sort(key=lambda r: (str(r["restock_ts"]), str(r["request_joined_ts"]), str(r["token_id"])))
        return [str(r["token_id"]) for r in sent]

    def _who(self, contact_key: Any) -> str:
        for n, contact in enumerate(PEOPLE):
            if self.w.key_of(contact) == contact_key:
                return f"#{n}"
        return "?"

    # --- the operations

    def play(self, op: Op) -> str:
        handler: Callable[[Any], str] = getattr(self, "_" + type(op).__name__.lower())
        return handler(op)

    def _tap(self, op: Tap) -> str:
        contact = PEOPLE[op.who % len(PEOPLE)]
        typed = spelled(op.who, op.variant)
        body = {"sku": self.w.sku, "channel": "email" if "@" in contact else "sms", "contact": typed}
        source = f"198.51.100.{op.who % len(PEOPLE) + 1}"  # each shopper taps from their own phone
        outcome = self.w.attempt("tap", lambda: self.services.capture.capture(source, body))
        self.w.clock.advance(1)
        return str(outcome.status)

    def _restock(self, op: Restock) -> str:
        if self.shelf >= self.threshold:
            return f"already in stock ({self.shelf})"
        return self.set_shelf(op.level)

    def _rise(self, op: Rise) -> str:
        return self.set_shelf(self.shelf + op.by)

    def _fall(self, op: Fall) -> str:
        return self.set_shelf(self.shelf - op.by)

    def _close(self, op: Close) -> str:
        return self.set_shelf(min(self.shelf, op.to, self.threshold - 1))

    def _linktap(self, op: LinkTap) -> str:
        tokens = self._messaged(op.live)
        if not tokens:
            return "no link to tap"
        token_id = tokens[op.pick % len(tokens)]
        row = self.w.row(token_id)
        outcome = self.w.reserve(token_id)
        return (
            f"{self._who(row.get('contact_key'))} {row.get('state')} -> {outcome.kind} {outcome.reason or ''}".strip()
        )

    def _order(self, op: Order) -> str:
        held = self._rows(OfferState.HELD)
        if not held:
            return "nothing held"
        if self.shelf <= 0:
            return "nothing on the shelf to sell"
        row = held[op.pick % len(held)]
        order_id = f"order-{len(self.orders_sent) + 1}"
        webhook_id = f"msg_order_{order_id}"
        body = json.dumps({"reservation_id": str(row["token_id"]), "order_id": order_id})
        self.orders_sent.append((webhook_id, body))
        # The sale leaves the shelf as the order webhook goes out; a report of it can only come after.
        self.shelf -= 1
        outcome = self.w.attempt("orders webhook", lambda: self.w.deliver_order(body, webhook_id))
        said = f"{self._who(row.get('contact_key'))} {outcome.status}, shelf {self.shelf}"
        if op.report:
            said += f"; {self.report()}"
        return said

    def _leave(self, op: Leave) -> str:
        key = self.w.key_of(PEOPLE[op.who % len(PEOPLE)])
        exit_ = self.w.attempt("leave", lambda: self.services.exits.leave_sku(key, self.w.sku, reason="manage"))
        return exit_.outcome

    def _optout(self, op: OptOut) -> str:
        result = self.w.unsubscribe(PEOPLE[op.who % len(PEOPLE)])
        return f"newly={result.newly} " + " ".join(e.outcome for e in result.exits)

    def _sweep(self, op: Sweep) -> str:
        self.w.clock.advance(op.advance)
        summary = self.w.sweep()
        return " ".join(f"{k}={v}" for k, v in summary.items() if v) or "nothing to do"

    def _pump(self, _op: Pump) -> str:
        return f"{self.w.pump()} job(s)"

    def _advance(self, op: Advance) -> str:
        self.w.clock.advance(op.seconds)
        return f"clock +{op.seconds}s"

    def _redeliver(self, op: Redeliver) -> str:
        if op.what == "inventory":
            if not self.inventory_sent:
                return "no inventory webhook yet"
            webhook_id, body = self.inventory_sent[op.pick % len(self.inventory_sent)]
            return f"{webhook_id} again: {self._deliver_inventory(webhook_id, body)}"
        if op.what == "order":
            if not self.orders_sent:
                return "no order webhook yet"
            webhook_id, body = self.orders_sent[op.pick % len(self.orders_sent)]
            outcome = self.w.attempt("orders webhook", lambda: self.w.deliver_order(body, webhook_id))
            return f"{webhook_id} again: {outcome.status}"
        if not self.w.handled_jobs:
            return "no job handled yet"
        body = self.w.handled_jobs[op.pick % len(self.w.handled_jobs)]
        self.w.sqs.send_message(QueueUrl=self.w.queue_url, MessageBody=body)
        return f"job {json.loads(body).get('kind')} back on the queue"

    def _crashat(self, op: CrashAt) -> str:
        self.w.faults.crash_at(op.point)
        return "armed"

    def _meanwhile(self, op: Meanwhile) -> str:
        if op.what == "told, lapsed":
            played = [Pump(), Sweep(PAST_EVERY_WINDOW_S)]
        elif op.what == "optout, cut short":
            played = [op]
        else:
            played = [
                {
                    "pump": Pump(),
                    "optout": OptOut(op.pick),
                    "tap": Tap(op.pick),
                    "linktap": LinkTap(op.pick),
                    "leave": Leave(op.pick),
                    "sweep": Sweep(0),
                }[op.what]
            ]

        def run() -> None:
            for work in played:
                try:
                    said = self._suppress_only(op.pick) if work is op else self.play(work)
                except DomainError as refusal:
                    said = f"refused: {refusal.code}"
                except Exception as error:
                    self.problems.append(f"! {type(error).__name__}: {error} (meanwhile: {work!r})")
                    said = f"{type(error).__name__}: {error}"
                self.meanwhile_said.append(f"meanwhile at {op.moment}, {work!r}: {said}")
            # An opt-out done meanwhile is written before the rest of the step: its messages count as after it.
            self.note_suppressions(frozenset(str(o["contact"]) for o in scan(self.w.table("optout"))))

        self.w.faults.meanwhile(op.moment, run)
        return "armed"

    def _suppress_only(self, who: int) -> str:
        """The first write of an unsubscribe (optout_service.opt_out), and nothing after it: pressed again later."""
        self.pressed_again.append(OptOut(who))
        key = self.w.key_of(PEOPLE[who % len(PEOPLE)])
        return f"newly={self.services.tables.optout.add(key, 'unsubscribe', self.w.clock.now())}, then died"

    def press_again(self) -> list[str]:
        """Opt-outs cut short during the step, pressed again now that it is over."""
        said = []
        while self.pressed_again:
            op = self.pressed_again.pop(0)
            said.append(f"{op!r} pressed again: {self._optout(op)}")
        return said

    def note_suppressions(self, suppressed: frozenset[str]) -> None:
        """Remember, for each contact newly seen suppressed, which offers had been sent before."""
        new = suppressed - self.sent_before.keys()
        if new:
            sent = set(self.w.sent_tokens())
            self.sent_before.update((key, sent) for key in new)

    def _cutpower(self, op: CutPower) -> str:
        self.w.faults.cut_before_call(op.call)
        return "armed"

    def _throttle(self, op: Throttle) -> str:
        capture = self.services.capture
        contact = PEOPLE[op.who % len(PEOPLE)]
        tap = {"sku": self.w.sku, "channel": "email" if "@" in contact else "sms", "contact": contact}
        # The same source spends the minute's taps (the clock stands still meanwhile, so it is one minute)...
        for _ in range(self.services.settings.rate_limit_per_minute):
            try:
                self.w.attempt("tap", lambda: capture.capture(THROTTLE_SOURCE, tap))
            except RateLimited:
                break  # an earlier Throttle this minute already spent them
        # ...and the next tap from it, by someone else, is refused without writing anything.
        other = PEOPLE[(op.who + 1) % len(PEOPLE)]
        body = {"sku": self.w.sku, "channel": "email" if "@" in other else "sms", "contact": other}
        before = self._list_as_written()
        try:
            self.w.attempt("tap", lambda: capture.capture(THROTTLE_SOURCE, body))
        except RateLimited:
            if self._list_as_written() != before:
                self.problems.append("2 one place: a rate-limited tap changed the waiting list")
            return "rate limited, nothing written"
        self.problems.append(
            f"! throttle: a tap past {self.services.settings.rate_limit_per_minute} a minute was let in"
        )
        return "NOT rate limited"

    def _list_as_written(self) -> tuple[Any, ...]:
        requests = sorted(
            (str(r["joined_ts"]), str(r.get("state")), int(r.get("ttl", 0))) for r in scan(self.w.table("requests"))
        )
        catalog = self.w.table("catalog")
        shards = [
            catalog.get_item(Key={"sku": shard_key(self.w.sku, shard)}, ConsistentRead=True).get("Item") or {}
            for shard in range(WAITING_SHARDS)
        ]
        return tuple(requests), sum(int(shard.get("waiting_count") or 0) for shard in shards)

    def _settings(self, op: Settings) -> str:
        change: dict[str, Any] = {}
        if op.threshold is not None:
            change["threshold"] = op.threshold
        if op.offer_window_s is not None:
            change["offer_window_s"] = op.offer_window_s

        def apply() -> Any:
            self.services.tables.catalog.upsert(SKU, change)
            reconsider = getattr(self.services.detector, "reconsider", None)
            return reconsider(SKU) if reconsider is not None else None

        outcome = self.w.attempt("settings", apply)
        if op.threshold is not None:
            self.threshold = op.threshold
        said = " ".join(f"{k}={v}" for k, v in change.items())
        if outcome is not None:
            body = outcome.body() if hasattr(outcome, "body") else outcome
            said += f"; reconsidered: {body}"
        return said

    # --- after the storm

    def settle(self) -> None:
        """Deliver every job, run out every window, sweep; again until nothing is queued, live or due."""
        for _ in range(SETTLE_ROUNDS):
            self.w.pump()
            if self._quiet():
                return
            self.w.clock.advance(PAST_EVERY_WINDOW_S)
            self.w.sweep()
        self.problems.append(f"7 nothing lost: still busy after {SETTLE_ROUNDS} rounds of settling")

    def _quiet(self) -> bool:
        if self.w.jobs_waiting():
            return False
        if any(r["state"] in (OfferState.OFFERED, OfferState.HELD) or r.get("due_key") for r in self._rows()):
            return False
        return not any(r.get("pending_key") for r in scan(self.w.table("restocks")))


# A level webhook as the platform sends it: its body and headers.
Request = tuple[bytes, dict[str, str]]


class PlatformStorm(Storm):
    """A storm on a platform world: the shelf is the store's storefront stock, reported by the platform's own signed
    webhook, both when the shop sets it and when the store's stock moves by itself (a hold placed or given back, a
    payment, a walk-in sale: `Report`, late or twice); orders are the shopper paying the store's hold; `StoreDown`
    makes the store answer errors for a while."""

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.reports_sent: list[Request] = []  # every level report delivered and applied or remembered, oldest first
        self.held_up: list[tuple[float, int, Request]] = []  # reports on their way: (stamped at, level, request)
        self.newest = float("-inf")  # the stamp of the newest report delivered

    def play(self, op: Op) -> str:
        # Holds placed, released or sold move the storefront's stock: the shop sets its stock from what it shows.
        self.shelf = self.w.store.counts(self.w.sku)["available"]
        return super().play(op)

    # --- the store's level reports

    def set_shelf(self, level: int) -> str:
        """The shop sets the storefront's stock; the platform reports it at once."""
        level = max(0, level)
        if level == self.shelf:
            return f"shelf stays at {level}"
        before, self.shelf = self.shelf, level
        self.w.clock.advance(1)  # strictly newer than every report before it
        return f"shelf {before}->{level}: {self._deliver(self.w.store_set(level), self.w.clock.now())}"

    def report(self) -> str:
        """The store reports its stock as it stands now."""
        return self._report(Report())

    def _deliver(self, request: Request, stamped: float) -> str:
        """Deliver a report of the stock as it stands now: the catalogue's level is then the shelf level."""
        outcome = self.w.attempt("store level webhook", lambda: self.w.deliver_store(request))
        self.reports_sent.append(request)
        self.newest = max(self.newest, stamped)
        product = self.w.table("catalog").get_item(Key={"sku": self.w.sku}, ConsistentRead=True).get("Item") or {}
        level, held = int(product.get("level") or 0), int(product.get("store_held") or 0)
        available = self.w.store.counts(self.w.sku)["available"]
        if level != available + held:
            self.problems.append(
                f"4 shelf level: the store reported {available} with {held} held there for us; the catalogue's"
                f" level is {level}"
            )
        return _answer(outcome)

    def _report(self, op: Report) -> str:
        request = self.w.store_report()
        level = self.w.store.counts(self.w.sku)["available"]
        if op.late:
            self.held_up.append((self.w.clock.now(), level, request))
            return f"the store reports {level}: held up on the way"
        return f"the store reports {level}: {self._deliver(request, self.w.clock.now())}"

    def _reportagain(self, op: ReportAgain) -> str:
        if not self.reports_sent:
            return "no level report delivered yet"
        request = self.reports_sent[op.pick % len(self.reports_sent)]
        outcome = self.w.attempt("store level webhook", lambda: self.w.deliver_store(request))
        if {r.get("reason") for r in outcome.results} != {"duplicate"}:
            self.problems.append(f"6 exactly once: a level report delivered again was answered {outcome.body()}")
        return f"a report delivered again: {_answer(outcome)}"

    def _latereport(self, op: LateReport) -> str:
        if not self.held_up:
            return "no report held up"
        stamped, level, request = self.held_up.pop(op.pick % len(self.held_up))
        newer = ""
        if stamped >= self.newest:
            newer = f"a newer one first: {self.report()}; "
        return newer + self._arrives_late(stamped, level, request)

    def _arrives_late(self, stamped: float, level: int, request: Request) -> str:
        """A report older than one delivered since arrives: detection must ignore it (its level is out of date)."""
        outcome = self.w.attempt("store level webhook", lambda: self.w.deliver_store(request))
        if {r.get("reason") for r in outcome.results} != {"stale"}:
            self.problems.append(
                f"4 shelf level: a report of {level} stamped {iso(stamped)}, after a newer one, was answered"
                f" {outcome.body()}"
            )
        return f"a report of {level} arrives late: {_answer(outcome)}"

    # --- the store's own operations

    def _walkin(self, _op: WalkIn) -> str:
        if not self.w.walk_in():
            return "nothing on the storefront to buy"
        return f"somebody buys one on the storefront: {self.shelf}->{self.shelf - 1}"

    def _order(self, op: Order) -> str:
        placed = [r for r in self._rows(OfferState.HELD) if r.get("store_ref")]
        if not placed:
            return "no hold on the store to pay"
        row = placed[op.pick % len(placed)]
        outcome = self.w.store_pay(str(row["token_id"]))
        said = f"{self._who(row.get('contact_key'))} paid: {outcome.status}"
        if op.report:
            said += f"; {self.report()}"
        return said

    def _storedown(self, op: StoreDown) -> str:
        if self.w.platform == "shopify":
            self.w.store.fail_next(503, count=op.calls)
        else:
            self.w.store.fail_next(503, times=op.calls)
        return f"the store errs for {op.calls} call(s)"

    def settle(self) -> None:
        """Settle; then, every hold ended, the store's last report, and after it every report still on its way (each
        must be ignored as stale); then settle what that report started."""
        self.w.store._faults.clear()  # the store is back before the last report and the settling
        super().settle()
        self.trace.append(f"  - the store's last report: {self.report()}")
        for stamped, level, request in self.held_up:
            self.trace.append(f"  - {self._arrives_late(stamped, level, request)}")
        self.held_up.clear()
        super().settle()


def _answer(outcome: Any) -> str:
    """A store webhook's answer in short: its status, and what detection said of each level in it."""
    said = [str(outcome.status)]
    for result in outcome.results:
        said.append(" ".join(str(result[k]) for k in ("reason", "adjusted") if result.get(k)))
    return " ".join(part for part in said if part)


def play(ops: Sequence[Op], bench: Emulator, *, tally: bool = True) -> Result:
    """Play `ops` on a fresh shop of `bench`, settle, and check every invariant (`tally`: count it as a storm)."""
    world = bench.world()
    storm = Storm(world) if world.store is None else PlatformStorm(world)
    crashes = 0
    moment = Moment.read(world.table)
    steps: list[str] = []  # each step's counter moves, held to DESIGN's table (step_violations)
    for index, op in enumerate(ops):
        seen = len(world.faults.crashes)
        try:
            said = storm.play(op)
        except DomainError as refusal:
            said = f"refused: {refusal.code}"
        except CRASHES as crash:  # a crash no retry absorbed: the op's own process died, nothing follows
            said = f"crashed: {crash}"
        except Exception as error:
            storm.problems.append(f"! {type(error).__name__}: {error} (op {index}: {op!r})")
            storm.trace.append(f"{index:>3} {op!r}: {type(error).__name__}: {error}")
            break
        finally:
            if not isinstance(op, CrashAt | CutPower | Meanwhile):
                # A crash (or work meanwhile) armed for this op and never reached does not carry over to the next.
                world.faults.disarm()
            crashes += len(world.faults.crashes) - seen
        said = "; ".join([said, *storm.meanwhile_said, *storm.press_again()])
        storm.meanwhile_said.clear()
        storm.trace.append(f"{index:>3} {op!r}: {said}")
        if not isinstance(op, CrashAt | CutPower | Meanwhile):  # arming one writes nothing
            # Only an opt-out writes a suppression row (work done meanwhile notes its own).
            moment, before = Moment.read(world.table, since=moment, suppressions=isinstance(op, OptOut)), moment
            steps += step_violations(before, moment, f"op {index} {op!r}")
            storm.note_suppressions(moment.suppressed)
    found = list(storm.problems) + steps
    if not any(p.startswith("! ") for p in found):
        try:
            world.faults.disarm()
            storm.trace.append(f"  - final report: {storm.report()}")
            storm.settle()
            found = list(storm.problems)
            settled = Moment.read(world.table)
            steps += step_violations(moment, settled, "settling")
            storm.note_suppressions(settled.suppressed)
            found += steps
            found += told_after_suppression(world.services, storm.sent_before)
            # A platform's shelf level is the store's available plus our holds there: the store's last report came
            # after the settling (PlatformStorm.settle), so the catalogue's level must be it.
            levels = {world.sku: storm.shelf} if world.store is None else None
            found += violations(
                world.services,
                world.clock.now(),
                settled=True,
                store_levels=levels,
                store=world.store,
                store_reported=world.store is not None,
            )
        except Exception as error:
            found.append(f"! {type(error).__name__} while settling: {error}")
    result = Result(list(ops), found, storm.trace, crashes)
    if tally:
        tally_storm(result)
    else:
        count("storm shrink trials")
    return result


def tally_storm(result: Result) -> None:
    """Count one storm in the reliability suite's summary line."""
    count("storms run")
    count("storm ops played", len(result.ops))
    count("storm crashes injected", result.crashes)
    count("storm violations found", len(result.violations))


def run(ops: Sequence[Op], bench: Emulator | None = None) -> list[str]:
    """The violations of one storm (on `bench`, or on an emulator of its own)."""
    if bench is not None:
        return play(ops, bench).violations
    with emulator() as own:
        return play(ops, own).violations


# --- many storms at once: one emulator per process


_OWN: Emulator | None = None
_KEEP: list[Any] = []  # the worker's open emulator context: dropped, it would close


def _start_worker() -> None:
    """A worker process's emulator, kept for the process's life; its log stays out of the test output."""
    global _OWN
    import contextlib
    import logging

    logging.getLogger().addHandler(logging.NullHandler())
    stack = contextlib.ExitStack()
    _KEEP.append(stack)
    _OWN = stack.enter_context(emulator())


def _play_seed(seed: int, mode: str = "mixed") -> tuple[int, Result]:
    assert _OWN is not None
    return seed, play(generate(seed, mode=mode), _OWN, tally=False)


@contextmanager
def storm_pool(workers: int) -> Iterator[Callable[..., list[tuple[int, Result]]]]:
    """Plays seeds in `workers` processes, each with an emulator of its own; yields `(seeds, mode) -> [(seed,
    result)]` (counted in this process's tally). The emulator is in-process and single-threaded, so processes are
    what let a storm use a second core."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # never fork a process that holds the emulator's lock
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker) as pool:

        def play_seeds(seeds: Sequence[int], mode: str = "mixed") -> list[tuple[int, Result]]:
            played = list(pool.map(_play_seed, seeds, [mode] * len(seeds)))
            for _, result in played:
                tally_storm(result)
            return played

        yield play_seeds


# --- shrinking


def shrink(ops: Sequence[Op], fails: Callable[[list[Op]], bool], *, budget: int = 150) -> tuple[list[Op], int]:
    """Delta debugging: the shortest sub-list found (dropping halves, then smaller chunks, then single ops)
    for which `fails` still holds, within `budget` trials; returns it and the number of trials."""
    current = list(ops)
    parts = 2
    trials = 0
    while len(current) >= 2 and trials < budget:
        size = -(-len(current) // parts)
        for start in range(0, len(current), size):
            candidate = current[:start] + current[start + size :]
            trials += 1
            if candidate and fails(candidate):
                current = candidate
                parts = max(parts - 1, 2)
                break
            if trials >= budget:
                break
        else:
            if size == 1:
                break
            parts = min(len(current), parts * 2)
    return current, trials


def shrink_storm(result: Result, bench: Emulator, *, budget: int = 150) -> Result:
    """The shortest storm found that still breaks the first invariant `result` broke, played once more."""
    target = label(result.violations[0])

    def fails(candidate: list[Op]) -> bool:
        return any(label(v) == target for v in play(candidate, bench, tally=False).violations)

    smallest, _ = shrink(result.ops, fails, budget=budget)
    return play(smallest, bench, tally=False)


def replayable(ops: Sequence[Op]) -> str:
    """The op list as Python, one op a line (paste it into `run([...])`)."""
    return "[\n" + "".join(f"    {op!r},\n" for op in ops) + "]"


def describe(seed: int, result: Result, smallest: Result | None = None) -> str:
    """A failing storm as the test reports it."""
    lines = [f"storm seed {seed}: {len(result.violations)} violation(s)"]
    lines += [f"  {v}" for v in result.violations[:12]]
    if smallest is not None:
        lines.append(f"smallest storm that still breaks '{label(result.violations[0])}' ({len(smallest.ops)} ops):")
        lines.append(replayable(smallest.ops))
        lines.append("its trace:")
        lines += [f"  {t}" for t in smallest.trace]
        lines.append("its violations:")
        lines += [f"  {v}" for v in smallest.violations]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Replay one seed and print its trace and violations (and, with --shrink, the smallest failing storm)."""
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.storms", description=main.__doc__)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--length", type=int, default=LENGTH)
    parser.add_argument("--mode", choices=sorted(MODES), default="mixed", help="the mix of operations (MODES)")
    parser.add_argument("--shrink", action="store_true", help="shrink a failing storm")
    args = parser.parse_args(argv)
    with emulator() as bench:
        result = play(generate(args.seed, args.length, mode=args.mode), bench)
        print(f"storm seed {args.seed} ({args.mode}), {len(result.ops)} ops, {result.crashes} crash(es):")
        for line in result.trace:
            print(line)
        print("violations:" if result.failed else "every invariant held")
        for v in result.violations:
            print(f"  {v}")
        if result.failed and args.shrink:
            print()
            print(describe(args.seed, result, shrink_storm(result, bench)))
    return 1 if result.failed else 0


if __name__ == "__main__":
    import os

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ["AWS_DEFAULT_REGION"] = REGION
    sys.exit(main())
