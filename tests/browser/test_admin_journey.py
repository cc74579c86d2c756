"""The shop owner's dashboard in headless Chromium, at a desktop's and a phone's size.

The page and its files come from the app itself (GET /admin and /admin/static/* through chalice.test.Client, with
their real headers, so Chromium enforces the real Content-Security-Policy). /admin/api/* is answered by AdminApiDouble,
a test double in this file that returns the shapes of the admin API contract (docs/ADMIN.md, "Pages" lists the calls
each tab makes) and records every request it was sent. Playwright's request routing serves both from
http://admin.test, so no server runs.

Screenshots of each step go to artifacts/screenshots/admin-<size>-*.png (git-ignored).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from chalice.test import Client

from chalicelib.admin.dashboard import UNCONFIRMED_NOTE
from chalicelib.tables.catalog import BACKORDER_OFFERS
from tests.browser import axe
from tests.browser.running import SHOTS
from tests.support import ROOT

pytestmark = pytest.mark.browser

ORIGIN = "http://admin.test"
WAIT_MS = 5_000
TOKEN = "id-token-for-the-test-double"
OWNER = "owner@example.com"
CONTACT = "grace@example.com"
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}

# Contract-shaped answers (the admin API contract: GET demand, restocks, restocks/{id}, waiting/{sku}, operations;
# POST contacts/*, waiting/{sku}/remove, operations/redrive, products/{sku}/backorder). Names carry markup to prove it is shown as text.
THROW_ADVICE = (
    "Below 2 units nobody is told (the notify threshold is 2). A stock level of 2 tells the first 2 confirmed people "
    "in line, one per unit; 38 tells all 38 confirmed. 4 unconfirmed email places are passed over until confirmed."
)
DEMAND = {
    "from": "2026-11-01",
    "to": "2026-12-01",
    "skus": [
        {
            "sku": "WW-THROW-OAT",
            "name": "Oatmeal merino throw",
            "waiting": 42,
            "unconfirmed": 4,
            "new_in_period": 30,
            "threshold": 2,
            "notify_from": 2,
            "restock_hint": 38,
            "advice": THROW_ADVICE,
        },
        {
            "sku": "WW-BOARD-WALNUT",
            "name": "Walnut <b>board</b>",
            "waiting": 17,
            "unconfirmed": 0,
            "new_in_period": 9,
            "threshold": 1,
            "notify_from": 1,
            "restock_hint": 17,
            "advice": "A stock level of 1 tells the first confirmed person in line, one per unit; 17 tells all 17 confirmed.",
        },
        {
            "sku": "WW-MUG-ASH",
            "name": "Ash glaze mug",
            "waiting": 5,
            "unconfirmed": 0,
            "new_in_period": 5,
            "threshold": 1,
            "notify_from": 1,
            "restock_hint": 5,
            "advice": "A stock level of 1 tells the first confirmed person in line, one per unit; 5 tells all 5 confirmed.",
        },
    ],
    "daily": [{"date": f"2026-11-{day:02d}", "new": (day * 7) % 5} for day in range(1, 31)],
}
RESTOCK = {
    "restock_id": "r-0001",
    "sku": "WW-THROW-OAT",
    "name": "Oatmeal merino throw",
    "opened_at": "2026-11-20T09:00:00Z",
    "units": 10,
    "notified": 10,
    "held": 7,
    "bought": 6,
    "lapsed": 3,
    "expired": 1,
    "sold_out_seconds": 5400,
    "revenue": 534.0,
    "currency": "GBP",
}
RESTOCKS = {
    "restocks": [
        RESTOCK,
        {
            **RESTOCK,
            "restock_id": "r-0002",
            "sku": "WW-MUG-ASH",
            "name": "Ash glaze mug",
            "units": 2,
            "notified": 2,
            "held": 1,
            "bought": 0,
            "lapsed": 1,
            "expired": 1,
            "sold_out_seconds": None,
            "revenue": 0,
            "opened_at": "2026-11-25T12:30:00Z",
        },
    ],
    "by_channel": [
        {"channel": "sms", "notified": 8, "bought": 5, "rate": 0.625},
        {"channel": "email", "notified": 4, "bought": 1, "rate": 0.25},
    ],
}
FUNNEL = {
    **RESTOCK,
    "funnel": [{"stage": "notified", "count": 10}, {"stage": "held", "count": 7}, {"stage": "bought", "count": 6}],
}
WAITING = {
    "sku": "WW-THROW-OAT",
    "name": "Oatmeal merino throw",
    "entries": [
        {
            "position": 1,
            "contact": "+44*******456",
            "channel": "sms",
            "state": "waiting",
            "unconfirmed": False,
            "note": None,
            "joined_at": "2026-11-02T10:00:00Z",
            "action": "remove",
            "ref": "ref-1",
        },
        {
            "position": 2,
            "contact": "k***@e***.com",
            "channel": "email",
            "state": "waiting",
            "unconfirmed": True,
            "note": UNCONFIRMED_NOTE,
            "joined_at": "2026-11-02T11:00:00Z",
            "action": "remove",
            "ref": "ref-3",
        },
        {
            "position": 3,
            "contact": "g***@e***.com",
            "channel": "email",
            "state": "offered",
            "unconfirmed": False,
            "note": None,
            "joined_at": "2026-11-03T10:00:00Z",
            "action": None,
            "ref": "ref-2",
        },
    ],
    "next": None,
}
EXPLAIN = {
    "contact": "g***@e***.com",
    "opted_out": False,
    "places": [{"sku": "WW-THROW-OAT", "state": "waiting", "position": 2, "unconfirmed": True}],
    "decisions": [
        {"at": "2026-11-03T10:00:00Z", "what": "joined the list", "why": "tapped Notify me"},
        {"at": "2026-11-20T09:01:00Z", "what": "not told", "why": "<i>all units were already offered</i>"},
        {
            "at": "2026-11-20T09:02:00Z",
            "what": "WW-THROW-OAT restock r-0001 (10 units): other",
            "why": "skipped: their email address had not confirmed the request yet; later pass at 2026-11-20T10:05:00Z",
        },
    ],
}


# The answers the real import gives for tests/fixtures/imports/generic.csv (chalicelib/importer.py's report): line 5
# names no consent_source; Bo's place is imported unconfirmed and owes one confirmation email.
GENERIC_CSV = ROOT / "tests" / "fixtures" / "imports" / "generic.csv"
NO_CONSENT = "no consent_source: where this person agreed to be told"
IMPORT_MAX_BYTES = 1024  # the double's limit; the route's message (chalicelib/admin/api.py) names `bisn import`


def import_report(*, dry_run: bool, again: bool) -> dict[str, Any]:
    already = [{"line": line, "reason": "already on the list"} for line in (2, 3, 4)] if again else []
    return {
        "format": "generic",
        "dry_run": dry_run,
        "rows": 4,
        "imported": 0 if again else 3,
        "confirmations_owed": 0 if again else 1,
        "already": already,
        "refused": [{"line": 5, "reason": NO_CONSENT}],
    }


class AdminApiDouble:
    """A test double of /admin/api: signs in through one NEW_PASSWORD_REQUIRED challenge, then answers each read and
    action with the contract's shapes. Every request is recorded as (method, path, query, body, authorization)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.dlq_depth = 3
        self.revoked = False
        self.imported = False
        # The throw's product as catalogue sync and the backorder route leave it (chalicelib/tables/catalog.py).
        self.backorder = False
        self.backorder_offer = "none"

    def answer(self, method: str, path: str, query: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        if path == "session":
            if body.get("password") != "first-password":
                return 401, {"error": "sign_in_failed", "message": "Wrong email or password."}
            return 200, {"challenge": "NEW_PASSWORD_REQUIRED", "session": "opaque-session"}
        if path == "session/challenge":
            assert body == {
                "email": OWNER,
                "session": "opaque-session",
                "challenge": "NEW_PASSWORD_REQUIRED",
                "answer": "a new long password",
            }
            return 200, {"id_token": TOKEN, "expires_in": 3600, "role": "owner", "email": OWNER}
        if self.revoked:
            return 401, {"error": "unauthorized", "message": "Sign in again."}
        if path == "imports" and len(body["csv"]) > IMPORT_MAX_BYTES:
            return 413, {
                "error": "payload_too_large",
                "message": f"The file is over {IMPORT_MAX_BYTES} bytes, the most the dashboard imports at once; "
                "import it with `bisn import` instead.",
            }
        if query.get("format") == "csv":
            return 200, "sku,name,waiting\r\nWW-THROW-OAT,Oatmeal merino throw,42\r\n"
        routes: dict[tuple[str, str], Any] = {
            ("GET", "demand"): lambda: DEMAND,
            ("GET", "restocks"): lambda: RESTOCKS,
            ("GET", "restocks/r-0001"): lambda: FUNNEL,
            ("GET", "waiting/WW-THROW-OAT"): lambda: {
                **WAITING,
                "backorder": self.backorder,
                "backorder_offer": self.backorder_offer,
            },
            ("GET", "operations"): lambda: {
                "queues": [
                    {"name": "bisn-jobs", "dlq_depth": self.dlq_depth},
                    {"name": "bisn-feedback", "dlq_depth": 0},
                ],
                "sends_failed": 2,
                "undeliverable": 1,
                "alarms": [{"name": "bisn-dlq-not-empty", "state": "ALARM"}, {"name": "bisn-sms-spend", "state": "OK"}],
                "sms_spend": {"month_usd": 12.5, "limit_usd": 50},
            },
            ("POST", "contacts/explain"): lambda: EXPLAIN,
            ("POST", "contacts/optout"): lambda: {"status": "opted_out"},
            ("POST", "contacts/forget"): lambda: (
                {"status": "forgotten"} if body.get("confirm") is True else {"error": "confirm_required"}
            ),
            ("POST", "waiting/WW-THROW-OAT/remove"): lambda: {"status": "removed"},
            ("POST", "operations/redrive"): self.redrive,
            ("POST", "imports"): lambda: self.import_list(query),
            ("POST", "products/WW-THROW-OAT/backorder"): lambda: self.choose_backorder(body),
        }
        if method == "POST" and path.startswith("products/") and path.endswith("/backorder"):
            if body.get("offer") not in BACKORDER_OFFERS:
                return 400, {"error": "invalid_field", "message": "`offer` must be one of notify, preorder, none."}
            if path != "products/WW-THROW-OAT/backorder":
                return 404, {"error": "unknown_sku", "message": "No product with that SKU is catalogued."}
        handler = routes.get((method, path))
        if handler is None:
            return 404, {"error": "not_found", "message": f"{method} {path} is not in the test double."}
        return 200, handler()

    def import_list(self, query: dict[str, str]) -> dict[str, Any]:
        dry_run = query.get("dry_run") == "true"
        report = import_report(dry_run=dry_run, again=self.imported)
        self.imported = self.imported or not dry_run
        return report

    def choose_backorder(self, body: dict[str, Any]) -> dict[str, Any]:
        """As AdminApi.backorder answers (chalicelib/admin/api.py)."""
        self.backorder_offer = body["offer"]
        return {
            "sku": "WW-THROW-OAT",
            "backorder": self.backorder,
            "offer": self.backorder_offer,
            "waiting_list_open": not self.backorder or self.backorder_offer == "notify",
        }

    def redrive(self) -> dict[str, int]:
        moved, self.dlq_depth = self.dlq_depth, 0
        return {"moved": moved}

    def handle(self, route: Any) -> None:
        request = route.request
        url = urlparse(request.url)
        path = url.path.removeprefix("/admin/api/")
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        content_type = request.headers.get("content-type", "")
        if content_type == "text/csv":
            body = {"csv": request.post_data_buffer, "content_type": content_type}
        else:
            body = json.loads(request.post_data) if request.post_data else {}
        authorization = request.headers.get("authorization")
        self.calls.append({"method": request.method, "path": path, "query": query, "body": body, "auth": authorization})
        if not path.startswith("session") and authorization != f"Bearer {TOKEN}":
            status, answer = 401, {"error": "unauthorized", "message": "No token."}
        else:
            status, answer = self.answer(request.method, path, query, body)
        if isinstance(answer, str):
            route.fulfill(status=status, body=answer, headers={"Content-Type": "text/csv"})
        else:
            route.fulfill(status=status, body=json.dumps(answer), headers={"Content-Type": "application/json"})

    def last(self, method: str, path: str) -> dict[str, Any]:
        return [c for c in self.calls if c["method"] == method and c["path"] == path][-1]


@pytest.fixture(scope="module")
def app_client() -> Iterator[Client]:
    from app import app

    with Client(app, stage_name="local", project_dir=str(ROOT)) as client:
        yield client


def serve_from_app(client: Client) -> Any:
    def handle(route: Any) -> None:
        response = client.http.get(urlparse(route.request.url).path)
        route.fulfill(status=response.status_code, headers=dict(response.headers), body=response.body)

    return handle


@pytest.fixture(params=sorted(SIZES))
def dashboard(
    request: pytest.FixtureRequest, browser: Any, app_client: Client
) -> Iterator[tuple[Any, AdminApiDouble, str]]:
    size = request.param
    api = AdminApiDouble()
    # A staff member in New York reading British English: times must follow the browser's zone, not UTC.
    context = browser.new_context(
        viewport=SIZES[size], accept_downloads=True, locale="en-GB", timezone_id="America/New_York"
    )
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    tab.problems = []
    tab.on("pageerror", lambda error: tab.problems.append(str(error)))
    # A refused script, style or call is logged to the console; a 401 the page handles is logged too, and is not one.
    tab.on(
        "console",
        lambda message: tab.problems.append(message.text) if "Content Security Policy" in message.text else None,
    )
    tab.route(f"{ORIGIN}/admin/api/**", api.handle)
    tab.route(f"{ORIGIN}/admin", serve_from_app(app_client))
    tab.route(f"{ORIGIN}/admin/static/**", serve_from_app(app_client))
    yield tab, api, size
    context.close()


def shot(page: Any, size: str, name: str) -> None:
    """A full-page screenshot, once the page is known not to scroll sideways at this size."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= SIZES[size]["width"], f"{name}: the page is {width}px wide at {size}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"admin-{size}-{name}.png"), full_page=True)


def numbers(texts: list[str]) -> list[int]:
    return [int(t.strip()) for t in texts]


def sign_in(page: Any, api: AdminApiDouble) -> None:
    page.goto(f"{ORIGIN}/admin")
    page.get_by_label("Email", exact=True).fill(OWNER)
    page.get_by_label("Password", exact=True).fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("alert").filter(has_text="did not match").wait_for()
    page.get_by_label("Password", exact=True).fill("first-password")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_label("New password").fill("a new long password")
    page.get_by_role("button", name="Continue").click()
    page.get_by_role("tab", name="Demand", selected=True).wait_for()
    assert page.evaluate("JSON.parse(sessionStorage.getItem('bisn-admin-token')).token") == TOKEN
    assert api.last("GET", "demand")["auth"] == f"Bearer {TOKEN}"


def test_the_owner_signs_in_reads_demand_and_restocks_explains_a_contact_and_redrives(
    dashboard: tuple[Any, AdminApiDouble, str],
) -> None:
    page, api, size = dashboard
    sign_in(page, api)

    # Demand: the bar chart has a bar per product, with the same numbers as its table; the days' columns too.
    wanted = page.locator("figure", has=page.locator("#demand-table"))
    wanted.locator("svg[role=img] g.bar").first.wait_for()
    bars = wanted.locator("svg g.bar")
    assert bars.count() == 3
    assert numbers(bars.evaluate_all("gs => gs.map(g => g.dataset.value)")) == [42, 17, 5]
    assert bars.evaluate_all("gs => gs.map(g => g.dataset.label)") == [
        "Oatmeal merino throw",
        "Walnut <b>board</b>",
        "Ash glaze mug",
    ]
    assert numbers(page.locator("#demand-table tbody tr td:nth-child(3)").all_inner_texts()) == [42, 17, 5]
    assert wanted.locator("svg title").first.text_content() == "People waiting now, by product"
    assert "Oatmeal merino throw: 42 waiting" in wanted.locator("svg desc").first.text_content()
    assert page.locator("#demand-table b").count() == 0  # the name's markup is text
    assert page.locator("#demand-waiting").inner_text() == "64"
    assert page.locator("#demand-unconfirmed").inner_text() == "4"
    # The advice says what level tells whom, by the threshold, and counts the unconfirmed places apart.
    throw = page.locator("#demand-table tbody tr").first
    assert throw.locator("td").nth(2).inner_text() == "4"
    assert throw.locator("td").last.inner_text() == THROW_ADVICE
    assert "notify threshold" in page.locator("#demand-rule").inner_text()
    assert page.locator("#time-zone").inner_text().startswith("Times are shown in your time zone (America/New_York).")
    # The period's days are UTC days, shown as days (never shifted to New York's evening before).
    first_day = page.locator("#daily-table tbody tr").first.locator("time")
    assert (first_day.get_attribute("datetime"), first_day.inner_text()) == ("2026-11-01", "1 Nov 2026")
    axe.assert_accessible(page, f"dashboard demand ({size})")
    days = page.locator("figure", has=page.locator("#daily-table")).locator("svg rect.column")
    assert days.count() == 30 == page.locator("#daily-table tbody tr").count()
    assert api.last("GET", "demand")["query"].keys() == {"from", "to"}
    shot(page, size, "1-demand")

    # CSV: fetched with the token, then saved as a file.
    with page.expect_download() as download:
        page.locator("figure", has=page.locator("#demand-table")).get_by_role("link", name="Download CSV").click()
    saved = download.value
    assert saved.suggested_filename.startswith("demand-") and saved.suggested_filename.endswith(".csv")
    assert Path(saved.path()).read_text(encoding="utf-8").startswith("sku,name,waiting")
    csv_call = api.last("GET", "demand")
    assert csv_call["query"]["format"] == "csv" and csv_call["auth"] == f"Bearer {TOKEN}"

    # Restocks: open the throw's funnel.
    page.get_by_role("tab", name="Restocks").click()
    page.locator("#restocks-table tbody tr").first.wait_for()
    assert page.locator("#restocks-table tbody tr").count() == 2
    assert "1.5 h" in page.locator('#restocks-table tr[data-restock="r-0001"]').inner_text()
    opened = page.locator('#restocks-table tr[data-restock="r-0001"] time')
    assert opened.get_attribute("datetime") == "2026-11-20T09:00:00Z"
    assert opened.inner_text() == "20 Nov 2026, 04:00"  # 09:00 UTC in New York
    assert "not sold out" in page.locator('#restocks-table tr[data-restock="r-0002"]').inner_text()
    page.locator('#restocks-table tr[data-restock="r-0001"]').get_by_role("button", name="Show funnel").click()
    stages = page.locator("#restock-detail svg[role=img] g.stage")
    stages.first.wait_for()
    assert stages.evaluate_all("gs => gs.map(g => [g.dataset.label, Number(g.dataset.value)])") == [
        ["notified", 10],
        ["held", 7],
        ["bought", 6],
    ]
    assert numbers(page.locator("#funnel-table tbody td").all_inner_texts()) == [10, 7, 6]
    channels = page.locator("figure", has=page.locator("#channels-table")).locator("svg g.bar")
    assert channels.evaluate_all("gs => gs.map(g => Number(g.dataset.value))") == [62.5, 25]
    shot(page, size, "2-restock-funnel")

    # Waiting list: positions, masked contacts, and the one action on the row that has one (with a confirm step).
    page.get_by_role("tab", name="Waiting list").click()
    page.get_by_label("Product SKU").fill("WW-THROW-OAT")
    page.get_by_role("button", name="Show waiting list").click()
    rows = page.locator("#waiting-table tbody tr")
    rows.first.wait_for()
    assert rows.count() == 3
    assert rows.nth(2).get_by_role("button").count() == 0
    # The unconfirmed place keeps its number and is marked, with why the offered person behind it was told.
    assert rows.nth(1).get_attribute("data-unconfirmed") == ""
    assert rows.nth(0).get_attribute("data-unconfirmed") is None
    assert rows.nth(1).locator("td").nth(2).inner_text().splitlines() == ["waiting", "email not confirmed"]
    assert page.locator("#waiting-unconfirmed").inner_text() == (
        f"1 place shown is marked “email not confirmed”. {UNCONFIRMED_NOTE}"
    )
    joined = rows.first.locator("time")
    assert (joined.get_attribute("datetime"), joined.inner_text()) == ("2026-11-02T10:00:00Z", "2 Nov 2026, 05:00")
    assert joined.get_attribute("title") == "2026-11-02T10:00:00Z (UTC)"
    axe.assert_accessible(page, f"dashboard waiting list ({size})")
    rows.first.get_by_role("button", name="Remove").click()
    page.get_by_role("button", name="Yes, remove").click()
    page.get_by_role("status").filter(has_text="was removed").wait_for()
    assert api.last("POST", "waiting/WW-THROW-OAT/remove")["body"] == {"ref": "ref-1"}
    shot(page, size, "3-waiting-list")

    # Support: a contact typed in full is sent in the body (never the URL); the decisions come back as text.
    page.get_by_role("tab", name="Support").click()
    page.get_by_label("Email address or phone number, typed in full").fill(CONTACT)
    page.get_by_role("button", name="Explain").click()
    page.locator("#decisions-table tbody tr").first.wait_for()
    assert page.locator("#decisions-table tbody tr").count() == 3
    # Moments in the desk's text are shown in the staff member's zone too, the ISO string kept in the element.
    later = page.locator('#decisions-table time[datetime="2026-11-20T10:05:00Z"]')
    assert later.inner_text() == "20 Nov 2026, 05:05"
    assert "2026-11-20T10:05:00Z" not in page.locator("#decisions-table").inner_text()
    assert "email not confirmed" in page.locator("#places-table").inner_text()
    assert "<i>all units were already offered</i>" in page.locator("#decisions-table").inner_text()
    assert page.locator("#decisions-table i").count() == 0
    assert page.locator("#explain-heading").inner_text() == "About g***@e***.com"
    assert api.last("POST", "contacts/explain")["body"] == {"contact": CONTACT}
    assert all(CONTACT not in c["path"] and CONTACT not in json.dumps(c["query"]) for c in api.calls)
    axe.assert_accessible(page, f"dashboard support ({size})")
    shot(page, size, "4-support-explain")
    # Opting out ends a live offer: nothing is sent until the second press.
    page.get_by_role("button", name="Opt out…").click()
    assert not [c for c in api.calls if c["path"] == "contacts/optout"]
    assert "its unit passes to the next person" in page.locator(".confirm").inner_text()
    shot(page, size, "4b-support-opt-out-confirm")
    page.get_by_role("button", name="Cancel").click()
    assert not [c for c in api.calls if c["path"] == "contacts/optout"]
    page.get_by_role("button", name="Opt out…").click()
    page.get_by_role("button", name="Yes, opt them out").click()
    page.get_by_role("status").filter(has_text="Opted out").wait_for()
    assert api.last("POST", "contacts/optout")["body"] == {"contact": CONTACT}
    page.get_by_role("button", name="Forget (GDPR)…").click()
    assert not [c for c in api.calls if c["path"] == "contacts/forget"]  # nothing until the second press
    page.get_by_role("button", name="Yes, forget them").click()
    page.get_by_role("status").filter(has_text="Forgotten").wait_for()
    assert api.last("POST", "contacts/forget")["body"] == {"contact": CONTACT, "confirm": True}

    # Operations: the jobs DLQ has three; Redrive moves them and the depth reads 0.
    page.get_by_role("tab", name="Operations").click()
    jobs = page.locator('#queues-table tr[data-queue="bisn-jobs"]')
    jobs.wait_for()
    assert page.locator('#queues-table tr[data-queue="bisn-feedback"]').get_by_role("button").is_disabled()
    assert page.locator("#sms-spend").inner_text().startswith("US$12.50 of US$50.00")  # USD in a British locale
    assert page.locator('#alarms-table tr[data-state="ALARM"]').count() == 1
    shot(page, size, "5-operations")
    jobs.get_by_role("button", name="Redrive").click()
    page.get_by_role("status").filter(has_text="3 message(s) moved back").wait_for()
    assert api.last("POST", "operations/redrive")["body"] == {"queue": "bisn-jobs"}
    # The depth is read again after the move: wait for the table to show it.
    jobs.locator("td").first.filter(has_text=re.compile(r"^0$")).wait_for()

    # A link to a product's waiting list opens that tab with the list shown (the console links so).
    page.goto(f"{ORIGIN}/admin#waiting/WW-THROW-OAT")
    page.get_by_role("tab", name="Waiting list", selected=True).wait_for()
    page.locator("#waiting-table tbody tr").first.wait_for()
    assert page.get_by_label("Product SKU").input_value() == "WW-THROW-OAT"

    # A 401 (an expired or revoked token) returns to the sign-in form.
    api.revoked = True
    page.get_by_role("tab", name="Demand").click()
    page.get_by_role("heading", name="Sign in").wait_for()
    assert page.evaluate("sessionStorage.getItem('bisn-admin-token')") is None
    assert page.problems == []


def test_the_owner_imports_a_waiting_list_and_reads_the_report(dashboard: tuple[Any, AdminApiDouble, str]) -> None:
    page, api, size = dashboard
    sign_in(page, api)
    page.get_by_role("tab", name="Waiting list").click()
    panel = page.locator("section.import")
    panel.get_by_role("heading", name="Import a waiting list").wait_for()
    page.get_by_label("CSV file").set_input_files(str(GENERIC_CSV))
    assert "consent_source" in page.locator("#import-format-hint").inner_text()  # generic is the first format
    page.get_by_label("Exported by").select_option("klaviyo")
    assert "Phone Number" in page.locator("#import-format-hint").inner_text()
    page.get_by_label("Exported by").select_option("generic")

    # A check first: the file's bytes as the body, as text/csv, with the token; nothing written.
    page.get_by_label("Check only (dry run): nothing is written").check()
    page.get_by_role("button", name="Import", exact=True).click()
    page.locator("#import-summary").filter(has_text="Nothing was written").wait_for()
    checked = api.last("POST", "imports")
    assert checked["query"] == {"format": "generic", "dry_run": "true"}
    assert checked["body"] == {"csv": GENERIC_CSV.read_bytes(), "content_type": "text/csv"}
    assert checked["auth"] == f"Bearer {TOKEN}"
    assert page.locator("#import-imported").inner_text() == "3"

    # The import itself: the counts, and the refused line with its reason.
    page.get_by_label("Check only (dry run): nothing is written").uncheck()
    page.get_by_role("button", name="Import", exact=True).click()
    page.locator("#import-summary").filter(has_text="Imported 3 of 4 row(s); 1 refused.").wait_for()
    assert api.last("POST", "imports")["query"] == {"format": "generic"}
    assert page.locator("#import-summary").get_attribute("aria-live") == "polite"
    assert page.locator("#import-owed").inner_text() == "1"
    refused = page.locator("#import-refused-table tbody tr")
    assert refused.count() == 1
    assert refused.first.locator("th").inner_text() == "5"
    assert refused.first.locator("td").inner_text() == NO_CONSENT
    axe.assert_accessible(page, f"dashboard import ({size})")
    shot(page, size, "6-import")

    # The same file again: every accepted row is already on the list, by line.
    page.get_by_role("button", name="Import", exact=True).click()
    page.locator("#import-summary").filter(has_text="Imported 0 of 4").wait_for()
    assert numbers(page.locator("#import-already-table tbody th").all_inner_texts()) == [2, 3, 4]

    # A file over the limit: the server's 413 says to use `bisn import`, and no report is left standing.
    big = GENERIC_CSV.read_bytes() + b"CHAIR-WALNUT,email,x@example.com,2026-09-01T08:00:00Z,form,yes\n" * 20
    page.get_by_label("CSV file").set_input_files(files=[{"name": "big.csv", "mimeType": "text/csv", "buffer": big}])
    page.get_by_role("button", name="Import", exact=True).click()
    page.get_by_role("alert").filter(has_text="`bisn import`").wait_for()
    assert page.locator("#import-summary").inner_text() == ""

    # Only the owner is offered it: a support member's waiting-list tab has no import.
    page.evaluate(
        "const s = JSON.parse(sessionStorage.getItem('bisn-admin-token'));"
        "sessionStorage.setItem('bisn-admin-token', JSON.stringify({...s, role: 'support'}))"
    )
    page.reload()
    page.get_by_role("tab", name="Waiting list", selected=True).wait_for()
    page.get_by_label("Product SKU").wait_for()
    assert page.locator("section.import").count() == 0
    assert page.problems == []


def test_staff_choose_what_the_widget_offers_for_a_product_sold_on_backorder(
    dashboard: tuple[Any, AdminApiDouble, str],
) -> None:
    page, api, size = dashboard
    api.backorder = True  # catalogue sync found the store sells the throw once its stock is gone
    sign_in(page, api)
    page.get_by_role("tab", name="Waiting list").click()
    page.get_by_label("Product SKU").fill("WW-THROW-OAT")
    page.get_by_role("button", name="Show waiting list").click()
    offers = page.get_by_role("group", name="What the widget offers while the store sells it on backorder")
    offers.wait_for()
    state = page.locator("#backorder-state")
    assert (
        state.inner_text()
        == "The store sells it on backorder now: the widget offers nothing (the widget stays hidden)."
    )
    assert offers.get_by_role("radio", name="Nothing").is_checked()  # the default until a choice is made
    axe.assert_accessible(page, f"dashboard backorder choice ({size})")

    # By keyboard: the arrow moves the choice within the group, Tab reaches Save, Enter sends it.
    offers.get_by_role("radio", name="Nothing").focus()
    page.keyboard.press("ArrowUp")
    assert offers.get_by_role("radio", name="Pre-order note").is_checked()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Save"
    page.keyboard.press("Enter")
    answer = page.locator("#backorder-answer")
    answer.filter(has_text="Saved: Pre-order note.").wait_for()
    assert api.last("POST", "products/WW-THROW-OAT/backorder")["body"] == {"offer": "preorder"}
    assert answer.inner_text() == "Saved: Pre-order note. A tap on Notify me does not join its waiting list now."
    assert answer.get_attribute("aria-live") == "polite"
    assert "a note that it can be ordered now" in state.inner_text()

    offers.get_by_label("Notify me", exact=True).check()
    page.get_by_role("button", name="Save", exact=True).click()
    answer.filter(has_text="joins its waiting list now").wait_for()
    assert api.last("POST", "products/WW-THROW-OAT/backorder")["body"] == {"offer": "notify"}
    shot(page, size, "7-backorder")

    # Read again, the saved choice is the one checked; a support member may choose too, and a product the store no
    # longer sells on backorder keeps its choice for when it does again.
    api.backorder = False
    page.evaluate(
        "const s = JSON.parse(sessionStorage.getItem('bisn-admin-token'));"
        "sessionStorage.setItem('bisn-admin-token', JSON.stringify({...s, role: 'support'}))"
    )
    page.goto(f"{ORIGIN}/admin#waiting/WW-THROW-OAT")
    page.reload()
    offers.wait_for()
    assert offers.get_by_role("radio", name="Notify me").is_checked()
    assert state.inner_text().startswith("The store does not sell it on backorder now")
    assert page.problems == []
