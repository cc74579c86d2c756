"""The local stack's small rules: ports, overrides, the demo feed on other ports, the stack's clock, outbox parsing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from chalicelib.config import ConfigError
from chalicelib.platforms.http import HttpResponse
from chalicelib.web import cors_headers
from chalicelib.wiring import Services
from devstack import demo
from devstack.api import PlatformFollower, parse_overrides
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock, model_for
from devstack.outbox import Sent, html_to_text
from devstack.runner import api_overrides, parse_args
from devstack.stack import (
    ConsoleClock,
    LocalContext,
    SharedClock,
    SharedOffset,
    SharedPlatform,
    scheduled_event,
    sqs_event,
)
from devstack.stage import local_settings
from devstack.stores import Rebased, RoutedTransport


def test_default_ports_are_the_documented_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DEVSTACK_MOTO_PORT", "DEVSTACK_API_PORT", "DEVSTACK_CONSOLE_PORT"):
        monkeypatch.delenv(name, raising=False)
    args = parse_args([])
    assert (args.moto_port, args.api_port, args.console_port) == (4566, 8000, 8001)
    assert args.sweep_every == 60.0 and not args.no_pump


def test_ports_come_from_the_environment_and_flags_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVSTACK_API_PORT", "9000")
    monkeypatch.setenv("DEVSTACK_CONSOLE_PORT", "9001")
    assert parse_args([]).api_port == 9000
    assert parse_args(["--api-port", "9100"]).api_port == 9100


@pytest.mark.parametrize("argv", [["--api-port", "0"], ["--api-port", "8001"], ["--console-port", "70000"]])
def test_bad_or_clashing_ports_are_refused(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEVSTACK_CONSOLE_PORT", raising=False)
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_api_settings_follow_the_ports_and_pass_the_rate_limit_through() -> None:
    assert api_overrides(8000, 8001, {}) == {
        "PUBLIC_BASE_URL": "http://127.0.0.1:8000",
        "CORS_ORIGINS": "http://127.0.0.1:8001,http://localhost:8001",
        "SHOP_URL": "http://127.0.0.1:8001/",
        "SHOP_LOGO_URL": "http://127.0.0.1:8001/static/logo.svg",
    }
    assert api_overrides(8000, 8001, {"RATE_LIMIT_PER_MINUTE": "600"})["RATE_LIMIT_PER_MINUTE"] == "600"
    assert "RATE_LIMIT_PER_MINUTE" not in api_overrides(8000, 8001, {"RATE_LIMIT_PER_MINUTE": " "})


def test_events_out_settings_reach_the_app_from_the_environment() -> None:
    events = {"OUTBOUND_EVENTS": "held,bought", "OUTBOUND_WEBHOOK_URL": "http://127.0.0.1:9000/hooks"}
    overrides = api_overrides(8000, 8001, {**events, "OUTBOUND_WEBHOOK_SECRET": "", "HOME": "/home/shop"})
    assert {k: v for k, v in overrides.items() if k.startswith("OUTBOUND_")} == events


def test_cors_origins_from_the_environment_reach_the_app_beside_the_consoles() -> None:
    env = {"CORS_ORIGINS": " https://theme.walnut-and-wool.test , http://localhost:9292/,"}
    overrides = api_overrides(8000, 8001, env)
    assert overrides["CORS_ORIGINS"] == (
        "http://127.0.0.1:8001,http://localhost:8001,https://theme.walnut-and-wool.test,http://localhost:9292"
    )
    allowed = local_settings(overrides).cors_origins
    assert cors_headers("http://localhost:9292", allowed)["Access-Control-Allow-Origin"] == "http://localhost:9292"
    assert cors_headers("http://127.0.0.1:8001", allowed) != {}  # the console's storefront keeps working
    assert cors_headers("https://elsewhere.test", allowed) == {}


@pytest.mark.parametrize("raw", ["theme.test", "ftp://theme.test", "https://theme.test/shop", "https://", "*"])
def test_cors_origins_that_are_not_origins_are_refused_at_start(raw: str) -> None:
    with pytest.raises(SystemExit, match="CORS_ORIGINS must be origins"):
        api_overrides(8000, 8001, {"CORS_ORIGINS": raw})


def test_api_overrides_are_name_value_pairs() -> None:
    assert parse_overrides(["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    with pytest.raises(ValueError):
        parse_overrides(["nonsense"])


def test_the_demo_feed_is_used_as_is_on_the_default_console_port() -> None:
    assert demo.feed_for("http://127.0.0.1:8001") == demo.DEMO_CATALOG


def test_the_demo_feed_points_checkout_pages_and_pictures_at_a_console_on_another_port(tmp_path: Path) -> None:
    feed = demo.feed_for("http://127.0.0.1:9001", work_dir=tmp_path)

    products = json.loads(feed.read_text())["products"]
    assert feed.parent == tmp_path
    assert [p["sku"] for p in products] == [p["sku"] for p in demo.read_products()]
    assert all(p["checkout_url"].startswith("http://127.0.0.1:9001/checkout?") for p in products)
    assert [p["product_url"] for p in products] == [f"http://127.0.0.1:9001/#{p['sku']}" for p in products]
    assert [p["image_url"] for p in products] == [
        f"http://127.0.0.1:9001/static/products/{p['sku']}.svg" for p in products
    ]


def test_every_demo_product_has_its_own_picture_in_the_console() -> None:
    static = Path(demo.__file__).parent / "console" / "static" / "products"
    for product in demo.read_products():
        picture = static / f"{product['sku']}.svg"
        assert picture.read_text().startswith("<svg "), picture
        assert f"<title>{product['name']}</title>" in picture.read_text()


def test_the_stack_clock_advances_and_can_be_held_at_a_moment() -> None:
    clock = ConsoleClock(FixedClock(1000.0))
    clock.advance(60)
    assert clock.now() == 1060.0
    with clock.pinned(5000.0):
        assert clock.now() == 5000.0
    assert clock.now() == 1060.0


def test_lambda_events_have_the_shape_chalice_reads() -> None:
    event = sqs_event(
        {"MessageId": "m1", "ReceiptHandle": "r1", "Body": "{}", "Attributes": {"ApproximateReceiveCount": "2"}},
        "arn:aws:sqs:eu-west-2:123456789012:bisn-jobs",
        "eu-west-2",
    )
    [record] = event["Records"]
    assert (record["messageId"], record["receiptHandle"], record["body"]) == ("m1", "r1", "{}")
    assert record["attributes"]["ApproximateReceiveCount"] == "2"
    scheduled = scheduled_event(0.0, "eu-west-2", "rule")
    assert scheduled["time"] == "1970-01-01T00:00:00Z"
    assert scheduled["detail-type"] == "Scheduled Event"
    assert 0 < LocalContext("notifier", 60, "eu-west-2").get_remaining_time_in_millis() <= 60_000


def test_links_are_found_in_text_html_and_headers() -> None:
    sent = Sent(
        id="1",
        channel="email",
        to="a@example.com",
        subject="s",
        body="Hold one: http://127.0.0.1:8000/reserve/abc.DEF-_1.",
        html='<a href="http://127.0.0.1:8000/me/xyz">me</a>',
        headers={"List-Unsubscribe": "<http://127.0.0.1:8000/unsubscribe/u1>"},
    )
    assert sent.links() == {
        "reserve": "http://127.0.0.1:8000/reserve/abc.DEF-_1",
        "manage": "http://127.0.0.1:8000/me/xyz",
        "unsubscribe": "http://127.0.0.1:8000/unsubscribe/u1",
    }


def test_a_confirmation_email_offers_its_confirm_link() -> None:
    sent = Sent(
        id="m2",
        channel="email",
        to="grace@example.com",
        subject="Please confirm",
        body="To confirm, open this link: http://127.0.0.1:8000/confirm/c1.X-_2\nUnsubscribe: "
        "http://127.0.0.1:8000/unsubscribe/u1",
    )
    assert sent.links() == {
        "confirm": "http://127.0.0.1:8000/confirm/c1.X-_2",
        "unsubscribe": "http://127.0.0.1:8000/unsubscribe/u1",
    }


def test_an_html_email_reads_as_text_with_its_links() -> None:
    text = html_to_text("<html><head><style>p{}</style></head><p>Hi <b>Ada</b></p><p><a href='http://x/y'>go</a></p>")
    assert text.splitlines() == ["Hi Ada", "http://x/y go"]


def test_the_api_process_keeps_the_time_the_console_sets(tmp_path: Path) -> None:
    published = tmp_path / "clock.json"
    console = ConsoleClock(FixedClock(1000.0), share=SharedOffset(published))
    api = SharedClock(SharedOffset(published))
    assert abs(api.now() - time.time()) < 1

    console.advance(600)

    assert abs(api.now() - time.time() - 600) < 1
    assert console.now() == 1600.0


def test_a_stack_clock_that_was_never_published_is_the_wall_clock(tmp_path: Path) -> None:
    assert abs(SharedClock(SharedOffset(tmp_path / "none.json")).now() - time.time()) < 1


def test_the_fake_model_comes_from_the_local_stack_never_from_the_shipped_code() -> None:
    settings = local_settings()
    assert settings.copy_mode == "fake"
    with pytest.raises(ConfigError, match="COPY_MODE=fake"):
        _ = Services(settings).bedrock
    assert isinstance(Services(settings, model=model_for(settings)).bedrock, FakeBedrock)
    template = local_settings({"COPY_MODE": "template"})
    assert model_for(template) is None
    assert Services(template, model=FakeBedrock()).bedrock is None


def test_the_fake_stores_have_ports_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DEVSTACK_WOOCOMMERCE_PORT", "DEVSTACK_SHOPIFY_PORT", "DEVSTACK_CONSOLE_PORT"):
        monkeypatch.delenv(name, raising=False)
    args = parse_args([])
    assert (args.woocommerce_port, args.shopify_port) == (8002, 8003)
    with pytest.raises(SystemExit):
        parse_args(["--shopify-port", "8001"])


def test_the_woocommerce_store_url_follows_its_port() -> None:
    assert api_overrides(8000, 8001, {}, 9002)["WOOCOMMERCE_STORE_URL"] == "http://127.0.0.1:9002"
    settings = local_settings(api_overrides(8000, 8001, {}, 9002))
    assert (settings.platform, settings.woocommerce_store_url) == ("generic", "http://127.0.0.1:9002")
    assert settings.shopify_shop_domain == "walnut-and-wool.myshopify.com"


class Recorder:
    def __init__(self) -> None:
        self.urls: list[str] = []

    def send(self, method: str, url: str, headers: Any, body: bytes | None = None) -> HttpResponse:
        self.urls.append(url)
        return HttpResponse(200)


def test_requests_go_to_the_transport_of_their_host_and_a_rebased_one_keeps_the_path() -> None:
    shop, other = Recorder(), Recorder()
    routed = RoutedTransport({"walnut-and-wool.myshopify.com": Rebased("http://127.0.0.1:8003", shop)}, fallback=other)
    routed.send("POST", "https://walnut-and-wool.myshopify.com/admin/api/2025-10/graphql.json?x=1", {})
    routed.send("GET", "http://127.0.0.1:8002/wp-json/wc/v3/products", {})
    assert shop.urls == ["http://127.0.0.1:8003/admin/api/2025-10/graphql.json?x=1"]
    assert other.urls == ["http://127.0.0.1:8002/wp-json/wc/v3/products"]


def test_the_api_process_rebuilds_its_services_when_the_platform_changes(tmp_path: Path) -> None:
    shared = SharedPlatform(tmp_path / "platform.json")
    built: list[str] = []

    def build(platform: str) -> Any:
        built.append(platform)
        return local_settings({"PLATFORM": platform or "generic"})

    follower = PlatformFollower(shared, build)
    assert follower.platform == "generic" and built == [""]
    shared.write("shopify")
    assert follower.platform == "shopify"
    assert follower.platform == "shopify" and built == ["", "shopify"]
