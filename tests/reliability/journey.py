"""One product's whole story as a list of steps, so a crash can be placed before any step or AWS call of it.

Five shoppers join; stock returns (3 units), then rises by one; the notifier tells the front of the line;
the first shopper told taps and buys; the second taps and never buys; the third unsubscribes while their
offer is live; a newcomer joins late; time passes past every window and the sweep settles the rest.
Each step picks its people from what the tables and the outbox say, not from a script, so after a crash
has changed the course of things the story goes on from wherever it now stands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib.tables.reservations import OfferState
from tests.reliability.world import World

SHOPPERS = ("+447400100101", "+447400100102", "shopper.three@example.com", "+447400100104", "+447400100105")
LATECOMER = "Late.Comer@Example.com"


@dataclass(frozen=True)
class Step:
    """One thing that happens, and the part of the system it exercises."""

    name: str
    area: str  # capture, detect, notifier, reserve, orders, leave, sweep
    run: Callable[[World], Any]


def messaged_offer(w: World, *, skip: int = 0) -> dict[str, Any] | None:
    """The live offer of the (skip+1)-th oldest place whose notice actually went out, if any."""
    sent = set(w.sent_tokens())
    live = [r for r in w.offers(OfferState.OFFERED) if r["token_id"] in sent]
    return live[skip] if len(live) > skip else None


def buy_first(w: World) -> None:
    """The oldest shopper told taps their link, is sent to checkout, and the shop reports the order."""
    offer = messaged_offer(w)
    if offer is None:
        return
    w.reserve(str(offer["token_id"]))
    if w.row(str(offer["token_id"])).get("state") == OfferState.HELD:
        w.order(str(offer["token_id"]), "order-1001")


def hold_and_walk_away(w: World) -> None:
    """The next shopper told taps their link but never buys."""
    offer = messaged_offer(w)
    if offer is not None:
        w.reserve(str(offer["token_id"]))


def leave_with_live_offer(w: World) -> None:
    """The next shopper told unsubscribes instead of tapping: their offer passes on."""
    offer = messaged_offer(w)
    if offer is None:
        return
    owner = next((s for s in w.shoppers if s.key == offer["contact_key"]), None)
    if owner is not None:
        w.unsubscribe(owner.contact)


def after_every_window(w: World) -> None:
    """An hour and a minute later: every offer and hold window has ended."""
    w.clock.advance(3661)
    w.sweep()


STEPS: tuple[Step, ...] = (
    *(Step(f"tap {i + 1}", "capture", lambda w, c=c: w.tap(c)) for i, c in enumerate(SHOPPERS)),
    Step("stock returns: 3", "detect", lambda w: w.inventory(3)),
    Step("notifier: restock job", "notifier", lambda w: w.pump()),
    Step("stock rises: 4", "detect", lambda w: w.inventory(4)),
    Step("notifier: top-up job", "notifier", lambda w: w.pump()),
    Step("tap link and buy", "reserve", buy_first),
    Step("tap link, walk away", "reserve", hold_and_walk_away),
    Step("unsubscribe with a live offer", "leave", leave_with_live_offer),
    Step("latecomer joins", "capture", lambda w: w.tap(LATECOMER)),
    Step("notifier: jobs after leaving", "notifier", lambda w: w.pump()),
    Step("sweep: windows over", "sweep", after_every_window),
    Step("notifier: top-ups after the sweep", "notifier", lambda w: w.pump()),
    Step("sweep: next minute", "sweep", lambda w: (w.clock.advance(60), w.sweep())),
)


def play(w: World, *, before_step: Callable[[int, Step], None] | None = None, settle: bool = True) -> None:
    """Play every step, then let every window pass; `before_step` may arm a crash for the step about to run."""
    w.product()
    for index, step in enumerate(STEPS):
        if before_step is not None:
            before_step(index, step)
        try:
            step.run(w)
        finally:
            # Whatever the step did, its process is gone now; the next step runs in a fresh one.
            w.faults.restore()
    if settle:
        w.settle()
