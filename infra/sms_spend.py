"""Check (or set) the account's SNS SMS settings at deploy: CloudFormation has no resource for them.

    python -m infra.sms_spend --max-usd 20          # fails unless a limit is set, at most 20 USD
    python -m infra.sms_spend --max-usd 20 --set    # sets it to 20 USD first

SNS stops sending SMS for the rest of the month once the limit is spent: the last guard against SMS pumping.
A limit above 1 USD needs an AWS support case first (docs/DEPLOY.md, "SMS spend and protect").

    python -m infra.sms_spend --max-usd 20 --delivery-status-role ROLE_ARN --failure-function FUNCTION_ARN [--set]

also checks (with --set: first turns on) SMS delivery status logging: SNS writes a record of every SMS it could
not deliver to the account's log group sns/<region>/<account>/DirectPublishToPhoneNumber/Failure, assuming the
stack's SmsDeliveryStatusRoleArn (the SMS attributes DeliveryStatusIAMRole and DeliveryStatusSuccessSamplingRate,
0: failures only), and a subscription filter on that group invokes the stack's SmsFeedbackFunctionArn
(chalicelib/sms_feedback.py). Both ARNs are stack outputs (docs/DEPLOY.md, "SMS delivery failures").
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any


def spend_limit(sns: Any) -> float | None:
    """The account's MonthlySpendLimit in USD, or None when it is not set."""
    raw = sns.get_sms_attributes(attributes=["MonthlySpendLimit"]).get("attributes", {}).get("MonthlySpendLimit")
    return float(raw) if raw not in (None, "") else None


def check(sns: Any, max_usd: float, *, set_it: bool = False) -> str:
    """Set the limit to `max_usd` when asked; then a problem to report, or '' when the limit is within `max_usd`."""
    if set_it:
        sns.set_sms_attributes(attributes={"MonthlySpendLimit": str(int(max_usd))})
    limit = spend_limit(sns)
    if limit is None:
        return "no SNS SMS MonthlySpendLimit is set in this account and region"
    if limit > max_usd:
        return f"the SNS SMS MonthlySpendLimit is {limit:g} USD, above the {max_usd:g} USD this deploy allows"
    return ""


FAILURE_LOG_RETENTION_DAYS = 30  # the records name phone numbers: kept a month, for reading a failure's reason
SUCCESS_SAMPLING_RATE = "0"  # only failures are acted on; success records would cost log ingestion for nothing


def failure_log_group(function_arn: str) -> str:
    """The log group SNS writes failed direct SMS deliveries to, in the function's region and account."""
    region, account = _region_and_account(function_arn)
    return f"sns/{region}/{account}/DirectPublishToPhoneNumber/Failure"


def _region_and_account(arn: str) -> tuple[str, str]:
    parts = arn.split(":")
    if len(parts) < 7 or parts[0] != "arn" or parts[2] != "lambda" or not parts[3] or not parts[4]:
        raise ValueError(f"not a Lambda function ARN: {arn!r}")
    return parts[3], parts[4]


def filter_name(function_arn: str) -> str:
    """The subscription filter's name: the function it feeds (two stacks in one account keep one each)."""
    return function_arn.split(":")[6]


def enable_delivery_status(sns: Any, logs: Any, *, role_arn: str, function_arn: str) -> None:
    """Turn on SMS delivery status logging for failures and subscribe the function to the failure log group."""
    sns.set_sms_attributes(
        attributes={"DeliveryStatusIAMRole": role_arn, "DeliveryStatusSuccessSamplingRate": SUCCESS_SAMPLING_RATE}
    )
    group = failure_log_group(function_arn)
    # Created here rather than on SNS's first failure, so the subscription has a group to attach to from the start.
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=group)
    logs.put_retention_policy(logGroupName=group, retentionInDays=FAILURE_LOG_RETENTION_DAYS)
    # An empty pattern: every record of the group is a failure.
    logs.put_subscription_filter(
        logGroupName=group, filterName=filter_name(function_arn), filterPattern="", destinationArn=function_arn
    )


def delivery_status_problem(sns: Any, logs: Any, *, role_arn: str, function_arn: str) -> str:
    """What keeps SMS delivery failures from reaching the function, or '' when nothing does."""
    role = (
        sns.get_sms_attributes(attributes=["DeliveryStatusIAMRole"]).get("attributes", {}).get("DeliveryStatusIAMRole")
    )
    if role != role_arn:
        return (
            f"SNS SMS delivery status logging does not assume {role_arn} (DeliveryStatusIAMRole is {role or 'unset'})"
        )
    group = failure_log_group(function_arn)
    try:
        filters = logs.describe_subscription_filters(logGroupName=group).get("subscriptionFilters", [])
    except logs.exceptions.ResourceNotFoundException:
        return f"the log group {group} does not exist"
    if not any(f.get("destinationArn") == function_arn for f in filters):
        return f"no subscription filter on {group} invokes {function_arn}"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-usd", type=float, required=True, help="the most SMS may cost in a month")
    parser.add_argument("--set", action="store_true", help="set MonthlySpendLimit to --max-usd first")
    parser.add_argument("--delivery-status-role", default="", help="the stack's SmsDeliveryStatusRoleArn output")
    parser.add_argument("--failure-function", default="", help="the stack's SmsFeedbackFunctionArn output")
    parser.add_argument("--region", default=None)
    args = parser.parse_args(argv)
    if bool(args.delivery_status_role) != bool(args.failure_function):
        parser.error("--delivery-status-role and --failure-function go together")
    import boto3

    sns = boto3.client("sns", region_name=args.region)
    problem = check(sns, args.max_usd, set_it=args.set)
    if problem:
        print(f"SMS spend check failed: {problem} (docs/DEPLOY.md)", file=sys.stderr)
        return 1
    print(f"SNS SMS monthly spend limit is within {args.max_usd:g} USD")
    if not args.failure_function:
        return 0
    logs = boto3.client("logs", region_name=args.region)
    wiring = {"role_arn": args.delivery_status_role, "function_arn": args.failure_function}
    if args.set:
        enable_delivery_status(sns, logs, **wiring)
    problem = delivery_status_problem(sns, logs, **wiring)
    if problem:
        print(f"SMS delivery status check failed: {problem} (docs/DEPLOY.md)", file=sys.stderr)
        return 1
    print(f"SMS delivery failures reach {args.failure_function}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
