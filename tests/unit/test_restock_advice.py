"""The dashboard's restock advice: what stock level tells whom, by detection's own rule (chalicelib/detect.py)."""

from __future__ import annotations

import pytest

from chalicelib.admin.dashboard import restock_advice
from chalicelib.detect import CROSSING, decide


def test_a_threshold_of_one_tells_one_person_per_unit() -> None:
    advice = restock_advice(threshold=1, store_held=0, waiting=3, unconfirmed=0)
    assert (advice.notify_from, advice.restock_to, advice.confirmed) == (1, 3, 3)
    assert (
        advice.text
        == "A stock level of 1 tells the first confirmed person in line, one per unit; 3 tells all 3 confirmed."
    )


def test_below_the_threshold_nobody_is_told_and_the_line_needs_the_threshold_not_its_length() -> None:
    advice = restock_advice(threshold=5, store_held=0, waiting=3, unconfirmed=0)
    assert (advice.notify_from, advice.restock_to) == (5, 5)
    assert advice.text == (
        "Below 5 units nobody is told (the notify threshold is 5). A stock level of 5 tells all 3 confirmed people waiting."
    )


def test_unconfirmed_email_places_are_not_counted_as_people_a_restock_tells() -> None:
    advice = restock_advice(threshold=2, store_held=0, waiting=10, unconfirmed=4)
    assert (advice.notify_from, advice.restock_to, advice.confirmed) == (2, 6, 6)
    assert advice.text == (
        "Below 2 units nobody is told (the notify threshold is 2). A stock level of 2 tells the first 2 confirmed "
        "people in line, one per unit; 6 tells all 6 confirmed. 4 unconfirmed email places are passed over until "
        "confirmed."
    )


def test_when_nobody_has_confirmed_no_level_tells_anyone() -> None:
    advice = restock_advice(threshold=1, store_held=0, waiting=1, unconfirmed=1)
    assert advice.confirmed == 0
    assert advice.text == (
        "A stock level of 1 or more opens a restock, but nobody waiting has confirmed yet. "
        "1 unconfirmed email place is passed over until confirmed."
    )


def test_with_nobody_waiting_the_advice_says_so() -> None:
    advice = restock_advice(threshold=2, store_held=0, waiting=0, unconfirmed=0)
    assert advice.text == (
        "Below 2 units nobody is told (the notify threshold is 2). "
        "A stock level of 2 or more opens a restock, but nobody is waiting."
    )


def test_units_our_holds_keep_on_the_store_count_towards_the_level() -> None:
    advice = restock_advice(threshold=3, store_held=1, waiting=5, unconfirmed=0)
    assert (advice.notify_from, advice.restock_to) == (2, 4)
    assert "A stock level of 2 tells the first 3 confirmed people in line" in advice.text
    assert advice.text.endswith("These are the store's own levels: the 1 unit our holds keep on the store count too.")


@pytest.mark.parametrize(("threshold", "store_held"), [(1, 0), (2, 0), (5, 0), (3, 1), (4, 2)])
def test_notify_from_is_the_lowest_store_level_detection_opens_a_restock_at(threshold: int, store_held: int) -> None:
    advice = restock_advice(threshold=threshold, store_held=store_held, waiting=9, unconfirmed=0)
    # Out of stock: the shelf level (the store's plus our holds there) is below the threshold.
    before = store_held
    shelf = advice.notify_from + store_held
    assert decide(before, shelf, threshold, restock_open=False).kind == CROSSING
    assert decide(before, shelf - 1, threshold, restock_open=False).kind != CROSSING
    # The restock has the shelf's units; `restock_to` gives one to each of the 9 confirmed.
    assert decide(before, advice.restock_to + store_held, threshold, restock_open=False).amount == 9
