"""The links a shopper receives: reserve, unsubscribe, manage, confirm and opt-in.

An offer row's id is a random link id (chalicelib/link_ids.py), so its reserve link is short: `/r/{id}`, looked
up in the reservations table. A person's SMS carries a short manage link, `/m/{id}`, whose id is kept in the
opt-out table (chalicelib/tables/optout.py). Everything else is signed (chalicelib/tokens.py); a row made
before ids were random is linked by a signed token as before.
"""

from __future__ import annotations

from chalicelib.link_ids import is_link_id
from chalicelib.tokens import Tokens

RESERVE_SHORT = "/r/"
MANAGE_SHORT = "/m/"


class Links:
    """Builds absolute links under the stage's public base URL."""

    def __init__(self, base_url: str, tokens: Tokens) -> None:
        self.base_url = base_url.rstrip("/")
        self.tokens = tokens

    def reserve(self, token_id: str) -> str:
        """The link that holds one unit of an offer: the row's own random id when it is one, else signed."""
        if is_link_id(token_id):
            return f"{self.base_url}{RESERVE_SHORT}{token_id}"
        return f"{self.base_url}/reserve/{self.tokens.reserve(token_id)}"

    def unsubscribe(self, contact_key: str) -> str:
        """The one-click unsubscribe link (also the List-Unsubscribe header's target)."""
        return f"{self.base_url}/unsubscribe/{self.tokens.unsubscribe(contact_key)}"

    def manage(self, contact_key: str, version: int = 0) -> str:
        """The signed "see or change your requests" link, at the person's current link version (emails)."""
        return f"{self.base_url}/me/{self.tokens.manage(contact_key, version)}"

    def manage_short(self, link_id: str) -> str:
        """The short manage link an SMS carries: the person's current manage id."""
        return f"{self.base_url}{MANAGE_SHORT}{link_id}"

    def manage_in_sms(self, contact_key: str, version: int, link_id: str | None) -> str:
        """The manage link for an SMS: the short one where the person has a manage id, else the signed one (longer,
        as good)."""
        return self.manage_short(link_id) if link_id else self.manage(contact_key, version)

    def confirm(self, sku: str, joined_ts: str) -> str:
        """The link in a confirmation email: opens a page whose button confirms that one place."""
        return f"{self.base_url}/confirm/{self.tokens.confirm(sku, joined_ts)}"

    def optin(self, contact_key: str, nonce: str) -> str:
        """The link staff give a person who asked to hear from the shop again: its button lifts their opt-out."""
        return f"{self.base_url}/optin/{self.tokens.optin(contact_key, nonce)}"
