"""The IAM policy of each Lambda function, per deployed stage, generated from what each one touches.

Chalice reads one policy file per function (`.chalice/policies/<stage>/policy-<function>.json`).
Policy files cannot hold CloudFormation intrinsics, so the stage's name prefix, secret names, sender
address and model are baked in from `.chalice/config.json`, and the account is written as `*` here.
`make package` then pins every such ARN of the packaged template to the deploying account
(`${AWS::AccountId}`, infra/pin_stage.py): the account is never in the stage settings, but the
template knows it where the policies end up. The region is fixed by DEPLOY_REGION; `make package`
refuses a deployment to any other region (see infra/pin_stage.py).

Regenerate after changing a stage's settings or what a function touches:

    .venv/bin/python -m infra.policies          # rewrite the files
    .venv/bin/python -m infra.policies --check  # exit 1 if a file is out of date (the tests do this)
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from email.utils import parseaddr
from pathlib import Path
from typing import Any

from infra.stages import load_config, stage_env

ROOT = Path(__file__).resolve().parent.parent
POLICY_DIR = ROOT / ".chalice" / "policies"

DEPLOY_REGION = "eu-west-2"
LOCAL_STAGES = ("local",)  # run on the emulator only; never packaged
FUNCTIONS = (
    "api_handler",
    "notifier",
    "sweep",
    "catalog_sync",
    "reconcile",
    "feedback",
    "sms_feedback",
    "events_feed",
    "outbound",
)

# The copy model: Claude Haiku 4.5 through the global cross-region inference profile.
BEDROCK_PROFILE = "global.anthropic.claude-haiku-4-5-20251001-v1:0"

GET = "dynamodb:GetItem"
BATCH_GET = "dynamodb:BatchGetItem"
QUERY = "dynamodb:Query"
SCAN = "dynamodb:Scan"
CHECK = "dynamodb:ConditionCheckItem"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
DELETE = "dynamodb:DeleteItem"

# The queue actions Lambda's SQS event source needs on the role of the function it feeds.
CONSUME = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
PRODUCE = ("sqs:SendMessage", "sqs:GetQueueUrl")
# A failed delivery sets its own next try (chalicelib/outbound.py backoff_s).
BACK_OFF = ("sqs:ChangeMessageVisibility", "sqs:GetQueueUrl")
# What Lambda's DynamoDB Streams event source reads on the role of the function it feeds.
STREAM_READ = ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams")


# A platform's API credentials, and those with its webhook secrets (chalicelib/config.py's OPTIONAL_SECRETS).
PLATFORM_API_SECRETS = (
    "SHOPIFY_ACCESS_TOKEN",
    "SHOPIFY_CLIENT_SECRET",
    "WOOCOMMERCE_CONSUMER_KEY",
    "WOOCOMMERCE_CONSUMER_SECRET",
)
PLATFORM_SECRETS = ("SHOPIFY_WEBHOOK_SECRET", "WOOCOMMERCE_WEBHOOK_SECRET", *PLATFORM_API_SECRETS)


@dataclass(frozen=True)
class TableAccess:
    """What one function may do to one table, and which of its indexes it may query."""

    actions: tuple[str, ...]
    indexes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Needs:
    """Everything one function touches (DESIGN §2), independent of stage."""

    tables: dict[str, TableAccess]
    queue: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    alerts: bool = False  # publish to the stage's staff alert topic
    sms: bool = False  # SNS Publish to phone numbers (no resource ARN exists for those)
    email: bool = False  # SES SendEmail from the stage's sender identity
    copy_model: bool = False  # Bedrock, the copy model only
    sms_optouts: bool = False  # SNS ListPhoneNumbersOptedOut (an account-level call)
    optional_secrets: tuple[str, ...] = ()  # granted only when the stage configures them
    feedback_queue: bool = False  # consume the SES feedback queue (its trigger)
    dashboard: bool = False  # the shop's dashboard (/admin/api): dead letters, alarms, monthly figures, erasure
    events_queue: tuple[str, ...] = ()  # the outbound events queue (docs/EVENTS.md)
    audit_stream: bool = False  # read the audit table's stream (its trigger)


NEEDS: dict[str, Needs] = {
    # Every route: capture, both webhooks, reserve, unsubscribe, the manage page, the widget.
    "api_handler": Needs(
        tables={
            # by-store-item: a platform's stock webhook names its inventory item, not the SKU (a query on the index
            # only; the table itself is never queried). SCAN: a product deleted on the platform reaches its SKUs
            # (rare, never a shopper's path: chalicelib/tables/catalog.py). CHECK: a confirmed email place looks for
            # units waiting for nobody (chalicelib/shopper/confirm_pages.py). BATCH_GET: a place in line sums the product's
            # waiting shards (chalicelib/line.py); the dashboard's names and prices of a period's restocks.
            # by-demand: the dashboard's most-wanted products.
            "catalog": TableAccess((GET, BATCH_GET, UPDATE, SCAN, CHECK), ("by-store-item", "by-demand")),
            # QUERY: the dashboard's pages of a waiting list and a period's joins, each a bounded page. A shopper's
            # path never queries the table: a place in line is read from the line's figures (chalicelib/line.py).
            # CHECK: a tap under a mailbox's new key makes sure its old key holds no place (chalicelib/contacts.py).
            # BATCH_GET: the dashboard's import reads the uniqueness items of a file's people (chalicelib/importer.py).
            "requests": TableAccess((GET, BATCH_GET, QUERY, PUT, UPDATE, DELETE, CHECK), ("by-contact",)),
            # QUERY: a SKU's restocks (the dashboard's "explain"); by-opened: the restocks of a period.
            "restocks": TableAccess((GET, QUERY, PUT, UPDATE), ("by-opened",)),
            "reservations": TableAccess((GET, UPDATE)),
            # UPDATE: a person's manage-link version, raised when they sign out everywhere. DELETE: a person's own
            # opt-in link, or their proof from a tap (a re-subscribe link or code, chalicelib/shopper/resubscribe.py), lifts it.
            # BATCH_GET: the dashboard's import passes over the people of a file who opted out.
            "optout": TableAccess((GET, BATCH_GET, PUT, UPDATE, DELETE, CHECK)),
            # Rate limits; inventory webhook ids remembered, so a late retry is known; pending channel switches.
            "throttle": TableAccess((GET, PUT, UPDATE, DELETE)),
            # QUERY: the facts the dashboard's "explain" and export read. Erasure's one change to a fact is
            # granted apart, narrowed to the person fields (`dashboard`).
            "audit": TableAccess((PUT, QUERY), ("by-contact",)),
        },
        queue=PRODUCE,  # a restock's first job; top-ups for places given up
        secrets=("WEBHOOK_SECRET", "TOKEN_KEY", "CONTACT_HASH_KEY"),
        # No staff alerts: a tap on an unknown SKU is only counted here; the sweep sends the digest.
        # The platform dialects the stage accepts, and the store a reserve link places its hold on.
        # TURNSTILE_SECRET: the tap's optional human check (chalicelib/challenge.py), granted where a stage names it.
        optional_secrets=(*PLATFORM_SECRETS, "TURNSTILE_SECRET"),
        dashboard=True,
    ),
    "notifier": Needs(
        tables={
            # UPDATE: the mark of units nobody eligible waits for, which a new place reads.
            "catalog": TableAccess((GET, UPDATE)),
            # BATCH_GET: the places a top-up looks at again, parked before the walk's cursor, in one read.
            "requests": TableAccess((GET, BATCH_GET, QUERY, UPDATE)),
            # CHECK: the idle mark is set or cleared only while the restock's units say so.
            "restocks": TableAccess((GET, UPDATE, CHECK)),
            # An offer row is written, or taken back when its notice is refused. GET, UPDATE: its one lapse reminder,
            # taken once for sending and looked at again right before it goes (chalicelib/reminders.py).
            "reservations": TableAccess((GET, PUT, UPDATE, DELETE)),
            # BATCH_GET: one read per batch of people about to be told; GET: a switch code's new contact, once.
            # PUT, UPDATE: a person's short manage id, issued on their first SMS (chalicelib/manage_ids.py).
            # UPDATE: a re-subscribe message, taken once for sending (chalicelib/shopper/resubscribe.py).
            "optout": TableAccess((GET, BATCH_GET, PUT, UPDATE)),
            "audit": TableAccess((PUT,)),
            # A pending channel switch's code, taken once for sending (chalicelib/confirm.py).
            "throttle": TableAccess((UPDATE,)),
        },
        queue=CONSUME + PRODUCE,  # its trigger; continuation jobs for large restocks
        secrets=("TOKEN_KEY",),
        sms=True,
        email=True,
        copy_model=True,
    ),
    "sweep": Needs(
        tables={
            # by-demand, BATCH_GET: the ranking's waiting count rolled up from each out-of-stock product's shards.
            "catalog": TableAccess((GET, BATCH_GET, UPDATE), ("by-demand",)),
            # by-contact: a number that replied STOP leaves every list it was on.
            # PUT: a place told about a restock leaves its memory behind when it goes.
            # by-confirm: confirmation emails still owed a minute after their tap (the tap was cut short).
            "requests": TableAccess((GET, PUT, UPDATE, DELETE), ("by-expiry", "by-contact", "by-confirm")),
            "restocks": TableAccess((UPDATE,), ("by-pending",)),
            "reservations": TableAccess((GET, UPDATE), ("by-due",)),
            # UPDATE: a STOP number's opt-out is marked done once its places have left every list.
            # by-owed: re-subscribe messages still owed a minute after their tap (the tap was cut short).
            "optout": TableAccess((GET, BATCH_GET, PUT, UPDATE), ("by-owed",)),
            "audit": TableAccess((PUT,)),
            # The unknown-SKU digest of the window that ended: read, then marked sent. The STOP sync's page token.
            "throttle": TableAccess((GET, UPDATE)),
        },
        queue=PRODUCE,  # top-ups for freed units; restocks stuck before their job
        secrets=("CONTACT_HASH_KEY",),  # opted-out numbers are stored as keyed hashes
        sms_optouts=True,
        alerts=True,  # the unknown-SKU digest
        # Store holds a crash or an outage left owed: placed, or given back to the store.
        optional_secrets=PLATFORM_API_SECRETS,
    ),
    "catalog_sync": Needs(
        tables={
            # BATCH_GET: each batch of feed products compared with what is stored, 100 a read.
            "catalog": TableAccess((GET, BATCH_GET, SCAN, UPDATE)),
            # A lowered threshold that the level on hand meets opens a restock and queues its job.
            "restocks": TableAccess((GET, PUT, UPDATE)),
            # PUT: a lowered threshold's restock, its change id remembered once. GET, UPDATE: where the sync stopped.
            "throttle": TableAccess((GET, PUT, UPDATE)),
            "audit": TableAccess((PUT,)),
        },
        queue=PRODUCE,
        optional_secrets=("CATALOG_TOKEN", *PLATFORM_API_SECRETS),  # the feed's token, or the platform's API keys
    ),
    # The store's level of each SKU somebody waits for, read in bulk and fed to restock detection.
    "reconcile": Needs(
        tables={
            # by-demand: the out-of-stock SKUs somebody waits for; BATCH_GET: their platform ids and recorded levels;
            # by-store-item: a level the platform names by its inventory item, mapped to its SKU as a webhook's is.
            "catalog": TableAccess((GET, BATCH_GET, UPDATE), ("by-demand", "by-store-item")),
            # A crossing opens a restock and queues its job, as a webhook's does.
            "restocks": TableAccess((GET, PUT, UPDATE)),
            # GET, UPDATE: where the last run stopped; PUT: each level read remembered once, as a webhook's id is.
            "throttle": TableAccess((GET, PUT, UPDATE)),
            "audit": TableAccess((PUT,)),
        },
        queue=PRODUCE,
        optional_secrets=("CATALOG_TOKEN", *PLATFORM_API_SECRETS),  # the stock feed's token, or the platform's keys
    ),
    # SES bounces, complaints and deliveries: a hard bounce or a complaint opts the address out everywhere.
    "feedback": Needs(
        tables={
            "catalog": TableAccess((UPDATE,)),  # the waiting count of each list the address leaves
            # by-contact: the address leaves every list it was on; PUT: a told place leaves its memory behind.
            "requests": TableAccess((GET, PUT, UPDATE, DELETE), ("by-contact",)),
            "restocks": TableAccess((UPDATE,)),
            "reservations": TableAccess((GET, UPDATE)),
            "optout": TableAccess((PUT,)),
            "throttle": TableAccess((PUT,)),  # each event remembered a week, so a redelivery counts once
            "audit": TableAccess((PUT,)),
        },
        queue=PRODUCE,  # top-ups for live offers given up
        secrets=("CONTACT_HASH_KEY",),  # addresses are known by keyed hash
        feedback_queue=True,
    ),
    # SNS's SMS delivery failures (a CloudWatch Logs subscription invokes it): a number that can never take an SMS
    # is opted out everywhere, as a hard bounce is.
    "sms_feedback": Needs(
        tables={
            "catalog": TableAccess((UPDATE,)),  # the waiting count of each list the number leaves
            # by-contact: the number leaves every list it was on; PUT: a told place leaves its memory behind.
            "requests": TableAccess((GET, PUT, UPDATE, DELETE), ("by-contact",)),
            "restocks": TableAccess((UPDATE,)),
            "reservations": TableAccess((GET, UPDATE)),
            "optout": TableAccess((PUT,)),
            "throttle": TableAccess((PUT,)),  # each failure remembered a week, so a repeated invocation counts once
            "audit": TableAccess((PUT,)),
        },
        queue=PRODUCE,  # top-ups for live offers given up
        secrets=("CONTACT_HASH_KEY",),  # numbers are known by keyed hash
    ),
    # New audit facts from the table's stream: those that are events the shop chose go on the events queue.
    "events_feed": Needs(tables={}, events_queue=PRODUCE, audit_stream=True),
    # Each outbound event to the shop's webhook receiver or Klaviyo.
    "outbound": Needs(
        tables={
            "requests": TableAccess((GET,)),  # the person's place: their uniqueness item, then the place
            "optout": TableAccess((BATCH_GET,)),  # whether they opted out since the event was queued
        },
        events_queue=CONSUME + BACK_OFF,  # its trigger, and each failure's next try
        optional_secrets=("OUTBOUND_WEBHOOK_SECRET", "KLAVIYO_API_KEY"),
    ),
}


@dataclass(frozen=True)
class Stage:
    """The settings of one deployed stage that the policies depend on."""

    name: str
    prefix: str
    secret_ids: dict[str, str]
    ses_from: str
    copy_mode: str
    model_id: str
    configuration_set: str
    region: str = DEPLOY_REGION


def deployed_stages(config: dict[str, Any]) -> list[str]:
    """Every stage that is packaged for AWS."""
    return [name for name in config["stages"] if name not in LOCAL_STAGES]


def stage_settings(config: dict[str, Any], name: str) -> Stage:
    """Read what the policies need from a stage's environment, refusing anything incomplete."""
    env = stage_env(name, config)
    secret_ids = {key[: -len("_SECRET_ID")]: value for key, value in env.items() if key.endswith("_SECRET_ID")}
    for key in ("NAME_PREFIX", "SES_FROM", "SES_CONFIGURATION_SET"):
        if not env.get(key):
            raise ValueError(f"stage {name} sets no {key}")
    return Stage(
        name=name,
        prefix=env["NAME_PREFIX"],
        secret_ids=secret_ids,
        ses_from=env["SES_FROM"],
        copy_mode=env.get("COPY_MODE", "bedrock"),
        model_id=env.get("BEDROCK_MODEL_ID", BEDROCK_PROFILE),
        configuration_set=env["SES_CONFIGURATION_SET"],
    )


