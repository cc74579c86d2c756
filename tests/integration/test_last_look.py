"""Invariant 3 at the moment of sending: a notice held back by its channel's rate limit, or by a throttle's back-off,
never goes to someone whose opt-out (or leave) completed meanwhile (chalicelib/messages/optout_gate.py).

The senders here run at the stage's own per-function rate (SMS_PER_SECOND and EMAIL_PER_SECOND over
NOTIFIER_MAX_CONCURRENCY), so a batch of 25 takes seconds to go out, as it does in Lambda.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from chalicelib.clock import SystemClock
from chalicelib.config import NOTIFIER_MAX_CONCURRENCY
from chalicelib.messages.senders import EmailSender, Senders, SmsSender, per_function_rate
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from tests.builders import add_request, add_restock, joined, key_of
from tests.notices import email_outbox, plenty, selling_the_chair, told, waiting_by_sms

SKU = "CHAIR-WALNUT"


@pytest.fixture
def shop(services: Services) -> Services:
    return selling_the_chair(services, SKU)


class Provider:
    """A provider's client that runs `during` inside its `at`-th call (the shopper acts while that message is at the
    provider), and throttles the numbers in `throttle` once each."""

    def __init__(
        self, real: Any, method: str, *, at: int, during: Callable[[], None], throttle: set[str] = frozenset()
    ):
        self.real = real
        self.method = method
        self.at = at
        self.during = during
        self.throttle = set(throttle)
        self.calls = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name != self.method:
            return getattr(self.real, name)
        return self._call

    def _call(self, **kwargs: Any) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            now = self.calls == self.at
            number = kwargs.get("PhoneNumber", "")
            throttled = number in self.throttle
            self.throttle.discard(number)
        if now:
            self.during()
        if throttled:
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, self.method)
        return dict(getattr(self.real, self.method)(**kwargs))


def at_stage_rates(shop: Services, *, sns: Any = None, sesv2: Any = None) -> Services:
    """The shop with senders at the stage's own per-function rates, through these providers."""
    settings = shop.settings
    senders = Senders(
        SmsSender(sns or shop.aws.sns),
        EmailSender(sesv2 or shop.aws.sesv2, settings.ses_from),
        sms_per_second=per_function_rate(settings.sms_per_second, None, NOTIFIER_MAX_CONCURRENCY),
        email_per_second=per_function_rate(settings.email_per_second, None, NOTIFIER_MAX_CONCURRENCY),
    )
    # The wall clock: the notifier ages its looks on the app's clock, and here seconds pass as the rate limit waits.
    return Services(settings, aws=shop.aws, clock=SystemClock(), model=FakeBedrock(), senders=senders)


def withdrawn_as(shop: Services, contact: str) -> list[str]:
    key = key_of(shop, contact)
    return [
        str(f["reason"])
        for f in shop.tables.audit.for_sku(SKU)
        if f["kind"] == "notice_skipped" and f.get("contact_key") == key
    ]


def test_an_sms_held_by_the_rate_limit_never_goes_to_someone_who_opted_out_meanwhile(
    shop: Services, clock: FixedClock
) -> None:
    numbers = waiting_by_sms(shop, SKU, clock.now(), 25)
    last = numbers[-1]

    def opt_out_to_completion() -> None:
        shop.optouts.opt_out(key_of(shop, last), "unsubscribe")
        assert shop.tables.optout.suppressed_among([key_of(shop, last)])

    shop = at_stage_rates(shop, sns=Provider(shop.aws.sns, "publish", at=2, during=opt_out_to_completion))
    job = add_restock(shop, SKU, 25, clock.now())
    shop.notifier.handle(job, plenty)

    assert last not in told(), "told after their opt-out completed"
    assert sorted(told()) == sorted(numbers[:-1])
    assert withdrawn_as(shop, last) == ["opted_out"]
    restock = shop.tables.restocks.get(SKU, job.restock_ts)
    assert restock is not None and restock.units_offerable == 1, "their unit is offerable again, once"


def test_an_email_held_by_the_rate_limit_never_goes_to_someone_who_opted_out_meanwhile(
    shop: Services, clock: FixedClock
) -> None:
    now = clock.now()
    addresses = [f"shopper{i:02d}@example.com" for i in range(25)]
    for i, address in enumerate(addresses):
        add_request(shop, SKU, address, joined(i, now), now)
    last = addresses[-1]

    def opt_out_to_completion() -> None:
        shop.optouts.opt_out(key_of(shop, last), "unsubscribe")

    provider = Provider(shop.aws.sesv2, "send_email", at=2, during=opt_out_to_completion)
    shop = at_stage_rates(shop, sesv2=provider)
    job = add_restock(shop, SKU, 25, now)
    shop.notifier.handle(job, plenty)

    sent_to = [to for message in email_outbox() for to in message.destinations["ToAddresses"]]
    assert last not in sent_to, "emailed after their opt-out completed"
    assert sorted(sent_to) == sorted(addresses[:-1])
    assert withdrawn_as(shop, last) == ["opted_out"]


def test_a_retry_after_a_throttle_back_off_never_goes_to_someone_who_opted_out_during_it(
    shop: Services, clock: FixedClock
) -> None:
    numbers = waiting_by_sms(shop, SKU, clock.now(), 3)
    last = numbers[-1]

    def opt_out_to_completion() -> None:
        shop.optouts.opt_out(key_of(shop, last), "stop")

    # The third SMS is throttled on its first try (its back-off is 0.4 s), and its person sends STOP meanwhile.
    provider = Provider(shop.aws.sns, "publish", at=3, during=opt_out_to_completion, throttle={last})
    shop = at_stage_rates(shop, sns=provider)
    job = add_restock(shop, SKU, 3, clock.now())
    shop.notifier.handle(job, plenty)

    assert sorted(told()) == sorted(numbers[:2])  # two senders: either may go first
    assert provider.calls == 3, "the retry after the back-off looked again and did not call the provider"
    assert withdrawn_as(shop, last) == ["opted_out"]


def test_an_sms_held_by_the_rate_limit_never_goes_to_someone_who_left_the_list_meanwhile(
    shop: Services, clock: FixedClock
) -> None:
    numbers = waiting_by_sms(shop, SKU, clock.now(), 25)
    last = numbers[-1]

    def leave() -> None:
        place = next((p for p in shop.tables.requests.queue(SKU) if p.contact == last), None)
        assert place is not None
        shop.exits.leave(place, reason="manage")

    shop = at_stage_rates(shop, sns=Provider(shop.aws.sns, "publish", at=2, during=leave))
    job = add_restock(shop, SKU, 25, clock.now())
    shop.notifier.handle(job, plenty)

    assert last not in told(), "told after they left the list"
    assert withdrawn_as(shop, last) == ["not_waiting"]
