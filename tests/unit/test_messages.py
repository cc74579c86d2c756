"""The jobs queue's messages: today's bodies of every kind parse and are written back byte for byte, a malformed
body is refused as invalid_job (so the notifier raises and it ends in the DLQ), and each type has its one handler."""

from __future__ import annotations

import typing

import pytest

from chalicelib.config import settings_from_env
from chalicelib.errors import BadRequest
from chalicelib.queue.messages import (
    ConfirmEmail,
    Job,
    LapseReminder,
    Message,
    MessageBus,
    OptinLink,
    ResubscribeProof,
    SwitchCode,
    parse,
    to_body,
)
from chalicelib.wiring import Services
from infra.stages import stage_env

RESTOCK = "rs_0123456789abcdef01234567"
STAMP = "2026-01-01T00:00:00.000000Z#01234567"
KEY = "c#" + "a" * 64

# Bodies exactly as messages already in a deployed queue carry them.
TODAYS_BODIES: list[tuple[str, Message]] = [
    (
        f'{{"kind":"restock","restock_id":"{RESTOCK}","restock_ts":"{STAMP}","sku":"CHAIR"}}',
        Job("CHAIR", RESTOCK, STAMP),
    ),
    (
        f'{{"kind":"topup","restock_id":"{RESTOCK}","restock_ts":"{STAMP}","sku":"CHAIR"}}',
        Job("CHAIR", RESTOCK, STAMP, kind="topup"),
    ),
    (
        f'{{"after":"{STAMP}","kind":"continue","passed":42,"restock_id":"{RESTOCK}","restock_ts":"{STAMP}",'
        '"sku":"CHAIR"}',
        Job("CHAIR", RESTOCK, STAMP, kind="continue", after=STAMP, passed=42),
    ),
    (f'{{"kind":"confirm","sku":"CHAIR","joined_ts":"{STAMP}"}}', ConfirmEmail("CHAIR", STAMP)),
    (f'{{"kind":"code","key":"{KEY}","nonce":"n0nce"}}', SwitchCode(KEY, "n0nce")),
    ('{"kind":"resubscribe","key":"rs#' + "b" * 32 + '"}', ResubscribeProof("rs#" + "b" * 32)),
    (f'{{"kind":"optin","key":"{KEY}","nonce":"n0nce"}}', OptinLink(KEY, "n0nce")),
    ('{"kind":"reminder","token_id":"tok_abc"}', LapseReminder("tok_abc")),
]


@pytest.mark.parametrize(("body", "message"), TODAYS_BODIES, ids=lambda v: type(v).__name__)
def test_todays_bodies_parse_and_are_written_back_byte_for_byte(body: str, message: Message) -> None:
    assert parse(body) == message
    assert to_body(message) == body


def test_a_job_body_without_a_kind_is_a_restocks_first_pass() -> None:
    body = f'{{"restock_id":"{RESTOCK}","restock_ts":"{STAMP}","sku":"CHAIR"}}'
    assert parse(body) == Job("CHAIR", RESTOCK, STAMP)


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[1, 2]",
        '"a string"',
        "[" * 100_000,
        '{"kind":"teleport","sku":"CHAIR"}',
        '{"kind":["restock"]}',
        '{"kind":"restock","sku":"CHAIR","restock_id":"rs_1"}',
        '{"kind":"topup","sku":"","restock_id":"rs_1","restock_ts":"t"}',
        '{"kind":"confirm","sku":"CHAIR"}',
        '{"kind":"code","key":"k","nonce":7}',
        '{"kind":"resubscribe"}',
        '{"kind":"optin","key":"k","nonce":""}',
        '{"kind":"reminder"}',
    ],
)
def test_a_malformed_body_is_refused_as_an_invalid_job(body: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse(body)
    assert refused.value.code == "invalid_job"


def test_the_bus_hands_each_message_to_its_own_handler_with_the_time_left() -> None:
    seen: list[tuple[str, object, int]] = []
    bus = MessageBus(
        handlers={
            kind: (lambda m, left, name=kind.__name__: seen.append((name, m, left())) or name)
            for kind in typing.get_args(Message)
        }
    )
    for _, message in TODAYS_BODIES:
        assert bus.handle(message, lambda: 1234) == type(message).__name__
    assert seen == [(type(m).__name__, m, 1234) for _, m in TODAYS_BODIES]


def test_the_services_have_a_handler_for_every_kind_of_message() -> None:
    services = Services(settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": "eu-west-2"}))
    assert set(services.message_bus.handlers) == set(typing.get_args(Message))
