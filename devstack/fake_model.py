"""A stand-in for the Bedrock runtime client, for the local stage (`COPY_MODE=fake`) and the tests."""

from __future__ import annotations

import json
from typing import Any

from chalicelib.compose import LINK, PRODUCT, SHOP
from chalicelib.config import Settings


class FakeBedrock:
    """A stand-in for the Bedrock runtime client (local stage and tests): fixed text, or a given failure.

    Without fixed text it answers the way a model asked by user_prompt would: with the placeholders for the names,
    which composing fills in, so the local demo's notices read like real ones.
    """

    def __init__(self, text: str | None = None, error: Exception | None = None, stop_reason: str = "end_turn") -> None:
        self.text = text
        self.error = error
        self.stop_reason = stop_reason
        self.calls: list[dict[str, Any]] = []

    @staticmethod
    def written() -> str:
        """The fake's notice: the product and the shop as placeholders (the prompt holds no names), the link once."""
        return json.dumps(
            {
                "sms": f"Good news: {PRODUCT} is back! Tap soon to hold one while you check out: {LINK}",
                "email_subject": f"{PRODUCT} is back in stock",
                "email_body": (
                    f"{PRODUCT} is back in stock at {SHOP}, and you asked to be told first.\n\n"
                    f"Tap the link to hold one while you check out:\n\n{LINK}\n\n"
                    "If you don't use it in time, it passes to the next person waiting."
                ),
            }
        )

    def converse(self, **kwargs: Any) -> dict[str, Any]:
        """Answer like Converse does."""
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        text = self.text
        if text is None:
            text = self.written()
        content = [{"text": text}] if text else []
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": self.stop_reason,
            "usage": {"inputTokens": 200, "outputTokens": 120, "totalTokens": 320},
        }


def model_for(settings: Settings) -> FakeBedrock | None:
    """The model client the local stack passes to Services: the fake when the stage says `COPY_MODE=fake`."""
    return FakeBedrock() if settings.copy_mode == "fake" else None
