"""Every CloudWatch alarm in infra/template.json watches a metric something really emits.

An alarm on a metric nobody writes can never fire. A metric in the app's namespace must be counted somewhere
in chalicelib (a `metrics.count(...)` or `metrics.gauge(...)` of a name from chalicelib/metrics.py), with the
`service` dimension the code writes; a metric in an AWS namespace must be one AWS publishes for that service.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib import metrics
from chalicelib.config import settings_from_env
from chalicelib.metrics import MetricsFactory, skip_metric
from chalicelib.notifier import SkipReason
from infra.stages import load_config, stage_env
from tests.support import REGION, ROOT

# The AWS namespaces an alarm may watch, and the metrics AWS publishes there that the template may use.
AWS_METRICS = {
    "AWS/SQS": {"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage", "NumberOfMessagesSent"},
    "AWS/Lambda": {"Errors", "Throttles", "Duration", "Invocations", "ConcurrentExecutions"},
    "AWS/ApiGateway": {"5XXError", "4XXError", "Count", "Latency"},
    "AWS/SES": {"Reputation.BounceRate", "Reputation.ComplaintRate", "Bounce", "Complaint", "Send", "Delivery"},
    "AWS/SNS": {"NumberOfNotificationsFailed", "SMSSuccessRate", "SMSMonthToDateSpentUSD"},
}
# What the app itself writes: the namespace every deployed stage gives POWERTOOLS_METRICS_NAMESPACE.
APP_NAMESPACES = {stage_env(stage).get("POWERTOOLS_METRICS_NAMESPACE") for stage in ("dev", "prod")}
# The one dimension of the app's metrics (chalicelib/metrics.py), set to the stack's prefix in every function.
APP_DIMENSIONS = [{"Name": "service", "Value": {"Ref": "NamePrefix"}}]


def alarms() -> dict[str, dict[str, Any]]:
    template = json.loads((ROOT / "infra" / "template.json").read_text())
    return {
        name: resource["Properties"]
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
    }


def watched(alarm: dict[str, Any]) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """(namespace, metric name, dimensions) of each metric an alarm reads, its metric math included."""
    if "MetricName" in alarm:
        yield alarm["Namespace"], alarm["MetricName"], alarm.get("Dimensions", [])
    for query in alarm.get("Metrics", []):
        if "MetricStat" in query:
            metric = query["MetricStat"]["Metric"]
            yield metric["Namespace"], metric["MetricName"], metric.get("Dimensions", [])


def emitted_names() -> set[str]:
    """Metric names chalicelib counts: the chalicelib/metrics.py constant (or skip_metric) each count() and
    gauge() call passes."""
    constants = {name: value for name, value in vars(metrics).items() if name.isupper() and isinstance(value, str)}
    names: set[str] = set()
    for path in (ROOT / "chalicelib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
                continue
            if node.func.attr not in ("count", "gauge"):
                continue
            first = node.args[0]
            if isinstance(first, ast.Name) and first.id in constants:
                names.add(constants[first.id])
            elif isinstance(first, ast.Call) and isinstance(first.func, ast.Name) and first.func.id == "skip_metric":
                names.update(skip_metric(reason) for reason in SkipReason)
    return names


def test_the_template_has_alarms_and_every_one_reads_a_metric() -> None:
    assert alarms()
    for name, alarm in alarms().items():
        assert list(watched(alarm)), f"{name} watches no metric"


@pytest.mark.parametrize("name", sorted(alarms()))
def test_each_alarm_watches_a_metric_that_is_emitted(name: str) -> None:
    emitted = emitted_names()
    for namespace, metric, dimensions in watched(alarms()[name]):
        if namespace in APP_NAMESPACES:
            assert metric in emitted, f"{name} watches {namespace}/{metric}, which nothing in chalicelib emits"
            assert dimensions == APP_DIMENSIONS, f"{name}: the app's metrics carry only service=<NamePrefix>"
        else:
            assert namespace in AWS_METRICS, f"{name} watches namespace {namespace}, neither AWS's nor the app's"
            assert metric in AWS_METRICS[namespace], f"{name} watches {namespace}/{metric}, not a metric AWS publishes"


def test_the_app_namespace_is_one_for_every_deployed_stage() -> None:
    assert len(APP_NAMESPACES) == 1 and None not in APP_NAMESPACES
    assert "POWERTOOLS_METRICS_DISABLED" not in {**stage_env("dev"), **stage_env("prod")}
    assert "dev" in load_config()["stages"] and "prod" in load_config()["stages"]


def test_metrics_carry_the_service_the_functions_are_given() -> None:
    # The template sets POWERTOOLS_SERVICE_NAME to the stack's NamePrefix (tests/integration/test_deploy_template.py),
    # which is what the alarms' `service` dimension refers to.
    env = {**stage_env("dev"), "POWERTOOLS_SERVICE_NAME": "bisn-dev", "AWS_DEFAULT_REGION": REGION}
    settings = settings_from_env(env)
    buffer = MetricsFactory(settings.metrics_namespace, settings.service_name).start()
    buffer.count(metrics.NOTICES_OVER_UNITS, 0)
    document = buffer.document()
    assert document["service"] == "bisn-dev"
    assert document["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] in APP_NAMESPACES
