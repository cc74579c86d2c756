"""The benchmark's call counting on the emulator: a new tap is one transaction and one count."""

from __future__ import annotations

from bench.measure import calls_per_tap


def test_a_counted_tap_is_one_transaction_and_one_query() -> None:
    counted = calls_per_tap(taps=5, warm=2)
    assert counted["calls"] == {"dynamodb.Query": 1.0, "dynamodb.TransactWriteItems": 1.0}
    assert counted["total"] == 2
    # rate limit, catalogue and request: 2 units each (+1 each index the request lands in); opt-out check; uniqueness
    assert counted["write_units"] >= 10
