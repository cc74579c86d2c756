"""The Notify-me widget as the API serves it: its size raw and gzipped (levels 9 and 6), against 10 KB.

The script is built exactly as GET /widget.js builds it for the local stage (the shop's accent, consent line,
phone example and all five languages' strings written in); what a shopper's browser downloads is the gzipped size.
"""

from __future__ import annotations

import gzip
from typing import Any

from chalicelib.config import settings_from_env
from chalicelib.shopper.widget import widget_source
from infra.stages import stage_env

# What the widget may weigh, gzipped, with its styles and every language: 10 KB.
BUDGET_BYTES = 10 * 1024


def widget_size() -> dict[str, Any]:
    """The served script's bytes: raw, gzipped at level 9 (a build step) and 6 (most servers' default)."""
    settings = settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": "eu-west-2"})
    served = widget_source(settings).encode("utf-8")
    return {
        "raw": len(served),
        "gzip9": len(gzip.compress(served, compresslevel=9)),
        "gzip6": len(gzip.compress(served, compresslevel=6)),
        "budget": BUDGET_BYTES,
    }
