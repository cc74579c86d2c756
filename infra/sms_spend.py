"""Check (or set) the account's SNS SMS monthly spend limit at deploy: CloudFormation has no resource for it.

    python -m infra.sms_spend --max-usd 20          # fails unless a limit is set, at most 20 USD
    python -m infra.sms_spend --max-usd 20 --set    # sets it to 20 USD first

SNS stops sending SMS for the rest of the month once the limit is spent: the last guard against SMS pumping.
A limit above 1 USD needs an AWS support case first (docs/DEPLOY.md, "SMS spend and protect").
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-usd", type=float, required=True, help="the most SMS may cost in a month")
    parser.add_argument("--set", action="store_true", help="set MonthlySpendLimit to --max-usd first")
    parser.add_argument("--region", default=None)
    args = parser.parse_args(argv)
    import boto3

    problem = check(boto3.client("sns", region_name=args.region), args.max_usd, set_it=args.set)
    if problem:
        print(f"SMS spend check failed: {problem} (docs/DEPLOY.md)", file=sys.stderr)
        return 1
    print(f"SNS SMS monthly spend limit is within {args.max_usd:g} USD")
    return 0


if __name__ == "__main__":
    sys.exit(main())