def function_name(prefix: str, function: str) -> str:
    """The deployed Lambda function name (infra/template.json sets FunctionName to the same)."""
    return f"{prefix}-{function}"


def _table_arn(stage: Stage, table: str) -> str:
    return f"arn:aws:dynamodb:{stage.region}:*:table/{stage.prefix}-{table}"


def _secret_arn(stage: Stage, secret_id: str) -> str:
    if secret_id.startswith("arn:"):
        return secret_id
    # Secrets Manager appends six random characters to every secret's ARN.
    return f"arn:aws:secretsmanager:{stage.region}:*:secret:{secret_id}-??????"


def _sid(text: str) -> str:
    return "".join(part.capitalize() for part in text.replace("-", "_").split("_"))


def policy(stage: Stage, function: str) -> dict[str, Any]:
    """The IAM policy document of one function in one stage."""
    needs = NEEDS[function]
    region = stage.region
    statements: list[dict[str, Any]] = [
        {
            "Sid": "OwnLogs",
            "Effect": "Allow",
            # No logs:CreateLogGroup: the template creates the group with its retention.
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": f"arn:aws:logs:{region}:*:log-group:/aws/lambda/{function_name(stage.prefix, function)}:*",
        }
    ]
    for table, access in needs.tables.items():
        resources = [_table_arn(stage, table)]
        statements.append(
            {
                "Sid": f"{_sid(table)}Table",
                "Effect": "Allow",
                "Action": list(access.actions),
                "Resource": resources[0],
            }
        )
        if access.indexes:
            statements.append(
                {
                    "Sid": f"{_sid(table)}Indexes",
                    "Effect": "Allow",
                    "Action": [QUERY],
                    "Resource": [f"{_table_arn(stage, table)}/index/{index}" for index in access.indexes],
                }
            )
    if needs.queue:
        statements.append(
            {
                "Sid": "JobsQueue",
                "Effect": "Allow",
                "Action": list(needs.queue),
                "Resource": f"arn:aws:sqs:{region}:*:{stage.prefix}-jobs",
            }
        )
    if needs.feedback_queue:
        statements.append(
            {
                "Sid": "FeedbackQueue",
                "Effect": "Allow",
                "Action": list(CONSUME),
                "Resource": f"arn:aws:sqs:{region}:*:{stage.prefix}-ses-feedback",
            }
        )
    if needs.events_queue:
        statements.append(
            {
                "Sid": "EventsQueue",
                "Effect": "Allow",
                "Action": list(dict.fromkeys(needs.events_queue)),
                "Resource": f"arn:aws:sqs:{region}:*:{stage.prefix}-events",
            }
        )
    if needs.audit_stream:
        statements.append(
            {
                "Sid": "AuditStream",
                "Effect": "Allow",
                "Action": list(STREAM_READ),
                "Resource": f"{_table_arn(stage, 'audit')}/stream/*",
            }
        )
    wanted = list(needs.secrets) + [name for name in needs.optional_secrets if name in stage.secret_ids]
    if wanted:
        missing = [name for name in wanted if name not in stage.secret_ids]
        if missing:
            raise ValueError(
                f"stage {stage.name} names no secret for {', '.join(missing)} (set {missing[0]}_SECRET_ID)"
            )
        statements.append(
            {
                "Sid": "Secrets",
                "Effect": "Allow",
                "Action": ["secretsmanager:GetSecretValue"],
                "Resource": [_secret_arn(stage, stage.secret_ids[name]) for name in wanted],
            }
        )
    if needs.sms:
        statements.append(
            {
                "Sid": "Sms",
                "Effect": "Allow",
                "Action": ["sns:Publish"],
                # An SMS to a phone number has no resource ARN, so the Allow cannot be narrowed further.
                "Resource": "*",
            }
        )
        statements.append(
            {
                "Sid": "SmsOnlyNoTopics",
                "Effect": "Deny",
                "Action": ["sns:Publish"],
                # ...but Publish to a topic (or a platform endpoint) is authorised against its ARN,
                # arn:${Partition}:sns:${Region}:${Account}:${TopicName} in the Service Authorization Reference
                # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsns.html), and an
                # explicit Deny overrides any Allow (IAM policy evaluation logic). So this role can text phone
                # numbers and reach no topic, in any account: the staff alert topic included.
                "Resource": "arn:aws:sns:*:*:*",
            }
        )
    if needs.alerts:
        statements.append(
            {
                "Sid": "StaffAlerts",
                "Effect": "Allow",
                "Action": ["sns:Publish"],
                "Resource": f"arn:aws:sns:{region}:*:{stage.prefix}-alerts",
            }
        )
    if needs.sms_optouts:
        statements.append(
            {
                "Sid": "SmsOptOuts",
                "Effect": "Allow",
                "Action": ["sns:ListPhoneNumbersOptedOut"],
                # An account-level call: SNS defines no resource for it.
                "Resource": "*",
            }
        )
    if needs.email:
        address = parseaddr(stage.ses_from)[1]
        if "@" not in address:
            raise ValueError(f"stage {stage.name}: SES_FROM {stage.ses_from!r} has no email address")
        domain = address.rsplit("@", 1)[1]
        statements.append(
            {
                "Sid": "Email",
                "Effect": "Allow",
                "Action": ["ses:SendEmail"],
                # Either the address or its whole domain may be the verified identity; a send under a
                # configuration set is authorised against the set as well.
                "Resource": [
                    f"arn:aws:ses:{region}:*:identity/{domain}",
                    f"arn:aws:ses:{region}:*:identity/{address}",
                    f"arn:aws:ses:{region}:*:configuration-set/{stage.configuration_set}",
                ],
                "Condition": {"StringEquals": {"ses:FromAddress": address}},
            }
        )
        statements.append(
            {
                "Sid": "EmailQuota",
                "Effect": "Allow",
                # The account's sending rate (SendQuota.MaxSendRate), read once per container to pace sends.
                "Action": ["ses:GetAccount"],
                # An account-level call: SES defines no resource for it.
                "Resource": "*",
            }
        )
    if needs.dashboard:
        statements.extend(_dashboard(stage))
    if needs.copy_model and stage.copy_mode == "bedrock":
        statements.extend(_bedrock(stage))
    return {"Version": "2012-10-17", "Statement": statements}


