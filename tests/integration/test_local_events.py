"""Events out on the local stack: the stack reads the audit table's stream as the deployed trigger does and delivers
the events queue to the shop's receiver, which verifies each delivery with the Standard Webhooks library."""

from __future__ import annotations

from chalicelib.config import settings_from_env
from chalicelib.wiring import Services
from devstack.fake_model import FakeBedrock
from devstack.stack import ConsoleClock, InProcessApi, Stack
from tests.builders import join_request
from tests.receiver import SECRET, URL, Receiver

SKU = "CHAIR-WALNUT"


def test_a_confirmed_place_reaches_the_receiver_once(services: Services, env: dict[str, str], chair: str) -> None:
    chosen = {"OUTBOUND_EVENTS": "confirmed", "OUTBOUND_WEBHOOK_URL": URL, "OUTBOUND_WEBHOOK_SECRET": SECRET}
    receiver = Receiver()
    s = Services(
        settings_from_env({**env, **chosen}),
        aws=services.aws,
        clock=services.clock,
        model=FakeBedrock(),
        transport=receiver,
    )
    stack = Stack(s, ConsoleClock(s.clock), InProcessApi(None))
    now = s.clock.now()
    place = join_request(s, SKU, "ada@example.com", now)
    confirmed = s.tables.audit.record(SKU, "confirmed", now, contact_key=place.contact_key)
    s.tables.audit.record(SKU, "notice_skipped", now, contact_key=place.contact_key)  # not an event fact

    assert stack.run_events() == {"queued": 1, "sent": 1, "failed": 0, "available": True}
    [(headers, document)] = receiver.taken  # Receiver.send verified the signature with the standardwebhooks library
    assert document == {"type": "bisn.confirmed", "timestamp": confirmed["ts"].split("#")[0], "data": {"sku": SKU}}
    assert headers["webhook-id"].startswith("evt_")

    assert stack.run_events() == {"queued": 0, "sent": 0, "failed": 0, "available": True}
    assert len(receiver.taken) == 1
