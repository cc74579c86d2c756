"""The place in line from the line's figures (chalicelib/line.py), checked against a list counted by hand."""

from __future__ import annotations

import random

from chalicelib.line import PlaceInLine, place_in_line
from chalicelib.shopper.selfservice import place_words


def test_nobody_gone_gives_the_exact_place() -> None:
    assert place_in_line(ticket=4, burnt_before=0, issued=10, waiting=10) == PlaceInLine(4, 4)


def test_burnt_tickets_before_a_place_are_nobodys() -> None:
    # Tickets 1..10, 2 of those before ticket 6 were burnt: 8 places, ticket 6 is the 4th.
    assert place_in_line(ticket=6, burnt_before=2, issued=10, waiting=8).exact == 4


def test_a_place_from_before_tickets_has_only_the_honest_upper_bound() -> None:
    assert place_in_line(ticket=None, burnt_before=0, issued=0, waiting=7) == PlaceInLine(1, 7)


def test_the_bounds_always_hold_the_true_place() -> None:
    rng = random.Random(7)
    for _ in range(300):
        tickets = list(range(1, rng.randint(2, 60)))
        burnt = {t for t in tickets if rng.random() < 0.1}
        placed = [t for t in tickets if t not in burnt]
        if not placed:
            continue
        mine = rng.choice(placed)
        burnt_before = sum(1 for t in burnt if t < mine)  # burns recorded before this ticket was handed out
        gone = {t for t in placed if t != mine and rng.random() < 0.3}
        live = [t for t in placed if t not in gone]
        truth = sorted(live).index(mine) + 1
        place = place_in_line(ticket=mine, burnt_before=burnt_before, issued=len(tickets), waiting=len(live))
        assert place.lowest <= truth <= place.highest, (mine, place, truth)


def test_the_page_says_exact_or_a_labelled_range() -> None:
    assert place_words(PlaceInLine(3, 3)) == "2 people are ahead of you in line."
    assert place_words(PlaceInLine(1, 12)) == "At most 11 people are ahead of you in line."
    assert place_words(PlaceInLine(4900, 5000)).startswith("Between 4,899 and 4,999 people are ahead of you in line")


def test_imported_places_anywhere_in_line_keep_the_bounds_true() -> None:
    # Taps take tickets in time order; imports put places at older join times without tickets, counting them on the
    # line first (`inserted`), and each ticket remembers the count when it was taken (`inserted_before`).
    rng = random.Random(11)
    for _ in range(300):
        line: list[tuple[float, int | None, int]] = []  # (join time, ticket, inserted before it), in event order
        issued = inserted = 0
        clock = 0.0
        for _ in range(rng.randint(2, 40)):
            clock += 1
            if rng.random() < 0.3:
                batch = rng.randint(1, 4)
                inserted += batch
                line += [(rng.uniform(-5, clock), None, 0) for _ in range(batch)]
            else:
                issued += 1
                line.append((clock, issued, inserted))
        gone = {i for i in range(len(line)) if rng.random() < 0.2}
        live = sorted((p for i, p in enumerate(line) if i not in gone), key=lambda p: p[0])
        for truth, (_, ticket, before) in enumerate(live, start=1):
            place = place_in_line(
                ticket=ticket,
                burnt_before=0,
                issued=issued,
                waiting=len(live),
                inserted=inserted,
                inserted_before=before,
            )
            assert place.lowest <= truth <= place.highest


def test_a_place_taken_after_an_import_is_exact_while_nobody_leaves() -> None:
    # 5 imported places, then tickets 1..3: ticket 2 stands 7th of 8.
    assert place_in_line(ticket=2, burnt_before=0, issued=3, waiting=8, inserted=5, inserted_before=5).exact == 7
