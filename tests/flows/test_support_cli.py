"""The `bisn` support command line, driven through click's CliRunner against the emulator."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from chalice.test import Client
from click.testing import CliRunner, Result

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.queue.messages import Job, to_body
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from infra.stages import stage_env
from support import cli as support_cli
from support.cli import cli
from tests.builders import add_restock, join_request
from tests.notices import verify_sender
from tests.scenes import scene
from tests.support import CHAIR, REGION


def bisn(services: Services, *args: str, input: str | None = None) -> Result:
    result = CliRunner().invoke(cli, list(args), obj={"desk": services.desk, "emulated": True}, input=input)
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
    services.tables.catalog.upsert("LAMP", {"name": "Brass lamp"})
    assert ok(services, "queue", "LAMP") == "Nobody is waiting for LAMP.\n"
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


def test_a_tagged_gmail_place_stored_before_mailbox_matching_is_exported_and_forgotten(
    services: Services, clock: FixedClock, chair: str
) -> None:
    # Stored, as every email place was before mailboxes were matched, under the address lower-cased whole.
    old = join_request(services, chair, "ada.lovelace+shop@gmail.com", clock.now())
    data = json.loads(ok(services, "export", "Ada.Lovelace+shop@gmail.com"))
    assert [r["joined_ts"] for r in data["requests"]] == [old.joined_ts]
    out = ok(services, "forget", "Ada.Lovelace+shop@gmail.com", "--yes")
    assert "Erased 1 request(s) and 1 uniqueness item(s)" in out
    assert services.tables.requests.get(chair, old.joined_ts) is None
    assert json.loads(ok(services, "export", "Ada.Lovelace+shop@gmail.com"))["requests"] == []


def test_forget_while_holding_is_refused_clearly(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=1)
    s.tap(s.offer(0))
    result = bisn(services, "forget", "+447400100000", "--yes")
    assert result.exit_code == 1
    assert "nothing was erased" in result.output and "(still_holding)" in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["explain", "CHAIR-WALNUT", "not a number"],
        ["explain", "not-a-number", "CHAIR-WALNUT"],
        ["optout", "add", "Ada Lovelace"],
        ["export", "12"],
    ],
)
def test_something_that_is_not_a_contact_is_named_as_such(services: Services, chair: str, command: list[str]) -> None:
    result = bisn(services, *command)
    assert result.exit_code == 2, result.output
    assert "is not an email or a phone number" in result.stderr


def test_a_number_still_unreadable_as_a_phone_is_the_desks_clear_error(services: Services, chair: str) -> None:
    result = bisn(services, "explain", "CHAIR-WALNUT", "000000000000000000")
    assert result.exit_code == 1
    assert "Error:" in result.output and "invalid_phone" in result.output


def test_explain_takes_contact_and_sku_in_either_order_and_a_phone_in_words(
    services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=2)
    services.notifier.handle(Job(s.sku, s.restock.restock_id, s.restock.restock_ts), lambda: 60_000)
    expected = ok(services, "explain", s.sku, "+447400100001")
    assert "Place: 2 in line, waiting" in expected
    assert ok(services, "explain", "+447400100001", s.sku) == expected
    assert ok(services, "explain", "+44", "7400", "100001", s.sku) == expected  # typed unquoted
    assert ok(services, "explain", s.sku, "07400", "100001") == expected
    # Without a SKU: every line they stand in, here the one.
    assert ok(services, "explain", "07400", "100001") == expected
    assert json.loads(ok(services, "explain", "07400 100001", "--json"))[0]["sku"] == s.sku
    assert ok(services, "explain", "+447400100099") == "They have no place and no history on any list.\n"


def test_an_unknown_sku_suggests_the_one_meant_whatever_its_case(services: Services, chair: str) -> None:
    lower = bisn(services, "queue", chair.lower())
    assert lower.exit_code == 1
    assert lower.stderr == f"Error: no product with SKU {chair.lower()}; did you mean {chair}? (unknown_sku)\n"
    typo = bisn(services, "explain", "chair-wanlut", "+447400100000")
    assert f"did you mean {chair}?" in typo.stderr


def test_queue_shows_unconfirmed_email_places_apart_and_says_why(
    services: Services, clock: FixedClock, chair: str
) -> None:
    join_request(services, chair, "+447400100000", clock.now())
    clock.advance(1)
    pending = join_request(services, chair, "dee@example.com", clock.now())
    services.tables.requests.table.update_item(
        Key={"sku": chair, "joined_ts": pending.joined_ts},
        UpdateExpression="SET unconfirmed = :yes",
        ExpressionAttributeValues={":yes": True},
    )
    clock.advance(1)
    join_request(services, chair, "+447400100002", clock.now())
    out = ok(services, "queue", chair)
    confirmed, note = out.split("\n\n")
    assert [line.split()[0] for line in confirmed.splitlines()[1:]] == ["1", "3"]
    assert note.startswith("Not confirmed yet") and "someone lower in line can be told first" in note
    assert note.splitlines()[-1].split()[:4] == ["2", pending.joined_ts[:19] + "Z", "waiting", "email"]
    rows = json.loads(ok(services, "queue", chair, "--json"))
    assert [(r["position"], r["confirmed"]) for r in rows] == [(1, True), (2, False), (3, True)]


def test_explain_shows_an_opt_back_in_after_the_opt_out(services: Services, clock: FixedClock, chair: str) -> None:
    join_request(services, chair, "dee@example.com", clock.now())
    clock.advance(60)
    ok(services, "optout", "add", "dee@example.com")
    clock.advance(60)
    desk = services.desk
    _, key = desk.contact("dee@example.com")
    services.tables.optout.remove(key)
    services.tables.audit.record(chair, "resubscribed", clock.now(), contact_key=key, channel="email")
    out = ok(services, "explain", "dee@example.com", chair)
    history = [line for line in out.splitlines() if line.startswith("History:")]
    assert history[0].endswith("left the list (admin)")
    assert history[1].endswith("opted back in (the proof sent to their contact came back)")
    assert "Opted out: no" in out


def test_explain_shows_an_unsubscribe_taken_back_with_undo(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    ada = join_request(services, chair, "ada@example.com", clock.now())
    clock.advance(60)
    join_request(services, chair, "+447400100001", clock.now())
    clock.advance(60)
    url = f"/unsubscribe/{services.tokens.unsubscribe(ada.contact_key)}"
    done = client.http.post(url, headers=form, body="List-Unsubscribe=One-Click")
    found = re.search(r'<form method="post" action="(undo/[^"]+)">', done.body.decode())
    assert done.status_code == 200 and found, done.body.decode()
    # A unit comes back while Ada is unsubscribed: it goes to the one person left in line.
    clock.advance(60)
    verify_sender(services)
    services.notifier.handle(add_restock(services, chair, 1, clock.now()), lambda: 60_000)
    clock.advance(60)
    undone = client.http.post(f"/unsubscribe/{found.group(1)}", headers=form, body="")
    assert undone.status_code == 200 and "Your unsubscribe is undone" in undone.body.decode()

    out = ok(services, "explain", "ada@example.com", chair)

    history = [line.removeprefix("History: ") for line in out.splitlines() if line.startswith("History:")]
    assert [h.split(" ", 1)[1] for h in history] == [
        "left the list (unsubscribe)",
        "took back their unsubscribe (the Undo on its done page): back at the end of the line",
    ]
    assert "Opted out: no" in out
    assert "Place: 2 in line, waiting" in out
    assert "not_on_list — not on the list then: left (unsubscribe) before it and joined again after" in out
    assert "behind_cap" not in out


def test_dlq_redrive_reports_how_it_moved_them(services: Services) -> None:
    dlq = services.aws.sqs.get_queue_url(QueueName=services.settings.dlq_name)["QueueUrl"]
    services.aws.sqs.send_message(QueueUrl=dlq, MessageBody=to_body(Job("CHAIR", "rs_1", "t#1")))
    out = ok(services, "dlq", "redrive")
    assert "1 job(s) were dead-lettered." in out
    assert "Method: receive-and-resend" in out
    assert "does not implement StartMessageMoveTask" in out


def test_json_goes_before_or_after_the_subcommand(services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    before = json.loads(ok(services, "--json", "queue", s.sku))
    after = json.loads(ok(services, "queue", s.sku, "--json"))
    assert before == after and [r["position"] for r in after] == [1, 2]
    assert json.loads(ok(services, "optout", "add", "+447400100000", "--json"))["newly"] is True
    assert json.loads(ok(services, "dlq", "redrive", "--json"))["method"] == "receive-and-resend"


@pytest.mark.parametrize("command", [["queue", "NO-SUCH-SKU"], ["explain", "NO-SUCH-SKU", "+447400100000"]])
def test_an_unknown_sku_says_so(services: Services, command: list[str]) -> None:
    result = bisn(services, *command)
    assert result.exit_code == 1
    assert result.stderr == "Error: no product with SKU NO-SUCH-SKU (unknown_sku)\n"
    assert result.stdout == ""


class Terminal(io.StringIO):
    """A stderr that says it is a terminal, as an interactive shell's is."""

    def isatty(self) -> bool:
        return True


