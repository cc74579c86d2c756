"""What goes to SNS and SES for one notice, how sends are paced, and how metrics are written."""

from __future__ import annotations

import json
import threading
from unittest.mock import Mock

import boto3
import pytest
from moto import mock_aws

from chalicelib.config import ConfigError
from chalicelib.messages.senders import EMAIL, SMS, EmailSender, Notice, RateLimiter, Senders, SmsSender
from chalicelib.metrics import Metrics, MetricsFactory, skip_metric

REGION = "eu-west-2"
SES_FROM = "Walnut & Wool <hello@walnut-and-wool.test>"


def client_double(service: str, method: str, response: dict) -> Mock:
    """A client double with the real client's interface (no AWS call is made)."""
    real = boto3.session.Session(region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x").client(service)
    double = Mock(spec=real)
    getattr(double, method).return_value = response
    return double


def email_notice() -> Notice:
    return Notice(
        channel=EMAIL,
        to="ada@example.com",
        subject="It's back in stock",
        text="Hello,\n\nIt's back: https://n.example/reserve/abc",
        html='<p>It\'s back: <a href="https://n.example/reserve/abc">this link</a></p>',
        unsubscribe_url="https://n.example/unsubscribe/def",
    )


def test_an_sms_is_published_to_the_number_as_transactional() -> None:
    sns = client_double("sns", "publish", {"MessageId": "sms-1"})
    notice = Notice(channel=SMS, to="+447400123456", text="Back: https://n.example/reserve/abc\nReply STOP to opt out")
    assert SmsSender(sns).send(notice) == "sms-1"
    sns.publish.assert_called_once_with(
        PhoneNumber="+447400123456",
        Message=notice.text,
        MessageAttributes={"AWS.SNS.SMS.SMSType": {"DataType": "String", "StringValue": "Transactional"}},
    )


def test_an_sms_goes_from_the_stages_origination_number_when_it_has_one() -> None:
    # The attribute's name and form: the SNS Developer Guide, "Publishing to a mobile phone" (message attributes).
    published: list[dict[str, str]] = []

    def wire(params: dict, **_: object) -> None:
        published.append(dict(params["body"]))

    with mock_aws():
        sns = boto3.client("sns", region_name=REGION)
        sns.meta.events.register("before-call.sns.Publish", wire)
        notice = Notice(channel=SMS, to="+447400123456", text="Back: https://n.example/reserve/abc")
        assert SmsSender(sns, "+447700900123").send(notice)
        assert SmsSender(sns).send(notice)
    with_number, without = published
    attributes = {
        with_number[f"MessageAttributes.entry.{i}.Name"]: with_number[f"MessageAttributes.entry.{i}.Value.StringValue"]
        for i in (1, 2)
    }
    assert attributes == {"AWS.SNS.SMS.SMSType": "Transactional", "AWS.MM.SMS.OriginationNumber": "+447700900123"}
    assert with_number["PhoneNumber"] == "+447400123456"
    assert "MessageAttributes.entry.2.Name" not in without


def test_an_email_has_text_and_html_parts_and_one_click_unsubscribe_headers() -> None:
    ses = client_double("sesv2", "send_email", {"MessageId": "email-1"})
    assert EmailSender(ses, SES_FROM).send(email_notice()) == "email-1"
    [call] = ses.send_email.call_args_list
    assert call.kwargs["FromEmailAddress"] == SES_FROM
    assert call.kwargs["Destination"] == {"ToAddresses": ["ada@example.com"]}
    simple = call.kwargs["Content"]["Simple"]
    assert simple["Subject"]["Data"] == "It's back in stock"
    assert simple["Body"]["Text"]["Data"].startswith("Hello,")
    assert simple["Body"]["Html"]["Data"].startswith("<p>")
    assert simple["Headers"] == [
        {"Name": "List-Unsubscribe", "Value": "<https://n.example/unsubscribe/def>"},
        {"Name": "List-Unsubscribe-Post", "Value": "List-Unsubscribe=One-Click"},
    ]


def test_the_email_request_is_valid_for_the_ses_v2_api() -> None:
    # moto ignores Headers, so check the request against botocore's own model of SendEmail instead.
    from botocore.validate import ParamValidator

    model = boto3.session.Session(region_name=REGION).client("sesv2").meta.service_model
    shape = model.operation_model("SendEmail").input_shape
    for sender in (EmailSender(None, SES_FROM), EmailSender(None, SES_FROM, "bisn-feedback")):
        report = ParamValidator().validate(sender.request(email_notice()), shape)
        assert not report.has_errors(), report.generate_report()


def test_an_email_goes_out_under_the_stages_configuration_set() -> None:
    # SendEmail's ConfigurationSetName (botocore's sesv2 model): the set whose event destination reports bounces.
    assert (
        EmailSender(None, SES_FROM, "bisn-feedback").request(email_notice())["ConfigurationSetName"] == "bisn-feedback"
    )
    assert "ConfigurationSetName" not in EmailSender(None, SES_FROM).request(email_notice())


def test_senders_route_by_channel_and_refuse_an_unknown_one() -> None:
    sns = client_double("sns", "publish", {"MessageId": "sms-2"})
    ses = client_double("sesv2", "send_email", {"MessageId": "email-2"})
    senders = Senders(SmsSender(sns), EmailSender(ses, SES_FROM), sms_per_second=100, email_per_second=100)
    assert senders.send(Notice(channel=SMS, to="+447400123456", text="x")) == "sms-2"
    assert senders.send(email_notice()) == "email-2"
    with pytest.raises(ValueError):
        senders.send(Notice(channel="fax", to="x", text="x"))


class FakeTime:
    """Monotonic time that only moves when someone sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


def test_the_rate_limit_allows_a_burst_then_paces_sends() -> None:
    time = FakeTime()
    limiter = RateLimiter(5, monotonic=time.monotonic, sleep=time.sleep)
    waits = [limiter.acquire() for _ in range(15)]
    assert waits[:5] == [0.0] * 5
    assert time.now == pytest.approx(2.0)  # ten more sends at five a second
    assert all(w == pytest.approx(0.2) for w in waits[5:])


def test_the_rate_limit_is_shared_by_concurrent_senders() -> None:
    time = FakeTime()
    limiter = RateLimiter(10, monotonic=time.monotonic, sleep=lambda s: None)
    threads = [threading.Thread(target=limiter.acquire) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Time never moved, so 10 came from the burst and 20 booked slots up to two seconds ahead.
    assert limiter.acquire() == pytest.approx(2.1)


def test_a_rate_of_zero_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError):
        RateLimiter(0)


def test_metrics_are_one_emf_document_per_invocation(capsys: pytest.CaptureFixture[str]) -> None:
    metrics = MetricsFactory("BackInStock", enabled=True).start()
    metrics.count("NoticesSent")
    metrics.count("NoticesSent")
    metrics.count(skip_metric("opted_out"))
    metrics.gauge("UnitsTotal", 4)
    metrics.metadata("restock_id", "rs_1")
    assert metrics.flush() == {"NoticesSent": 2, "NoticeSkippedOptedOut": 1, "UnitsTotal": 4}
    [line] = capsys.readouterr().out.splitlines()
    document = json.loads(line)
    names = {m["Name"] for m in document["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert names == {"NoticesSent", "NoticeSkippedOptedOut", "UnitsTotal"}
    assert document["NoticesSent"] == [2.0] and document["restock_id"] == "rs_1"
    assert metrics.totals == {}


def test_disabled_metrics_print_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    metrics = Metrics("BackInStock", "bisn", enabled=False)
    metrics.count("NoticesSent")
    assert metrics.flush() == {"NoticesSent": 1}
    assert capsys.readouterr().out == ""


# --- Sending exactly once: what is retried, what is "maybe sent", and the last look at the suppression list.


def sms_notice() -> Notice:
    return Notice(channel=SMS, to="+447400123456", text="It's back: https://n.example/reserve/abc")


def senders_over(sns: Mock) -> tuple[Senders, list[float]]:
    slept: list[float] = []
    ses = client_double("sesv2", "send_email", {"MessageId": "e"})
    senders = Senders(
        SmsSender(sns), EmailSender(ses, SES_FROM), sms_per_second=1000, email_per_second=1000, sleep=slept.append
    )
    return senders, slept


def test_a_throttled_or_unreachable_provider_is_asked_again_because_nothing_was_sent() -> None:
    from botocore.exceptions import ClientError, EndpointConnectionError

    sns = client_double("sns", "publish", {"MessageId": "sms-1"})
    sns.publish.side_effect = [
        ClientError({"Error": {"Code": "Throttling", "Message": "slow down"}}, "Publish"),
        EndpointConnectionError(endpoint_url="https://sns.eu-west-2.amazonaws.com/"),
        {"MessageId": "sms-1"},
    ]
    senders, slept = senders_over(sns)
    assert senders.send(sms_notice()) == "sms-1"
    assert sns.publish.call_count == 3
    assert len(slept) == 2


def test_a_lost_answer_is_never_sent_again_and_says_it_may_have_gone() -> None:
    from botocore.exceptions import ConnectionClosedError, ReadTimeoutError

    from chalicelib.messages.senders import error_code, maybe_sent

    for lost in (
        ReadTimeoutError(endpoint_url="https://sns.eu-west-2.amazonaws.com/"),
        ConnectionClosedError(endpoint_url="https://sns.eu-west-2.amazonaws.com/"),
    ):
        sns = client_double("sns", "publish", {"MessageId": "sms-1"})
        sns.publish.side_effect = lost
        senders, _ = senders_over(sns)
        with pytest.raises(type(lost)):
            senders.send(sms_notice())
        assert sns.publish.call_count == 1
        assert maybe_sent(lost)
        assert error_code(lost) == type(lost).__name__  # no answer, so no provider code: never a crash


def test_a_refusal_is_not_retried_here_and_is_not_maybe_sent() -> None:
    from botocore.exceptions import ClientError

    from chalicelib.messages.senders import error_code, maybe_sent

    refused = ClientError({"Error": {"Code": "InvalidParameter", "Message": "bad number"}}, "Publish")
    sns = client_double("sns", "publish", {"MessageId": "sms-1"})
    sns.publish.side_effect = refused
    senders, _ = senders_over(sns)
    with pytest.raises(ClientError):
        senders.send(sms_notice())
    assert sns.publish.call_count == 1
    assert not maybe_sent(refused)
    assert error_code(refused) == "InvalidParameter"


def test_the_check_just_before_the_call_can_stop_the_send() -> None:
    sns = client_double("sns", "publish", {"MessageId": "sms-1"})
    senders, _ = senders_over(sns)

    def opted_out() -> None:
        raise LookupError("suppressed")

    with pytest.raises(LookupError):
        senders.send(sms_notice(), just_before=opted_out)
    sns.publish.assert_not_called()


def test_the_sending_clients_never_retry_on_their_own() -> None:
    from chalicelib.aws import Aws

    aws = Aws(
        REGION,
        session=boto3.session.Session(region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"),
        sends_concurrency=16,
    )
    for client in (aws.sns_sends, aws.sesv2_sends):
        assert client.meta.config.retries["total_max_attempts"] == 1
        # botocore's client-side rate limiting slows the container down when the provider throttles.
        assert client.meta.config.retries["mode"] == "adaptive"
        # One pooled connection per send thread (botocore's default pool holds 10).
        assert client.meta.config.max_pool_connections == 16


# Error answers in the shapes botocore raises them: the codes are those of SES v2 SendEmail and SNS Publish in
# botocore's service models (botocore/data/sesv2/*/service-2.json, botocore/data/sns/*/service-2.json).
def refusal(code: str, message: str = "refused", operation: str = "SendEmail") -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


def test_refusals_of_one_recipient_are_told_apart_from_our_accounts_and_our_requests() -> None:
    from chalicelib.messages.senders import refused_recipient

    # SES v2 SendEmail: MessageRejected refuses this message to its recipient (an invalid address, or in the
    # sandbox one not verified: SES API reference, SendEmail).
    assert refused_recipient(EMAIL, refusal("MessageRejected", "Email address is not verified."))
    # The rest are about the account, the sender identity or the request: they would refuse anyone.
    for code in (
        "MailFromDomainNotVerifiedException",
        "AccountSuspendedException",
        "SendingPausedException",
        "LimitExceededException",
        "NotFoundException",
        "BadRequestException",
        "TooManyRequestsException",
    ):
        assert not refused_recipient(EMAIL, refusal(code)), code
    # SNS Publish: OptedOut (OptedOutException), and an InvalidParameter naming the number (the message SNS
    # gives a number it cannot send to).
    publish = "Publish"
    assert refused_recipient(SMS, refusal("OptedOut", "Phone number is opted out", publish))
    bad_number = "Invalid parameter: PhoneNumber Reason: +1555 is not valid to publish to"
    assert refused_recipient(SMS, refusal("InvalidParameter", bad_number, publish))
    assert refused_recipient(SMS, refusal("ParameterValueInvalid", bad_number, publish))
    # An invalid parameter that is not the number is our request's fault; authorisation and KMS our account's.
    assert not refused_recipient(SMS, refusal("InvalidParameter", "Invalid parameter: MessageAttributes", publish))
    for code in ("AuthorizationError", "KMSDisabled", "EndpointDisabled", "Throttled", "InternalError"):
        assert not refused_recipient(SMS, refusal(code, "PhoneNumber", publish)), code
    # No answer at all is never a refusal.
    from botocore.exceptions import EndpointConnectionError

    assert not refused_recipient(SMS, EndpointConnectionError(endpoint_url="https://sns.eu-west-2.amazonaws.com/"))


def test_a_throttle_is_back_pressure_asked_again_longer_than_other_answers() -> None:
    from chalicelib.messages.senders import THROTTLE_ATTEMPTS

    sns = client_double("sns", "publish", {"MessageId": "sms-1"})
    # SNS Publish's ThrottledException has the code "Throttled" (botocore's SNS service model).
    throttle = refusal("Throttled", "Rate exceeded", "Publish")
    sns.publish.side_effect = [throttle] * (THROTTLE_ATTEMPTS - 1) + [{"MessageId": "sms-1"}]
    senders, slept = senders_over(sns)
    assert senders.send(sms_notice()) == "sms-1"
    assert sns.publish.call_count == THROTTLE_ATTEMPTS
    assert slept == [0.4, 0.8, 1.6, 3.2]  # waiting longer each time


def test_a_provider_failure_on_its_side_is_asked_again_as_nothing_was_sent() -> None:
    from chalicelib.messages.senders import ATTEMPTS

    sns = client_double("sns", "publish", {"MessageId": "sms-1"})
    # SNS Publish's InternalErrorException: code "InternalError", HTTP 500 (botocore's SNS service model).
    sns.publish.side_effect = [refusal("InternalError", "oops", "Publish")] * ATTEMPTS
    senders, slept = senders_over(sns)
    with pytest.raises(Exception, match="InternalError"):
        senders.send(sms_notice())
    assert sns.publish.call_count == ATTEMPTS
    assert len(slept) == ATTEMPTS - 1


def test_a_functions_share_of_the_send_rate_is_the_accounts_divided_among_the_notifiers() -> None:
    from chalicelib.messages.senders import per_function_rate

    # The stage's rate is the ceiling; SES's MaxSendRate lowers it when lower; the notifiers share it.
    assert per_function_rate(14.0, 50.0, 2) == 7.0
    assert per_function_rate(14.0, 1.0, 2) == 0.5  # a sandboxed account: SES allows 1 per second
    assert per_function_rate(20.0, None, 4) == 5.0  # SMS: SNS has no quota to read
    assert per_function_rate(14.0, 0.0, 2) == 7.0  # an unreadable quota leaves the stage's rate alone
    with pytest.raises(ConfigError):
        per_function_rate(0.0, 10.0, 2)
    with pytest.raises(ConfigError):
        per_function_rate(14.0, 10.0, 0)


def test_the_accounts_ses_rate_is_read_from_get_account_or_left_to_the_stage() -> None:
    from chalicelib.messages.senders import ses_max_send_rate

    # GetAccount's SendQuota (SES v2 API reference, GetAccount; botocore's sesv2 model, shape SendQuota).
    ses = client_double(
        "sesv2", "get_account", {"SendQuota": {"Max24HourSend": 50000.0, "MaxSendRate": 14.0, "SentLast24Hours": 3.0}}
    )
    assert ses_max_send_rate(ses) == 14.0
    ses.get_account.side_effect = refusal("TooManyRequestsException", "slow down", "GetAccount")
    assert ses_max_send_rate(ses) is None
    assert ses_max_send_rate(client_double("sesv2", "get_account", {})) is None


def test_the_notifier_trigger_is_capped_at_the_concurrency_the_rates_are_divided_by() -> None:
    import app
    from chalicelib.config import NOTIFIER_MAX_CONCURRENCY

    assert 2 <= NOTIFIER_MAX_CONCURRENCY <= 1000  # SQS event source mappings allow 2 to 1000
    [notifier] = [h for h in app.app.event_sources if getattr(h, "name", "") == "notifier"]
    assert notifier.maximum_concurrency == NOTIFIER_MAX_CONCURRENCY


def test_a_batch_reads_the_suppression_list_once_when_its_first_send_is_due() -> None:
    from collections.abc import Sequence

    from chalicelib.messages.optout_gate import OPTED_OUT, Addressee, BatchLook

    reads: list[list[str]] = []

    def read(addressees: Sequence[Addressee]) -> dict[str, str]:
        reads.append([a.contact_key for a in addressees])
        return {a.token_id: OPTED_OUT for a in addressees if a.contact_key == "k-opted-out"}

    def to(key: str) -> Addressee:
        return Addressee(key, f"ts-{key}", f"tok-{key}")

    check = BatchLook(read, [to("k2"), to("k1"), to("k-opted-out"), to("k1")])
    assert reads == [], "nothing is read before a send is due"
    answers: dict[str, bool] = {}

    def ask(key: str) -> None:
        answers[key] = check.withheld(to(key)) is not None

    threads = [threading.Thread(target=ask, args=(k,)) for k in ("k1", "k2", "k-opted-out")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert reads == [["k-opted-out", "k1", "k2"]]
    assert answers == {"k1": False, "k2": False, "k-opted-out": True}
