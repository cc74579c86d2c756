"""`bisn` finds the local stack where `make dev` says it runs, and reads its arguments as staff type them."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import click
import pytest

from devstack.runner import LocalStack, parse_args
from support import stack_state
from support.cli import check_contact, endpoint_for, split_contact_and_sku
from support.stack_state import StackState

CATALOGUE = {"CHAIR-WALNUT", "12345"}


def known(word: str) -> bool:
    return word in CATALOGUE


def running(moto: str = "http://127.0.0.1:4610") -> StackState:
    return StackState(pid=os.getpid(), moto=moto, api="http://127.0.0.1:8010", console="http://127.0.0.1:8011")


@pytest.fixture(autouse=True)
def no_endpoint_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("DEVSTACK_MOTO_PORT", raising=False)


def test_the_local_stage_uses_the_running_stacks_emulator(tmp_path: Path) -> None:
    state = tmp_path / "stack.json"
    stack_state.write(running(), state)
    chosen = endpoint_for("local", None, state)
    assert chosen.url == "http://127.0.0.1:4610"
    assert chosen.source.startswith("the running stack, ")


def test_a_state_file_left_by_a_stack_that_died_is_not_believed(tmp_path: Path) -> None:
    state = tmp_path / "stack.json"
    stack_state.write(running(), state)
    assert stack_state.read(state, alive=lambda pid: False) is None
    (tmp_path / "broken.json").write_text("{not json")
    assert stack_state.read(tmp_path / "broken.json") is None
    assert endpoint_for("local", None, tmp_path / "missing.json").url == "http://127.0.0.1:4566"


def test_the_option_and_the_environment_win_over_the_state_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "stack.json"
    stack_state.write(running(), state)
    assert endpoint_for("local", "http://127.0.0.1:9999", state).url == "http://127.0.0.1:9999"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:7777")
    assert endpoint_for("local", None, state).source == "AWS_ENDPOINT_URL"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert endpoint_for("prod", None, state).url is None  # a deployed stage talks to AWS itself
    monkeypatch.setenv("DEVSTACK_MOTO_PORT", "4620")
    assert endpoint_for("local", None, tmp_path / "missing.json").url == "http://127.0.0.1:4620"


def test_only_the_stack_that_wrote_the_state_file_removes_it(tmp_path: Path) -> None:
    state = tmp_path / "stack.json"
    stack_state.write(running(), state)
    stack_state.remove(os.getpid() + 1, state)
    assert state.exists()
    stack_state.remove(os.getpid(), state)
    assert not state.exists()


def test_the_start_banner_lists_the_allowed_origins_and_the_state_names_the_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CORS_ORIGINS", "https://theme.walnut-and-wool.test")
    stack = LocalStack(parse_args(["--moto-port", "4610", "--console-port", "8011"]), threading.Event())
    banner = stack.banner()
    for origin in ("http://127.0.0.1:8011", "http://localhost:8011", "https://theme.walnut-and-wool.test"):
        assert f"\n    {origin}\n" in banner
    assert "The widget may tap from these origins only" in banner
    state = stack.state()
    assert (state.pid, state.moto, state.console) == (os.getpid(), "http://127.0.0.1:4610", "http://127.0.0.1:8011")
    assert "https://theme.walnut-and-wool.test" in state.cors_origins


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["CHAIR-WALNUT", "07400 100001"], ("07400 100001", "CHAIR-WALNUT")),
        (["07400 100001", "CHAIR-WALNUT"], ("07400 100001", "CHAIR-WALNUT")),
        (["+44", "7400", "100001", "CHAIR-WALNUT"], ("+44 7400 100001", "CHAIR-WALNUT")),
        (["CHAIR-WALNUT", "(07400)", "100-001"], ("(07400) 100-001", "CHAIR-WALNUT")),
        (["Dee@Example.com"], ("Dee@Example.com", None)),
        (["WW-MUG", "dee@example.com"], ("dee@example.com", "WW-MUG")),
        (["07400", "100001"], ("07400 100001", None)),
        (["12345", "07400100001"], ("07400100001", "12345")),  # an all-digit SKU the catalogue knows
        (["07400100001", "12345"], ("07400100001", "12345")),
        (["NO-SUCH-SKU", "+447400100000"], ("+447400100000", "NO-SUCH-SKU")),
    ],
)
def test_explain_reads_contact_and_sku_in_either_order(words: list[str], expected: tuple[str, str | None]) -> None:
    assert split_contact_and_sku(words, known) == expected


@pytest.mark.parametrize("raw", ["not a number", "Ada Lovelace", "12", "CHAIR-WALNUT", ""])
def test_what_is_neither_an_email_nor_a_phone_number_is_named_as_such(raw: str) -> None:
    with pytest.raises(click.UsageError, match="is not an email or a phone number"):
        check_contact(raw)
    with pytest.raises(click.UsageError, match="is not an email or a phone number"):
        split_contact_and_sku(["CHAIR-WALNUT", raw] if raw else ["CHAIR-WALNUT"], known)
