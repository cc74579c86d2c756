"""bisn-catalog: products, their per-SKU settings, and the last stock level seen."""

from __future__ import annotations

import hashlib
import math
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Self

from chalicelib.config import DEFAULT_OFFER_WINDOW_S
from chalicelib.tables.base import (
    Conditional,
    TransactionCancelled,
    Tx,
    TxItem,
    get_all,
    int_or_none,
    present,
    query_all,
    scan_all,
    str_or_none,
    tx_check,
    tx_update,
)

PRODUCT_FIELDS = ("name", "threshold", "hold_window_s", "offer_window_s", "voice", "checkout_url")
DEFAULTS: dict[str, Any] = {
    "threshold": 1,
    "hold_window_s": 900,
    "offer_window_s": DEFAULT_OFFER_WINDOW_S,
    "voice": "friendly",
}
NOT_DISCONTINUED = "(attribute_not_exists(discontinued) OR discontinued = :no)"
DEMAND_OUT = "out"  # demand_key of a product below its threshold (sparse GSI by-demand)
# A product's waiting count is kept on this many shard items, so taps on one product spread their transactions
# over them instead of all meeting on the product item (docs/SCALE.md). Fixed: a place records its shard, and a
# different number would need every count moved.
WAITING_SHARDS = 16
MARK_ATTEMPTS = 5  # a product write that carries its shards' marks, tried again while the shop's choice moves
SHARD_OF = "shard_of"  # the attribute only shard items carry: the product they count for
# What the widget offers for a product the store sells on backorder (the shop's choice, per product): a place on the
# waiting list, a note that it can be ordered now, or nothing. Unset, nothing: the store's own page sells it.
NOTIFY, PREORDER, NOTHING = "notify", "preorder", "none"
BACKORDER_OFFERS = (NOTIFY, PREORDER, NOTHING)
DEFAULT_BACKORDER_OFFER = NOTHING
# The attribute a product's shards carry while its list is closed by backorder: the offer the widget makes instead.
BACKORDER_MARK = "on_backorder"


def backorder_mark(item: dict[str, Any]) -> str | None:
    """What is offered instead of a waiting list (preorder or none) for a product item that sells on backorder and
    whose shop did not choose notify-me; None while the list is open (a product without `backorder` is as before)."""
    if not item.get("backorder"):
        return None
    offer = str(item.get("backorder_offer") or DEFAULT_BACKORDER_OFFER)
    return None if offer == NOTIFY else offer


def shard_key(sku: str, shard: int) -> str:
    """The catalogue key of one of a product's waiting shards (SKUs never hold `#`, so no product has it)."""
    return f"{sku}#w{shard:02d}"


def shard_for(contact_key: str) -> int:
    """The shard a person's place is counted on: a hash of their contact key, so one person always lands on one."""
    return int(hashlib.sha256(contact_key.encode()).hexdigest()[:8], 16) % WAITING_SHARDS


def shard_cap(max_waiting: int) -> int:
    """The largest share of MAX_WAITING_PER_SKU one shard counts (MAX_WAITING_PER_SKU / N, rounded up)."""
    return math.ceil(max_waiting / WAITING_SHARDS)


def shard_share(max_waiting: int, shard: int) -> int:
    """The places shard `shard` counts at most. The shares sum to `max_waiting` exactly (the first
    `max_waiting % N` shards hold one more), so the list can never hold more than the cap, and it is full only once
    every shard is at its share."""
    return max_waiting // WAITING_SHARDS + (1 if shard < max_waiting % WAITING_SHARDS else 0)


def shard_of_key(key: str) -> int | None:
    """The shard number in a shard item's key (`<sku>#wNN`), None for any other key."""
    head, _, number = key.rpartition("#w")
    return int(number) if head and number.isdigit() else None


def is_shard(item: dict[str, Any]) -> bool:
    """Whether a catalogue item is a waiting shard rather than a product."""
    return SHARD_OF in item


@dataclass(frozen=True)
class WaitingShard:
    """One shard of a product's waiting count, with the list's conditions mirrored from the product."""

    waiting_count: int = 0
    discontinued: bool = False
    idle_restock_ts: str | None = None
    idle_restock_id: str | None = None
    shard: int | None = None  # which of the product's shards (its share of the cap depends on it)
    on_backorder: str | None = None  # set while the list is closed by backorder: the offer made instead

    def full(self, max_waiting: int) -> bool:
        """Whether this shard counts its whole share of `max_waiting` (by its number; the largest share if unknown)."""
        share = shard_cap(max_waiting) if self.shard is None else shard_share(max_waiting, self.shard)
        return self.waiting_count >= share

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        """The typed shard from a stored item (as a transaction's refusal hands it back)."""
        return cls(
            shard=shard_of_key(str(item.get("sku") or "")),
            waiting_count=int(item.get("waiting_count") or 0),
            discontinued=bool(item.get("discontinued")),
            idle_restock_ts=str_or_none(item.get("idle_restock_ts")),
            idle_restock_id=str_or_none(item.get("idle_restock_id")),
            on_backorder=str_or_none(item.get(BACKORDER_MARK)),
        )


