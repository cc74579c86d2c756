"""The benchmark's call counting on the emulator: a new tap is one transaction and one count."""

from __future__ import annotations

from bench.measure import calls_per_tap


def test_a_counted_tap_is_one_transaction_and_one_query() -> None:
    counted = calls_per_tap(taps=5, warm=2)
    assert counted["calls"] == {"dynamodb.Query": 1.0, "dynamodb.TransactWriteItems": 1.0}
    assert counted["total"] == 2
    # rate limit, catalogue and request: 2 units each (+1 each index the request lands in); opt-out check; uniqueness
    assert counted["write_units"] >= 10


def test_the_throughput_bench_tells_every_waiting_shopper_through_the_real_notifier() -> None:
    from bench.measure import one_restock

    # Small and fast: this proves the bench's notifier run works end to end; `make bench` measures it.
    result = one_restock(units=30, latency_s=0.001)
    assert result["sent"] == 30
    assert result["jobs"] >= 1