def test_a_long_list_shows_progress_on_a_terminal_and_keeps_stdout_clean(
    services: Services, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(support_cli, "LIVE_FROM", 2)  # 100 places otherwise
    s = scene(services, clock, units=1, people=3)
    terminal = Terminal()
    obj = {"desk": services.desk, "emulated": True, "progress_stream": terminal}
    result = CliRunner().invoke(cli, ["queue", s.sku, "--limit", "0", "--json"], obj=obj)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 3
    # One line rewritten in place, then ended so the shell prompt starts on its own line.
    assert terminal.getvalue() == f"\rRead {s.sku}'s list: 2\rRead {s.sku}'s list: 3\n"
    # A list shorter than that comes without any.
    quiet = Terminal()
    short = CliRunner().invoke(cli, ["queue", s.sku, "--limit", "1"], obj={**obj, "progress_stream": quiet})
    assert short.exit_code == 0, short.output
    assert quiet.getvalue() == ""


def test_redrive_counts_its_progress_off_a_terminal(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support_cli, "REDRIVE_PROGRESS_EVERY", 10)  # a line per 100 jobs otherwise
    dlq = services.aws.sqs.get_queue_url(QueueName=services.settings.dlq_name)["QueueUrl"]
    for batch in range(3):
        entries = [{"Id": str(i), "MessageBody": to_body(Job("CHAIR", f"rs_{batch}_{i}", "t#1"))} for i in range(9)]
        services.aws.sqs.send_message_batch(QueueUrl=dlq, Entries=entries)
    result = bisn(services, "dlq", "redrive")
    assert result.exit_code == 0, result.output
    # A line each time the count passes a multiple of ten (batches are at most ten, so 27 jobs pass two).
    counts = [int(line.removeprefix("Moved: ")) for line in result.stderr.splitlines()]
    assert len(counts) == 2 and 10 <= counts[0] < 20 <= counts[1] <= 27
    assert "Moved 27 job(s)" in result.stdout
    assert services.aws.sqs.receive_message(QueueUrl=dlq).get("Messages", []) == []


# --- the surroundings failing: one line on stderr, exit code 1, no traceback


def test_a_missing_table_is_one_line(session: boto3.session.Session, env: dict[str, str], clock: FixedClock) -> None:
    # Another stage's names: the emulator has none of its tables, as when a stage was never deployed.
    bare = Services(
        settings_from_env({**env, "NAME_PREFIX": "never-deployed"}),
        aws=Aws(REGION, session=session),
        clock=clock,
        model=FakeBedrock(),
    )
    result = CliRunner().invoke(cli, ["queue", "CHAIR-WALNUT"], obj={"desk": bare.desk, "emulated": True})
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: GetItem: Requested resource not found")
    assert line.endswith(
        "(ResourceNotFoundException): is this stage deployed in this region (or, locally, is `make dev` running)?"
    )
    assert "Traceback" not in result.output


def test_no_credentials_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    # Nothing else may supply credentials: no files, no instance metadata.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    result = CliRunner().invoke(cli, ["--stage", "dev", "--region", "eu-west-2", "queue", "CHAIR-WALNUT"])
    assert result.exit_code == 1
    using, error = result.stderr.splitlines()
    assert using == "Using AWS (stage dev)"
    assert error.startswith("Error: no AWS credentials: set AWS_PROFILE")


def test_the_emulator_not_running_is_one_line_from_the_installed_command(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    env = {**os.environ, "AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard"}
    env.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "support", "--endpoint-url", closed, "demand"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        f"Using {closed} (--endpoint-url)\n"
        f"Error: cannot reach AWS at {closed} (EndpointConnectionError): is the emulator running? "
        "Start it with `make dev`\n"
    )


def test_stage_settings_come_from_the_chalice_config() -> None:
    assert stage_env("prod")["NAME_PREFIX"] == "bisn"
    assert stage_env("dev")["TOKEN_KEY_SECRET_ID"] == "bisn-dev/token-key"
    with pytest.raises(Exception, match="no stage"):
        stage_env("nope")


# --- redrive on AWS: SQS's own move task, followed with --wait. The emulator has no StartMessageMoveTask, so
# botocore's Stubber answers, checking each request and answer against botocore's SQS service model; the
# answers' fields and statuses are those of the SQS API reference (StartMessageMoveTask, ListMessageMoveTasks,
# ListMessageMoveTasksResultEntry).

DLQ_URL = "https://sqs.eu-west-2.amazonaws.com/111122223333/bisn-jobs-dlq"
JOBS_URL = "https://sqs.eu-west-2.amazonaws.com/111122223333/bisn-jobs"
DLQ_ARN = "arn:aws:sqs:eu-west-2:111122223333:bisn-jobs-dlq"
JOBS_ARN = "arn:aws:sqs:eu-west-2:111122223333:bisn-jobs"


def stubbed_sqs(services: Services, task_states: list[dict[str, Any]]) -> tuple[Any, Stubber]:
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    stub = Stubber(sqs)
    names = services.settings
    stub.add_response("get_queue_url", {"QueueUrl": DLQ_URL}, {"QueueName": names.dlq_name})
    stub.add_response("get_queue_url", {"QueueUrl": JOBS_URL}, {"QueueName": names.jobs_queue_name})
    stub.add_response(
        "get_queue_attributes",
        {"Attributes": {"QueueArn": DLQ_ARN, "ApproximateNumberOfMessages": "250"}},
        {"QueueUrl": DLQ_URL, "AttributeNames": ["QueueArn", "ApproximateNumberOfMessages"]},
    )
    stub.add_response(
        "get_queue_attributes",
        {"Attributes": {"QueueArn": JOBS_ARN}},
        {"QueueUrl": JOBS_URL, "AttributeNames": ["QueueArn"]},
    )
    stub.add_response(
        "start_message_move_task", {"TaskHandle": "task-1"}, {"SourceArn": DLQ_ARN, "DestinationArn": JOBS_ARN}
    )
    for state in task_states:
        entry = {"TaskHandle": "task-1", "SourceArn": DLQ_ARN, "DestinationArn": JOBS_ARN, **state}
        stub.add_response("list_message_move_tasks", {"Results": [entry]}, {"SourceArn": DLQ_ARN, "MaxResults": 10})
    stub.activate()
    return sqs, stub


def test_following_a_move_task_reports_its_progress_until_it_ends(services: Services) -> None:
    states = [
        {"Status": "RUNNING", "ApproximateNumberOfMessagesMoved": 0, "ApproximateNumberOfMessagesToMove": 250},
        {"Status": "RUNNING", "ApproximateNumberOfMessagesMoved": 120, "ApproximateNumberOfMessagesToMove": 250},
        {"Status": "COMPLETED", "ApproximateNumberOfMessagesMoved": 250, "ApproximateNumberOfMessagesToMove": 250},
    ]
    sqs, stub = stubbed_sqs(services, states)
    desk = replace(services.desk, sqs=sqs)
    heard: list[int] = []
    naps: list[float] = []
    started = desk.dlq_redrive(emulated=False)
    assert (started.method, started.task_handle, started.waiting_before) == ("StartMessageMoveTask", "task-1", 250)
    done = desk.follow_move_task(started, heard.append, sleep=naps.append, poll_s=2.0)
    assert (done.status, done.moved, heard, naps) == ("COMPLETED", 250, [120, 130], [2.0, 2.0])
    stub.assert_no_pending_responses()


def test_redrive_wait_shows_how_a_failed_move_task_ended(services: Services) -> None:
    failed = {"Status": "FAILED", "ApproximateNumberOfMessagesMoved": 40, "FailureReason": "AccessDenied"}
    sqs, stub = stubbed_sqs(services, [failed])
    obj = {"desk": replace(services.desk, sqs=sqs), "emulated": False}
    result = CliRunner().invoke(cli, ["dlq", "redrive", "--wait"], obj=obj)
    assert result.exit_code == 0, result.output
    assert "Method: StartMessageMoveTask\nMoved 40 job(s) to " in result.stdout
    assert "Status: FAILED\nThe move task ended FAILED: AccessDenied" in result.stdout
    stub.assert_no_pending_responses()
