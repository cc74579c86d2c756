"""Test data: restocks, places and offers, written only through the production item builders, exactly as
detection, capture and the notifier write them (so a place is always counted in the catalogue's waiting shards
while it is live, as capture counts it)."""

from __future__ import annotations

import uuid
from typing import Any

from chalicelib.clock import iso
from chalicelib.contacts import contact_key
from chalicelib.detect import restock_id_for, restock_ts_for
from chalicelib.queue.messages import Job
from chalicelib.tables.base import transact
from chalicelib.tables.catalog import shard_for
from chalicelib.tables.requests import ACTIVE_STATES, Request, RequestState, new_joined_ts
from chalicelib.tables.restocks import Restock
from chalicelib.wiring import Services

# --- Restocks.


def add_restock(
    services: Services, sku: str, units: int, now: float, *, webhook_id: str = "wh_1", state: str = "queued"
) -> Job:
    """A restock exactly as detection opens it (its ids and table moves), and the job detection sends for it."""
    restock_id = restock_id_for(sku, webhook_id)
    restock_ts = restock_ts_for(now, restock_id)
    opened = services.tables.restocks.open_item(
        sku=sku,
        restock_ts=restock_ts,
        restock_id=restock_id,
        webhook_id=webhook_id,
        units=units,
        level_before=0,
        level_after=units,
        threshold=1,
        now=now,
    )
    transact(services.tables.restocks.table.meta.client, [opened])
    if state == "queued":
        assert services.tables.restocks.mark_enqueued(sku, restock_ts, token=webhook_id, now=now)
    elif state == "closed":
        seen = services.tables.restocks.get(sku, restock_ts)
        assert seen is not None
        closed = services.tables.restocks.close_item(
            sku, restock_ts, seen=seen, available=units, offerable=units, now=now
        )
        transact(services.tables.restocks.table.meta.client, [closed])
    return Job(sku, restock_id, restock_ts)


def put_restock(services: Services, sku: str, units: int, now: float, *, webhook_id: str = "wh_restock") -> Restock:
    """A queued restock of `units` units, both counters full, as detection leaves it; returns the stored item."""
    job = add_restock(services, sku, units, now, webhook_id=webhook_id)
    restock = services.tables.restocks.get(sku, job.restock_ts)
    assert restock is not None
    return restock


# --- Places in line.


def match_form(contact: str) -> str:
    """The form a contact is recognised by (emails lower-cased), as capture hashes it."""
    return contact.lower() if "@" in contact else contact


def key_of(services: Services, contact: str) -> str:
    """The keyed hash that stands for a contact in rows and audit facts."""
    return contact_key(match_form(contact), services.hash_key)


def request_items(
    services: Services,
    sku: str,
    contact: str,
    joined_ts: str,
    now: float,
    *,
    name: str = "",
    ttl: int | None = None,
    ticket: tuple[int, int] | None = None,
) -> list[dict[str, Any]]:
    """The items capture writes for one new place (the waiting count, uniqueness item, request), from the
    table classes themselves, with the line's ticket capture takes first (`ticket`: one taken already, with the
    tickets burnt before it; chalicelib/line.py)."""
    ticket, burnt_before = ticket or take_ticket(services, sku, now)
    key = key_of(services, contact)
    place = services.tables.requests.join_items(
        Request.waiting(
            sku=sku,
            joined_ts=joined_ts,
            channel="email" if "@" in contact else "sms",
            contact=contact,
            contact_key=key,
            name=name,
            ttl=ttl if ttl is not None else int(now) + 90 * 86400,
            now=now,
            ticket=ticket,
            burnt_before=burnt_before,
            waiting_shard=shard_for(key),
        )
    )
    return [services.tables.catalog.join_item(sku, shard_for(key)), *place]


def take_ticket(services: Services, sku: str, now: float) -> tuple[int, int]:
    """The next ticket of a SKU's line, as capture takes it: (its number, tickets burnt before it)."""
    number, burnt_before, _ = services.tables.line_tickets.take_ticket(sku, int(now) + 91 * 86400)
    return number, burnt_before


def add_request(
    services: Services,
    sku: str,
    contact: str,
    joined_ts: str,
    now: float,
    *,
    name: str = "",
    ttl: int | None = None,
    ticket: tuple[int, int] | None = None,
    **fields: Any,
) -> Request:
    """One place, written as capture writes it; `fields` then set state or history directly.

    A place set to a state that has left the line (converted) is not counted as waiting, as the move there
    would have uncounted it.
    """
    items = request_items(services, sku, contact, joined_ts, now, name=name, ttl=ttl, ticket=ticket)
    if fields.get("state", RequestState.WAITING) not in ACTIVE_STATES:
        items = items[1:]
    transact(services.tables.requests.table.meta.client, items)
    if fields:
        names = {f"#f{i}": k for i, k in enumerate(fields)}
        values = {f":f{i}": v for i, v in enumerate(fields.values())}
        services.tables.requests.table.update_item(
            Key={"sku": sku, "joined_ts": joined_ts},
            UpdateExpression="SET " + ", ".join(f"#f{i} = :f{i}" for i in range(len(fields))),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
    request = services.tables.requests.get(sku, joined_ts)
    assert request is not None
    return request


def join_request(services: Services, sku: str, contact: str, now: float, *, ttl: int | None = None) -> Request:
    """A waiting place for `contact` joining at `now`, with a join stamp made as capture makes it."""
    ticket = take_ticket(services, sku, now)
    return add_request(services, sku, contact, new_joined_ts(now, ticket[0]), now, ttl=ttl, ticket=ticket)


def add_many_requests(services: Services, sku: str, count: int, now: float) -> list[str]:
    """`count` waiting SMS places, one second apart; returns their numbers in queue order."""
    numbers = []
    for i in range(count):
        number = f"+4477009{i:05d}"
        add_request(services, sku, number, joined(i, now, f"{i:06x}"), now)
        numbers.append(number)
    return numbers


def joined(i: int, now: float, suffix: str = "000000") -> str:
    """A join stamp i seconds after `now`."""
    return f"{iso(now + i)}#{suffix}"


# --- Offers.


def make_offer(
    services: Services, restock: Restock, request: Request, now: float, *, offer_window_s: int = 3600
) -> str:
    """Offer one unit to `request`: exactly the notifier's transaction. Returns the offer's token_id."""
    token_id = uuid.uuid4().hex
    sku, restock_ts = restock.sku, restock.restock_ts
    transact(
        services.tables.restocks.table.meta.client,
        [
            services.tables.restocks.take_offers_item(sku, restock_ts, 1),
            services.tables.reservations.offer_put_item(
                token_id=token_id,
                sku=sku,
                restock_ts=restock_ts,
                restock_id=restock.restock_id,
                request_joined_ts=request.joined_ts,
                contact_key=request.contact_key,
                channel=request.channel,
                now=now,
                offer_window_s=offer_window_s,
            ),
            services.tables.requests.mark_offered_item(
                sku, request.joined_ts, restock_id=restock.restock_id, token_id=token_id
            ),
        ],
    )
    return token_id
