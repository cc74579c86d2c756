"""Creates the tables, queues and topics of infra/template.json on an AWS endpoint (the emulator, in practice).

The template is the one definition of the schema; this reads it rather than repeating it. It also creates the SES
configuration set and subscribes queues to topics. The emulator (moto 5.2.5) has no SES v2 event destinations and
publishes no SES events, so the configuration set's event destination is not created here: locally, feedback
reaches the queue only when something publishes an SES event record to the feedback topic. A table's stream is
created as the template specifies it (the audit table's feeds events out: devstack/stack.py `run_events`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).resolve().parent.parent / "infra" / "template.json"


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The parsed CloudFormation template."""
    return json.loads(path.read_text())


def resolve(value: Any, params: dict[str, str], attrs: dict[str, dict[str, str]]) -> Any:
    """Resolve the few intrinsic functions the template uses (Fn::Sub, Ref, Fn::GetAtt) for plain values."""
    if isinstance(value, dict) and len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Fn::Sub":
            text = arg if isinstance(arg, str) else arg[0]
            for name, val in params.items():
                text = text.replace("${" + name + "}", val)
            return text
        if fn == "Ref":
            return params[arg]
        if fn == "Fn::GetAtt":
            return attrs[arg[0]][arg[1]]
    if isinstance(value, dict):
        return {k: resolve(v, params, attrs) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, params, attrs) for v in value]
    return value


def tables(template: dict[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    """Every AWS::DynamoDB::Table of the template as resolved Properties, by logical id."""
    params = {"NamePrefix": prefix}
    return {
        logical: resolve(res["Properties"], params, {})
        for logical, res in template["Resources"].items()
        if res["Type"] == "AWS::DynamoDB::Table"
    }


def provision(session: Any, prefix: str = "bisn", template: dict[str, Any] | None = None) -> dict[str, str]:
    """Create every table, queue and topic (skipping what exists); returns logical id -> name or URL."""
    template = template or load_template()
    params = {"NamePrefix": prefix}
    ddb = session.client("dynamodb")
    sqs = session.client("sqs")
    sns = session.client("sns")
    created: dict[str, str] = {}
    existing = set(ddb.list_tables().get("TableNames", []))
    for logical, props in tables(template, prefix).items():
        name = props["TableName"]
        created[logical] = name
        if name in existing:
            continue
        kwargs = {
            k: props[k]
            for k in (
                "TableName",
                "AttributeDefinitions",
                "KeySchema",
                "BillingMode",
                "GlobalSecondaryIndexes",
                "StreamSpecification",
            )
            if k in props
        }
        if "StreamSpecification" in kwargs:
            # CloudFormation's StreamSpecification names only the view; the API also asks whether it is on.
            kwargs["StreamSpecification"] = {"StreamEnabled": True, **kwargs["StreamSpecification"]}
        ddb.create_table(**kwargs)
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
    attrs: dict[str, dict[str, str]] = {}
    # Queues in dependency order: a queue whose redrive policy names another comes after it.
    queues = {k: r for k, r in template["Resources"].items() if r["Type"] == "AWS::SQS::Queue"}
    ordered = sorted(queues, key=lambda k: "RedrivePolicy" in queues[k]["Properties"])
    for logical in ordered:
        props = resolve(queues[logical]["Properties"], params, attrs)
        attributes = {}
        for key in ("VisibilityTimeout", "MessageRetentionPeriod"):
            if key in props:
                attributes[key] = str(props[key])
        if "RedrivePolicy" in props:
            attributes["RedrivePolicy"] = json.dumps(props["RedrivePolicy"])
        url = sqs.create_queue(QueueName=props["QueueName"], Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        attrs[logical] = {"Arn": arn, "QueueUrl": url, "QueueName": props["QueueName"]}
        created[logical] = url
    for logical, res in template["Resources"].items():
        if res["Type"] == "AWS::SNS::Topic":
            props = resolve(res["Properties"], params, attrs)
            created[logical] = sns.create_topic(Name=props["TopicName"])["TopicArn"]
            attrs[logical] = {"Ref": created[logical]}
    _subscriptions(sns, template, params, attrs, created)
    _configuration_sets(session.client("sesv2"), template, params, created)
    return created


def _subscriptions(
    sns: Any,
    template: dict[str, Any],
    params: dict[str, str],
    attrs: dict[str, dict[str, str]],
    created: dict[str, str],
) -> None:
    """Subscribe each queue to its topic (SNS returns the existing subscription when asked again).

    Only queue subscriptions: the staff's optional email subscription to the alert topic is theirs to make."""
    for logical, res in template["Resources"].items():
        if res["Type"] != "AWS::SNS::Subscription" or res["Properties"].get("Protocol") != "sqs":
            continue
        props = res["Properties"]
        topic = created[props["TopicArn"]["Ref"]]
        endpoint = resolve(props["Endpoint"], params, attrs)
        raw = "true" if props.get("RawMessageDelivery") else "false"
        created[logical] = sns.subscribe(
            TopicArn=topic, Protocol=props["Protocol"], Endpoint=endpoint, Attributes={"RawMessageDelivery": raw}
        )["SubscriptionArn"]


def _configuration_sets(sesv2: Any, template: dict[str, Any], params: dict[str, str], created: dict[str, str]) -> None:
    """Create each SES configuration set that does not exist yet."""
    existing = {c for c in sesv2.list_configuration_sets().get("ConfigurationSets", [])}
    for logical, res in template["Resources"].items():
        if res["Type"] != "AWS::SES::ConfigurationSet":
            continue
        name = resolve(res["Properties"], params, {})["Name"]
        if name not in existing:
            sesv2.create_configuration_set(ConfigurationSetName=name)
        created[logical] = name
