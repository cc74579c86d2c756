"""Which waiting shard a place is counted on, and each shard's share of the list's cap."""

from __future__ import annotations

from collections import Counter

from chalicelib.contacts import contact_key
from chalicelib.tables.catalog import WAITING_SHARDS, is_shard, shard_cap, shard_for, shard_key


def test_a_person_always_lands_on_the_same_shard() -> None:
    key = contact_key("+447400900123", "k" * 32)
    assert {shard_for(key) for _ in range(5)} == {shard_for(key)}
    assert 0 <= shard_for(key) < WAITING_SHARDS


def test_many_people_spread_over_every_shard_about_evenly() -> None:
    counts = Counter(shard_for(contact_key(f"+4474{i:08d}", "k" * 32)) for i in range(16_000))
    assert set(counts) == set(range(WAITING_SHARDS))
    # 1,000 a shard on average; a hash spreads them within a few standard deviations (about 31).
    assert max(counts.values()) < 1_150 and min(counts.values()) > 850, counts


def test_a_shard_takes_its_share_of_the_cap_rounded_up() -> None:
    assert shard_cap(10_000) == 625
    assert shard_cap(1) == 1
    assert shard_cap(17) == 2
    assert shard_cap(10_000) * WAITING_SHARDS >= 10_000


def test_shard_keys_cannot_be_products() -> None:
    # SKUs never hold "#" (chalicelib/capture.py refuses them), so no product's key looks like a shard's.
    assert shard_key("CHAIR-WALNUT", 3) == "CHAIR-WALNUT#w03"
    assert is_shard({"sku": "CHAIR-WALNUT#w03", "shard_of": "CHAIR-WALNUT"})
    assert not is_shard({"sku": "CHAIR-WALNUT", "waiting_count": 3})
