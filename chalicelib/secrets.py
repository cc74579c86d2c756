"""Secrets: from the stage environment locally, from Secrets Manager (cached by Powertools) when deployed."""

from __future__ import annotations

from typing import Any

from chalicelib.config import ConfigError, Settings

CACHE_S = 300  # a rotated secret is picked up by a warm container within five minutes


def split_values(value: str) -> list[str]:
    """The values of a secret that holds several during a rotation: space or comma separated, newest first."""
    return [part for part in value.replace(",", " ").split() if part]


class Secrets:
    """Looks up the named secrets of the stage.

    Built once per container (`Services.secrets`), and it holds the container's one Powertools
    SecretsProvider: the provider's cache lives on the provider object, so a provider made per read would
    ask Secrets Manager every time. With one, a secret is fetched once per `max_age_s` at most, and a
    rotation reaches a warm container when its cached value expires.
    """

    def __init__(self, settings: Settings, secretsmanager: Any | None = None, *, max_age_s: int = CACHE_S) -> None:
        self.settings = settings
        self._client = secretsmanager
        self.max_age_s = max_age_s
        self._provider: Any | None = None

    def _secrets_provider(self) -> Any:
        if self._provider is None:
            # Imported here: Powertools' parameters module is only needed where secrets live in AWS.
            from aws_lambda_powertools.utilities import parameters

            self._provider = (
                parameters.SecretsProvider(boto3_client=self._client) if self._client else parameters.SecretsProvider()
            )
        return self._provider

    def get(self, name: str) -> str:
        """The value of one secret (WEBHOOK_SECRET, TOKEN_KEY, CONTACT_HASH_KEY, ...)."""
        if name in self.settings.secret_values:
            return self.settings.secret_values[name]
        ref = self.settings.secret_refs.get(name)
        if not ref:
            raise ConfigError(f"no value or secret id configured for {name}")
        value = self._secrets_provider().get(ref, max_age=self.max_age_s)
        return str(value)

    def get_all(self, name: str) -> list[str]:
        """Every value of a secret that may hold several during a rotation (space or comma separated, newest
        first): sign with the first, accept any."""
        values = split_values(self.get(name))
        if not values:
            raise ConfigError(f"{name} is empty")
        return values
