"""Random interleavings of offers, taps, lapses, expiries, conversions and level changes keep promises 4–6.

After every step the tables themselves are read back: counters, offer rows, requests and the audit.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from chalicelib.errors import Conflict
from chalicelib.orders import Order
from chalicelib.tables.base import TransactionCancelled
from chalicelib.tables.requests import Request
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from tests.builders import join_request, make_offer, put_restock
from tests.support import CHAIR

ACTIVE = {"waiting", "offered", "reserved"}
ROW_TO_REQUEST = {"offered": "offered", "held": "reserved", "converted": "converted"}
_skus = itertools.count()


def machine_for(base: Services) -> type[RuleBasedStateMachine]:
    """A state machine class whose instances each get a fresh SKU and clock on the shared emulator."""

    class HoldsMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.clock = FixedClock(float(int(time.time())))
            self.services = Services(base.settings, aws=base.aws, clock=self.clock, model=FakeBedrock())
            self.sku = f"PROP-{next(_skus)}"
            self.services.tables.catalog.upsert(self.sku, dict(CHAIR))
            self.requests: list[Request] = []
            self.tokens: dict[int, str] = {}
            self.total = 0
            self.cut = 0

        @initialize(units=st.integers(1, 4), people=st.integers(2, 6))
        def restock(self, units: int, people: int) -> None:
            for i in range(people):
                self.requests.append(join_request(self.services, self.sku, f"+4474009{i:05d}", self.clock.now()))
                self.clock.advance(1)
            self.restock_item = put_restock(self.services, self.sku, units, self.clock.now())
            self.total = units
            self.notify_in_order()

        # --- what happens in the world

        def _offer(self, i: int) -> bool:
            try:
                token_id = make_offer(self.services, self.restock_item, self.requests[i], self.clock.now())
            except TransactionCancelled:
                return False  # the notifier's conditions refused: no unit to promise, or told already
            assert i not in self.tokens, "a request was offered twice for one restock"
            self.tokens[i] = token_id
            available, _ = self.counters()
            # Promise 5 at the moment an offer is made: live offers never exceed the units.
            assert self.live() <= available
            return True

        @rule()
        def notify_in_order(self) -> None:
            # As a notifier job walks the list: oldest first; anyone told about this restock is refused.
            for i in range(len(self.requests)):
                self._offer(i)

        def _pick(self, who: int) -> str | None:
            """One of the offers made so far (taps and orders only ever name real links)."""
            tokens = sorted(self.tokens.values())
            return tokens[who % len(tokens)] if tokens else None

        @precondition(lambda self: self.tokens)
        @rule(who=st.integers(0, 5), times=st.integers(1, 2))
        def tap(self, who: int, times: int) -> None:
            token_id = self._pick(who)
            if token_id is None:
                return
            link = self.services.tokens.reserve(token_id)
            kinds = [self.services.holds.reserve(link).kind for _ in range(times)]
            assert kinds[1:] in ([], [kinds[0]], ["held_again"])

        @precondition(lambda self: self.tokens)
        @rule(who=st.integers(0, 5))
        def order(self, who: int) -> None:
            token_id = self._pick(who)
            if token_id is None:
                return
            # An untapped offer is refused (Conflict): there is nothing to convert.
            with contextlib.suppress(Conflict):
                self.services.orders.record(Order(token_id, f"order-{who}"))

        @rule(seconds=st.sampled_from([30, 300, 900, 3600]))
        def time_passes(self, seconds: int) -> None:
            self.clock.advance(seconds)

        @rule()
        def sweep(self) -> None:
            self.services.sweep.run()

        @rule(units=st.integers(1, 3))
        def level_falls(self, units: int) -> None:
            # As restock detection lowers an open restock: only units nobody holds can vanish.
            available, _ = self.counters()
            cut = min(units, available)
            self._adjust(-cut)
            self.cut += cut

        @rule(units=st.integers(1, 2))
        def level_rises(self, units: int) -> None:
            self._adjust(units, total=True)
            self.total += units

        def _adjust(self, delta: int, *, total: bool = False) -> None:
            expression = "ADD units_available :d, units_offerable :d" + (", units_total :d" if total else "")
            self.services.tables.restocks.table.update_item(
                Key={"sku": self.sku, "restock_ts": self.restock_item.restock_ts},
                UpdateExpression=expression,
                ExpressionAttributeValues={":d": delta},
            )

        # --- reading the tables back

        def counters(self) -> tuple[int, int]:
            item = self.services.tables.restocks.get(self.sku, self.restock_item.restock_ts)
            return item.units_available, item.units_offerable

        def rows(self) -> dict[int, dict[str, Any]]:
            if not self.tokens:
                return {}
            name = self.services.tables.reservations.name
            found = self.services.aws.dynamodb.batch_get_item(
                RequestItems={name: {"Keys": [{"token_id": t} for t in self.tokens.values()], "ConsistentRead": True}}
            )["Responses"][name]
            by_token = {row["token_id"]: row for row in found}
            return {i: by_token[t] for i, t in self.tokens.items()}

        def live(self) -> int:
            return sum(1 for row in self.rows().values() if row.get("state") == "offered")

        @invariant()
        def promises_hold(self) -> None:
            if not self.requests:
                return
            available, offerable = self.counters()
            rows = self.rows()
            states = Counter(row["state"] for row in rows.values())
            # 4. Never oversell: every unit is available, held, sold or gone from the shelf; none twice.
            assert available >= 0
            assert available + states["held"] + states["converted"] == self.total - self.cut
            # 5. Never over-promise: what can still be promised is what no hold, sale or live offer has.
            assert offerable == available - states["offered"]
            if self.cut == 0:
                assert states["offered"] <= available
            # 6. Exactly once: one audit fact per move, each request moved with its own row.
            facts = Counter(str(f["kind"]) for f in self.services.tables.audit.for_sku(self.sku))
            assert facts["hold"] == states["held"] + states["converted"] + states["expired"]
            assert facts["expiry"] == states["expired"]
            assert facts["conversion"] == states["converted"]
            assert facts["lapse"] + facts["just_gone"] == states["lapsed"]
            places = {r.joined_ts: r for r in self.services.tables.requests.queue(self.sku, active_only=False)}
            for i, request in enumerate(self.requests):
                current = places[request.joined_ts]
                row = rows.get(i)
                if row is None:
                    assert current.state == "waiting"
                    continue
                assert current.state == ROW_TO_REQUEST.get(row["state"], "waiting")
                assert current.offer_token == (row["token_id"] if row["state"] in ("offered", "held") else None)
                assert current.last_notified_restock == self.restock_item.restock_id
            assert self.services.tables.catalog.waiting(self.sku) == sum(
                1 for r in places.values() if r.state in ACTIVE
            )

    return HoldsMachine


def test_random_interleavings_keep_promises_four_to_six(services: Services) -> None:
    run_state_machine_as_test(
        machine_for(services),
        settings=settings(
            max_examples=15,
            stateful_step_count=20,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
