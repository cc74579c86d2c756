"""First step of `make package` for a real stage: refuse the sample settings .chalice/config.json ships with.

The `dev` and `prod` stages come filled with a made-up shop ("Your Shop" at `your-shop.example`), so that the
project packages and lints out of the box. Deployed as they are, shoppers would get messages signed by "Your
Shop" with links to a domain that cannot exist, and the widget would be refused on the real storefront. This
lists every such setting of a stage, naming each, and exits 1 when there is any.

A setting is a placeholder when it is:
- the sample shop name ("Your Shop"), or empty where a value is needed;
- a URL, address or host under a name reserved for examples and tests (RFC 2606 and RFC 6761): the top-level
  `.example`, `.test`, `.invalid`, `.localhost`, or `example.com`, `example.net`, `example.org`;
- an ARN in an account id AWS's documentation uses as an example (111122223333, 123456789012, ...), except
  ALERT_TOPIC_ARN, which the template sets from the stack (docs/DEPLOY.md);
- an inline secret marked as local-only.

The first deployment cannot know the API's own address yet (docs/DEPLOY.md step 7), so names given with
`--allow` (`make package STAGE=prod ALLOW_PLACEHOLDERS=PUBLIC_BASE_URL`) are let through and said so.

    .venv/bin/python -m infra.placeholders --stage prod [--allow PUBLIC_BASE_URL]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infra.stages import UnknownStage, stage_env

SAMPLE_SHOP_NAMES = {"your shop"}
# RFC 2606 §2-3 and RFC 6761 §6: names that never resolve to anyone's shop.
RESERVED_TLDS = ("example", "test", "invalid", "localhost")
RESERVED_DOMAINS = ("example.com", "example.net", "example.org")
# Account ids AWS's own documentation writes in example ARNs.
EXAMPLE_ACCOUNTS = {"111122223333", "123456789012", "444455556666", "777788889999", "000000000000"}
# Set from the stack by infra/template.json, whatever the config says.
FROM_THE_STACK = {"ALERT_TOPIC_ARN"}
# Each needs a value, or its _SECRET_ID (chalicelib/config.py reads them so).
SECRETS = ("WEBHOOK_SECRET", "TOKEN_KEY", "CONTACT_HASH_KEY")
LOCAL_ONLY_MARKERS = ("local-only", "not-for-production", "local_fake", "fake-")

HOST = re.compile(r"(?<![\w.-])((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z][a-z0-9-]*)(?![\w-])", re.IGNORECASE)
ARN_ACCOUNT = re.compile(r"arn:aws[\w-]*:[\w-]+:[\w-]*:(\d{12}):")


@dataclass(frozen=True)
class Placeholder:
    """One setting still holding a sample value, and why it counts as one."""

    name: str
    value: str
    reason: str

    def line(self) -> str:
        """The setting as the message names it."""
        return f"{self.name} = {self.value!r}: {self.reason}"


def _reserved(host: str) -> bool:
    host = host.lower().rstrip(".")
    if host.rsplit(".", 1)[-1] in RESERVED_TLDS:
        return True
    return any(host == d or host.endswith("." + d) for d in RESERVED_DOMAINS)


def find(env: Mapping[str, str]) -> list[Placeholder]:
    """Every placeholder setting of a stage's environment, in the config's order."""
    found: list[Placeholder] = []
    for name, value in env.items():
        text = str(value)
        if name == "SHOP_NAME" and (not text.strip() or text.strip().lower() in SAMPLE_SHOP_NAMES):
            found.append(Placeholder(name, text, "the sample shop name; shoppers see it in every message"))
            continue
        hosts = [h for h in HOST.findall(text) if _reserved(h)]
        if hosts:
            found.append(Placeholder(name, text, f"{', '.join(sorted(set(hosts)))} is a reserved example name"))
            continue
        accounts = [a for a in ARN_ACCOUNT.findall(text) if a in EXAMPLE_ACCOUNTS]
        if accounts and name not in FROM_THE_STACK:
            found.append(Placeholder(name, text, f"account {accounts[0]} is an example account id"))
            continue
        if name.endswith("_SECRET_ID") and not text.strip():
            found.append(Placeholder(name, text, "empty: name the Secrets Manager secret"))
            continue
        if name in SECRETS and any(marker in text.lower() for marker in LOCAL_ONLY_MARKERS):
            found.append(Placeholder(name, "…", "the local stage's throwaway value; use a secret (…_SECRET_ID)"))
    named = {p.name for p in found}
    for secret in SECRETS:
        missing = not env.get(secret, "").strip() and not env.get(f"{secret}_SECRET_ID", "").strip()
        if missing and f"{secret}_SECRET_ID" not in named:
            found.append(Placeholder(f"{secret}_SECRET_ID", "", "missing: name the Secrets Manager secret"))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Check one stage; 0 when it is ready to package, 1 (naming each placeholder) when it is not."""
    parser = argparse.ArgumentParser(prog="python -m infra.placeholders", description=__doc__.splitlines()[0])
    parser.add_argument("--stage", required=True)
    parser.add_argument(
        "--allow", default="", help="comma-separated settings to let through (PUBLIC_BASE_URL on a first deployment)"
    )
    args = parser.parse_args(argv)
    try:
        env = stage_env(args.stage)
    except UnknownStage as error:
        print(f"infra.placeholders: {error}", file=sys.stderr)
        return 1
    allowed = {a.strip() for a in args.allow.split(",") if a.strip()}
    found = find(env)
    refused = [p for p in found if p.name not in allowed]
    for p in found:
        if p.name in allowed:
            print(f"Allowed for now: {p.line()}", file=sys.stderr)
    if not refused:
        return 0
    print(
        f"Stage {args.stage!r} of .chalice/config.json still has {len(refused)} placeholder setting(s); "
        "set them in stages." + args.stage + ".environment_variables (docs/DEPLOY.md step 2):",
        file=sys.stderr,
    )
    for p in refused:
        print(f"  {p.line()}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
