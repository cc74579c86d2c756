"""shopify.app.toml, the app configuration a shop deploys with Shopify CLI, asks for exactly the scopes the connector
needs, subscribes to exactly the topics it reads, at the version it is pinned to, and delivers to the route it serves.

Format: https://shopify.dev/docs/apps/build/cli-for-apps/app-configuration (name, client_id, application_url,
embedded required; [access_scopes] scopes; [webhooks] api_version; [[webhooks.subscriptions]] topics and uri) and
https://shopify.dev/docs/apps/build/webhooks/subscribe. Each topic's scope: https://shopify.dev/docs/api/webhooks/2025-10.
Each query's and mutation's scope is on its page under https://shopify.dev/docs/api/admin-graphql/2025-10/; a write
scope grants its read scope: https://shopify.dev/docs/api/usage/access-scopes.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from chalicelib.errors import BadRequest
from chalicelib.platforms import shopify
from chalicelib.platforms.base import IGNORED
from chalicelib.platforms.shopify import ACCESS_SCOPES, API_VERSION, WEBHOOK_TOPICS, ShopifyConnector
from tests.unit.test_shopify_webhooks import signed

TOML = Path(__file__).resolve().parents[2] / "shopify.app.toml"

# What each root field and topic the connector uses requires, as each one's reference page states.
SCOPE_OF_FIELD = {
    "productVariants": "read_products",
    "draftOrders": "read_draft_orders",
    "draftOrder": "read_draft_orders",
    "draftOrderCreate": "write_draft_orders",
    "draftOrderDelete": "write_draft_orders",
}
SCOPE_OF_TOPIC = {
    "inventory_levels/update": "read_inventory",
    "orders/create": "read_orders",
    "orders/paid": "read_orders",
    "draft_orders/update": "read_draft_orders",
    "products/create": "read_products",
    "products/update": "read_products",
    "products/delete": "read_products",
}


def config() -> dict[str, Any]:
    with TOML.open("rb") as file:
        return tomllib.load(file)


def root_field(document: str) -> str:
    # The operation's first field, past `shop { currencyCode }`, which the catalogue asks for beside it (no scope).
    body = document[document.index("{") + 1 :]
    return next(n for n in re.findall(r"([_A-Za-z][_0-9A-Za-z]*)\s*[({]", body) if n != "shop")


def test_the_required_top_level_properties_are_there() -> None:
    loaded = config()
    assert {"name", "client_id", "application_url", "embedded"} <= set(loaded)
    assert loaded["embedded"] is False
    assert urlparse(loaded["application_url"]).scheme == "https"


def test_it_subscribes_to_exactly_the_topics_the_connector_reads_at_its_pinned_version() -> None:
    webhooks = config()["webhooks"]
    assert webhooks["api_version"] == API_VERSION
    [subscription] = webhooks["subscriptions"]
    assert sorted(subscription["topics"]) == sorted(WEBHOOK_TOPICS)
    assert len(subscription["topics"]) == len(set(subscription["topics"]))


def test_it_delivers_to_the_route_the_app_serves() -> None:
    from app import app

    [subscription] = config()["webhooks"]["subscriptions"]
    uri = urlparse(subscription["uri"])
    assert uri.scheme == "https" and uri.path == "/webhooks/shopify"
    assert "POST" in app.routes[uri.path]


def test_it_asks_for_exactly_the_scopes_the_connector_uses() -> None:
    scopes = [s.strip() for s in config()["access_scopes"]["scopes"].split(",")]
    assert sorted(scopes) == sorted(ACCESS_SCOPES)

    documents = [value for name, value in vars(shopify).items() if name.endswith(("_QUERY", "_MUTATION"))]
    fields = {root_field(d) for d in documents}
    assert fields == set(SCOPE_OF_FIELD)
    needed = {SCOPE_OF_FIELD[f] for f in fields} | {SCOPE_OF_TOPIC[t] for t in WEBHOOK_TOPICS}
    # read_x is granted by write_x: only the scopes nothing else implies are asked for.
    implied = {s.replace("write_", "read_", 1) for s in needed if s.startswith("write_")}
    assert needed - implied == set(ACCESS_SCOPES)


@pytest.mark.parametrize("topic", WEBHOOK_TOPICS)
def test_every_subscribed_topic_is_read_not_ignored(topic: str) -> None:
    connector = ShopifyConnector(
        shop_domain="walnut-and-wool.myshopify.com",
        access_token=lambda: "shpat_x",
        webhook_secrets=lambda: ["hush"],
        transport=None,  # type: ignore[arg-type]
    )
    body = b"{}"
    # An unknown topic is acknowledged as ignored without a look at the body; a subscribed one is read as that
    # topic's payload, and an empty one is refused.
    assert connector.read_webhook(body, signed(body, "carts/update", secret="hush")).kind == IGNORED
    with pytest.raises(BadRequest):
        connector.read_webhook(body, signed(body, topic, secret="hush"))
