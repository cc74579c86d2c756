"""A place in line from maintained figures, never by counting the list (DESIGN §5, docs/SCALE.md).

A new place takes a ticket from its SKU's line (`LineTickets.take_ticket`, a plain write off the tap's
transaction) and keeps it, with the count of tickets burnt before it. Later its place is read from three figures,
whatever the list's length: its ticket T (and burnt-before B), the tickets issued so far J, and the people waiting
now W (the sum of the product's waiting shards, each moved in the same transaction as a join or leave).

* Everyone ahead holds a lower ticket, and a burnt ticket is nobody's place: place <= T - B. Nobody can be ahead
  who is not waiting: place <= W.
* Everyone behind holds a higher ticket: at most J - T of them, so place >= W - (J - T).

With nobody gone and no ticket burnt the two bounds meet and the place is exact; once people left (or bought)
they give a range that holds the true place, and the pages say so. A place from before tickets, or one an import
wrote (it keeps the join time of the app it came from, so it may stand ahead of tickets handed out before it:
docs/IMPORT.md), has only the second upper bound. The line counts the places imports put in it (I, counted before
they are written), and a ticket records how many were counted before it was taken (I0): any of the I may stand
ahead of it, so place <= T - B + I; only the I - I0 counted after it may stand behind it, so
place >= W - (J - T) - (I - I0). A place that joined after an import is exact again while nobody leaves. Tickets follow the join stamps (the fair order, invariant 1) except between taps in the same
few milliseconds, which may cross: there a bound may be off by the taps that crossed. `place_in_line` is pure;
`read_place` is its two reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chalicelib.tables.requests import Request
    from chalicelib.tables.store import Tables


@dataclass(frozen=True)
class PlaceInLine:
    """Where a live place stands: certainly no earlier than `lowest` and no later than `highest` (1 = next)."""

    lowest: int
    highest: int

    @property
    def exact(self) -> int | None:
        """The place, when the figures pin it down."""
        return self.lowest if self.lowest == self.highest else None


def place_in_line(
    *, ticket: int | None, burnt_before: int, issued: int, waiting: int, inserted: int = 0, inserted_before: int = 0
) -> PlaceInLine:
    """The bounds of a live place (see the module's docstring); `waiting` counts the place itself."""
    waiting = max(waiting, 1)
    if ticket is None:
        return PlaceInLine(1, waiting)
    highest = max(1, min(waiting, ticket - burnt_before + inserted))
    lowest = max(1, waiting - max(issued - ticket, 0) - max(inserted - inserted_before, 0))
    return PlaceInLine(min(lowest, highest), highest)


def read_place(tables: Tables, request: Request) -> PlaceInLine:
    """A live place's bounds from strongly consistent reads: the product's waiting shards (one BatchGetItem of
    WAITING_SHARDS keys) and the line's tickets (one GetItem)."""
    waiting = tables.catalog.waiting(request.sku)
    issued, _, inserted = tables.line_tickets.figures(request.sku)
    return place_in_line(
        ticket=request.ticket,
        burnt_before=request.burnt_before,
        issued=issued,
        waiting=waiting,
        inserted=inserted,
        inserted_before=request.inserted_before,
    )
