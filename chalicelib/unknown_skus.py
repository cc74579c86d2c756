"""Taps naming SKUs the catalogue does not know: counted per window, and told to staff once per window.

A product page with a wrong SKU shows up as a burst of taps on one unknown SKU; a bot can make up thousands.
So an SKU is named in its window's digest once it reaches the threshold, the digest names at most
`DIGEST_CAP` SKUs (and counts the rest), and the sweep sends one staff alert per window after it ends. The
SKUs in it are defanged: shoppers choose them, and a mail client must not turn one into a link.
"""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.alerts import StaffAlerts
from chalicelib.tables.throttle import Digests, RateCounters

DIGEST_CAP = 50


def defang(sku: str) -> str:
    """An SKU as staff may read it but no mail client can follow it: dots, colons and slashes bracketed."""
    return sku.replace(".", "[.]").replace(":", "[:]").replace("/", "[/]")


@dataclass(frozen=True, kw_only=True, eq=False)
class UnknownSkus:
    """Counts taps on unknown SKUs and sends each window's digest once."""

    counters: RateCounters
    digests: Digests
    alerts: StaffAlerts
    window_s: int
    threshold: int

    def _digest_key(self, bucket: int) -> str:
        return f"unknown-digest#{bucket}"

    def record(self, sku: str, now: float) -> None:
        """One more tap on `sku` in this window; at the threshold the SKU joins the window's digest."""
        bucket = int(now // self.window_s)
        expires = (bucket + 3) * self.window_s  # the digest is sent after the window ends: keep it a while
        count = self.counters.bump(f"unknown#{sku}#{bucket}", expires)
        # Exactly at the threshold, so each SKU is named once per window, however many taps follow.
        if count == self.threshold:
            self.digests.add_to_digest(self._digest_key(bucket), sku, cap=DIGEST_CAP, expires_at=expires)

    def send_due(self, now: float) -> bool:
        """Send the digest of the window that ended last, once; True when this call sent it.

        The alert goes before the digest is marked sent, so a crash between the two sends it again on the next
        sweep (a repeated staff note) rather than never.
        """
        key = self._digest_key(int(now // self.window_s) - 1)
        skus, more, sent = self.digests.digest(key)
        if sent or not skus:
            return False
        listed = "\n".join(f"- {defang(sku)}" for sku in skus)
        extra = f"\nand {more} more unknown SKUs." if more else ""
        self.alerts.send(
            f"Shoppers asked for {len(skus) + more} unknown SKU(s)",
            f"In the last {self.window_s // 60} minutes, each of these SKUs was named by at least {self.threshold} "
            f"Notify-me taps but is not in the catalogue:\n{listed}{extra}\n"
            "If one is a real product, add it (or fix the product page's SKU). Dots, colons and slashes are "
            "bracketed so that no SKU can be followed as a link.",
        )
        return self.digests.mark_digest_sent(key, now)
