"""The demo catalogue: a few sold-out products the storefront shows and shoppers can wait for.

It is the local stage's catalogue feed (CATALOG_URL in .chalice/config.json), applied at start through
the app's catalogue sync as a shop's feed would be (only then: the console's edits are not reverted). Each
product's picture is an illustration the console serves (static/products/<sku>.svg) and its page is its card on
the storefront (/#<sku>). The feed has no price field, so the demo products have none. Its checkout, page and
picture URLs name the console's default address; a stack on other ports gets a rewritten copy under .devstack/
(git-ignored).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chalicelib.tables.catalog import PRODUCT_FIELDS
from devstack.stack import Stack
from devstack.stage import ROOT

DEMO_CATALOG = Path(__file__).resolve().parent / "demo-catalog.json"
DEFAULT_CONSOLE = "http://127.0.0.1:8001"
WORK_DIR = ROOT / ".devstack"
# The feed's URLs that name the console: its checkout, and the storefront's card and picture of each product.
URL_FIELDS = ("checkout_url", "product_url", "image_url")


def read_products(path: Path = DEMO_CATALOG) -> list[dict[str, Any]]:
    """The products of a feed file: {"products": [...]} or a bare list."""
    data = json.loads(path.read_text())
    products = data.get("products") if isinstance(data, dict) else data
    if not isinstance(products, list) or not all(isinstance(p, dict) and p.get("sku") for p in products):
        raise ValueError(f"{path} must list products, each with a sku")
    return products


def feed_for(console_base: str, source: Path = DEMO_CATALOG, work_dir: Path = WORK_DIR) -> Path:
    """The demo feed with its checkout, product page and picture URLs pointing at this console (the file itself
    when on the default port)."""
    console_base = console_base.rstrip("/")
    if console_base == DEFAULT_CONSOLE:
        return source
    products = []
    for product in read_products(source):
        for key in URL_FIELDS:
            url = product.get(key)
            if isinstance(url, str) and url.startswith(DEFAULT_CONSOLE + "/"):
                product = {**product, key: console_base + url[len(DEFAULT_CONSOLE) :]}
        products.append(product)
    work_dir.mkdir(parents=True, exist_ok=True)
    port = console_base.rsplit(":", 1)[-1]
    target = work_dir / f"demo-catalog.{port}.json"
    target.write_text(json.dumps({"products": products}, indent=2) + "\n")
    return target


def load(stack: Stack, feed: Path = DEMO_CATALOG) -> list[str]:
    """Apply the demo feed (the stage's CATALOG_URL): through the app's catalog_sync handler when it has
    one, else by upserting each product. Returns the SKUs."""
    if stack.entry_point("catalog_sync") is not None:
        result = stack.run_scheduled("catalog_sync")
        error = result.get("error") if isinstance(result, dict) else None
        if error:
            raise RuntimeError(f"catalogue sync of {feed} failed: {error}")
        return [str(p["sku"]) for p in read_products(feed)]
    skus = []
    for product in read_products(feed):
        sku = str(product["sku"])
        stack.services.tables.catalog.upsert(sku, {k: product[k] for k in PRODUCT_FIELDS if product.get(k) is not None})
        skus.append(sku)
    return skus
