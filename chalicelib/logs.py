"""The app's logs: one JSON object per line (Powertools Logger), at the stage's POWERTOOLS_LOG_LEVEL.

Modules log through `logging.getLogger(__name__)`; those loggers are children of `chalicelib`, which
`configure` gives the Powertools handler and level (Powertools' `copy_config_to_registered_loggers`), so every
line carries the level, time, location, logger name and `service` (POWERTOOLS_SERVICE_NAME). `correlated` adds
the ids known in a block (restock, token, SQS message) to the lines the current thread writes inside it.
A log line never names a contact: ids and keyed hashes only (tests/flows/test_logs_name_no_contact.py).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

APP_LOGGER = "chalicelib"

_source: Logger | None = None


def configure() -> Logger:
    """Route every `chalicelib.*` logger through one Powertools JSON handler on stdout (the function's log group).

    The level is POWERTOOLS_LOG_LEVEL (INFO when unset; Lambda's own log-level setting wins if a stage sets one).
    Idempotent: the handler is installed once per process.
    """
    global _source
    if _source is None:
        # Imported here: only a function that loads the app pays for it, once, at its cold start.
        from aws_lambda_powertools import Logger
        from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

        source = Logger()
        logging.getLogger(APP_LOGGER)  # registered now, so the copy reaches it; the modules' loggers log through it
        copy_config_to_registered_loggers(source_logger=source, include={APP_LOGGER})
        _source = source
    return _source


def offer_ref(token_id: str) -> str:
    """How a log line names an offer: an offer's id is the key of its reserve link (`/r/{id}`), so whoever reads
    the logs must not be able to hold its unit with it. A short digest still ties the lines of one offer together."""
    return "o-" + hashlib.sha256(token_id.encode()).hexdigest()[:16]


@contextmanager
def correlated(**ids: str) -> Iterator[None]:
    """Add these keys to every log line this thread writes inside the block (nothing when logs are not configured,
    e.g. a service called directly by a tool)."""
    source = _source
    if source is None:
        yield
        return
    source.thread_safe_append_keys(**ids)
    try:
        yield
    finally:
        source.thread_safe_remove_keys(ids.keys())