@dataclass(frozen=True)
class Product:
    """One catalogued product: its settings (shop-wide defaults where unset) and the last stock level seen."""

    sku: str
    name: str = ""
    threshold: int = DEFAULTS["threshold"]
    hold_window_s: int = DEFAULTS["hold_window_s"]
    offer_window_s: int = DEFAULTS["offer_window_s"]
    voice: str = DEFAULTS["voice"]
    checkout_url: str = ""
    waiting_count: int = 0
    level: int | None = None
    level_ts: Decimal | None = None  # the event time of the level, as the platform stamped it (not rounded)
    level_version: int | None = None
    level_webhook_id: str | None = None
    level_seen_at: int | None = None
    open_restock_ts: str | None = None
    open_restock_id: str | None = None
    idle_restock_ts: str | None = None  # the open restock's units wait for nobody (DESIGN §4)
    idle_restock_id: str | None = None
    demand_key: str | None = None  # present while out of stock (sparse index by-demand)
    discontinued: bool = False
    discontinued_at: int | None = None
    synced_at: int | None = None
    # From a store platform's catalogue (chalicelib/platforms): where the product is shown and sold.
    product_url: str | None = None
    image_url: str | None = None
    price: str | None = None  # the platform's decimal string, never a float
    currency: str | None = None
    # The platform's own ids for this SKU, `<platform>.<name>` -> id (e.g. "shopify.variant_id" -> "4411").
    store_ids: dict[str, str] = field(default_factory=dict)
    # "<platform>.<name>:<id>" of the id the platform's stock webhooks name (sparse index by-store-item).
    store_item: str | None = None
    store_product: str | None = None  # "<platform>.product_id:<id>": a product's deletion reaches its SKUs
    # One stock level per store location, summed into `level` (Shopify reports each location on its own):
    # location id -> {"n": units, "ts": the platform's time of that location's level}.
    locations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Our holds the store holds too (chalicelib/store_holds.py): its own level no longer shows them, so detection
    # compares the shelf level, the store's plus these, as on a store that holds nothing (DESIGN §5).
    store_held: int = 0
    # The store sells it once its stock is gone (catalogue sync, from the platform), and what the shop chose the widget
    # offers then (NOTIFY, PREORDER or NOTHING; None: DEFAULT_BACKORDER_OFFER).
    backorder: bool = False
    backorder_offer: str | None = None

    @property
    def backorder_mark(self) -> str | None:
        """The offer made instead of a waiting list while the product sells on backorder; None while it takes one."""
        return backorder_mark({"backorder": self.backorder, "backorder_offer": self.backorder_offer})

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        """The typed product from a stored item, unset settings filled from the defaults (unknown attributes are
        ignored)."""
        merged = with_defaults(item)
        level_ts = merged.get("level_ts")
        return cls(
            sku=str(merged["sku"]),
            name=str(merged["name"]),
            threshold=int(merged["threshold"]),
            hold_window_s=int(merged["hold_window_s"]),
            offer_window_s=int(merged["offer_window_s"]),
            voice=str(merged["voice"]),
            checkout_url=str(merged["checkout_url"]),
            waiting_count=int(merged.get("waiting_count") or 0),
            level=int_or_none(merged.get("level")),
            level_ts=Decimal(str(level_ts)) if level_ts is not None else None,
            level_version=int_or_none(merged.get("level_version")),
            level_webhook_id=str_or_none(merged.get("level_webhook_id")),
            level_seen_at=int_or_none(merged.get("level_seen_at")),
            open_restock_ts=str_or_none(merged.get("open_restock_ts")),
            open_restock_id=str_or_none(merged.get("open_restock_id")),
            idle_restock_ts=str_or_none(merged.get("idle_restock_ts")),
            idle_restock_id=str_or_none(merged.get("idle_restock_id")),
            demand_key=str_or_none(merged.get("demand_key")),
            discontinued=bool(merged.get("discontinued")),
            discontinued_at=int_or_none(merged.get("discontinued_at")),
            synced_at=int_or_none(merged.get("synced_at")),
            product_url=str_or_none(merged.get("product_url")),
            image_url=str_or_none(merged.get("image_url")),
            price=str_or_none(merged.get("price")),
            currency=str_or_none(merged.get("currency")),
            store_ids={str(k): str(v) for k, v in (merged.get("store_ids") or {}).items()},
            store_item=str_or_none(merged.get("store_item")),
            store_product=str_or_none(merged.get("store_product")),
            locations={str(k): dict(v) for k, v in (merged.get("locations") or {}).items()},
            store_held=int(merged.get("store_held") or 0),
            backorder=bool(merged.get("backorder")),
            backorder_offer=str_or_none(merged.get("backorder_offer")),
        )

    def to_item(self) -> dict[str, Any]:
        """The stored item (absent attributes left out; a product still sold carries no `discontinued`)."""
        item = present(dict(self.__dict__))
        if not self.discontinued:
            del item["discontinued"]
        if not self.backorder:
            del item["backorder"]
        for empty in ("store_ids", "locations", "store_held"):
            if not item[empty]:
                del item[empty]
        return item


