"""Pure rules of holds and orders: checkout URLs, order bodies, and the pages a shopper sees."""

from __future__ import annotations

import pytest

from app import RESERVE_STATUS
from chalicelib import holds
from chalicelib.errors import BadRequest
from chalicelib.holds import ReserveOutcome, checkout_location
from chalicelib.orders import Order, parse_order
from chalicelib.shopper.pages import LOCAL_TIMES, LOCAL_TIMES_HASH, Shop, reserve_link_page
from chalicelib.web.responses import page_response


def test_checkout_url_fills_sku_and_reservation_id_url_encoded() -> None:
    template = "https://shop.example/cart/add?sku={sku}&ref={reservation_id}&utm={{keep}}"
    assert checkout_location(template, "MUG/BLUE 2", "ab12") == (
        "https://shop.example/cart/add?sku=MUG%2FBLUE%202&ref=ab12&utm={{keep}}"
    )


@pytest.mark.parametrize("template", ["", "javascript:alert(1)", "//shop.example/{sku}", "ftp://shop.example/"])
def test_checkout_url_must_be_http(template: str) -> None:
    assert checkout_location(template, "SKU", "id") is None


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (holds.OFFER_PAGE, 200),
        (holds.HOLDING_PAGE, 200),
        (holds.HELD_NOW, 303),
        (holds.HELD_AGAIN, 303),
        (holds.JUST_GONE_PAGE, 410),
        (holds.EXPIRED_LINK, 410),
        (holds.INVALID_LINK, 400),
        (holds.UNKNOWN_LINK, 404),
        (holds.UNAVAILABLE, 409),
    ],
)
def test_every_outcome_has_a_status_below_500(kind: str, status: int) -> None:
    assert RESERVE_STATUS[ReserveOutcome(kind).kind] == status


def test_redirect_keeps_the_link_out_of_the_referrer() -> None:
    response = page_response(
        reserve_link_page(
            ReserveOutcome(holds.HELD_NOW, "https://shop.example/c?a=1&b=2"),
            RESERVE_STATUS[holds.HELD_NOW],
            Shop("Shop"),
            "t",
        )
    )
    assert response.status_code == 303
    assert response.headers["Location"] == "https://shop.example/c?a=1&b=2"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert 'href="https://shop.example/c?a=1&amp;b=2"' in response.body


@pytest.mark.parametrize(
    ("outcome", "title", "says"),
    [
        (ReserveOutcome(holds.JUST_GONE_PAGE), "Just gone — you keep your place for next time", "not lost your place"),
        (ReserveOutcome(holds.EXPIRED_LINK, reason="offer_lapsed"), "This link has expired", "time to reserve"),
        (ReserveOutcome(holds.EXPIRED_LINK, reason="hold_expired"), "This link has expired", "held for you"),
        # Opened after its purchase: bought, not expired.
        (ReserveOutcome(holds.EXPIRED_LINK, reason="used"), "You bought this one", "Thank you for your order"),
        (ReserveOutcome(holds.EXPIRED_LINK, reason="link_too_old"), "This link has expired", "keep your place"),
        (ReserveOutcome(holds.INVALID_LINK), "This link is not complete", "cut short"),
        (ReserveOutcome(holds.UNKNOWN_LINK), "We cannot find this reservation", "does not match"),
        (ReserveOutcome(holds.UNAVAILABLE), "Checkout is not available right now", "nothing has been reserved"),
    ],
)
def test_pages_are_honest_and_carry_the_shop_name(outcome: ReserveOutcome, title: str, says: str) -> None:
    response = page_response(reserve_link_page(outcome, RESERVE_STATUS[outcome.kind], Shop("Walnut & Wool"), "tok.en"))
    assert response.status_code == RESERVE_STATUS[outcome.kind]
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert f"<h1>{title}</h1>" in response.body
    assert says in response.body
    assert "Walnut &amp; Wool" in response.body
    assert '<html lang="en">' in response.body
    assert "<form" not in response.body and "<script" not in response.body


@pytest.mark.parametrize(
    ("outcome", "title", "button"),
    [
        (
            ReserveOutcome(holds.OFFER_PAGE, product_name="Mug <blue>", offer_expires_at=0),
            "is back in stock",
            "Hold one",
        ),
        (ReserveOutcome(holds.HOLDING_PAGE, product_name="Mug <blue>", hold_expires_at=0), "is held for you", "Go to"),
    ],
)
def test_an_opened_link_is_a_page_whose_button_alone_posts_to_the_link(
    outcome: ReserveOutcome, title: str, button: str
) -> None:
    response = page_response(reserve_link_page(outcome, RESERVE_STATUS[outcome.kind], Shop("Walnut & Wool"), "tok.en"))
    assert response.status_code == 200
    assert "Mug &lt;blue&gt;" in response.body and title in response.body and button in response.body
    assert '<form id="go" method="post" action="tok.en">' in response.body
    # Its one script shows its time in the shopper's own zone, allowed by its hash alone; no script sends the form.
    assert response.body.count("<script>") == 1 and f"<script>{LOCAL_TIMES}</script>" in response.body
    policy = response.headers["Content-Security-Policy"]
    assert f"script-src {LOCAL_TIMES_HASH};" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert "form-action" not in policy, "the form's answer is a redirect to the shop's checkout on another origin"
    assert response.headers["X-Frame-Options"] == "DENY" and response.headers["Cache-Control"] == "no-store"


def test_order_body_accepts_string_or_numeric_order_ids() -> None:
    assert parse_order({"reservation_id": "a1", "order_id": " #1001 "}) == Order("a1", "#1001")
    assert parse_order({"reservation_id": "a1", "order_id": 1001}) == Order("a1", "1001")


def test_order_body_rejects_what_no_platform_sends() -> None:
    with pytest.raises(BadRequest, match="reservation_id is required"):
        parse_order({"order_id": "1"})
    with pytest.raises(BadRequest, match="order_id must be a string or a whole number"):
        parse_order({"reservation_id": "a1", "order_id": 1.5})
