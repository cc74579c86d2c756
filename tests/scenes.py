"""A SKU with a restock, a queue and offers, as the hold, order and sweep tests build on it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from chalicelib import holds
from chalicelib.tables.requests import Request
from chalicelib.tables.reservations import Offer
from chalicelib.tables.restocks import Restock
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import join_request, make_offer, put_restock
from tests.support import CHAIR


@dataclass
class Scene:
    """One SKU with a restock and a queue, and the offers made so far."""

    services: Services
    clock: FixedClock
    sku: str
    restock: Restock
    requests: list[Request]
    tokens: list[str]

    def counters(self) -> tuple[int, int]:
        item = self.services.tables.restocks.get(self.sku, self.restock.restock_ts)
        assert item is not None
        return item.units_available, item.units_offerable

    def offer(self, index: int = 0) -> str:
        token_id = make_offer(self.services, self.restock, self.requests[index], self.clock.now())
        self.tokens.append(token_id)
        return token_id

    def tap(self, token_id: str) -> holds.ReserveOutcome:
        return self.services.holds.reserve(self.services.tokens.reserve(token_id))

    def row(self, token_id: str) -> Offer:
        row = self.services.tables.reservations.get(token_id)
        assert row is not None, f"no offer {token_id}"
        return row

    def request(self, index: int = 0) -> Request:
        request = self.services.tables.requests.get(self.sku, self.requests[index].joined_ts)
        assert request is not None, f"no place {self.requests[index].joined_ts}"
        return request

    def waiting_count(self) -> int:
        return self.services.tables.catalog.waiting(self.sku)

    def audit_kinds(self) -> Counter[str]:
        return Counter(str(f["kind"]) for f in self.services.tables.audit.for_sku(self.sku))


def scene(services: Services, clock: FixedClock, units: int = 2, people: int = 3, sku: str = "CHAIR-WALNUT") -> Scene:
    services.tables.catalog.upsert(sku, dict(CHAIR))
    requests = []
    for i in range(people):
        requests.append(join_request(services, sku, f"+4474001000{i:02d}", clock.now()))
        clock.advance(1)
    restock = put_restock(services, sku, units, clock.now())
    return Scene(services, clock, sku, restock, requests, [])


def level_falls_to(s: Scene, units: int) -> None:
    """The shop's stock fell while offers were out: both counters drop by the same amount."""
    available, _ = s.counters()
    cut = available - units
    s.services.tables.restocks.table.update_item(
        Key={"sku": s.sku, "restock_ts": s.restock.restock_ts},
        UpdateExpression="ADD units_available :minus, units_offerable :minus",
        ExpressionAttributeValues={":minus": -cut},
    )
