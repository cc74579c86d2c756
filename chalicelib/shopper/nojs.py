"""The page a Notify-me form posted without JavaScript answers with, in the shopper's language.

A browser with scripts off posts the embed snippet's plain form and shows whatever comes back, so it gets a page
that says what happened and links back to the product: the catalogue's product URL for the SKU, else the shop's
own URL. The link never comes from the request, so no post can turn the API into a redirector. An accepted tap
reads the same whether the place is new, kept or refused for an opt-out (chalicelib/capture.py, CaptureOutcome).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlparse

from chalicelib.capture import SKU_PATTERN, name_ok, parse_lang
from chalicelib.config import Settings
from chalicelib.contacts import TOO_LONG, TOO_SHORT, example_region
from chalicelib.errors import BadRequest, DomainError
from chalicelib.i18n import accept_language, text
from chalicelib.shopper.pages import About, Page, Shop, shopper_page
from chalicelib.shopper.widget import PREORDER_NOTE, STRINGS, home_regions, phone_example, served_regions
from chalicelib.tables.catalog import PREORDER, Product
from chalicelib.web.errors import error_status

# A refusal's code, as capture raises it, to what the widget says about it (chalicelib/shopper/widget.py STRINGS keys).
# Codes whose words depend on the channel chosen are settled in `_refusal_key`.
REFUSAL_KEYS = {
    "invalid_phone": "phoneFix",
    "invalid_email": "badEmail",
    "sms_number_type": "mobileOnly",
    "sms_country_not_allowed": "country",
    "too_many_places": "places",
    "unknown_sku": "gone",
    "discontinued": "gone",
    "invalid_sku": "gone",
    "waiting_list_full": "full",
    "rate_limited": "tooMany",
    "number_rate_limited": "tooMany",
    "prefix_rate_limited": "tooMany",
    "busy": "busy",
}
THANKS = "Thank you"
REFUSED = "We could not add you to the list"
BACK_TO_PRODUCT = "Back to the product"
BACK_TO_SHOP = "Back to the shop"
OWN_PAGE = "Please sign up from the shop's own product page."


class ProductLookup(Protocol):
    def get_cached(self, sku: str) -> Product | None: ...


def _web_url(url: str | None) -> str:
    """The URL if it is an absolute http(s) one (what a link back may be), else ''."""
    parsed = urlparse((url or "").strip())
    return url.strip() if url and parsed.scheme in ("http", "https") and parsed.netloc else ""


def _refusal_key(error: DomainError, form: Mapping[str, Any]) -> str:
    sms = str(form.get("channel", "")).strip().lower() != "email"
    if error.code == "contact_channel_mismatch":
        return "looksEmail" if sms else "looksPhone"
    if error.code == "missing_field" and not str(form.get("contact", "")).strip():
        return "needPhone" if sms else "needEmail"
    name = form.get("name")
    named = isinstance(name, str) and bool(name.strip())
    if error.code == "invalid_field" and named and not name_ok(str(name)):
        return "nameBad"
    if error.code == "invalid_phone" and error.reason in (TOO_SHORT, TOO_LONG):
        return error.reason
    if error.code == "on_backorder":
        return "gone"  # sold on backorder and the shop chose nothing (its pre-order note is the refusal's own `note`)
    return REFUSAL_KEYS.get(error.code, "failed")


@dataclass(frozen=True, kw_only=True)
class FormAnswers:
    """The pages a no-JavaScript tap is answered with."""

    settings: Settings
    catalog: ProductLookup

    @property
    def _served(self) -> tuple[str, ...]:
        return served_regions(self.settings.default_phone_region, self.settings.sms_allowed_countries)

    def _example(self, form: Mapping[str, Any], accept: str | None, lang: str) -> str:
        """An example mobile of the country the typed number names, else of the shopper's own, as the widget picks."""
        typed = form.get("contact")
        tags = [str(form.get("lang") or ""), *accept_language(accept)]
        region = example_region(typed if isinstance(typed, str) else "", self._served, home_regions(tags, lang))
        return phone_example(region)

    def _product(self, form: Mapping[str, Any]) -> Product | None:
        sku = form.get("sku")
        return self.catalog.get_cached(sku) if isinstance(sku, str) and SKU_PATTERN.match(sku) else None

    @staticmethod
    def _about(product: Product | None) -> About | None:
        """The product the form was for, shown on the page (its picture and name), when the catalogue knows it."""
        if product is None or not product.name:
            return None
        return About(product.name, product.image_url or "", _web_url(product.product_url))

    def _back(self, product: Product | None, lang: str) -> str:
        """A link back to the SKU's product page, else to the shop; none when the shop has no URL configured."""
        t = text("widget", lang)
        url = _web_url(product.product_url if product else None)
        label = t(BACK_TO_PRODUCT) if url else t(BACK_TO_SHOP)
        url = url or _web_url(self.settings.shop_url)
        return f'<p><a href="{html.escape(url)}">{html.escape(label)}</a></p>' if url else ""

    def accepted(self, status: int, form: Mapping[str, Any], accept_language: str | None, confirm_email: bool) -> Page:
        """The same page for a new place, a kept one and an opted-out contact: what happens next."""
        lang = _lang(form, accept_language)
        t = text("widget", lang)
        email = str(form.get("channel", "")).strip().lower() == "email"
        said = t(STRINGS["onListEmail" if email else "onList"])
        if email and confirm_email:
            said = f"{said} {t(STRINGS['confirm'])}"
        product = self._product(form)
        return _in(
            lang,
            shopper_page(
                status,
                t(THANKS),
                said,
                Shop.of(self.settings),
                self._back(product, lang),
                lang=lang,
                about=self._about(product),
            ),
        )

    def refused(self, error: DomainError, form: Mapping[str, Any], accept_language: str | None) -> Page:
        """A refusal in words the shopper can act on, with the refusal's own status code."""
        lang = _lang(form, accept_language)
        t = text("widget", lang)
        said = t(OWN_PAGE) if error.code == "cross_site_form" else t(STRINGS[_refusal_key(error, form)])
        if error.code == "on_backorder" and error.reason == PREORDER:
            said = t(PREORDER_NOTE)
        if error.code == "invalid_phone":
            # What is wrong with the number, then a mobile of the shopper's own country, as the widget says it.
            said = f"{said} {t(STRINGS['eg'], example=self._example(form, accept_language, lang))}"
        refusal = shopper_page(
            error_status(error),
            t(REFUSED),
            said,
            Shop.of(self.settings),
            self._back(self._product(form), lang),
            lang=lang,
        )
        retry = getattr(error, "retry_after_s", None)
        if retry is not None:
            refusal = refusal.with_headers({"Retry-After": str(retry)})
        return _in(lang, refusal)


def _lang(form: Mapping[str, Any], accept_language: str | None) -> str:
    try:
        return parse_lang(form.get("lang"), accept_language)
    except BadRequest:
        return parse_lang(None, accept_language)


def _in(lang: str, answer: Page) -> Page:
    """The page's language said in its headers too."""
    return answer.with_headers({"Content-Language": lang})
