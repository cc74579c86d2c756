"""A Notify-me body that cannot be taken is a 400 with its code and a message, refused before any AWS call.

The app's parsing and the capture service run as POST /notify-me runs them, on a boto3 session that fails the
test on any AWS call, so nothing can have been read or stored. One end-to-end case of each kind is in
tests/flows/test_capture_errors.py and tests/integration/test_sms_pumping.py.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.errors import DomainError
from chalicelib.tables.base import CONDITION_FAILED as FAILED
from chalicelib.tables.base import TRANSACTION_CONFLICT, Reason, TransactionCancelled
from chalicelib.web import MAX_BODY_BYTES, parse_body
from chalicelib.web.errors import error_status
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from infra.stages import stage_env
from tests.support import REGION

GOOD = {"sku": "CHAIR-WALNUT", "channel": "sms", "contact": "07400 123456"}

BAD_BODIES = [
    ("{not json", "invalid_json"),
    ("", "invalid_body"),
    ("[1, 2]", "invalid_body"),
    ('"just a string"', "invalid_body"),
    (json.dumps({**GOOD, "sku": None}), "missing_field"),
    (json.dumps({**GOOD, "contact": 447400123456}), "invalid_field"),
    (json.dumps({**GOOD, "channel": "pigeon"}), "unsupported_channel"),
    (json.dumps({**GOOD, "contact": "12"}), "invalid_phone"),
    (json.dumps({**GOOD, "channel": "email", "contact": "ada@"}), "invalid_email"),
    (json.dumps({**GOOD, "contact": "ada@example.com"}), "contact_channel_mismatch"),
    (json.dumps({**GOOD, "name": "x" * 500}), "field_too_long"),
    (json.dumps({**GOOD, "lang": ["de"]}), "invalid_field"),
    (json.dumps({**GOOD, "lang": 7}), "invalid_field"),
]

NOT_A_MOBILE_HERE = [
    ("+33 6 12 34 56 78", "sms_country_not_allowed"),  # a French mobile; the shop sells in GB
    ("+1 415 555 2671", "sms_country_not_allowed"),
    ("020 7946 0000", "sms_number_type"),  # a London landline
    ("0800 123 4567", "sms_number_type"),  # toll-free
    ("0909 879 0000", "sms_number_type"),  # premium rate
    ("0843 123 4567", "sms_number_type"),  # shared cost / service number
    ("+881 6 1234 5678", "sms_number_type"),  # satellite (Iridium)
    ("070 1234 5678", "sms_number_type"),  # personal (forwarding) number
]


def no_aws_call(model: Any, **_: Any) -> None:
    raise AssertionError(f"a refused tap reached AWS: {model.service_model.service_name}.{model.name}")


@pytest.fixture(scope="module")
def services() -> Services:
    """The local stage's services on a session that refuses every AWS call."""
    session = boto3.session.Session(region_name=REGION, aws_access_key_id="unit", aws_secret_access_key="unit")
    session.events.register("before-call", no_aws_call)
    env = {**stage_env("local"), "AWS_DEFAULT_REGION": REGION}
    return Services(
        settings_from_env(env), aws=Aws(REGION, session=session), clock=FixedClock(1_700_000_000.0), model=FakeBedrock()
    )


def refusal(services: Services, body: str) -> DomainError:
    with pytest.raises(DomainError) as raised:
        data = parse_body(body.encode(), "application/json", MAX_BODY_BYTES)
        services.capture.capture("203.0.113.1", data)
    return raised.value


@pytest.mark.parametrize(("body", "code"), BAD_BODIES)
def test_bad_input_gets_400_with_a_code_and_nothing_is_stored(services: Services, body: str, code: str) -> None:
    refused = refusal(services, body)
    assert error_status(refused) == 400
    assert refused.code == code
    assert refused.message


@pytest.mark.parametrize(("contact", "code"), NOT_A_MOBILE_HERE)
def test_sms_to_another_country_or_a_non_mobile_number_is_refused_with_400(
    services: Services, contact: str, code: str
) -> None:
    refused = refusal(services, json.dumps({"sku": "CHAIR-WALNUT", "channel": "sms", "contact": contact}))
    assert error_status(refused) == 400
    assert refused.code == code


def test_a_good_tap_goes_on_to_aws_so_every_refusal_above_came_before_any_call(services: Services) -> None:
    with pytest.raises(AssertionError, match="reached AWS"):
        services.capture.capture("203.0.113.1", dict(GOOD))


def cancelled(*parts: tuple[str, str, dict[str, Any] | None]) -> TransactionCancelled:
    """A cancellation of a transaction whose named items answered (name, code, old image), one item each."""
    return TransactionCancelled(
        [Reason(code, old) for _, code, old in parts], {name: [i] for i, (name, _, _) in enumerate(parts)}
    )


REFUSALS = [
    # An email tap's transaction holds no number's counters: a conflict alone is still "try again".
    ([("rate", "None", None), ("product", "None", None), ("unique", "None", None)], "busy", TRANSACTION_CONFLICT),
    ([("rate", FAILED, None), ("product", FAILED, None)], "rate_limited", None),
    ([("rate", "None", None), ("product", FAILED, None)], "unknown_sku", None),
    ([("product", FAILED, {"sku": "CHAIR-WALNUT#w03", "discontinued": True})], "discontinued", None),
    ([("product", "None", None), ("places", FAILED, None)], "too_many_places", None),
]


@pytest.mark.parametrize(("parts", "code", "also"), REFUSALS)
def test_a_refused_place_is_read_as_one_error(
    services: Services, parts: list[tuple[str, str, dict[str, Any] | None]], code: str, also: str | None
) -> None:
    if also is not None:
        parts = [*parts, ("other", also, None)]
    refusal = services.capture.refusal_of(cancelled(*parts), "CHAIR-WALNUT")
    assert refusal is not None and refusal.code == code


def test_a_part_the_caller_answers_itself_is_no_error(services: Services) -> None:
    # The uniqueness item (a repeat tap) or an opt-out check: answered as an outcome, never as an error.
    parts = [("product", "None", None), ("unique", FAILED, {"sku": "CHAIR-WALNUT", "joined_ts": "U#k"})]
    assert services.capture.refusal_of(cancelled(*parts), "CHAIR-WALNUT") is None
