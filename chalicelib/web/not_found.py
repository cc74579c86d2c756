"""The answer to an address we have no route for: a shop-branded page for a person, a JSON 404 for a program.

Without it, API Gateway (and `chalice local`) answers an unknown path with its own 403 `{"message": "Missing
Authentication Token"}`, which tells a shopper who mistyped a link nothing and looks to a developer like an auth
problem. app.py routes `/` and the greedy `/{proxy+}` here; API Gateway sends a path to the most specific resource
that matches, so the greedy one gets only what no other route takes.
"""

from __future__ import annotations

from chalice import Response

from chalicelib import i18n
from chalicelib.errors import NotFound
from chalicelib.shopper.pages import NOT_FOUND_PAGE, Shop, shopper_text_page
from chalicelib.web.responses import error_response, page_response

# Paths under these are the API's: whoever calls them reads JSON (docs/openapi.yaml).
API_PREFIXES = ("notify-me", "webhooks/", "admin/api", "widget.js")


def wants_json(path: str, accept: str | None) -> bool:
    """A program's request: an API path, or a client that does not ask for HTML (a browser always does)."""
    bare = path.lstrip("/")
    return bare.startswith(API_PREFIXES) or "text/html" not in (accept or "").lower()


def not_found(path: str, method: str, accept: str | None, shop: Shop, accept_language: str | None) -> Response:
    """404: JSON `{"error": "not_found", "message": ...}` for a program, the shop's own page for a person."""
    if wants_json(path, accept):
        shown = "/" + path.lstrip("/")
        return error_response(NotFound(f"There is no {method} {shown} here; docs/openapi.yaml lists the API."))
    return page_response(shopper_text_page(404, NOT_FOUND_PAGE, shop, i18n.negotiate(accept=accept_language)))
