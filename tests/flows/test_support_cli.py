"""The `bisn` support command line, driven through click's CliRunner against the emulator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from chalicelib.jobs import Job
from chalicelib.support_desk import desk_for
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from infra.stages import stage_env
from support.cli import cli
from tests.scenes import scene
from tests.support import CHAIR


def bisn(services: Services, *args: str, input: str | None = None) -> Result:
    result = CliRunner().invoke(cli, list(args), obj={"desk": desk_for(services), "emulated": True}, input=input)
    return result


def ok(services: Services, *args: str, **kwargs: Any) -> str:
    result = bisn(services, *args, **kwargs)
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def test_explain_prints_place_and_each_restock(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    services.notifier.handle(Job(s.sku, s.restock.restock_id, s.restock.restock_ts), lambda: 60_000)
    out = ok(services, "explain", s.sku, "07400 100001")
    assert "Place: 2 in line, waiting" in out
    assert "behind_cap — behind the cap: 1 unit(s), 1 notice(s) went to people ahead" in out
    data = json.loads(ok(services, "--json", "explain", s.sku, "+447400100000"))
    assert data["restocks"][0]["verdict"] == "told"
    assert "+447400100000" not in json.dumps(data)  # masked


def test_queue_and_demand(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    services.tables.catalog.sync_product(s.sku, dict(CHAIR), now=clock.now(), created=False, out_of_stock=True)
    out = ok(services, "queue", s.sku)
    first = out.splitlines()[1].split()
    assert (first[0], first[2], first[3]) == ("1", "waiting", "sms")
    assert "+4474•••••001" in out and "+447400100001" not in out
    assert ok(services, "queue", "NOBODY") == "Nobody is waiting for NOBODY.\n"
    demand = ok(services, "demand")
    assert demand.splitlines()[1].split()[:2] == ["2", s.sku]


def test_optout_add_then_remove(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    assert ok(services, "optout", "add", "07400 100000") == f"Opted out.\nLeft {s.sku} (left)\n"
    assert "Already opted out" in ok(services, "optout", "add", "+447400100000")
    assert "Opt-out lifted." in ok(services, "optout", "remove", "+447400100000")
    assert "There was no opt-out" in ok(services, "optout", "remove", "+447400100000")


def test_export_is_json(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    data = json.loads(ok(services, "export", "+447400100000"))
    assert data["contact"] == "+447400100000"
    assert data["requests"][0]["sku"] == s.sku


def test_forget_asks_first_then_erases(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    declined = bisn(services, "forget", "+447400100000", input="n\n")
    assert declined.exit_code == 1
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts) is not None
    out = ok(services, "forget", "+447400100000", "--yes")
    assert "Erased 1 request(s) and 1 uniqueness item(s)" in out
    assert "Took their keyed hash off 1 audit fact(s)" in out  # the fact their leaving wrote
    assert services.tables.requests.get(s.sku, s.requests[0].joined_ts) is None


def test_forget_while_holding_is_refused_clearly(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    s.tap(s.offer(0))
    result = bisn(services, "forget", "+447400100000", "--yes")
    assert result.exit_code == 1
    assert "nothing was erased" in result.output and "(still_holding)" in result.output


def test_a_contact_that_cannot_be_read_is_a_clear_error(services: Services) -> None:
    result = bisn(services, "explain", "CHAIR-WALNUT", "not a number")
    assert result.exit_code == 1
    assert "Error:" in result.output and "invalid_phone" in result.output


def test_dlq_redrive_reports_how_it_moved_them(services: Services) -> None:
    dlq = services.aws.sqs.get_queue_url(QueueName=services.settings.dlq_name)["QueueUrl"]
    services.aws.sqs.send_message(QueueUrl=dlq, MessageBody=Job("CHAIR", "rs_1", "t#1").to_json())
    out = ok(services, "dlq", "redrive")
    assert "1 job(s) were dead-lettered." in out
    assert "Method: receive-and-resend" in out
    assert "does not implement StartMessageMoveTask" in out


def test_stage_settings_come_from_the_chalice_config() -> None:
    assert stage_env("prod")["NAME_PREFIX"] == "bisn"
    assert stage_env("dev")["TOKEN_KEY_SECRET_ID"] == "bisn-dev/token-key"
    with pytest.raises(Exception, match="no stage"):
        stage_env("nope")
