"""The generic platform: any shop that posts our own webhooks and hosts a JSON product feed (docs/WEBHOOKS.md).

Its hold lives in our tables only: the checkout is the product's own `checkout_url`, which carries the
reservation id so that the shop's checkout can report the order back.
"""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.platforms.base import GENERIC, HoldRequest, StoreHold, StoreRefused


@dataclass(frozen=True)
class GenericStore:
    """A store we hold nothing on."""

    name = GENERIC
    # A hold lives in our tables only: the shop's own checkout honours the reservation id in its URL, or nothing does.
    holds_on_store = False

    def place_hold(self, hold: HoldRequest) -> StoreHold:
        """The product's checkout URL for this reservation; StoreRefused when the product has no usable one."""
        # Imported here: holds.py imports this module's package, not the other way round at load time.
        from chalicelib.holds import checkout_location

        location = checkout_location(hold.checkout_url, hold.sku, hold.reservation_id)
        if location is None:
            raise StoreRefused(f"product {hold.sku} has no usable checkout URL")
        return StoreHold(ref=hold.reservation_id, checkout_url=location)

    def release_hold(self, reservation_id: str, ref: str | None) -> None:
        """Nothing to give back: no generic hold is ever placed on the store."""
        return None

    def release_duplicates(self, reservation_id: str, ref: str) -> bool:
        """Settled: a hold in our tables alone has no copy anywhere."""
        return True
