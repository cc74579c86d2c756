"""The dashboard's page and files (chalicelib/admin_pages.py): a strict policy, an allow-list, and a page whose
landmarks, tabs and inputs a screen reader can find."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser

import pytest
from chalice.test import Client

from chalicelib import admin_pages
from tests.support import ROOT


class Outline(HTMLParser):
    """Every start tag with its attributes, and the text inside each <label>."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.label_for: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag == "label" and found.get("for"):
            self.label_for.append(str(found["for"]))

    def having(self, tag: str, **attrs: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


@pytest.fixture(scope="module")
def outline() -> Outline:
    parsed = Outline()
    parsed.feed(admin_pages.page())
    return parsed


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    from app import app

    with Client(app, stage_name="local", project_dir=str(ROOT)) as test_client:
        yield test_client


def directives() -> dict[str, str]:
    parts = (p.strip().split(" ", 1) for p in admin_pages.CONTENT_SECURITY_POLICY.split(";"))
    return {p[0]: p[1] if len(p) > 1 else "" for p in parts}


def test_the_policy_allows_only_the_apis_own_scripts_and_no_inline_code() -> None:
    policy = directives()
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"
    assert policy["style-src"] == "'self'"
    assert policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["form-action"] == "'none'"
    assert "unsafe-inline" not in admin_pages.CONTENT_SECURITY_POLICY
    assert "unsafe-eval" not in admin_pages.CONTENT_SECURITY_POLICY
    assert "http" not in admin_pages.CONTENT_SECURITY_POLICY


def test_the_page_has_no_inline_script_style_or_handler(outline: Outline) -> None:
    scripts = outline.having("script")
    assert scripts == [{"type": "module", "src": "admin/static/admin.js"}]
    assert outline.having("style") == []
    assert not [a for _, a in outline.tags if "style" in a or any(k.startswith("on") for k in a)]
    # Relative addresses only, so the page works under a stage's path prefix and never names another host.
    assert all(
        not str(a.get("src") or a.get("href") or "").startswith(("/", "http"))
        for _, a in outline.tags
        if a.get("href") != "#main"
    )


def test_the_page_has_its_landmarks_tabs_and_a_label_for_every_input(outline: Outline) -> None:
    assert outline.having("html", lang="en")
    assert outline.having("main", id="main")
    assert outline.having("a", href="#main")  # skip link
    assert len(outline.having("div", role="tablist")) == 1
    tabs = outline.having("button", role="tab")
    assert [t["id"] for t in tabs] == [f"tab-{key}" for key, _ in admin_pages.TABS]
    for tab in tabs:
        assert outline.having("section", role="tabpanel", id=str(tab["aria-controls"]), aria_labelledby=str(tab["id"]))
    inputs = [a["id"] for t, a in outline.tags if t in {"input", "select", "textarea"}]
    assert inputs == ["sign-in-email", "sign-in-password", "challenge-answer", "period-from", "period-to"]
    assert sorted(outline.label_for) == sorted(inputs)
    assert outline.having("input", id="sign-in-password", type="password", autocomplete="current-password")
    assert outline.having("div", id="alert", role="alert")
    assert outline.having("p", id="status", role="status")


@pytest.mark.parametrize("name", sorted(admin_pages.STATIC_FILES))
def test_each_allowed_file_is_served_with_its_type(name: str) -> None:
    found = admin_pages.static_file(name)
    assert found is not None
    body, content_type = found
    assert body == (ROOT / "chalicelib" / "static" / "admin" / name).read_bytes()
    assert content_type == admin_pages.STATIC_FILES[name]


@pytest.mark.parametrize(
    "name",
    [
        "../admin_pages.py",
        "..%2fapp.py",
        "/etc/passwd",
        "admin.js/",
        "ADMIN.JS",
        "widget.js",
        "",
        ".",
        "..",
        "admin.js\x00.css",
    ],
)
def test_any_other_name_is_refused(name: str) -> None:
    assert admin_pages.static_file(name) is None


def test_every_file_in_the_folder_is_on_the_allow_list() -> None:
    on_disk = {p.name for p in (ROOT / "chalicelib" / "static" / "admin").iterdir()}
    assert on_disk == set(admin_pages.STATIC_FILES)


def test_the_scripts_never_write_html_from_data() -> None:
    for name in ("admin.js", "charts.js"):
        source = (ROOT / "chalicelib" / "static" / "admin" / name).read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in source, f"{name} uses {sink}"


def test_get_admin_answers_the_page_with_its_security_headers(client: Client) -> None:
    response = client.http.get("/admin")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert response.headers["Content-Security-Policy"] == admin_pages.CONTENT_SECURITY_POLICY
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.body.decode() == admin_pages.page()


def test_get_a_static_file_answers_it(client: Client) -> None:
    response = client.http.get("/admin/static/charts.js")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert b"export function barChart" in response.body


@pytest.mark.parametrize("path", ["/admin/static/app.py", "/admin/static/..%2F..%2Fapp.py", "/admin/static/%2e%2e"])
def test_an_unknown_or_traversing_name_is_a_json_404(client: Client, path: str) -> None:
    response = client.http.get(path)
    assert response.status_code == 404
    assert response.json_body["error"] == "not_found"
    assert b"Chalice" not in response.body and b"import" not in response.body