# The attributes erasure may touch on an audit fact: its key, and the two that name a person
# (chalicelib/tables/audit.py PERSON_FIELDS).
AUDIT_ERASURE_ATTRIBUTES = ["sku", "ts", "contact_key", "previous_key"]


def _dashboard(stage: Stage) -> list[dict[str, Any]]:
    """The dashboard's grants beyond the tables: its queues, CloudWatch, the SMS spend limit, erasure."""
    region, prefix = stage.region, stage.prefix
    return [
        {
            "Sid": "DashboardDeadLetters",
            "Effect": "Allow",
            # Depth of both dead-letter queues; the job queue's are moved back (StartMessageMoveTask, or by hand).
            "Action": [
                "sqs:GetQueueUrl",
                "sqs:GetQueueAttributes",
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:StartMessageMoveTask",
            ],
            "Resource": f"arn:aws:sqs:{region}:*:{prefix}-jobs-dlq",
        },
        {
            "Sid": "DashboardEventDeadLetters",
            "Effect": "Allow",
            # The events DLQ's messages are listed (received, never deleted) and moved back to the events queue.
            "Action": [
                "sqs:GetQueueUrl",
                "sqs:GetQueueAttributes",
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:StartMessageMoveTask",
            ],
            "Resource": f"arn:aws:sqs:{region}:*:{prefix}-events-dlq",
        },
        {
            "Sid": "DashboardEventRedrive",
            "Effect": "Allow",
            # The destination of an events redrive (by hand where StartMessageMoveTask is not there).
            "Action": ["sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SendMessage"],
            "Resource": f"arn:aws:sqs:{region}:*:{prefix}-events",
        },
        {
            "Sid": "DashboardQueueDepths",
            "Effect": "Allow",
            "Action": ["sqs:GetQueueUrl", "sqs:GetQueueAttributes"],
            "Resource": [
                f"arn:aws:sqs:{region}:*:{prefix}-ses-feedback-dlq",
                # The job queue's ARN, the destination a redrive names.
                f"arn:aws:sqs:{region}:*:{prefix}-jobs",
            ],
        },
        {
            "Sid": "DashboardStaffGroups",
            "Effect": "Allow",
            # A staff member's role is read from the groups they are in now, on every request. The pool is made by
            # the stack, so its id is not known here: any pool of this account and region (pinned at package).
            "Action": ["cognito-idp:AdminListGroupsForUser"],
            "Resource": f"arn:aws:cognito-idp:{region}:*:userpool/*",
        },
        {
            "Sid": "DashboardAlarms",
            "Effect": "Allow",
            "Action": ["cloudwatch:DescribeAlarms"],
            "Resource": f"arn:aws:cloudwatch:{region}:*:alarm:{prefix}-*",
        },
        {
            "Sid": "DashboardMonthlyFigures",
            "Effect": "Allow",
            # GetMetricData and GetSMSAttributes name no resource (Service Authorization Reference).
            "Action": ["cloudwatch:GetMetricData", "sns:GetSMSAttributes"],
            "Resource": "*",
        },
        {
            "Sid": "AuditErasure",
            "Effect": "Allow",
            "Action": [UPDATE],
            "Resource": _table_arn(stage, "audit"),
            # Erasure only takes the person fields off a fact: an update naming any other attribute is refused,
            # so the audit stays append-only in everything it says.
            "Condition": {"ForAllValues:StringEquals": {"dynamodb:Attributes": AUDIT_ERASURE_ATTRIBUTES}},
        },
    ]


