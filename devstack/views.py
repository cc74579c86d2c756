"""What the console shows, assembled from the tables: products, queues with counters, audit, the outbox.

Dev-only reads: the console may scan the small reservation table of a demo; the app never does.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from boto3.dynamodb.conditions import Attr, Key

from chalicelib.contacts import mask
from chalicelib.link_ids import is_link_id
from chalicelib.tables.base import plain
from chalicelib.tables.catalog import PRODUCT_FIELDS, Product
from chalicelib.tokens import TokenExpired, TokenInvalid
from chalicelib.wiring import Services
from devstack import outbox
from devstack.stores import LocalStores

ACTIVE = ("waiting", "offered", "reserved")
STATUS_LABELS = {"reserved": "holding"}
# Offer row states, and what a request's latest one says about it once it is back to waiting.
AFTER_OFFER = {"lapsed": "lapsed", "expired": "hold expired"}


def product(item: Product) -> dict[str, Any]:
    """A catalogue product as the console shows it."""
    data = plain(item.to_item())
    level = data.get("level")
    threshold = int(data.get("threshold", 1))
    view = {k: data.get(k) for k in ("sku", *PRODUCT_FIELDS)}
    view.update(
        level=level,
        in_stock=level is not None and int(level) >= threshold,
        waiting_count=int(data.get("waiting_count", 0) or 0),
        open_restock_ts=data.get("open_restock_ts"),
        discontinued=bool(data.get("discontinued", False)),
        image_url=data.get("image_url"),  # the storefront card's picture
    )
    return view


def catalog(services: Services, stores: LocalStores | None) -> list[dict[str, Any]]:
    """Every product with its platform ids: those its catalogue row carries (`store_ids`, from the last
    platform catalogue sync) over those the fake stores give it (`ids`, both platforms)."""
    result = []
    for item in services.tables.catalog.all():
        recorded = dict(item.store_ids)
        ids = {**(stores.ids(item.sku) if stores is not None else {}), **recorded}
        result.append(
            {
                "sku": item.sku,
                "name": item.name,
                "discontinued": bool(item.discontinued),
                "ids": dict(sorted(ids.items())),
                "store_ids": recorded,
            }
        )
    return result


def products(services: Services) -> list[dict[str, Any]]:
    """Every product in the catalogue, by SKU, with the count its waiting shards hold now (the product item's own
    figure is the demand ranking's roll-up, which the sweep refreshes at most every 9 minutes)."""
    catalog = services.tables.catalog
    return [{**product(item), "waiting_count": catalog.waiting(item.sku)} for item in catalog.all()]


# What the open restock did with a level that opened no new one (detect.py's `adjusted`).
ADJUSTED = {
    "topped_up": "it rose, and the new units go to the next people in line",
    "lowered": "it fell, so fewer units can be offered",
    "closed": "it fell below the threshold, so the restock is closed and no more offers are made",
}
# Why detection answered no_restock or ignored, other than the level's own (no_crossing).
REASONS = {
    "stale": "this event is older than the level already recorded, so it changed nothing",
    "duplicate": "this webhook was handled already; a redelivery changes nothing",
    "unknown_sku": "the app's catalogue has no such SKU",
    "unknown_item": "no catalogued SKU claims the store's inventory item",
}


def _units(n: int) -> str:
    return "1 unit" if n == 1 else f"{n} units"


def restock_meaning(services: Services, sku: str, status: int, body: Any) -> dict[str, str] | None:
    """What a restock sent from the console did, in a sentence, and its tone: `ok` for a restock, `neutral` for a
    level that opened none (and why: detection's rule, chalicelib/detect.py `decide`). None for a refusal (4xx/5xx),
    which the console shows as the API's own message."""
    if status >= 400 or not isinstance(body, dict):
        return None
    # A store platform's webhook answers one result per level it carried; the console's restock sends one.
    results = body.get("results")
    detail = results[0] if isinstance(results, list) and results and isinstance(results[0], dict) else body
    outcome, reason = detail.get("status"), detail.get("reason")
    product = services.tables.catalog.get(sku, consistent=True)
    if outcome == "restock":
        open_ts = product.open_restock_ts if product is not None else None
        restock = services.tables.restocks.get(sku, open_ts) if open_ts else None
        units = (
            f"{_units(restock.units_total)}: the notifier tells up to {restock.units_total} people"
            if restock
            else ("units: the notifier tells people")
        )
        return {
            "tone": "ok",
            "text": f"A restock of {units} in line, one per unit, oldest first (an email place not confirmed yet is "
            "passed over).",
        }
    if product is None or reason != "no_crossing":
        because = REASONS.get(str(reason), f"the API's reason: {reason}")
        return {"tone": "neutral", "text": f"No restock: {because}."}
    threshold, held = product.threshold, product.store_held
    counted = f" (counting the {_units(held)} our holds keep on the store)" if held else ""
    adjusted = detail.get("adjusted")
    if adjusted in ADJUSTED:
        text = f"No new restock: the one already open follows the level: {ADJUSTED[adjusted]}."
    elif product.level is not None and product.level < threshold:
        lowest = max(threshold - held, 0)
        text = (
            f"No restock: a level of {product.level}{counted} is below this product's notify threshold of "
            f"{threshold}, so nobody is told. A level of {lowest} or more{' on the store' if held else ''}, rising from "
            "below it, opens a restock "
            "that tells one person per unit."
        )
    elif product.open_restock_id:
        text = f"No new restock: one is already open, and the level stays at or above the threshold of {threshold}."
    else:
        text = (
            f"No restock: the level was already at or above the threshold of {threshold}. A restock opens only "
            f"when the level rises from below {threshold} to {threshold} or more (send 0 first to sell it out)."
        )
    return {"tone": "neutral", "text": text}


def _offers(services: Services, sku: str) -> list[dict[str, Any]]:
    table = services.tables.reservations.table
    rows: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"FilterExpression": Attr("sku").eq(sku), "ConsistentRead": True}
    while True:
        page = table.scan(**kwargs)
        rows.extend(plain(i) for i in page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return rows
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _restock(services: Services, sku: str, open_ts: str | None) -> dict[str, Any] | None:
    if open_ts:
        restock = services.tables.restocks.get(sku, open_ts)
        if restock:
            return plain(restock.to_item())
    page = services.tables.restocks.table.query(
        KeyConditionExpression=Key("sku").eq(sku), ScanIndexForward=False, Limit=1, ConsistentRead=True
    )
    items = page.get("Items", [])
    return plain(items[0]) if items else None


def restock_view(restock: dict[str, Any], offers: list[dict[str, Any]], *, is_open: bool) -> dict[str, Any]:
    """A restock's counters, the offers made for it by state, and whether they balance (DESIGN §4)."""
    tally = Counter(o.get("state", "?") for o in offers if o.get("restock_id") == restock.get("restock_id"))
    total = int(restock.get("units_total", 0))
    available = int(restock.get("units_available", 0))
    offerable = int(restock.get("units_offerable", 0))
    held, sold, live = tally.get("held", 0), tally.get("converted", 0), tally.get("offered", 0)
    return {
        "restock_id": restock.get("restock_id"),
        "restock_ts": restock.get("restock_ts"),
        "state": restock.get("state"),
        "open": is_open,
        "units_total": total,
        "units_available": available,
        "units_offerable": offerable,
        "offers": {state: tally.get(state, 0) for state in ("offered", "held", "converted", "lapsed", "expired")},
        "checks": {
            # Units not available are exactly the ones held or sold...
            "held_plus_sold_is_total_minus_available": held + sold == total - available,
            # ...and units available but not offerable are exactly the live offers.
            "live_offers_is_available_minus_offerable": live == available - offerable,
            "never_oversold": held + sold <= total,
            "never_over_promised": live <= available,
        },
    }


def queue(services: Services, sku: str) -> dict[str, Any] | None:
    """The SKU's waiting list in join order with masked contacts, and its restock's counters; None if unknown."""
    item = services.tables.catalog.get(sku, consistent=True)
    if item is None:
        return None
    offers = _offers(services, sku)
    latest: dict[str, dict[str, Any]] = {}
    for row in offers:
        key = str(row.get("request_joined_ts", ""))
        if key not in latest or row.get("offered_at", 0) >= latest[key].get("offered_at", 0):
            latest[key] = row
    entries = []
    place = 0
    for request in services.tables.requests.queue(sku, active_only=False):
        state = str(request.state)
        offer = latest.get(request.joined_ts)
        if state in ACTIVE:
            place += 1
        status = STATUS_LABELS.get(state, state)
        if state == "waiting" and offer and offer.get("state") in AFTER_OFFER:
            status = AFTER_OFFER[offer["state"]]
        entry: dict[str, Any] = {
            "position": place if state in ACTIVE else None,
            "contact": mask(request.contact),
            "channel": request.channel,
            "state": state,
            "status": status,
            "joined_ts": request.joined_ts,
        }
        if offer:
            entry["offer"] = {
                "reservation_id": offer.get("token_id"),
                "state": offer.get("state"),
                "offer_expires_at": offer.get("offer_expires_at"),
                "hold_expires_at": offer.get("hold_expires_at"),
            }
        entries.append(entry)
    open_ts = item.open_restock_ts
    restock = _restock(services, sku, open_ts)
    return {
        "sku": sku,
        "name": item.name,
        "entries": entries,
        "waiting": sum(1 for e in entries if e["state"] in ACTIVE),
        "restock": restock_view(restock, offers, is_open=bool(open_ts)) if restock else None,
    }


def audit(services: Services, sku: str) -> list[dict[str, Any]]:
    """The SKU's audit facts in time order (contacts appear only as keyed hashes)."""
    return [plain(item) for item in services.tables.audit.for_sku(sku)]


def reservation(services: Services, reservation_id: str) -> dict[str, Any] | None:
    """One offer or hold row, or None."""
    if not reservation_id or len(reservation_id) > 128:
        return None
    row = services.tables.reservations.get(reservation_id)
    return plain(row.to_item()) if row else None


def _reservation_of(services: Services, reserve_url: str, cache: dict[str, dict[str, Any] | None]) -> Any:
    token = reserve_url.rsplit("/", 1)[-1]
    if token not in cache and is_link_id(token):
        cache[token] = reservation(services, token)  # a short link is the row's own id
    if token not in cache:
        try:
            token_id = services.tokens.read_reserve(token).value
        except (TokenInvalid, TokenExpired):
            cache[token] = None
        else:
            cache[token] = reservation(services, token_id)
    return cache[token]


def _sku_confirmed_by(services: Services, confirm_url: str) -> str | None:
    try:
        sku, _joined_ts = services.tokens.read_confirm(confirm_url.rsplit("/", 1)[-1])
    except (TokenInvalid, TokenExpired):
        return None
    return sku


def messages(services: Services) -> list[dict[str, Any]]:
    """The outbox oldest first. A notice is tied to its SKU and reservation through its reserve link; an
    email asking the shopper to confirm their address (double opt-in) is marked "confirmation" and tied to
    the SKU its confirm link names."""
    cache: dict[str, dict[str, Any] | None] = {}
    result = []
    for sent in outbox.read(services.settings.aws_region):
        data = sent.to_json()
        reserve = data["links"].get("reserve")
        confirm = data["links"].get("confirm")
        row = _reservation_of(services, reserve, cache) if reserve else None
        if row:
            data["sku"] = row.get("sku")
            data["reservation"] = {"id": row.get("token_id"), "state": row.get("state")}
        elif confirm:
            data["kind"] = "confirmation"
            sku = _sku_confirmed_by(services, confirm)
            if sku:
                data["sku"] = sku
        result.append(data)
    return result
