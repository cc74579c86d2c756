"""A stand-in for the Bedrock runtime client, for the local stage (`COPY_MODE=fake`) and the tests."""

from __future__ import annotations

import json
import re
from typing import Any

from chalicelib.config import Settings
from chalicelib.i18n import LANGUAGES
from chalicelib.messages.compose import LINK, PRODUCT, SHOP

# What the fake writes in each language, with the placeholders for the names (the prompt holds none) and the link
# once: sms, email_subject, then the email body's paragraphs (the link's paragraph between them).
WRITTEN: dict[str, tuple[str, str, str, str, str]] = {
    "en": (
        f"Good news: {PRODUCT} is back! Tap to hold one: {LINK}",
        f"{PRODUCT} is back in stock",
        f"{PRODUCT} is back in stock at {SHOP}, and you asked to be told first.",
        "Tap the link to hold one while you check out:",
        "If you don't use it in time, it passes to the next person waiting.",
    ),
    "de": (
        f"{PRODUCT} ist wieder da! Jetzt sichern: {LINK}",
        f"{PRODUCT} ist wieder vorrätig",
        f"{PRODUCT} ist bei {SHOP} wieder vorrätig, und Sie wollten es zuerst erfahren.",
        "Tippen Sie auf den Link, um eins zu sichern, während Sie bezahlen:",
        "Wenn Sie ihn nicht rechtzeitig nutzen, geht er an die nächste Person auf der Warteliste.",
    ),
    "fr": (
        f"{PRODUCT} est de retour ! En garder un : {LINK}",
        f"{PRODUCT} est de retour en stock",
        f"{PRODUCT} est de retour chez {SHOP}, et vous vouliez l'apprendre en premier.",
        "Touchez le lien pour en garder un le temps de payer :",
        "Si vous ne l'utilisez pas à temps, il passe à la personne suivante.",
    ),
    "es": (
        f"¡{PRODUCT} ha vuelto! Aparta uno: {LINK}",
        f"{PRODUCT} vuelve a estar disponible",
        f"{PRODUCT} vuelve a estar disponible en {SHOP}, y pediste enterarte antes que nadie.",
        "Toca el enlace para apartar uno mientras pagas:",
        "Si no lo usas a tiempo, pasa a la siguiente persona de la lista.",
    ),
    "nl": (
        f"{PRODUCT} is terug! Houd er een vast: {LINK}",
        f"{PRODUCT} is weer op voorraad",
        f"{PRODUCT} is weer op voorraad bij {SHOP}, en je wilde het als eerste weten.",
        "Tik op de link om er een vast te houden terwijl je afrekent:",
        "Gebruik je hem niet op tijd, dan gaat hij naar de volgende persoon.",
    ),
}
# The languages a prompt asks for: its "- de (German...): ..." lines (chalicelib/messages/copywriter.py user_prompt).
ASKED = re.compile(r"^- ([a-z]{2}) \(", re.MULTILINE)


class FakeBedrock:
    """A stand-in for the Bedrock runtime client (local stage and tests): fixed text, or a given failure.

    Without fixed text it answers the way a model asked by user_prompt would: one JSON object keyed by each
    language the prompt asks for, with the placeholders for the names, which composing fills in, so the local
    demo's notices read like real ones in every language.
    """

    def __init__(self, text: str | None = None, error: Exception | None = None, stop_reason: str = "end_turn") -> None:
        self.text = text
        self.error = error
        self.stop_reason = stop_reason
        self.calls: list[dict[str, Any]] = []

    @staticmethod
    def written(langs: tuple[str, ...] = LANGUAGES) -> str:
        """The fake's notice in each language asked for, keyed by language as the prompt asks."""
        answer = {}
        for lang in langs:
            sms, subject, opening, lead, closing = WRITTEN[lang]
            body = f"{opening}\n\n{lead}\n\n{LINK}\n\n{closing}"
            answer[lang] = {"sms": sms, "email_subject": subject, "email_body": body}
        return json.dumps(answer, ensure_ascii=False)

    @staticmethod
    def asked(kwargs: dict[str, Any]) -> tuple[str, ...]:
        """The languages the request's prompt asks for (all of them when it names none)."""
        prompt = " ".join(
            str(block.get("text", "")) for m in kwargs.get("messages") or [] for block in m.get("content") or []
        )
        found = tuple(lang for lang in ASKED.findall(prompt) if lang in WRITTEN)
        return found or LANGUAGES

    def converse(self, **kwargs: Any) -> dict[str, Any]:
        """Answer like Converse does."""
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        text = self.text
        if text is None:
            text = self.written(self.asked(kwargs))
        content = [{"text": text}] if text else []
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": self.stop_reason,
            "usage": {"inputTokens": 200, "outputTokens": 120, "totalTokens": 320},
        }


def model_for(settings: Settings) -> FakeBedrock | None:
    """The model client the local stack passes to Services: the fake when the stage says `COPY_MODE=fake`."""
    return FakeBedrock() if settings.copy_mode == "fake" else None
