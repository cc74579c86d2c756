"""The inventory webhook and the catalogue sync schedule through the HTTP API, as a shop platform uses them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
from chalice.test import Client

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from tests.inventory import body, queued, restocks, signed
from tests.support import REGION, app_client

ROUTE = "/webhooks/inventory"


def post(client: Client, services: Services, payload: Any, *, webhook_id: str | None = None, **headers: str) -> Any:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return client.http.post(ROUTE, headers={**signed(services, text, webhook_id=webhook_id), **headers}, body=text)


def test_an_unsigned_delivery_is_401(client: Client, services: Services, chair: str) -> None:
    response = client.http.post(ROUTE, headers={"Content-Type": "application/json"}, body=body(chair, 3))
    assert response.status_code == 401
    assert response.json_body["error"] == "invalid_signature"
    assert response.json_body["message"]
    assert restocks(services, chair) == []


def test_a_tampered_delivery_is_401(client: Client, services: Services, chair: str) -> None:
    headers = signed(services, body(chair, 1))
    response = client.http.post(ROUTE, headers=headers, body=body(chair, 100))
    assert response.status_code == 401
    assert response.json_body["error"] == "invalid_signature"


def test_a_signed_but_malformed_body_is_400(client: Client, services: Services, chair: str) -> None:
    response = post(client, services, {"sku": chair, "available": -3})
    assert response.status_code == 400
    assert response.json_body == {"error": "invalid_field", "message": "available must be 0 or more."}
    response = post(client, services, "not json")
    assert response.status_code == 400
    assert response.json_body["error"] == "invalid_json"


def test_an_unknown_sku_is_200_ignored(client: Client, services: Services) -> None:
    response = post(client, services, {"sku": "NO-SUCH-THING", "available": 4})
    assert response.status_code == 200
    assert response.json_body == {"status": "ignored", "reason": "unknown_sku"}


def test_a_crossing_is_202_and_its_redelivery_is_200_duplicate(client: Client, services: Services, chair: str) -> None:
    assert post(client, services, {"sku": chair, "available": 0}).json_body == {
        "status": "no_restock",
        "reason": "no_crossing",
    }
    response = post(client, services, {"sku": chair, "available": 3}, webhook_id="msg_flow")
    assert response.status_code == 202
    [restock] = restocks(services, chair)
    assert response.json_body == {"status": "restock", "restock_id": restock["restock_id"]}
    again = post(client, services, {"sku": chair, "available": 3}, webhook_id="msg_flow")
    assert again.status_code == 200
    assert again.json_body == {"status": "no_restock", "reason": "duplicate"}
    assert len(queued(services)) == 1


def test_a_rise_on_an_open_restock_says_so(client: Client, services: Services, chair: str) -> None:
    opened = post(client, services, {"sku": chair, "available": 2}).json_body
    services.clock.advance(1)  # type: ignore[attr-defined]
    response = post(client, services, {"sku": chair, "available": 5})
    assert response.status_code == 200
    assert response.json_body == {
        "status": "no_restock",
        "reason": "no_crossing",
        "restock_id": opened["restock_id"],
        "adjusted": "topped_up",
    }


def test_an_older_event_is_200_stale(client: Client, services: Services, chair: str) -> None:
    post(client, services, {"sku": chair, "available": 0, "occurred_at": "2026-01-15T10:00:00Z"})
    response = post(client, services, {"sku": chair, "available": 9, "occurred_at": "2026-01-15T09:59:00Z"})
    assert response.status_code == 200
    assert response.json_body == {"status": "no_restock", "reason": "stale"}


def test_a_charset_in_the_content_type_is_fine(client: Client, services: Services, chair: str) -> None:
    response = post(
        client, services, {"sku": chair, "available": 1}, **{"Content-Type": "application/json; charset=utf-8"}
    )
    assert response.status_code == 202


def test_a_non_json_content_type_is_refused_without_a_5xx(client: Client, services: Services, chair: str) -> None:
    response = post(client, services, {"sku": chair, "available": 1}, **{"Content-Type": "text/plain"})
    assert response.status_code == 415
    assert restocks(services, chair) == []


def test_the_catalog_sync_schedule_loads_the_feed(
    session: boto3.session.Session, clock: FixedClock, env: dict[str, str], tmp_path: Path
) -> None:
    feed = tmp_path / "feed.json"
    mug = {
        "sku": "WW-MUG-SPECKLE",
        "name": "Speckled stoneware mug",
        "threshold": 2,
        "checkout_url": "https://shop.example/c?r={reservation_id}",
    }
    feed.write_text(json.dumps({"products": [mug]}))
    services = Services(
        settings_from_env({**env, "CATALOG_URL": feed.as_uri()}),
        aws=Aws(REGION, session=session),
        clock=clock,
        model=FakeBedrock(),
    )
    with app_client(services) as client:
        event = client.events.generate_cw_event(
            source="aws.events", detail_type="Scheduled Event", detail={}, resources=["catalog_sync"]
        )
        result = client.lambda_.invoke("catalog_sync", event)
    assert result.payload["created"] == ["WW-MUG-SPECKLE"]
    assert result.payload["error"] is None
    assert services.tables.catalog.get("WW-MUG-SPECKLE").threshold == 2
