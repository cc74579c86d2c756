"""Opting back in from a tap: one proof message to the contact itself, and only its link or code re-adds them."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from botocore.exceptions import ClientError
from chalice.local import LambdaEventConverter
from chalice.test import Client

from chalicelib.contacts import contact_key
from chalicelib.messages.senders import EmailSender, Senders, SmsSender
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_restock
from tests.notices import NOT_AUTHORISED, OPTED_OUT, FlakySns, drain, email_outbox, sms_outbox, verify_sender
from tests.support import queued_bodies, rebuilt

JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
ADA = "ada@example.com"
NUMBER = "+447400123458"


def tap(client: Client, sku: str, contact: str, channel: str = "email", lang: str = "en") -> Any:
    body = json.dumps({"sku": sku, "channel": channel, "contact": contact, "lang": lang})
    return client.http.post("/notify-me", headers=JSON, body=body)


def opt_out(services: Services, contact: str, source: str) -> str:
    key = contact_key(contact, services.hash_key)
    services.tables.optout.add(key, source, services.clock.now())
    return key


def resubscribe_path(message: Any) -> str:
    found = re.search(r'href="http://127\.0\.0\.1:8000(/resubscribe/[0-9a-f]{32})"', str(message.body))
    assert found, message.body
    return found.group(1)


def send_code(client: Client, sku: str, code: str, number: str = NUMBER) -> Any:
    body = json.dumps({"sku": sku, "channel": "sms", "contact": number, "code": code, "lang": "en"})
    return client.http.post("/notify-me/code", headers=JSON, body=body)


def texted_code() -> str:
    [(_, text)] = sms_outbox()[-1:]
    found = re.search(r"\b(\d{6})\b", text)
    assert found, text
    return found.group(1)


def test_the_answer_is_the_same_for_new_repeat_and_unsubscribed_contacts(
    client: Client, services: Services, chair: str
) -> None:
    opt_out(services, "bea@example.com", "unsubscribe")
    answers = [tap(client, chair, c) for c in (ADA, ADA, "bea@example.com")]
    assert len({(a.status_code, a.body) for a in answers}) == 1, [a.body for a in answers]
    assert answers[0].status_code == 202


def test_an_unsubscribed_address_that_taps_gets_one_email_whose_button_resubscribes_and_joins(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    verify_sender(services)
    key = opt_out(services, ADA, "unsubscribe")
    tap(client, chair, ADA, lang="de")
    assert list(services.tables.requests.queue(chair)) == [], "no place before the proof comes back"
    drain(services)
    [email] = email_outbox()
    body = str(email.body)
    assert "abgemeldet" in body and 'lang="de"' in body, "in the tap's language, saying they unsubscribed"
    path = resubscribe_path(email)

    opened = client.http.get(path)  # a mail scanner opening the link changes nothing
    assert opened.status_code == 200 and '<form method="post"' in opened.body.decode()
    assert services.tables.optout.get(key) is not None
    assert client.http.post(path, headers={**FORM, "Origin": "https://evil.example"}, body="").status_code == 403

    done = client.http.post(path, headers=FORM, body="")
    assert done.status_code == 200 and "Sie sind wieder auf der Liste" in done.body.decode()
    assert services.tables.optout.get(key) is None, "the opt-out is lifted"
    [place] = services.tables.requests.queue(chair)
    assert place.contact == ADA and not place.unconfirmed, "the link proved the address: no second confirmation"
    assert place.lang == "de"
    assert client.http.post(path, headers=FORM, body="").status_code == 410, "single use"
    kinds = [f["kind"] for f in services.tables.audit.for_sku(chair)]
    assert {"resubscribe_asked", "resubscribe_sent", "resubscribed"} <= set(kinds)

    # Back on the list like anyone else: a restock tells them.
    job = add_restock(services, chair, 1, clock.now())
    services.tables.catalog.upsert(chair, {"open_restock_ts": job.restock_ts})
    services.jobs.send(job)
    drain(services)
    assert len(email_outbox()) == 2
    assert services.tables.requests.get(chair, place.joined_ts).state == "offered"


def test_one_proof_message_a_day_and_three_a_month(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    verify_sender(services)
    opt_out(services, ADA, "unsubscribe")
    tap(client, chair, ADA)
    clock.advance(3600)
    tap(client, chair, ADA)
    drain(services)
    assert len(email_outbox()) == 1, "a second tap inside 24 hours sends nothing more"
    for _ in range(3):
        clock.advance(86400 + 1)
        tap(client, chair, ADA)
        drain(services)
    assert len(email_outbox()) == 3, "at most three in 30 days"
    clock.advance(27 * 86400)
    tap(client, chair, ADA)
    drain(services)
    assert len(email_outbox()) == 4, "the oldest of the three left the 30-day window"


def test_a_bounced_or_complaining_address_gets_nothing(client: Client, services: Services, chair: str) -> None:
    verify_sender(services)
    opt_out(services, ADA, "bounce")
    opt_out(services, "bea@example.com", "complaint")
    assert tap(client, chair, ADA).status_code == 202
    assert tap(client, chair, "bea@example.com").status_code == 202
    assert queued_bodies(services) == [], "nothing owed"
    assert email_outbox() == []
    refused = [f for f in services.tables.audit.for_sku(chair) if f["kind"] == "resubscribe_refused"]
    assert sorted(f["reason"] for f in refused) == ["bounce", "complaint"]


def test_a_bounce_that_arrives_before_the_send_stops_it(client: Client, services: Services, chair: str) -> None:
    verify_sender(services)
    key = opt_out(services, ADA, "unsubscribe")
    tap(client, chair, ADA)
    services.tables.optout.remove(key)
    services.tables.optout.add(key, "bounce", services.clock.now())
    drain(services)
    assert email_outbox() == []


def test_the_sweep_sends_a_message_a_crash_left_owed_once(services: Services, clock: FixedClock, chair: str) -> None:
    verify_sender(services)
    opt_out(services, ADA, "unsubscribe")
    services.capture.capture("ip", {"sku": chair, "channel": "email", "contact": ADA})
    assert len(queued_bodies(services)) == 1  # the message is lost: taken off the queue, never handled
    clock.advance(30)
    assert services.sweep.run()["proofs_requeued"] == 0, "not before a minute"
    clock.advance(90)
    assert services.sweep.run()["proofs_requeued"] == 1
    assert services.sweep.run()["proofs_requeued"] == 1, "still owed until the notifier takes it"
    drain(services)
    assert len(email_outbox()) == 1, "two messages for one owed email send it once"
    assert services.sweep.run()["proofs_requeued"] == 0


def test_a_number_that_replied_stop_gets_a_code_that_resubscribes_it(
    client: Client, services: Services, chair: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = opt_out(services, NUMBER, "stop")
    assert tap(client, chair, NUMBER, channel="sms").status_code == 202
    drain(services)
    [(to, text)] = sms_outbox()
    assert to == NUMBER and text.startswith(services.settings.shop_name[:10])
    code = texted_code()
    wrong = "000000" if code != "000000" else "111111"
    refused = send_code(client, chair, wrong)
    assert refused.status_code == 400 and refused.json_body["error"] == "wrong_code"
    assert services.tables.optout.get(key) is not None
    done = send_code(client, chair, code)
    assert done.status_code == 200 and done.json_body == {"status": "resubscribed"}
    assert services.tables.optout.get(key) is None
    [place] = services.tables.requests.queue(chair)
    assert place.contact == NUMBER
    # Another address, whose own tries are not spent (this one made its two: CODE_TRIES_PER_SOURCE).
    from_address(monkeypatch, "192.0.2.45")
    assert send_code(client, chair, code).status_code == 400, "a code works once"


def test_no_code_a_wrong_code_and_an_expired_code_answer_alike(
    client: Client, services: Services, clock: FixedClock, chair: str
) -> None:
    never = send_code(client, chair, "123456", "+447400123459")
    opt_out(services, NUMBER, "unsubscribe")
    tap(client, chair, NUMBER, channel="sms")
    drain(services)
    code = texted_code()
    clock.advance(16 * 60)
    expired = send_code(client, chair, code)
    assert (never.status_code, never.body) == (expired.status_code, expired.body)
    assert expired.json_body["error"] == "wrong_code"


def from_address(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    """Later requests through the test client come from `address` (API Gateway's sourceIp)."""
    monkeypatch.setattr(LambdaEventConverter, "LOCAL_SOURCE_IP", address)


def test_too_many_tries_are_refused_whether_or_not_a_code_was_sent(
    client: Client, services: Services, chair: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opt_out(services, NUMBER, "unsubscribe")
    tap(client, chair, NUMBER, channel="sms")
    drain(services)
    code = texted_code()
    wrong = "000000" if code != "000000" else "111111"
    for number in (NUMBER, "+447400123459"):
        answers = []
        # Guesses from several addresses, two each (CODE_TRIES_PER_SOURCE), till the number's own cap.
        for i in range(6):
            from_address(monkeypatch, f"198.51.100.{10 * len(number) + i // 2}")
            answers.append(send_code(client, chair, wrong, number).status_code)
        assert answers == [400] * 5 + [429], number
    from_address(monkeypatch, "192.0.2.99")
    assert send_code(client, chair, code).status_code == 429, "the right code after the tries are spent"


def test_one_address_runs_out_of_guesses_before_the_persons_code_does(
    client: Client, services: Services, clock: FixedClock, chair: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = opt_out(services, NUMBER, "stop")
    tap(client, chair, NUMBER, channel="sms")
    drain(services)
    code = texted_code()
    wrong = "000000" if code != "000000" else "111111"
    from_address(monkeypatch, "203.0.113.66")
    # One stranger guessing: two tries in this window, then refused without spending the number's or the code's.
    answers = [send_code(client, chair, wrong).status_code for _ in range(5)]
    assert answers == [400, 400, 429, 429, 429]
    # A window later, still within the code's life: two more at most, so one address makes 4 tries, never the 5
    # that would use the code up.
    clock.advance(15 * 60 - clock.now() % (15 * 60))
    assert [send_code(client, chair, wrong).status_code for _ in range(3)] == [400, 400, 429]
    # The person, on their own phone, still gets back on the list with the code they were sent.
    from_address(monkeypatch, "192.0.2.44")
    done = send_code(client, chair, code)
    assert done.status_code == 200 and done.json_body == {"status": "resubscribed"}
    assert services.tables.optout.get(key) is None


def test_one_address_cannot_spread_its_guesses_over_many_numbers(
    client: Client, services: Services, chair: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_address(monkeypatch, "203.0.113.67")
    numbers = [f"+4474001234{i:02d}" for i in range(6)]
    answers = [send_code(client, chair, "123456", n).status_code for n in numbers for _ in range(2)]
    assert answers == [400] * 10 + [429] * 2


def test_a_form_without_script_gets_a_page(client: Client, services: Services, chair: str) -> None:
    opt_out(services, NUMBER, "unsubscribe")
    tap(client, chair, NUMBER, channel="sms")
    drain(services)
    body = f"sku={chair}&channel=sms&contact=%2B447400123458&code={texted_code()}"
    origin = services.settings.public_base_url.rstrip("/")
    done = client.http.post("/notify-me/code", headers={**FORM, "Origin": origin}, body=body)
    assert done.status_code == 200 and "text/html" in done.headers["Content-Type"]
    assert "back on the list" in done.body.decode()


def test_unknown_and_malformed_links_get_honest_pages(client: Client) -> None:
    assert client.http.get("/resubscribe/" + "0" * 32).status_code == 404
    assert client.http.get("/resubscribe/not-an-id").status_code == 404
    assert client.http.post("/resubscribe/" + "0" * 32, headers=FORM, body="").status_code == 404


def _sending_through(services: Services, sns: Any) -> Services:
    senders = Senders(
        SmsSender(sns),
        EmailSender(services.aws.sesv2, services.settings.ses_from),
        sms_per_second=1000,
        email_per_second=1000,
        sleep=lambda _s: None,
    )
    return rebuilt(services, senders=senders)


def test_a_number_opted_out_at_sns_gets_nothing_and_is_not_asked_again(services: Services, chair: str) -> None:
    opt_out(services, NUMBER, "stop")
    # SNS refuses a number that replied STOP (OptedOutException, botocore's SNS service model).
    flaky = FlakySns(services.aws.sns, {NUMBER: 99}, OPTED_OUT)
    shop = _sending_through(services, flaky)
    shop.capture.capture("ip", {"sku": chair, "channel": "sms", "contact": NUMBER})
    drain(shop)
    assert flaky.refused == [NUMBER], "asked once"
    assert sms_outbox() == []
    shop.clock.advance(120)  # type: ignore[attr-defined]
    assert shop.sweep.run()["proofs_requeued"] == 0, "a refused recipient is not owed again"
    [fact] = [f for f in shop.tables.audit.for_sku(chair) if f["kind"] == "resubscribe_refused"]
    assert fact["reason"] == "provider"


def test_a_send_that_provably_failed_stays_owed(services: Services, clock: FixedClock, chair: str) -> None:
    opt_out(services, NUMBER, "unsubscribe")
    flaky = FlakySns(services.aws.sns, {NUMBER: 1}, NOT_AUTHORISED)
    shop = _sending_through(services, flaky)
    shop.capture.capture("ip", {"sku": chair, "channel": "sms", "contact": NUMBER})
    [body] = queued_bodies(shop)
    with pytest.raises(ClientError):
        shop.proofs.handle(str(json.loads(body)["key"]))
    clock.advance(120)
    assert shop.sweep.run()["proofs_requeued"] == 1, "given back: owed again"
    drain(shop)
    assert len(sms_outbox()) == 1


def test_the_notifier_entry_point_sends_it_and_no_log_line_names_the_contact(
    client: Client, services: Services, clock: FixedClock, chair: str, caplog: pytest.LogCaptureFixture
) -> None:
    verify_sender(services)
    caplog.set_level(logging.DEBUG, logger="chalicelib")
    opt_out(services, ADA, "unsubscribe")
    opt_out(services, NUMBER, "stop")
    tap(client, chair, ADA)
    tap(client, chair, NUMBER, channel="sms")
    tap(client, chair, ADA)  # inside the cap: logged without the contact
    for body in queued_bodies(services):
        client.lambda_.invoke("notifier", client.events.generate_sqs_event([body], queue_name="bisn-jobs"))
    assert len(email_outbox()) == 1 and len(sms_outbox()) == 1
    send_code(client, chair, "000000")
    assert any("within its contact's cap" in r.getMessage() for r in caplog.records), "the capped tap was logged"
    written = "\n".join(r.getMessage() + json.dumps(getattr(r, "__dict__", {}), default=str) for r in caplog.records)
    assert "ada@" not in written.lower() and "7400123458" not in written


@pytest.mark.parametrize("mailbox_too", [False, True], ids=["old_key_only", "both_keys"])
def test_an_address_opted_out_before_mailbox_matching_opts_back_in_and_is_suppressed_under_neither_key(
    client: Client, services: Services, chair: str, mailbox_too: bool
) -> None:
    verify_sender(services)
    typed = "Ada.Lovelace+shop@gmail.com"
    # Stored under the address lower-cased whole, as every opt-out was before mailboxes were matched; the mailbox may
    # have opted out since as well.
    old_key = opt_out(services, "ada.lovelace+shop@gmail.com", "unsubscribe")
    mailbox = contact_key("adalovelace@gmail.com", services.hash_key)
    if mailbox_too:
        opt_out(services, "adalovelace@gmail.com", "admin")
    assert tap(client, chair, typed).status_code == 202
    assert list(services.tables.requests.queue(chair)) == []
    drain(services)
    [email] = email_outbox()
    assert typed in email.destinations["ToAddresses"]
    done = client.http.post(resubscribe_path(email), headers=FORM, body="")
    assert done.status_code == 200, done.body
    assert services.tables.optout.get(old_key) is None
    assert services.tables.optout.get(mailbox) is None
    [place] = services.tables.requests.queue(chair)
    assert (place.contact, place.contact_key) == (typed, mailbox)
    # Asking again finds the place, not an opt-out: no second proof message.
    assert tap(client, chair, typed).status_code == 202
    drain(services)
    assert len(email_outbox()) == 1
