"""Addresses no route serves: the shop's own 404 page for a browser, a JSON 404 for a program, never the gateway's
403 "Missing Authentication Token"."""

from __future__ import annotations

import html
import json

import pytest
from chalice.test import Client

from chalicelib.wiring import Services

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8", "Accept-Language": "de-CH,de;q=0.9"}


@pytest.mark.parametrize("path", ["/", "/nothing-here", "/reserve", "/a/b/c", "/r/abc/extra"])
def test_a_browser_gets_the_shops_404_page_in_its_language(client: Client, services: Services, path: str) -> None:
    answer = client.http.get(path, headers=BROWSER)
    assert answer.status_code == 404
    assert answer.headers["Content-Type"].startswith("text/html")
    body = answer.body.decode()
    assert "Wir finden diese Seite nicht" in body and 'lang="de"' in body
    assert html.escape(services.settings.shop_name) in body and "Zurück zum Shop" in body  # the shop's look
    assert "Missing Authentication Token" not in body


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/notify-me/nope"), ("POST", "/webhooks/nope"), ("GET", "/admin/api/nope"), ("DELETE", "/x/y")],
)
def test_a_program_gets_a_json_404(client: Client, method: str, path: str) -> None:
    answer = client.http.request(method, path, headers={"Accept": "*/*", "Content-Type": "text/plain"}, body=b"x")
    assert answer.status_code == 404
    body = json.loads(answer.body)
    assert body["error"] == "not_found"
    assert f"There is no {method} {path} here" in body["message"]


def test_an_api_path_is_json_even_for_a_browser(client: Client) -> None:
    answer = client.http.get("/webhooks/nope", headers=BROWSER)
    assert answer.status_code == 404 and json.loads(answer.body)["error"] == "not_found"


def test_head_answers_the_404_without_a_body(client: Client) -> None:
    answer = client.http.request("HEAD", "/nothing-here", headers=BROWSER)
    assert answer.status_code == 404 and answer.body == b""


def test_known_routes_still_answer_as_before(client: Client) -> None:
    assert client.http.get("/widget.js").status_code == 200
    assert client.http.get("/r/not-a-real-id", headers=BROWSER).status_code in (400, 404)
