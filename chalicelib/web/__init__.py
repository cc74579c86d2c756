"""The HTTP edge, shared by the entry points: reading request bodies and forms, and which origins may post.

The status each refusal is answered with is in web/errors.py, every Response is made in web/responses.py, and the
answer to an address no route serves is web/not_found.py. The HTML of a page is pages.py's, never HTTP's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlparse

from chalicelib.errors import BadRequest, FormRefused, PayloadTooLarge

# The largest notify-me body accepted: a SKU, a contact and a name fit many times over.
MAX_BODY_BYTES = 4096

# Fields a form body may carry: the notify-me form has four.
MAX_FORM_FIELDS = 20

# The largest body a shopper page's own form (or a one-click unsubscribe) sends, and the most fields it has.
MAX_PAGE_FORM_BYTES = 4096
MAX_PAGE_FORM_FIELDS = 10

# Response headers as Chalice types them: a name may carry several values.
Headers = dict[str, str | list[str]]


def parse_body(raw: bytes | None, content_type: str, max_bytes: int) -> dict[str, Any]:
    """A JSON or form-encoded body as a dict; BadRequest/PayloadTooLarge for anything else."""
    data = raw or b""
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"The body must be at most {max_bytes} bytes.")
    if not data.strip():
        raise BadRequest("The body is empty.", code="invalid_body")
    kind = (content_type or "").split(";")[0].strip().lower()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest("The body must be UTF-8.", code="invalid_body") from exc
    if kind == "application/x-www-form-urlencoded":
        try:
            fields = parse_qs(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
        except ValueError as exc:  # more fields than max_num_fields
            raise BadRequest(f"The form may have at most {MAX_FORM_FIELDS} fields.", code="invalid_body") from exc
        return {k: v[-1] for k, v in fields.items()}
    return json_object(text)


def page_form(raw: bytes | None, content_type: str) -> dict[str, str]:
    """The fields of a form one of our shopper pages posts; FormRefused for a body no such form sends. Whether
    another site's page sent it is the entry point's check (`cross_site`), made before the link is read."""
    data = raw or b""
    if len(data) > MAX_PAGE_FORM_BYTES:
        raise FormRefused("That form was too large.", code="form_too_large")
    if (content_type or "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise FormRefused("Please use the buttons on the page.", code="form_refused")
    try:
        fields = parse_qs(data.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_PAGE_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormRefused("Please use the buttons on the page.", code="form_refused") from exc
    return {k: v[-1] for k, v in fields.items()}


def json_object(text: str) -> dict[str, Any]:
    """Text that must be one JSON object; BadRequest 'invalid_json' or 'invalid_body' otherwise."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise BadRequest("The body is not valid JSON.", code="invalid_json") from exc
    except RecursionError as exc:
        # Arrays or objects nested deeper than the parser's stack: no body we accept looks like that.
        raise BadRequest("The body is nested too deeply.", code="invalid_body") from exc
    if not isinstance(parsed, dict):
        raise BadRequest("The body must be a JSON object.", code="invalid_body")
    return parsed


def cross_site(headers: Mapping[str, str], allowed_origin: str) -> bool:
    """True when a browser says a form was sent from another site's page: an Origin other than ours, or, without
    an Origin, a Referer from another origin, or Sec-Fetch-Site: cross-site.

    Neither header, or `Origin: null`, is not another site: our pages send no Referer (Referrer-Policy:
    no-referrer, which also makes a browser send `Origin: null` on some form posts), and a mail provider's RFC 8058
    one-click unsubscribe is a POST from its servers, with no browser headers at all. A browser sends Origin on
    every cross-origin POST, so a hostile page cannot hide behind an absent one."""
    lowered = {k.lower(): v for k, v in headers.items()}
    origin = (lowered.get("origin") or "").strip().rstrip("/")
    own = _origin_of(allowed_origin)
    if origin and origin != "null" and _origin_of(origin) != own:
        return True
    referer = (lowered.get("referer") or "").strip()
    if not origin and referer and _origin_of(referer) != own:
        return True
    return lowered.get("sec-fetch-site", "").lower() == "cross-site"


def cors_headers(origin: str | None, allowed: tuple[str, ...]) -> Headers:
    """CORS headers for a shop storefront origin on the allow-list (none for anyone else)."""
    if not origin:
        return {}
    origin = origin.rstrip("/")
    if origin not in allowed:
        return {}
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": "POST, OPTIONS",
        "Access-Control-Allow-Headers": "Content-Type",
        "Access-Control-Max-Age": "600",
        "Vary": "Origin",
    }


def _origin_of(url: str) -> str:
    parsed = urlparse(url.strip())
    return f"{parsed.scheme}://{parsed.netloc}".lower() if parsed.scheme and parsed.netloc else ""


def simple_post_allowed(headers: Mapping[str, str], allowed: tuple[str, ...], own_url: str) -> bool:
    """Whether a "simple" POST (form-encoded or text/plain: no CORS preflight) may be taken: only from a page of
    an allowed storefront origin or of the API itself, by its Origin header (or, without one, its Referer's).

    Any page can make a visitor's browser send such a post, so without this a hostile page could make every
    visitor tap for numbers it chose, from as many addresses as it has visitors. A post naming neither header
    (or `Origin: null`) is refused: browsers send Origin on every cross-origin POST.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    origin = (lowered.get("origin") or "").strip()
    if not origin:
        origin = _origin_of(lowered.get("referer") or "")
    elif origin == "null":
        return False
    else:
        origin = _origin_of(origin)
    if not origin:
        return False
    permitted = {_origin_of(o) for o in allowed} | {_origin_of(own_url)}
    return origin in permitted
