"""The signed links a shopper receives: reserve, unsubscribe, manage, confirm and opt-in (see chalicelib/tokens.py)."""

from __future__ import annotations

from chalicelib.tokens import Tokens


class Links:
    """Builds absolute links under the stage's public base URL."""

    def __init__(self, base_url: str, tokens: Tokens) -> None:
        self.base_url = base_url.rstrip("/")
        self.tokens = tokens

    def reserve(self, token_id: str) -> str:
        """The link that holds one unit of an offer."""
        return f"{self.base_url}/reserve/{self.tokens.reserve(token_id)}"

    def unsubscribe(self, contact_key: str) -> str:
        """The one-click unsubscribe link (also the List-Unsubscribe header's target)."""
        return f"{self.base_url}/unsubscribe/{self.tokens.unsubscribe(contact_key)}"

    def manage(self, contact_key: str, version: int = 0) -> str:
        """The "see or change your requests" link, at the person's current link version."""
        return f"{self.base_url}/me/{self.tokens.manage(contact_key, version)}"

    def confirm(self, sku: str, joined_ts: str) -> str:
        """The link in a confirmation email: opens a page whose button confirms that one place."""
        return f"{self.base_url}/confirm/{self.tokens.confirm(sku, joined_ts)}"

    def optin(self, contact_key: str, nonce: str) -> str:
        """The link staff give a person who asked to hear from the shop again: its button lifts their opt-out."""
        return f"{self.base_url}/optin/{self.tokens.optin(contact_key, nonce)}"
