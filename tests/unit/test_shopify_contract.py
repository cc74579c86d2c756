"""The requests the Shopify connector sends: endpoint, headers, GraphQL documents and variables, as documented.

Pages: endpoint and token header https://shopify.dev/docs/api/admin-graphql (Endpoints, Authentication);
productVariants https://shopify.dev/docs/api/admin-graphql/2025-10/queries/productVariants;
draftOrders https://shopify.dev/docs/api/admin-graphql/2025-10/queries/draftOrders;
draftOrderCreate and DraftOrderInput https://shopify.dev/docs/api/admin-graphql/2025-10/mutations/draftOrderCreate;
draftOrderDelete https://shopify.dev/docs/api/admin-graphql/2025-10/mutations/draftOrderDelete.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.platforms.base import HoldRequest
from chalicelib.platforms.http import HttpResponse
from chalicelib.platforms.shopify import API_VERSION, ShopifyConnector
from devstack.fake_shopify import ACCESS_TOKEN, SHOP_DOMAIN, WEBHOOK_SECRET, FakeShopify

EXPIRES_AT = 1893456000  # 2030-01-01T00:00:00Z


@dataclass
class Recording:
    """Passes each request on to the fake shop and keeps what was sent."""

    shop: FakeShopify
    sent: list[dict[str, Any]] = field(default_factory=list)

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        self.sent.append({"method": method, "url": url, "headers": dict(headers), "json": json.loads(body or b"{}")})
        return self.shop.transport().send(method, url, headers, body)


def setup() -> tuple[FakeShopify, Recording, ShopifyConnector]:
    shop = FakeShopify(now=lambda: 1_800_000_000.0)
    recording = Recording(shop)
    connector = ShopifyConnector(
        shop_domain=SHOP_DOMAIN,
        access_token=lambda: ACCESS_TOKEN,
        webhook_secrets=lambda: [WEBHOOK_SECRET],
        transport=recording,
    )
    return shop, recording, connector


def squash(document: str) -> str:
    return re.sub(r"\s+", " ", document).strip()


def test_api_version_is_a_stable_quarterly_release() -> None:
    assert re.fullmatch(r"20\d\d-(01|04|07|10)", API_VERSION)


def test_every_call_posts_json_to_the_versioned_endpoint_with_the_token_header() -> None:
    _shop, recording, connector = setup()
    list(connector.read_catalog())
    (call,) = recording.sent
    assert call["method"] == "POST"
    assert call["url"] == f"https://{SHOP_DOMAIN}/admin/api/{API_VERSION}/graphql.json"
    assert call["headers"]["X-Shopify-Access-Token"] == ACCESS_TOKEN
    assert call["headers"]["Content-Type"] == "application/json"
    assert set(call["json"]) == {"query", "variables"}


def test_the_catalogue_pages_product_variants_by_cursor() -> None:
    shop, recording, connector = setup()
    for i in range(60):
        shop.add_product(f"Extra {i}", [f"EXTRA-{i:03d}"])
    list(connector.read_catalog())
    first, second = recording.sent
    document = squash(first["json"]["query"])
    assert document.startswith("query BisnCatalogPage($first: Int!, $after: String) {")
    assert "productVariants(first: $first, after: $after) {" in document
    assert "pageInfo { hasNextPage endCursor }" in document
    for fragment in (
        "shop { currencyCode }",
        "nodes { id sku title price inventoryPolicy image { url } inventoryItem { id }",
        "product { id title handle status onlineStoreUrl featuredMedia { preview { image { url } } } }",
    ):
        assert fragment in document
    assert first["json"]["variables"] == {"first": 50, "after": None}
    assert second["json"]["variables"]["after"]  # the first page's endCursor
    assert second["json"]["query"] == first["json"]["query"]


def test_a_hold_looks_up_its_tag_then_creates_a_reserving_draft_order() -> None:
    shop, recording, connector = setup()
    shop.set_available("WW-THROW-OAT", 1)
    hold = HoldRequest("3f0c2a9e8b7d4c1f9a6e5d4c3b2a1f0e", "WW-THROW-OAT", shop.ids("WW-THROW-OAT"), EXPIRES_AT)
    held = connector.place_hold(hold)
    # The tag lookup, the create, and the lookup again that sees the new draft order is the only one for the hold.
    find, create, again = recording.sent

    assert squash(find["json"]["query"]).startswith("query BisnFindDraftOrders($query: String!) {")
    assert "draftOrders(first: 10, query: $query) { nodes { id status invoiceUrl tags createdAt } }" in squash(
        find["json"]["query"]
    )
    assert find["json"]["variables"] == {"query": 'tag:"bisn-3f0c2a9e8b7d4c1f9a6e5d4c3b2a1f0e"'}

    document = squash(create["json"]["query"])
    assert document.startswith("mutation BisnDraftOrderCreate($input: DraftOrderInput!) {")
    assert "draftOrderCreate(input: $input) { draftOrder { id status invoiceUrl } userErrors { field message } }" in (
        document
    )
    variant_id = shop.ids("WW-THROW-OAT")["shopify.variant_id"]
    assert create["json"]["variables"] == {
        "input": {
            "lineItems": [{"variantId": f"gid://shopify/ProductVariant/{variant_id}", "quantity": 1}],
            "reserveInventoryUntil": "2030-01-01T00:00:00Z",
            "tags": ["bisn-3f0c2a9e8b7d4c1f9a6e5d4c3b2a1f0e"],
            "customAttributes": [{"key": "bisn_reservation_id", "value": "3f0c2a9e8b7d4c1f9a6e5d4c3b2a1f0e"}],
            "note": "Held for a shopper on the back-in-stock list.",
        }
    }
    # No @idempotent directive: 2025-10 documents none for draftOrderCreate (the tag lookup stands in for it).
    assert "@idempotent" not in document
    assert again["json"] == find["json"]
    assert held.ref.startswith("gid://shopify/DraftOrder/")


def test_a_release_checks_the_draft_order_then_deletes_it_by_id() -> None:
    shop, recording, connector = setup()
    shop.set_available("WW-THROW-OAT", 1)
    held = connector.place_hold(HoldRequest("r-1", "WW-THROW-OAT", shop.ids("WW-THROW-OAT"), EXPIRES_AT))
    recording.sent.clear()
    connector.release_hold("r-1", held.ref)
    # By its id first; then the tag search, for any other draft order of the hold (none here).
    check, delete, find = recording.sent
    assert find["json"]["variables"] == {"query": 'tag:"bisn-r-1"'}
    assert "draftOrder(id: $id) { id status }" in squash(check["json"]["query"])
    assert check["json"]["variables"] == {"id": held.ref}
    document = squash(delete["json"]["query"])
    assert document.startswith("mutation BisnDraftOrderDelete($input: DraftOrderDeleteInput!) {")
    assert "draftOrderDelete(input: $input) { deletedId userErrors { field message } }" in document
    assert delete["json"]["variables"] == {"input": {"id": held.ref}}


def test_a_release_without_a_ref_finds_the_draft_order_by_its_tag() -> None:
    shop, recording, connector = setup()
    shop.set_available("WW-THROW-OAT", 1)
    held = connector.place_hold(HoldRequest("r-2", "WW-THROW-OAT", shop.ids("WW-THROW-OAT"), EXPIRES_AT))
    recording.sent.clear()
    connector.release_hold("r-2", None)
    find, _check, delete = recording.sent
    assert find["json"]["variables"] == {"query": 'tag:"bisn-r-2"'}
    assert delete["json"]["variables"] == {"input": {"id": held.ref}}


def test_a_long_reservation_id_still_makes_a_tag_within_shopifys_limit() -> None:
    shop, recording, connector = setup()
    shop.set_available("WW-THROW-OAT", 1)
    connector.place_hold(HoldRequest("x" * 80, "WW-THROW-OAT", shop.ids("WW-THROW-OAT"), EXPIRES_AT))
    [create] = [r for r in recording.sent if "input" in r["json"]["variables"]]
    (tag,) = create["json"]["variables"]["input"]["tags"]
    assert tag.startswith("bisn-") and len(tag) <= 40
