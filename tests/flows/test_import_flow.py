"""Importing another app's waiting list through the dashboard (POST /admin/api/imports) and `bisn import`: each
format's export becomes places at their original join times, a re-run or a resumed run writes nothing twice, and
opted-out people, unknown SKUs and bad rows are refused with their line.

Fixtures: tests/fixtures/imports/<format>.csv; where each format's columns come from is in SOURCES.md beside them
(Klaviyo: https://developers.klaviyo.com/en/reference/create_back_in_stock_subscription; cwginstock:
https://wordpress.org/plugins/back-in-stock-notifier-for-woocommerce/; WooCommerce Waitlist:
https://woocommerce.com/products/woocommerce-waitlist/, whose export columns are not documented).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chalice.test import Client
from click.testing import CliRunner

from chalicelib.aws import Aws
from chalicelib.config import settings_from_env
from chalicelib.line import read_place
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from devstack.fake_model import FakeBedrock
from support.cli import cli
from tests.admin_pool import Pool, jwks_over_http, staff_pool
from tests.builders import add_request, key_of
from tests.notices import drain, email_outbox, verify_sender
from tests.support import REGION, ROOT, app_client

FIXTURES = ROOT / "tests" / "fixtures" / "imports"
OWNER = "owner@shop.example"
HELPER = "desk@shop.example"


@pytest.fixture
def pool(session: Any) -> Pool:
    staff = staff_pool(session.client("cognito-idp", region_name=REGION))
    staff.add(OWNER, "owner")
    staff.add(HELPER, "support")
    return staff


@pytest.fixture
def shop(session: Any, clock: FixedClock, env: dict[str, str], pool: Pool) -> Services:
    settings = settings_from_env(
        {**env, "ADMIN_USER_POOL_ID": pool.pool_id, "ADMIN_CLIENT_ID": pool.client_id, "IMPORT_MAX_BYTES": "2048"}
    )
    services = Services(
        settings, aws=Aws(REGION, session=session), clock=clock, model=FakeBedrock(), jwks_fetch=jwks_over_http
    )
    services.tables.catalog.upsert("CHAIR-WALNUT", {"name": "Walnut chair", "level": 0})
    return services


@pytest.fixture
def api(shop: Services) -> Iterator[Client]:
    with app_client(shop) as test_client:
        yield test_client


def send(api: Client, token: str, csv_text: str, query: str) -> Any:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "text/csv"}
    return api.http.post(f"/admin/api/imports?{query}", headers=headers, body=csv_text.encode())


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.csv").read_text()


def in_line(services: Services) -> list[str]:
    return [r.contact for r in services.tables.requests.queue("CHAIR-WALNUT")]


# Per format: the people placed, in line order (oldest ask first), and the lines refused.
EXPECTED = {
    "klaviyo": (["bo@example.com", "ada@example.com"], {4, 5}),
    "cwginstock": (["bo@example.com", "ada@example.com"], {4, 5}),
    "woo-waitlist": (["bo@example.com", "ada@example.com"], {4, 5}),
    "generic": (["bo@example.com", "ada@example.com", "+447400100001"], {5}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_formats_export_becomes_places_at_their_original_join_times(
    api: Client, shop: Services, pool: Pool, name: str
) -> None:
    answer = send(api, pool.id_token(OWNER), fixture(name), f"format={name}")
    assert answer.status_code == 200, answer.body
    report = json.loads(answer.body)
    people, refused = EXPECTED[name]
    assert (report["rows"], report["imported"]) == (4, len(people))
    assert {r["line"] for r in report["refused"]} == refused and all(r["reason"] for r in report["refused"])
    assert in_line(shop) == people
    bo = shop.tables.requests.place_of("CHAIR-WALNUT", key_of(shop, "bo@example.com"))
    assert bo is not None and bo.joined_ts.startswith("2026-08-15T")
    assert bo.consent_source and bo.unconfirmed  # double opt-in: no export here says bo confirmed
    assert read_place(shop.tables, bo).lowest == 1
    staff = shop.tables.audit.for_sku("@staff")
    assert [(f["action"], f["staff_email"], int(f["imported"])) for f in staff] == [("import", OWNER, len(people))]
    facts = [f for f in shop.tables.audit.for_sku("CHAIR-WALNUT") if f["kind"] == "place_imported"]
    assert len(facts) == len(people) and {f["format"] for f in facts} == {name}
    assert not any("bo@example.com" in json.dumps(f, default=str) for f in facts)  # keyed hashes only

    again = json.loads(send(api, pool.id_token(OWNER), fixture(name), f"format={name}").body)
    assert again["imported"] == 0 and len(again["already"]) == len(people)
    assert {r["reason"] for r in again["already"]} == {"already on the list"}
    assert in_line(shop) == people

    # bo leaves before any restock told them (their uniqueness item goes with the place): the file run once more
    # still never puts them back.
    shop.exits.leave_sku(key_of(shop, "bo@example.com"), "CHAIR-WALNUT", reason="manage")
    third = json.loads(send(api, pool.id_token(OWNER), fixture(name), f"format={name}").body)
    assert third["imported"] == 0 and in_line(shop) == people[1:]
    assert "imported before and left the list since; not placed again" in {r["reason"] for r in third["refused"]}


def test_imported_places_stand_among_people_already_waiting_by_when_each_asked(
    api: Client, shop: Services, pool: Pool, clock: FixedClock
) -> None:
    verify_sender(shop)
    now = clock.now()
    # Someone who tapped on 2026-08-20 is behind bo (2026-08-15) and ahead of ada (2026-09-01).
    add_request(shop, "CHAIR-WALNUT", "eve@example.com", "2026-08-20T00:00:00.000000Z#000000000001aaaaaa", now)
    shop.tables.optout.add(key_of(shop, "+447400100001"), "unsubscribe", now)
    report = json.loads(send(api, pool.id_token(OWNER), fixture("generic"), "format=generic").body)
    assert report["imported"] == 2 and report["confirmations_owed"] == 1
    assert {r["line"]: r["reason"] for r in report["refused"]}[4].startswith("opted out")
    assert in_line(shop) == ["bo@example.com", "eve@example.com", "ada@example.com"]
    # eve took ticket 1 before the import put two places in her line: her place is a range that holds her true 2nd.
    eve = shop.tables.requests.place_of("CHAIR-WALNUT", key_of(shop, "eve@example.com"))
    assert eve is not None
    place = read_place(shop.tables, eve)
    assert place.lowest <= 2 <= place.highest
    # Someone tapping after the import stands behind all three, exactly.
    shop.capture.capture("203.0.113.5", {"sku": "CHAIR-WALNUT", "channel": "email", "contact": "fay@example.com"})
    fay = shop.tables.requests.place_of("CHAIR-WALNUT", key_of(shop, "fay@example.com"))
    assert fay is not None and read_place(shop.tables, fay).exact == 4
    # bo said "no" to confirmed: one confirmation email, once; ada's file said yes, so she owes none.
    drain(shop)
    send(api, pool.id_token(OWNER), fixture("generic"), "format=generic")
    drain(shop)
    sent = [m for m in email_outbox() if "bo@example.com" in m.destinations["ToAddresses"]]
    assert len(sent) == 1
    assert not [m for m in email_outbox() if "ada@example.com" in m.destinations["ToAddresses"]]


def test_the_dashboard_import_is_the_owners_bounded_and_says_what_is_wrong(
    api: Client, shop: Services, pool: Pool
) -> None:
    helper = send(api, pool.id_token(HELPER), fixture("generic"), "format=generic")
    assert helper.status_code == 403
    big = "sku,channel,contact,joined_at,consent_source\n" + "CHAIR-WALNUT,email,a@example.com,2026-09-01,form\n" * 60
    assert send(api, pool.id_token(OWNER), big, "format=generic").status_code == 413
    unknown = send(api, pool.id_token(OWNER), fixture("generic"), "format=swym")
    assert (unknown.status_code, json.loads(unknown.body)["error"]) == (400, "import_format")
    wrong = send(api, pool.id_token(OWNER), fixture("generic"), "format=woo-waitlist")
    assert (wrong.status_code, json.loads(wrong.body)["error"]) == (400, "import_columns")
    dry = json.loads(send(api, pool.id_token(OWNER), fixture("generic"), "format=generic&dry_run=true").body)
    assert dry["dry_run"] and dry["imported"] == 3 and in_line(shop) == []


def test_bisn_import_shows_progress_and_a_re_run_finishes_a_run_cut_short(
    shop: Services, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("support.cli.IMPORT_PROGRESS_EVERY", 10)
    rows = [f"CHAIR-WALNUT,email,p{i}@example.com,2026-09-01T08:{i:02d}:00Z,storefront form,yes" for i in range(30)]
    header = "sku,channel,contact,joined_at,consent_source,confirmed"
    # A run that stopped after its first 12 rows had written them (a crash, a closed laptop).
    first = shop.imports.run("\n".join([header, *rows[:12]]), "generic")
    assert first.imported == 12
    path = tmp_path / "export.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    stream = io.StringIO()
    result = CliRunner().invoke(
        cli,
        ["import", str(path), "--format", "generic"],
        obj={"importer": shop.imports, "emulated": True, "progress_stream": stream},
    )
    assert result.exit_code == 0, result.output
    assert "Imported 18 of 30 row(s) (generic)." in result.output
    assert "Already on the list: 12 row(s)" in result.output
    assert stream.getvalue().splitlines()[-1] == "Rows handled: 30 of ~30"
    assert len(in_line(shop)) == 30 and in_line(shop)[0] == "p0@example.com"
    dry = CliRunner().invoke(
        cli,
        ["--json", "import", str(path), "--format", "generic", "--dry-run"],
        obj={"importer": shop.imports, "progress_stream": io.StringIO()},
    )
    assert json.loads(dry.output)["imported"] == 0
