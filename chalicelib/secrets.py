"""Secrets: from the stage environment locally, from Secrets Manager (cached by Powertools) when deployed."""

from __future__ import annotations

from typing import Any

from chalicelib.config import ConfigError, Settings

CACHE_S = 300  # a rotated secret is picked up within five minutes


class Secrets:
    """Looks up the named secrets of the stage."""

    def __init__(self, settings: Settings, secretsmanager: Any | None = None) -> None:
        self.settings = settings
        self._client = secretsmanager

    def get(self, name: str) -> str:
        """The value of one secret (WEBHOOK_SECRET, TOKEN_KEY, CONTACT_HASH_KEY)."""
        if name in self.settings.secret_values:
            return self.settings.secret_values[name]
        ref = self.settings.secret_refs.get(name)
        if not ref:
            raise ConfigError(f"no value or secret id configured for {name}")
        # Imported here: Powertools' parameters module is only needed where secrets live in AWS.
        from aws_lambda_powertools.utilities import parameters

        provider = (
            parameters.SecretsProvider(boto3_client=self._client) if self._client else parameters.SecretsProvider()
        )
        value = provider.get(ref, max_age=CACHE_S)
        return str(value)

    def get_all(self, name: str) -> list[str]:
        """Every value of a secret that may hold several during a rotation (space or comma separated)."""
        return [part for part in self.get(name).replace(",", " ").split() if part]
