"""The support desk explains every reason the notifier can pass someone over."""

from __future__ import annotations

from chalicelib.notifier import SkipReason
from chalicelib.support_desk import OTHER, SKIP_VERDICTS, _verdict_for_skip


def test_every_skip_reason_has_a_verdict() -> None:
    assert set(SKIP_VERDICTS) == set(SkipReason)


def test_verdicts_are_read_from_the_stored_reason() -> None:
    for reason in SkipReason:
        assert _verdict_for_skip(str(reason)) == SKIP_VERDICTS[reason]


def test_an_unknown_reason_is_shown_as_written() -> None:
    assert _verdict_for_skip("gone_fishing") == (OTHER, "skipped: gone_fishing")