def _bedrock(stage: Stage) -> list[dict[str, Any]]:
    if stage.model_id != BEDROCK_PROFILE:
        raise ValueError(
            f"stage {stage.name}: BEDROCK_MODEL_ID is {stage.model_id!r}; the policies grant {BEDROCK_PROFILE} only"
        )
    model = BEDROCK_PROFILE.split(".", 1)[1]
    profile_arn = f"arn:aws:bedrock:{stage.region}:*:inference-profile/{BEDROCK_PROFILE}"
    return [
        {
            "Sid": "CopyModelProfile",
            "Effect": "Allow",
            "Action": ["bedrock:InvokeModel"],
            "Resource": profile_arn,
        },
        {
            "Sid": "CopyModelThroughProfile",
            "Effect": "Allow",
            "Action": ["bedrock:InvokeModel"],
            # The global profile routes to the model in the calling region or to its region-less
            # global ARN; both only when reached through that profile.
            "Resource": [
                f"arn:aws:bedrock:{stage.region}::foundation-model/{model}",
                f"arn:aws:bedrock:::foundation-model/{model}",
            ],
            "Condition": {"StringLike": {"bedrock:InferenceProfileArn": profile_arn}},
        },
    ]


def policy_path(stage: str, function: str, root: Path = POLICY_DIR) -> Path:
    """Where a function's policy file lives for a stage."""
    return root / stage / f"policy-{function}.json"


def policy_file_setting(stage: str, function: str) -> str:
    """The `iam_policy_file` value for config.json (relative to .chalice/)."""
    return f"policies/{stage}/policy-{function}.json"


def render(document: dict[str, Any]) -> str:
    """A policy document as written to disk."""
    return json.dumps(document, indent=2) + "\n"


def expected_files(config: dict[str, Any], root: Path = POLICY_DIR) -> dict[Path, str]:
    """Every policy file the config calls for, with its content."""
    files: dict[Path, str] = {}
    for name in deployed_stages(config):
        stage = stage_settings(config, name)
        for function in FUNCTIONS:
            files[policy_path(name, function, root)] = render(policy(stage, function))
    return files


def main(argv: list[str] | None = None) -> int:
    """Write the policy files, or with --check report the stale ones."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report files that differ")
    args = parser.parse_args(argv)
    stale = []
    for path, text in expected_files(load_config()).items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} {path.relative_to(ROOT)}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
