"""WooCommerce's levels read in bulk for the reconciliation, through the REST API v3.

A level here is what the product.updated webhook reports (chalicelib/platforms/woocommerce.py `_level`):
`stock_quantity` less the units the plugin's holds reserve (`bisn_reserved`), "plenty" for an in-stock product that
does not manage stock, none for one out of stock. Simple products are read with `GET /products?include=<ids>`, and
the variations of one parent with `GET /products/<parent>/variations?include=<ids>`: `include` limits the list to
those ids and `per_page` is at most 100 (https://woocommerce.github.io/woocommerce-rest-api-docs/#list-all-products,
#list-all-product-variations, #pagination), so one request reads up to 100 SKUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chalicelib.errors import BadRequest
from chalicelib.platforms.base import LevelReport
from chalicelib.platforms.levels import StockQuery
from chalicelib.platforms.woocommerce import (
    PER_PAGE,
    PRODUCT_ID,
    VARIATION_ID,
    WooCommerceConnector,
    _level,
    _listed,
)


class WooCommerceLevels:
    """Reads levels through the connector's own wire (its key handling, 429 waits and error mapping)."""

    def __init__(self, connector: WooCommerceConnector) -> None:
        self.connector = connector

    def read_levels(self, items: Sequence[StockQuery]) -> list[LevelReport]:
        """Simple products 100 a request, variations 100 a request per parent; StoreUnavailable if it cannot."""
        simple: dict[int, str] = {}
        variations: dict[int, dict[int, str]] = {}
        for item in items:
            product_id = _number(item.ids.get(PRODUCT_ID))
            variation_id = _number(item.ids.get(VARIATION_ID))
            if product_id is None:
                continue
            if variation_id is None:
                simple.setdefault(product_id, item.sku)
            else:
                variations.setdefault(product_id, {}).setdefault(variation_id, item.sku)
        reports = self._read("/products", simple)
        for parent, children in sorted(variations.items()):
            reports.extend(self._read(f"/products/{parent}/variations", children))
        return reports

    def _read(self, path: str, skus: dict[int, str]) -> list[LevelReport]:
        ids = sorted(skus)
        reports: list[LevelReport] = []
        for start in range(0, len(ids), PER_PAGE):
            chunk = ids[start : start + PER_PAGE]
            query = {"include": ",".join(str(i) for i in chunk), "per_page": str(PER_PAGE)}
            response = self.connector._request("GET", path, query)
            listed = _listed(response, "read stock levels", "a product list that is not a list")
            for resource in listed:
                report = _report(resource, skus)
                if report is not None:
                    reports.append(report)
        return reports


def _report(resource: Any, skus: dict[int, str]) -> LevelReport | None:
    if not isinstance(resource, dict) or resource.get("status", "publish") != "publish":
        return None  # not on sale: its webhook is ignored too
    product_id = resource.get("id")
    sku = skus.get(product_id) if isinstance(product_id, int) and not isinstance(product_id, bool) else None
    if sku is None:
        return None
    try:
        available = _level(resource)
    except BadRequest:
        return None  # a resource WooCommerce would never send: read nothing rather than a guess
    return LevelReport(available=available, occurred_at=None, sku=sku)


def _number(value: str | None) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() and int(value) > 0 else None