class CatalogTable:
    """Products keyed by SKU, with a short in-Lambda cache for the hot read paths."""

    def __init__(self, table: Any, cache_ttl_s: float = 30.0) -> None:
        self.table = table
        self.cache_ttl_s = cache_ttl_s
        self._cache: dict[str, tuple[float, Product | None]] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """Full table name."""
        return str(self.table.name)

    def get(self, sku: str, *, consistent: bool = False) -> Product | None:
        """A product with defaults filled in, or None."""
        kwargs: dict[str, Any] = {"Key": {"sku": sku}}
        if consistent:
            kwargs["ConsistentRead"] = True
        item = self.table.get_item(**kwargs).get("Item")
        return Product.from_item(item) if item else None

    def get_cached(self, sku: str) -> Product | None:
        """A product's settings, cached briefly: settings change rarely and every notice reads them."""
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(sku)
            if hit and now - hit[0] < self.cache_ttl_s:
                return hit[1]
        product = self.get(sku)
        with self._lock:
            self._cache[sku] = (now, product)
        return product

    def upsert(self, sku: str, settings: dict[str, Any]) -> Product:
        """Create or update a product's settings, leaving its stock level and counters alone."""
        names = {f"#{k}": k for k in settings}
        values = {f":{k}": v for k, v in settings.items()}
        sets = [f"#{k} = :{k}" for k in settings]
        sets.append("waiting_count = if_not_exists(waiting_count, :zero)")
        values[":zero"] = 0
        result = self.table.update_item(
            Key={"sku": sku},
            UpdateExpression="SET " + ", ".join(sets),
            ExpressionAttributeNames=names or None,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        attributes = result["Attributes"]
        if "level" not in attributes and "demand_key" not in attributes:
            # A product added by hand has no level yet, which counts as sold out: it belongs in the
            # demand index, as one created by catalogue sync does.
            sold_out = Conditional(self.table).update_item(
                Key={"sku": sku},
                UpdateExpression="SET demand_key = :out",
                # A level recorded meanwhile already decided the product's place in the index.
                ConditionExpression="attribute_not_exists(#level)",
                ExpressionAttributeNames={"#level": "level"},
                ExpressionAttributeValues={":out": DEMAND_OUT},
                ReturnValues="ALL_NEW",
            )
            if sold_out is not None:
                attributes = sold_out["Attributes"]
        if "waiting_shards" not in attributes:
            self._open_shards(attributes)
        elif settings.keys() & {"discontinued", "backorder", "backorder_offer"}:
            # The shards carry the flags a tap is refused on: they follow the product's (nobody joins a list for a
            # SKU we do not sell, nor for one sold on backorder unless the shop chose notify-me).
            Tx().add("shards", *self._shard_writes(attributes)).run(self.table.meta.client)
        with self._lock:
            self._cache.pop(sku, None)
        return Product.from_item(attributes)

    def open_shards(self, sku: str) -> bool:
        """Make the waiting shards of a product stored before shards existed (its first tap finds none); False when
        there is no such product, or it has them already. Safe to repeat: a shard keeps its count."""
        item = self.table.get_item(Key={"sku": sku}, ConsistentRead=True).get("Item")
        if not item or is_shard(item) or "waiting_shards" in item:
            return False
        try:
            self._open_shards(item)
        except TransactionCancelled:
            return False
        return True

    def _open_shards(self, product: dict[str, Any]) -> None:
        """Write every shard of `product` and record on it that they exist, together."""
        tx = (
            Tx().add("shards", *self._shard_writes(product)).add("product", self._shards_made_item(str(product["sku"])))
        )
        tx.run(self.table.meta.client)

    # --- Waiting shards: a product's waiting count split over WAITING_SHARDS items `<sku>#wNN`, each carrying
    # --- the list's conditions (discontinued, the idle mark of invariant 7, a share of the cap), so a tap's
    # --- transaction writes one shard and never the product item (docs/SCALE.md).

    def _shards_made_item(self, sku: str) -> TxItem:
        return {
            "Update": tx_update(
                self.name,
                {"sku": sku},
                "SET waiting_shards = :n",
                # Never for a product that is not there (an update would create it).
                "attribute_exists(sku)",
                values={":n": WAITING_SHARDS},
            )
        }

    def _shard_writes(self, product: dict[str, Any]) -> list[TxItem]:
        """Transaction items: every shard of `product` made (or kept) with the product's discontinued flag and,
        on a shard not marked yet, its idle mark. A shard is what lets a tap join, so only a sold product's
        shards are open."""
        sku = str(product["sku"])
        discontinued = bool(product.get("discontinued"))
        sets = ["#of = :sku", "waiting_count = if_not_exists(waiting_count, :zero)"]
        values: dict[str, Any] = {":sku": sku, ":zero": 0}
        if product.get("idle_restock_ts") and product.get("idle_restock_id"):
            # A shard made while the product is marked idle carries the mark (invariant 7); an existing shard
            # already has whatever the notifier last wrote.
            sets += [
                "idle_restock_ts = if_not_exists(idle_restock_ts, :rts)",
                "idle_restock_id = if_not_exists(idle_restock_id, :rid)",
            ]
            values.update({":rts": product["idle_restock_ts"], ":rid": product["idle_restock_id"]})
        if discontinued:
            sets.append("discontinued = :yes")
            values[":yes"] = True
        removes = [] if discontinued else ["discontinued"]
        mark = backorder_mark(product)
        if mark is not None:
            sets.append(f"{BACKORDER_MARK} = :offer")
            values[":offer"] = mark
        else:
            removes.append(BACKORDER_MARK)
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        return [
            {
                "Update": tx_update(
                    self.name, {"sku": shard_key(sku, shard)}, expression, names={"#of": SHARD_OF}, values=values
                )
            }
            for shard in range(WAITING_SHARDS)
        ]

    def _shard_items(self, sku: str, *, consistent: bool = True) -> list[dict[str, Any]]:
        """Every shard of a product, strongly consistent: one BatchGetItem of WAITING_SHARDS keys (N read units)."""
        keys: list[dict[str, Any]] = [{"sku": shard_key(sku, shard)} for shard in range(WAITING_SHARDS)]
        return list(get_all(self.table, keys, consistent=consistent))

    def shard_with_room(self, sku: str, max_waiting: int) -> int | None:
        """A shard of the product below its share of `max_waiting`, read strongly consistent (one BatchGetItem of
        WAITING_SHARDS keys, whatever the list's length); None when every shard is at its share, so the list holds
        `max_waiting`. Among shards with room, one of the emptiest at random, so taps that meet a full shard at the
        same moment spread out instead of all trying the same one."""
        room: dict[int, int] = {}
        for item in self._shard_items(sku):
            shard = shard_of_key(str(item["sku"]))
            if shard is not None:
                room[shard] = shard_share(max_waiting, shard) - int(item.get("waiting_count") or 0)
        most = max(room.values(), default=0)
        if most <= 0:
            return None
        return random.choice([shard for shard, left in room.items() if left == most])

    def waiting(self, sku: str, *, consistent: bool = True) -> int:
        """People waiting for a product: the sum of its shards (exact when strongly consistent)."""
        return sum(int(item.get("waiting_count") or 0) for item in self._shard_items(sku, consistent=consistent))

    def roll_up_waiting(self, sku: str) -> int:
        """Copy a product's summed shards onto the product item's `waiting_count`, the sort key of the by-demand
        ranking (which lags the shards by up to one roll-up, so half-price eventually consistent reads do); returns
        the sum."""
        total = self.waiting(sku, consistent=False)
        Conditional(self.table).update_item(
            Key={"sku": sku},
            UpdateExpression="SET waiting_count = :n",
            # Only a product that is there, and only when the figure moved (an index write costs).
            ConditionExpression="attribute_exists(sku) AND waiting_count <> :n",
            ExpressionAttributeValues={":n": total},
        )
        return total

    def all(self) -> list[Product]:
        """Every product (dev console and catalogue sync only: the catalogue is small)."""
        items = [Product.from_item(i) for i in scan_all(self.table) if not is_shard(i)]
        return sorted(items, key=lambda i: i.sku)

    def get_many(self, skus: list[str], *, consistent: bool = False) -> dict[str, Product]:
        """The products among `skus` that exist, read 100 at a time (BatchGetItem; eventually consistent for catalogue
        sync's comparison and the dashboard's names and prices, strongly for the reconciliation's levels)."""
        keys = [{"sku": sku} for sku in dict.fromkeys(skus)]
        return {str(item["sku"]): Product.from_item(item) for item in get_all(self.table, keys, consistent=consistent)}

    def synced(self) -> list[tuple[str, bool]]:
        """Every product catalogue sync created and still sells, with no other attribute (SKU, and whether it is
        discontinued): what a finished sync compares with the SKUs its feed named."""
        from boto3.dynamodb.conditions import Attr

        items = scan_all(
            self.table, FilterExpression=Attr("synced_at").exists(), ProjectionExpression="sku, discontinued"
        )
        return sorted((str(i["sku"]), bool(i.get("discontinued"))) for i in items)

    def join_item(self, sku: str, shard: int, *, unless_idle: bool = False, max_waiting: int | None = None) -> TxItem:
        """Transaction item: count one more shopper waiting on one of the product's shards, only for a product
        that is sold (its shards exist and are not marked discontinued).

        With `unless_idle`, it is also refused while the open restock has idle units (the notifier marks every
        shard), so the caller learns of them (the refusal hands back the shard) in the very transaction that
        writes the place. With `max_waiting`, it is refused once the shard counts its share of that (`shard_share`;
        capture then tries a shard with room, and the list is full only when none has).
        """
        # Nobody joins a list for a SKU we do not sell (no ghost queues), nor for one the store sells on backorder
        # unless the shop chose notify-me for it (a product on backorder is not sold out).
        condition = (
            "attribute_exists(sku) AND (attribute_not_exists(discontinued) OR discontinued = :no)"
            f" AND attribute_not_exists({BACKORDER_MARK})"
        )
        values: dict[str, Any] = {":one": 1, ":no": False}
        if max_waiting is not None:
            # A bounded list: a flood of places on one SKU cannot grow the notices one restock may send.
            share = shard_share(int(max_waiting), shard)
            # A share of none (a cap below WAITING_SHARDS) must refuse even a shard that has never counted.
            room = (
                "waiting_count < :max"
                if share == 0
                else "(attribute_not_exists(waiting_count) OR waiting_count < :max)"
            )
            condition += f" AND {room}"
            values[":max"] = share
        if unless_idle:
            # Nothing lost (invariant 7): a place joining while units wait for nobody must be told of them.
            condition += " AND attribute_not_exists(idle_restock_ts)"
        key = {"sku": shard_key(sku, shard)}
        return {
            "Update": tx_update(self.name, key, "ADD waiting_count :one", condition, values=values, old_on_failure=True)
        }

    def not_idle_check(self, sku: str) -> TxItem:
        """Transaction item: go on only while the open restock has no idle units (the refusal hands back the
        product, so the caller can owe that restock a top-up in the same transaction, invariant 7)."""
        return {
            "ConditionCheck": tx_check(
                self.name, {"sku": sku}, "attribute_not_exists(idle_restock_ts)", old_on_failure=True
            )
        }

    def leave_item(self, sku: str, shard: int) -> TxItem:
        """Transaction item: count one fewer shopper waiting, on the shard the place was counted on."""
        key = {"sku": shard_key(sku, shard)}
        # No condition: it moves in the same transaction as the request's state, so it stays
        # in step, and a leave must never be refused because of a counter.
        return {"Update": tx_update(self.name, key, "ADD waiting_count :minus", values={":minus": -1})}

    # --- The last stock level seen, written by restock detection. Every write bumps level_version, so a
    # --- writer that decided on an older version is refused and decides again (optimistic concurrency).

    def level_item(
        self,
        sku: str,
        *,
        seen_version: int,
        level: int,
        level_ts: Decimal,
        webhook_id: str,
        out_of_stock: bool,
        now: float,
        open_restock: tuple[str, str] | None = None,
        close_restock: bool = False,
        locations: dict[str, dict[str, Any]] | None = None,
    ) -> TxItem:
        """Transaction item: record a newer level (and open or close the SKU's restock with it); with `locations`,
        the per-location levels it is the sum of."""
        names = {"#level": "level"}
        values: dict[str, Any] = {
            ":level": level,
            ":ts": level_ts,
            ":wid": webhook_id,
            ":next": seen_version + 1,
            ":now": int(now),
        }
        sets = [
            "#level = :level",
            "level_ts = :ts",
            "level_webhook_id = :wid",
            "level_version = :next",
            "level_seen_at = :now",
        ]
        removes: list[str] = []
        if locations is not None:
            sets.append("locations = :locations")
            values[":locations"] = locations
        # demand_key is sparse: only out-of-stock products sit in the by-demand index.
        if out_of_stock:
            sets.append("demand_key = :out")
            values[":out"] = DEMAND_OUT
        else:
            removes.append("demand_key")
        if open_restock is not None:
            sets += ["open_restock_ts = :rts", "open_restock_id = :rid"]
            values[":rts"], values[":rid"] = open_restock
        if close_restock:
            removes += ["open_restock_ts", "open_restock_id", "idle_restock_ts", "idle_restock_id"]
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        if seen_version:
            values[":seen"] = seen_version
            version_condition = "level_version = :seen"
        else:
            version_condition = "attribute_not_exists(level_version)"
        return {
            "Update": tx_update(
                self.name,
                {"sku": sku},
                expression,
                # Only over the version we decided on, so two deliveries never both see the same "before"
                # (one crossing, one restock: invariant 6), and never for a product that is not catalogued.
                f"attribute_exists(sku) AND {version_condition}",
                names=names,
                values=values,
            )
        }

    # --- Idle units: the open restock has units to offer and nobody eligible waits. A new place reads the mark
    # --- (capture) and asks the notifier to walk again, so nobody who joins later waits untold (invariant 7).

    def idle_items(self, sku: str, restock_ts: str, restock_id: str) -> list[TxItem]:
        """Transaction items: mark `restock_ts` idle on the product and every shard, only while it is still the open
        restock (the caller adds the restock's own check that it has units to offer)."""
        return self._idle_mark_items(
            sku,
            (restock_ts, restock_id),
            "SET idle_restock_ts = :rts, idle_restock_id = :rid",
            # Only the restock still open: a closed one's mark would send jobs for nothing.
            "open_restock_ts = :rts",
            {":rts": restock_ts, ":rid": restock_id},
        )

    def _idle_mark_items(
        self, sku: str, mark: tuple[str, str] | None, update: str, condition: str, values: dict[str, Any]
    ) -> list[TxItem]:
        """The product's idle mark (`update` under `condition`) and every shard's with it (`_shard_marks`): the mark
        is set and taken off all together, or not at all."""
        product: TxItem = {"Update": tx_update(self.name, {"sku": sku}, update, condition, values=values)}
        return [product, *self._shard_marks(sku, mark)]

    def _shard_marks(self, sku: str, mark: tuple[str, str] | None) -> list[TxItem]:
        """Transaction items: set (`mark`) or take off (None) the idle mark on every shard, so every tap's
        transaction, which reads its shard's mark, serialises with the one that writes it (invariant 7)."""
        values: dict[str, Any] = {":sku": sku}
        if mark is None:
            expression = "SET #of = :sku REMOVE idle_restock_ts, idle_restock_id"
        else:
            expression = "SET #of = :sku, idle_restock_ts = :rts, idle_restock_id = :rid"
            values.update({":rts": mark[0], ":rid": mark[1]})
        # No condition: the product item's own condition in the same transaction decides; a shard is
        # always written whole (`shard_of`), never left a bare key.
        return [
            {
                "Update": tx_update(
                    self.name, {"sku": shard_key(sku, shard)}, expression, names={"#of": SHARD_OF}, values=values
                )
            }
            for shard in range(WAITING_SHARDS)
        ]

    def close_marks_items(self, sku: str) -> list[TxItem]:
        """Transaction items: the shards' idle marks go with a restock that closes (`level_item(close_restock=)`)."""
        return self._shard_marks(sku, None)

    def clear_idle_items(self, sku: str, restock_ts: str) -> list[TxItem]:
        """Transaction items: take `restock_ts`'s idle mark off the product and every shard (the caller adds the
        restock's own check that it has nothing left to offer)."""
        return self._idle_mark_items(
            sku,
            None,
            "REMOVE idle_restock_ts, idle_restock_id",
            # Only this restock's mark; a unit freed meanwhile keeps it (the restock's check beside it refuses).
            "idle_restock_ts = :rts",
            {":rts": restock_ts},
        )

    # --- Catalogue sync.

    def sync_product(
        self,
        sku: str,
        settings: dict[str, Any],
        *,
        now: float,
        created: bool,
        out_of_stock: bool | None,
        marks: bool = False,
    ) -> None:
        """Write a product's settings from the store feed; it is sold again if it had been discontinued. `marks`:
        the settings change what its shards must carry (its backorder), so they are written with it."""
        names = {f"#{k}": k for k in settings}
        values: dict[str, Any] = {f":{k}": v for k, v in settings.items()}
        sets = [f"#{k} = :{k}" for k in settings]
        sets += ["waiting_count = if_not_exists(waiting_count, :zero)", "synced_at = :now"]
        values.update({":zero": 0, ":now": int(now), ":no": False})
        removes = ["discontinued", "discontinued_at"]
        # A new product has no level yet, which counts as sold out (it is in the catalogue to be waited for).
        if created or out_of_stock:
            sets.append("demand_key = :out")
            values[":out"] = DEMAND_OUT
        elif out_of_stock is False:
            removes.append("demand_key")
        # The product is sold from here on: it and its shards (which are what let a tap join) move together.
        sets.append("waiting_shards = :n")
        values[":n"] = WAITING_SHARDS
        expression = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes)
        if not marks:
            opened = Conditional(self.table).update_item(
                Key={"sku": sku},
                UpdateExpression=expression,
                # Shards open already: the product alone, only while that still holds (a discontinue meanwhile
                # marked the shards, and this write alone would not reopen them).
                ConditionExpression=f"attribute_exists(waiting_shards) AND {NOT_DISCONTINUED}",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
            if opened is not None:
                self._forget(sku)
                return
        unconditional = {k: v for k, v in values.items() if k != ":no"}
        for attempt in range(MARK_ATTEMPTS):
            # New, sold again, from before shards, or its backorder changed: the product and its shards in one
            # transaction, the shards made from the product as read and written.
            old = self.table.get_item(Key={"sku": sku}, ConsistentRead=True).get("Item") or {}
            shards = self._shard_writes({**old, **settings, "sku": sku, "discontinued": False})
            offer = old.get("backorder_offer")
            # Only over the shop's choice read here, which the shards are made from (no list open that should not be).
            condition = "attribute_not_exists(backorder_offer)" if offer is None else "backorder_offer = :offer_read"
            read = unconditional if offer is None else {**unconditional, ":offer_read": offer}
            product = {"Update": tx_update(self.name, {"sku": sku}, expression, condition, names=names, values=read)}
            try:
                Tx().add("product", product).add("shards", *shards).run(self.table.meta.client)
            except TransactionCancelled as cancelled:
                if cancelled.failed("product") and attempt + 1 < MARK_ATTEMPTS:
                    continue
                raise
            self._forget(sku)
            return

    def set_backorder_offer(self, sku: str, offer: str) -> Product | None:
        """The shop's choice of what the widget offers while the product sells on backorder (NOTIFY, PREORDER or
        NOTHING), written with its shards' marks; None for a SKU that is not catalogued."""
        if offer not in BACKORDER_OFFERS:
            raise ValueError(offer)
        for attempt in range(MARK_ATTEMPTS):
            old = self.table.get_item(Key={"sku": sku}, ConsistentRead=True).get("Item")
            if not old or is_shard(old):
                return None
            new = {**old, "backorder_offer": offer}
            backorder = (
                "backorder = :yes" if old.get("backorder") else "(attribute_not_exists(backorder) OR backorder = :no)"
            )
            discontinued = "discontinued = :yes" if old.get("discontinued") else NOT_DISCONTINUED
            values: dict[str, Any] = {":offer": offer, ":n": WAITING_SHARDS}
            values.update({k: v for k, v in ((":yes", True), (":no", False)) if k in backorder + discontinued})
            product = {
                "Update": tx_update(
                    self.name,
                    {"sku": sku},
                    "SET backorder_offer = :offer, waiting_shards = :n",
                    # Only over the product as read, which the shards are made from (no list open that should not be).
                    f"attribute_exists(sku) AND {backorder} AND {discontinued}",
                    values=values,
                )
            }
            try:
                Tx().add("product", product).add("shards", *self._shard_writes(new)).run(self.table.meta.client)
            except TransactionCancelled as cancelled:
                if cancelled.failed("product") and attempt + 1 < MARK_ATTEMPTS:
                    continue
                raise
            self._forget(sku)
            return Product.from_item({**new, "waiting_shards": WAITING_SHARDS})
        return None

    def _forget(self, sku: str) -> None:
        with self._lock:
            self._cache.pop(sku, None)

    def store_held_item(self, sku: str, change: int) -> TxItem:
        """Transaction item: one more (1) or one fewer (-1) of our holds held on the store itself."""
        return {
            "Update": tx_update(
                self.name,
                {"sku": sku},
                "ADD store_held :change",
                # Never for a product that is not catalogued (an update would create it).
                "attribute_exists(sku)",
                values={":change": int(change)},
            )
        }

    def sku_for_store_item(self, store_item: str) -> str | None:
        """The SKU whose stock a platform's webhooks report under `store_item` (GSI by-store-item, one read)."""
        from boto3.dynamodb.conditions import Key

        page = self.table.query(IndexName="by-store-item", KeyConditionExpression=Key("store_item").eq(store_item))
        skus = sorted(str(item["sku"]) for item in page.get("Items", []))
        # Two SKUs claiming one inventory item is a catalogue fault; the first is as good a guess as any, and
        # the next sync (which writes each id to one SKU) puts it right.
        return skus[0] if skus else None

    def skus_of_store_product(self, store_product: str) -> list[str]:
        """Every SKU of one platform product. A scan: only a product's deletion in the store asks, which is rare
        and never on a shopper's path, so it does not earn an index of its own."""
        from boto3.dynamodb.conditions import Attr

        items = scan_all(
            self.table, FilterExpression=Attr("store_product").eq(store_product), ProjectionExpression="sku"
        )
        return sorted(str(item["sku"]) for item in items)

    def discontinue(self, sku: str, now: float) -> bool:
        """Mark a product no longer sold (never delete it: its waiting list and level stay); False if it was."""
        product: TxItem = {
            "Update": tx_update(
                self.name,
                {"sku": sku},
                "SET discontinued = :yes, discontinued_at = :now",
                # Marked once, and never for a product that is not there (an update would create it).
                f"attribute_exists(sku) AND {NOT_DISCONTINUED}",
                values={":yes": True, ":no": False, ":now": int(now)},
            )
        }
        try:
            # With its shards, which are what refuse a tap: no list is joined once the product is not sold.
            shards = self._shard_writes({"sku": sku, "discontinued": True})
            Tx().add("product", product).add("shards", *shards).run(self.table.meta.client)
        except TransactionCancelled:
            return False
        with self._lock:
            self._cache.pop(sku, None)
        return True

    # --- Demand: out-of-stock products ranked by people waiting, from the sparse by-demand index.

    def demand_skus(self) -> Iterator[str]:
        """Every out-of-stock product's SKU, from GSI by-demand (keys only read)."""
        from boto3.dynamodb.conditions import Key

        keys = query_all(
            self.table,
            IndexName="by-demand",
            KeyConditionExpression=Key("demand_key").eq(DEMAND_OUT),
            ProjectionExpression="sku",
        )
        yield from (str(item["sku"]) for item in keys)

    def waited_skus(self) -> Iterator[str]:
        """The SKUs of out-of-stock products somebody waits for (rolled-up `waiting_count` above 0), from GSI
        by-demand (keys only read): what the reconciliation reads, at a cost that grows with them alone."""
        from boto3.dynamodb.conditions import Key

        keys = query_all(
            self.table,
            IndexName="by-demand",
            KeyConditionExpression=Key("demand_key").eq(DEMAND_OUT) & Key("waiting_count").gt(0),
            ProjectionExpression="sku",
        )
        yield from (str(item["sku"]) for item in keys)

    def demand(self, *, limit: int = 20) -> list[Product]:
        """Out-of-stock products with the most people waiting first, read from GSI by-demand (never a scan): which
        products make the list follows the last roll-up, their counts are current."""
        from boto3.dynamodb.conditions import Key

        items: list[Product] = []
        kwargs: dict[str, Any] = {
            "IndexName": "by-demand",
            "KeyConditionExpression": Key("demand_key").eq(DEMAND_OUT),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        while len(items) < limit:
            page = self.table.query(**kwargs)
            items.extend(Product.from_item(i) for i in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        # The index ranks by the figure the sweep rolls up every quarter hour; the products it lists are shown with
        # their count now (their shards, eventually consistent: one BatchGetItem each), in that order.
        counted = [replace(p, waiting_count=self.waiting(p.sku, consistent=False)) for p in items[:limit]]
        return sorted(counted, key=lambda p: -p.waiting_count)


def with_defaults(item: dict[str, Any]) -> dict[str, Any]:
    """A catalogue item with unset settings filled from the shop-wide defaults."""
    merged = dict(DEFAULTS)
    merged.update({k: v for k, v in item.items() if v is not None})
    for key in ("threshold", "hold_window_s", "offer_window_s", "waiting_count"):
        if key in merged:
            merged[key] = int(merged[key])
    merged.setdefault("name", merged.get("sku", ""))
    merged.setdefault("checkout_url", "")
    return merged
