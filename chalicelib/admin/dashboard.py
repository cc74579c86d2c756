"""What the dashboard shows: demand, restocks and their funnel, and a SKU's waiting list (contacts masked).

Every figure comes from an index or a tally, never a table scan (docs/ADMIN.md, "What a page view costs"):
demand from the catalogue's sparse index by-demand and each listed SKU's joins in the period and in the days an
unconfirmed place can last (range Queries of its list's sort key); restocks from the restocks' sparse index
by-opened (one Query per month) with the funnel tallied on each restock as it happens (chalicelib/counters.py); a
waiting list a page at a time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from chalicelib.admin.periods import Period, seal, unseal
from chalicelib.clock import iso
from chalicelib.contacts import mask
from chalicelib.errors import BadRequest, NotFound
from chalicelib.tables.catalog import DEFAULT_BACKORDER_OFFER, Product
from chalicelib.tables.requests import ACTIVE_STATES, RequestState
from chalicelib.tables.restocks import Restock, RestockTally
from chalicelib.tables.store import Tables

DEMAND_SKUS = 50  # the most-wanted products listed
WAITING_PAGE = 50  # places on one page of a waiting list
FUNNEL = ("notified", "held", "bought")
# A person can be taken off a list by staff while waiting or offered (the offer passes on); a holder keeps the unit.
REMOVABLE = (RequestState.WAITING, RequestState.OFFERED)


# What the waiting list says of a place its email address has not confirmed yet: the notifier passes it over
# (SkipReason.UNCONFIRMED, as the support desk explains it), so a unit goes to someone behind it.
UNCONFIRMED_NOTE = (
    "An unconfirmed place is passed over at a restock until its email address confirms it (it keeps its position), "
    "so people behind it are told first."
)


@dataclass(frozen=True)
class RestockAdvice:
    """What stock level tells whom, for an out-of-stock product (the rule is chalicelib/detect.py `decide`).

    Detection opens a restock only when the shelf level crosses from below the threshold to at least it, and the
    restock has as many units as that level; the shelf level is the store's own plus the units our holds keep on
    the store (`store_held`). Each unit tells one person, oldest place first, passing over the places whose email
    address has not confirmed them. So a store level below `notify_from` tells nobody, and `restock_to` tells every
    confirmed place waiting now.
    """

    notify_from: int
    restock_to: int
    confirmed: int
    text: str


def restock_advice(*, threshold: int, store_held: int, waiting: int, unconfirmed: int) -> RestockAdvice:
    """The advice for a product out of stock with `waiting` live places, `unconfirmed` of them unconfirmed emails."""
    confirmed = max(waiting - unconfirmed, 0)
    notify_from = max(threshold - store_held, 0)
    restock_to = max(threshold, confirmed) - store_held
    parts = []
    if notify_from > 1:
        parts.append(f"Below {notify_from} units nobody is told (the notify threshold is {threshold}).")
    if waiting == 0:
        parts.append(f"A stock level of {notify_from} or more opens a restock, but nobody is waiting.")
    elif confirmed == 0:
        parts.append(f"A stock level of {notify_from} or more opens a restock, but nobody waiting has confirmed yet.")
    elif restock_to == notify_from:
        everyone = "the 1 confirmed person" if confirmed == 1 else f"all {confirmed} confirmed people"
        parts.append(f"A stock level of {restock_to} tells {everyone} waiting.")
    else:
        # A restock opened at notify_from has `threshold` units: one notice each.
        first = "the first confirmed person" if threshold == 1 else f"the first {threshold} confirmed people"
        parts.append(
            f"A stock level of {notify_from} tells {first} in line, one per unit; "
            f"{restock_to} tells all {confirmed} confirmed."
        )
    if store_held:
        unit = "1 unit" if store_held == 1 else f"{store_held} units"
        parts.append(f"These are the store's own levels: the {unit} our holds keep on the store count too.")
    if unconfirmed:
        places = "1 unconfirmed email place is" if unconfirmed == 1 else f"{unconfirmed} unconfirmed email places are"
        parts.append(f"{places} passed over until confirmed.")
    return RestockAdvice(notify_from=notify_from, restock_to=restock_to, confirmed=confirmed, text=" ".join(parts))


def _sold_out_seconds(restock: Restock, tally: RestockTally) -> int | None:
    """From detection to the sale of its last unit (None until every unit is sold)."""
    bought = sum(tally.bought.values())
    if restock.units_total <= 0 or bought < restock.units_total or tally.last_sale_at is None:
        return None
    if restock.created_at is None:
        return None
    return max(0, tally.last_sale_at - restock.created_at)


def _revenue(price: str | None, bought: int) -> str:
    """Price from the catalogue times units bought, as a decimal string ('0' when the catalogue has no price)."""
    try:
        return str((Decimal(price) if price else Decimal(0)) * bought)
    except InvalidOperation:
        return "0"


@dataclass(frozen=True, kw_only=True, eq=False)
class Dashboard:
    """The dashboard's read models over the app's tables."""

    tables: Tables

    # --- Demand

    def _joins(self, sku: str, period: Period, recent: tuple[str, str]) -> tuple[list[str], int]:
        """The join stamps of the period, and how many live places are unconfirmed: an unconfirmed place goes when
        its confirmation days run out, so all of them joined within `recent`. One Query when the two ranges meet
        (the default period holds `recent`), else one each."""
        start, end = iso(period.start), iso(period.end) + "~"
        if start <= recent[1] and recent[0] <= end:
            rows = self.tables.requests.joined_between(sku, min(start, recent[0]), max(end, recent[1]))
            in_period, in_recent = rows, rows
        else:
            in_period = self.tables.requests.joined_between(sku, start, end)
            in_recent = self.tables.requests.joined_between(sku, *recent)
        stamps = [stamp for stamp, _ in in_period if start <= stamp <= end]
        return stamps, sum(1 for stamp, unconfirmed in in_recent if unconfirmed and recent[0] <= stamp)

    def demand(self, period: Period, *, now: float, confirm_days: int) -> dict[str, Any]:
        """Most-wanted out-of-stock products, people who joined each list in the period, and joins per day; with
        each product's unconfirmed email places and what stock level would tell whom."""
        # A day more than the confirmation days: the sweep takes an expired place a little after its ttl.
        recent = (iso(now - (confirm_days + 1) * 86400), iso(now) + "~")
        daily: Counter[str] = Counter()
        skus = []
        for product in self.tables.catalog.demand(limit=DEMAND_SKUS):
            joined, unconfirmed = self._joins(product.sku, period, recent)
            daily.update(stamp[:10] for stamp in joined)
            # The shards and the Query are read apart: never more unconfirmed than waiting.
            unconfirmed = min(unconfirmed, product.waiting_count)
            advice = restock_advice(
                threshold=product.threshold,
                store_held=product.store_held,
                waiting=product.waiting_count,
                unconfirmed=unconfirmed,
            )
            skus.append(
                {
                    "sku": product.sku,
                    "name": product.name or product.sku,
                    "waiting": product.waiting_count,
                    "unconfirmed": unconfirmed,
                    "new_in_period": len(joined),
                    "threshold": product.threshold,
                    "notify_from": advice.notify_from,
                    "restock_hint": advice.restock_to,
                    "advice": advice.text,
                }
            )
        return {
            "from": period.first.isoformat(),
            "to": period.last.isoformat(),
            "skus": skus,
            "daily": [{"date": day, "new": daily.get(day, 0)} for day in period.days()],
        }

    # --- Restocks

    def _products(self, skus: set[str]) -> dict[str, Product | None]:
        """Names and prices for the listed SKUs: one BatchGetItem per 100."""
        found = self.tables.catalog.get_many(sorted(skus))
        return {sku: found.get(sku) for sku in skus}

    @staticmethod
    def _row(restock: Restock, tally: RestockTally, product: Product | None) -> dict[str, Any]:
        bought = sum(tally.bought.values())
        return {
            "restock_id": restock.restock_id,
            "sku": restock.sku,
            "name": (product.name if product else "") or restock.sku,
            "opened_at": iso(restock.created_at)[:19] + "Z" if restock.created_at is not None else None,
            "units": restock.units_total,
            "notified": sum(tally.notified.values()),
            "held": tally.held,
            "bought": bought,
            "lapsed": tally.lapsed,
            "expired": tally.expired,
            "sold_out_seconds": _sold_out_seconds(restock, tally),
            "revenue": _revenue(product.price if product else None, bought),
            "currency": (product.currency if product else None) or "",
        }

    def restocks(self, period: Period) -> dict[str, Any]:
        """Every restock opened in the period with its funnel, and conversion by channel over them all."""
        found = list(self.tables.restocks.opened_between(period.start, period.end))
        products = self._products({restock.sku for restock, _ in found})
        notified: Counter[str] = Counter()
        bought: Counter[str] = Counter()
        for _, tally in found:
            notified.update(tally.notified)
            bought.update(tally.bought)
        channels = sorted(set(notified) | set(bought))
        return {
            "from": period.first.isoformat(),
            "to": period.last.isoformat(),
            "restocks": [self._row(restock, tally, products[restock.sku]) for restock, tally in found],
            "by_channel": [
                {
                    "channel": channel,
                    "notified": notified[channel],
                    "bought": bought[channel],
                    "rate": round(bought[channel] / notified[channel], 4) if notified[channel] else 0.0,
                }
                for channel in channels
            ],
        }

    def restock(self, restock_id: str, period: Period) -> dict[str, Any]:
        """One restock of the period by its id, with its funnel stages."""
        for restock, tally in self.tables.restocks.opened_between(period.start, period.end):
            if restock.restock_id == restock_id:
                row = self._row(restock, tally, self.tables.catalog.get_cached(restock.sku))
                row["funnel"] = [{"stage": stage, "count": row[stage]} for stage in FUNNEL]
                return row
        raise NotFound("No restock with that id was opened in the period.", code="unknown_restock")

    # --- Waiting list

    def waiting(self, sku: str, cursor: str | None) -> dict[str, Any]:
        """One page of a SKU's live waiting list, oldest first, contacts masked, with each row's action, and what the
        widget offers while the store sells the product on backorder."""
        # Not the cached read: a choice just saved from another instance must show when the page is read again.
        product = self.tables.catalog.get(sku)
        if product is None:
            raise NotFound("No product with that SKU is in the catalogue.", code="unknown_sku")
        after, position = "", 0
        if cursor:
            state = unseal(cursor, "cursor")
            after, seen = str(state.get("a", "")), state.get("p")
            if not after or isinstance(seen, bool) or not isinstance(seen, int) or seen < 0:
                raise BadRequest("`cursor` is not one this dashboard gave out.", code="invalid_cursor")
            position = seen
        entries: list[dict[str, Any]] = []
        last = ""
        more = False
        for page in self.tables.requests.queue_pages(sku, after=after, page_size=WAITING_PAGE + 1):
            for request in page:
                if len(entries) == WAITING_PAGE:
                    more = True
                    break
                last = request.joined_ts
                if request.state not in ACTIVE_STATES:
                    continue
                position += 1
                entries.append(
                    {
                        "position": position,
                        "contact": mask(request.contact),
                        "channel": request.channel,
                        "state": str(request.state),
                        "unconfirmed": request.unconfirmed,
                        "note": UNCONFIRMED_NOTE if request.unconfirmed else None,
                        "joined_at": request.joined_ts.split("#", 1)[0],
                        "action": "remove" if request.state in REMOVABLE else None,
                        "ref": seal({"j": request.joined_ts}),
                    }
                )
            if more:
                break
        return {
            "sku": sku,
            "name": product.name or sku,
            "backorder": product.backorder,
            "backorder_offer": product.backorder_offer or DEFAULT_BACKORDER_OFFER,
            "entries": entries,
            "next": seal({"a": last, "p": position}) if more else None,
        }
