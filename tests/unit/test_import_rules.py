"""Reading another app's waiting-list export (chalicelib/imports.py): each format's columns, and every reason a row
is refused, with its line. Fixtures: tests/fixtures/imports/ (their sources: SOURCES.md there)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chalicelib.errors import BadRequest
from chalicelib.imports import FORMATS, RowRules, format_named, parse_file, parse_joined_at
from tests.support import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "imports"
NOW = datetime(2026, 10, 1, tzinfo=UTC).timestamp()
RULES = RowRules(default_region="GB", sms_countries=("GB",), now=NOW)


def parsed(name: str, text: str | None = None):  # type: ignore[no-untyped-def]
    return parse_file(text if text is not None else (FIXTURES / f"{name}.csv").read_text(), format_named(name), RULES)


def reasons(name: str, text: str | None = None) -> dict[int, str]:
    return {r.line: r.reason for r in parsed(name, text).refused}


def test_klaviyo_rows_keep_their_timestamp_and_refuse_sms_without_documented_consent() -> None:
    # tests/fixtures/imports/klaviyo.csv: profile export columns plus the back-in-stock event's SKU and Timestamp
    # (https://developers.klaviyo.com/en/reference/create_back_in_stock_subscription).
    found = parsed("klaviyo")
    assert [(r.line, r.contact.address, r.name) for r in found.rows] == [
        (3, "bo@example.com", "Bo"),
        (2, "ada@example.com", "Ada"),
        (5, "dee@example.com", "Dee"),
    ]
    assert found.rows[0].joined_at == datetime(2026, 8, 15, 10, 30, tzinfo=UTC).timestamp()
    assert {r.consent_source for r in found.rows} == {"klaviyo back in stock"}
    assert not any(r.confirmed for r in found.rows)
    assert "consent documented" in reasons("klaviyo")[4]


def test_cwginstock_imports_only_people_still_waiting_and_reads_its_subscribed_on() -> None:
    # tests/fixtures/imports/cwginstock.csv: the plugin's subscribers screen (includes/admin/class-post-type.php of
    # https://wordpress.org/plugins/back-in-stock-notifier-for-woocommerce/) plus the product's SKU.
    found = parsed("cwginstock")
    assert [r.line for r in found.rows] == [3, 2]  # oldest first: "Waiting for Confirmation" is still waiting
    refused = reasons("cwginstock")
    assert "not someone still waiting" in refused[4]  # Mail Sent: told already
    assert "not a date we read" in refused[5]


def test_woo_waitlist_keeps_the_earlier_of_two_rows_for_one_mailbox() -> None:
    # tests/fixtures/imports/woo-waitlist.csv: the columns we accept for the WooCommerce Waitlist extension
    # (https://woocommerce.com/products/woocommerce-waitlist/; its export's own columns are not documented).
    found = parsed("woo-waitlist")
    assert [r.line for r in found.rows] == [3, 2]
    refused = reasons("woo-waitlist")
    assert refused[4] == "the same person for the same SKU as line 3"
    assert 5 in refused  # not an address


def test_generic_rows_carry_channel_consent_and_confirmation() -> None:
    found = parsed("generic")
    by_line = {r.line: r for r in found.rows}
    assert by_line[2].confirmed and not by_line[3].confirmed
    assert by_line[4].contact.channel == "sms" and by_line[4].consent_source == "SMS keyword JOIN 2026-08"
    assert "consent_source" in reasons("generic")[5]


@pytest.mark.parametrize(
    ("cells", "why"),
    [
        ("CHAIR,fax,x@example.com,2026-09-01,form,", "neither email nor sms"),
        ("CHAIR,email,,2026-09-01,form,", "no contact"),
        ("bad sku!,email,x@example.com,2026-09-01,form,", "sku may hold"),
        ("CHAIR,email,x@example.com,2027-01-01,form,", "in the future"),
        ("CHAIR,email,x@example.com,1999-12-31,form,", "before 2000"),
        ("CHAIR,email,x@example.com,01/09/2026,form,", "not a date we read"),
        ("CHAIR,email,x@example.com,2026-09-01,form,maybe", "neither yes nor no"),
        ("CHAIR,sms,+12025550123,2026-09-01,keyword,", ""),  # a country the shop does not text
    ],
)
def test_a_bad_row_is_refused_with_its_line_and_the_others_stay(cells: str, why: str) -> None:
    text = f"sku,channel,contact,joined_at,consent_source,confirmed\nCHAIR,email,ok@example.com,2026-09-01,form,\n{cells}\n"
    found = parsed("generic", text)
    assert [r.line for r in found.rows] == [2]
    assert why in reasons("generic", text)[3]


def test_a_file_without_a_formats_columns_is_refused_whole_naming_them() -> None:
    with pytest.raises(BadRequest, match="no column 'sku'") as refused:
        parsed("woo-waitlist", "Email,Date Added\nada@example.com,2026-09-01\n")
    assert refused.value.code == "import_columns"
    with pytest.raises(BadRequest, match="empty"):
        parsed("generic", "")
    with pytest.raises(BadRequest, match="use one of klaviyo, cwginstock, woo-waitlist, generic"):
        format_named("swym")


def test_headers_match_whatever_their_case_spacing_or_bom() -> None:
    text = "\ufeffSKU , Channel,CONTACT,Joined_At,consent-source\nCHAIR,email,a@example.com,2026-09-01 08:00,form\n"
    assert len(parsed("generic", text).rows) == 1
    assert set(FORMATS) == {"klaviyo", "cwginstock", "woo-waitlist", "generic"}


def test_join_times_read_as_utc_unless_they_say_otherwise() -> None:
    assert parse_joined_at("2026-09-01", NOW) == datetime(2026, 9, 1, tzinfo=UTC).timestamp()
    assert parse_joined_at("2026-09-01T10:00:00+02:00", NOW) == datetime(2026, 9, 1, 8, tzinfo=UTC).timestamp()
    assert parse_joined_at("2026-09-01 08:00:00.5", NOW) == datetime(2026, 9, 1, 8, tzinfo=UTC).timestamp() + 0.5
