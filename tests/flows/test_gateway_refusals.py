"""Refusals Chalice makes itself, before any route runs, answer in the same JSON error shape as the app's own."""

from __future__ import annotations

import json

import pytest
from chalice.test import Client


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/webhooks/orders", "text/plain"),
        ("/webhooks/inventory", "application/xml"),
        ("/notify-me", "multipart/form-data; boundary=x"),
        ("/me/some-token", "application/json"),
        ("/unsubscribe/some-token", "application/json"),
    ],
)
def test_a_body_type_a_route_does_not_take_gets_415_with_a_json_error(
    client: Client, path: str, content_type: str
) -> None:
    response = client.http.post(path, headers={"Content-Type": content_type}, body=b"x")
    assert response.status_code == 415
    assert response.headers["Content-Type"] == "application/json"
    assert json.loads(response.body) == {
        "error": "unsupported_media_type",
        "message": f"Unsupported media type: {content_type}",
    }
