"""A page module returns a rendered `Page`; the entry point answers with it through one function
(chalicelib/web/responses.py page_response), byte for byte what the page frame rendered."""

from __future__ import annotations

from chalicelib.shopper.pages import LINK_INCOMPLETE, About, Shop, shopper_page, shopper_text_page
from chalicelib.web.responses import page_response

SHOP = Shop("Walnut <&> Wool", "https://shop.example/", "https://cdn.shop.example/logo.svg", "#7a4b2a")


def test_a_rendered_page_is_answered_as_the_frame_rendered_it() -> None:
    about = About("Chair", "https://cdn.shop.example/chair.jpg", "https://shop.example/chair")
    rendered = shopper_page(410, "Gone", "It went.", SHOP, "<p>x</p>", lang="de", about=about)
    answered = page_response(rendered)
    assert (answered.status_code, answered.headers, answered.body) == (rendered.status, rendered.headers, rendered.html)
    assert list(answered.headers) == list(rendered.headers)


def test_a_text_page_too() -> None:
    rendered = shopper_text_page(400, LINK_INCOMPLETE, SHOP, "fr")
    answered = page_response(rendered)
    assert (answered.status_code, answered.headers, answered.body) == (rendered.status, rendered.headers, rendered.html)


def test_headers_added_to_a_page_come_after_its_own() -> None:
    rendered = shopper_page(429, "Wait", "Later.", SHOP).with_headers({"Retry-After": "30"})
    assert list(rendered.headers)[-1] == "Retry-After"
    assert rendered.headers["Retry-After"] == "30"
