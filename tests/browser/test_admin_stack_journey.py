"""The shop's dashboard on the real local stack, in headless Chromium: nothing is a test double.

`python -m devstack` runs on free ports (tests/browser/conftest.py). Shoppers tap Notify me on the storefront, a
restock goes out from the console's controls, one shopper holds a unit and buys it, and a job is put on the notifier's
dead-letter queue in the stack's emulator. Then the owner signs in to /admin with a real id token from the
emulator's Cognito pool (devstack/staff.py), checked by the app against the pool's keys, and reads demand, a
restock's funnel, a contact's decisions and the dead letters, and redrives them; a support member signs in too and is
not offered, nor allowed, a person's export or erasure.

Screenshots at 1280x800 and 390x844 go to artifacts/screenshots/admin-stack-<size>-*.png (git-ignored).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from typing import Any

import boto3
import pytest
from playwright.sync_api import expect

from devstack.staff import DEV_PASSWORD, OWNER_EMAIL, SUPPORT_EMAIL
from devstack.stage import REGION
from tests.browser.running import SHOTS, RunningStack, confirm_from_inbox, get_json, tap_notify_me

pytestmark = pytest.mark.browser

THROW = "WW-THROW-OAT"
BOARD = "WW-BOARD-WALNUT"
GRACE = "grace@example.com"
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
DLQ = "bisn-jobs-dlq"


def new_dashboard_tab(browser: Any, size: str) -> Any:
    context = browser.new_context(viewport=SIZES[size])
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    tab.problems = []
    tab.on("pageerror", lambda error: tab.problems.append(str(error)))
    tab.on(
        "console",
        lambda message: tab.problems.append(message.text) if "Content Security Policy" in message.text else None,
    )
    return tab


def shot(page: Any, size: str, name: str) -> None:
    """A full-page screenshot, once the page is known not to scroll sideways at this size."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= SIZES[size]["width"], f"{name}: the page is {width}px wide at {size}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"admin-stack-{size}-{name}.png"), full_page=True)


def sign_in(page: Any, stack: RunningStack, email: str) -> str:
    """Sign in on /admin as `email` (answering a first-sign-in new-password step if the pool asks one); the token."""
    page.goto(f"{stack.api}/admin")
    page.get_by_label("Email", exact=True).fill(email)
    page.get_by_label("Password", exact=True).fill(DEV_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.locator("#dashboard:not([hidden]), #challenge-form:not([hidden])").first.wait_for()
    if page.locator("#challenge-form").is_visible():
        page.get_by_label("New password").fill(DEV_PASSWORD)
        page.get_by_role("button", name="Continue").click()
    page.get_by_role("tab", name="Demand", selected=True).wait_for()
    saved = json.loads(page.evaluate("sessionStorage.getItem('bisn-admin-token')"))
    assert saved["email"] == email
    return str(saved["token"])


def api_call(stack: RunningStack, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """The dashboard's API called with the token the page holds (the numbers the page must show)."""
    request = urllib.request.Request(
        f"{stack.api}/admin/api/{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def period(page: Any) -> str:
    return f"from={page.input_value('#period-from')}&to={page.input_value('#period-to')}"


def numbers(texts: list[str]) -> list[int]:
    return [int(t.strip()) for t in texts]


def emulator_sqs(stack: RunningStack) -> Any:
    """SQS in the stack's emulator (moto server takes any credentials)."""
    return boto3.client(
        "sqs",
        endpoint_url=f"http://127.0.0.1:{stack.moto_port}",
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def delivered_jobs(stack: RunningStack) -> int:
    """How many jobs the stack's pump has handed to the notifier so far (its log line per round)."""
    found = re.findall(r"notifier: delivered (\d+) job", stack.log_path.read_text(errors="replace"))
    return sum(int(n) for n in found)


def wait_for(check: Any, what: str, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def shop(browser: Any, stack: RunningStack) -> dict[str, Any]:
    """The story the dashboard reads: three shoppers wait, two units of the throw come back, Ada holds one and buys
    it, Grace is told and does nothing yet, Alan still waits for the board; then a throw job is dead-lettered."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        tap_notify_me(page, stack, "ada", THROW)
        tap_notify_me(page, stack, "grace", THROW)
        tap_notify_me(page, stack, "alan", BOARD)
        confirm_from_inbox(page, stack, GRACE)

        page.goto(stack.console + "/controls")
        page.select_option("#restock-sku", THROW)
        page.fill("#restock-available", "2")
        page.get_by_role("button", name="Send restock").click()
        page.locator("#restock-result", has_text="API answered 202").wait_for()

        page.goto(f"{stack.console}/outbox?sku={THROW}")
        sms = page.locator('li[data-channel="sms"]', has_text="+447400123456")
        sms.wait_for()
        page.locator('li[data-channel="email"]:not([data-kind="confirmation"])', has_text=GRACE).wait_for()
        sms.locator('a[data-link="reserve"]').first.click()
        page.locator("form#go button").click()  # opening the link holds nothing: Ada presses Hold one for me
        page.wait_for_url("**/checkout?**")
        page.get_by_role("button", name="Place order").click()
        page.wait_for_selector('#hold-state[data-state="converted"]')
    finally:
        context.close()

    restock = get_json(f"{stack.console}/api/queue/{THROW}")["restock"]
    # A top-up of that restock: run again it finds nothing freed, so it tells no one twice (the notifier is
    # idempotent), and it shows that the redrive moved it back to the job queue, where the pump delivers it.
    job = {"kind": "topup", "sku": THROW, "restock_id": restock["restock_id"], "restock_ts": restock["restock_ts"]}
    sqs = emulator_sqs(stack)
    dlq_url = sqs.get_queue_url(QueueName=DLQ)["QueueUrl"]
    sqs.send_message(QueueUrl=dlq_url, MessageBody=json.dumps(job, separators=(",", ":"), sort_keys=True))
    wait_for(lambda: get_json(f"{stack.console}/api/status")["jobs"]["dead_lettered"] == 1, "the dead letter")
    return {"restock": restock}


def test_the_owner_reads_demand_a_funnel_and_a_contact_and_redrives_the_dlq(
    browser: Any, stack: RunningStack, shop: dict[str, Any]
) -> None:
    # `make dev`'s banner names the dashboard once, with the staff accounts to sign in as.
    banner = stack.log_path.read_text(errors="replace")
    assert banner.count("Shop dashboard") == 1
    assert f"Shop dashboard (demand, restocks, support):          {stack.api}/admin" in banner
    assert f"sign in as {OWNER_EMAIL} (owner) or {SUPPORT_EMAIL} (support), password {DEV_PASSWORD}" in banner

    size = "desktop"
    page = new_dashboard_tab(browser, size)
    token = sign_in(page, stack, OWNER_EMAIL)
    assert page.locator("#who-role").inner_text() == "owner"

    # Demand: the bar chart draws a bar per most-wanted product, with the API's numbers, and the table agrees.
    status, demand = api_call(stack, token, "GET", f"demand?{period(page)}")
    assert status == 200
    wanted = page.locator("figure", has=page.locator("#demand-table"))
    wanted.locator("svg[role=img] g.bar").first.wait_for()
    bars = wanted.locator("svg g.bar")
    expected = {s["name"]: s["waiting"] for s in demand["skus"][:10]}
    assert bars.count() == len(expected) > 0
    drawn = bars.evaluate_all("gs => gs.map(g => [g.dataset.label, Number(g.dataset.value)])")
    assert dict(drawn) == expected
    assert expected["Walnut serving board, large"] == 1  # Alan still waits
    rows = page.locator("#demand-table tbody tr")
    assert rows.count() == len(demand["skus"])
    assert numbers(page.locator("#demand-table tbody tr td:nth-child(3)").all_inner_texts()) == [
        s["waiting"] for s in demand["skus"]
    ]
    assert page.locator("#demand-waiting").inner_text() == str(sum(s["waiting"] for s in demand["skus"]))
    # New per day counts the places the listed (out-of-stock) products still keep: Alan's, today.
    board = next(s for s in demand["skus"] if s["sku"] == BOARD)
    assert board["new_in_period"] == 1
    assert sum(d["new"] for d in demand["daily"]) == sum(s["new_in_period"] for s in demand["skus"])
    assert numbers(page.locator("#daily-table tbody tr td").all_inner_texts()) == [d["new"] for d in demand["daily"]]
    shot(page, size, "1-demand")

    # Restocks: the throw's restock, and its funnel: two told, one held, one bought.
    page.get_by_role("tab", name="Restocks").click()
    row = page.locator(f'#restocks-table tr[data-restock="{shop["restock"]["restock_id"]}"]')
    row.wait_for()
    status, restocks = api_call(stack, token, "GET", f"restocks?{period(page)}")
    assert status == 200 and len(restocks["restocks"]) == 1
    listed = restocks["restocks"][0]
    assert (listed["units"], listed["notified"], listed["held"], listed["bought"]) == (2, 2, 1, 1)
    if not listed["currency"]:  # the demo catalogue names no price: the page makes up no currency either
        assert "$" not in row.inner_text() and "0.00" in row.inner_text()
    row.get_by_role("button", name="Show funnel").click()
    stages = page.locator("#restock-detail svg[role=img] g.stage")
    stages.first.wait_for()
    assert stages.evaluate_all("gs => gs.map(g => [g.dataset.label, Number(g.dataset.value)])") == [
        ["notified", 2],
        ["held", 1],
        ["bought", 1],
    ]
    assert numbers(page.locator("#funnel-table tbody td").all_inner_texts()) == [2, 1, 1]
    shot(page, size, "2-restock-funnel")

    # Support: Grace's address typed in full; her decisions are shown, and her contact only masked.
    page.get_by_role("tab", name="Support").click()
    page.get_by_label("Email address or phone number, typed in full").fill(GRACE)
    page.get_by_role("button", name="Explain").click()
    page.locator("#decisions-table tbody tr").first.wait_for()
    # The decision about her at the restock: told, with the reason (`bisn explain`'s verdict).
    assert shop["restock"]["restock_id"] in page.locator("#decisions-table").inner_text()
    heading = page.locator("#explain-heading").inner_text()
    assert heading.startswith("About ") and GRACE not in heading
    assert GRACE not in page.locator("#support-result").inner_text()
    assert THROW in page.locator("#places-table").inner_text()
    shot(page, size, "3-support-explain")

    # The waiting list masks contacts too.
    page.get_by_role("tab", name="Waiting list").click()
    page.get_by_label("Product SKU").fill(THROW)
    page.get_by_role("button", name="Show waiting list").click()
    page.locator("#waiting-table tbody tr").first.wait_for()
    listing = page.locator("#waiting-table").inner_text()
    assert GRACE not in listing and "+447400123456" not in listing

    # Operations: one dead letter; Redrive moves it back to the job queue, where the pump delivers it.
    page.get_by_role("tab", name="Operations").click()
    jobs = page.locator(f'#queues-table tr[data-queue="{DLQ}"]')
    jobs.wait_for()
    assert jobs.locator("td").first.inner_text() == "1"
    if not api_call(stack, token, "GET", "operations")[1]["alarms"]:  # the emulator's stage defines none
        assert page.locator("#alarms-table").inner_text().endswith("This stage has no alarms.")
    shot(page, size, "4-operations")
    delivered_before = delivered_jobs(stack)
    jobs.get_by_role("button", name="Redrive").click()
    page.get_by_role("status").filter(has_text="1 message(s) moved back").wait_for()
    # expect() polls from Playwright's own script: the page's policy forbids the eval a wait_for_function needs.
    expect(jobs.locator("td").first).to_have_text("0")
    assert jobs.get_by_role("button", name="Redrive").is_disabled()
    wait_for(lambda: delivered_jobs(stack) > delivered_before, "the pump to deliver the redriven job")
    depths = get_json(f"{stack.console}/api/status")["jobs"]
    assert depths["dead_lettered"] == 0
    # Run again, the top-up told no one twice: still the same two notices.
    assert api_call(stack, token, "GET", f"restocks?{period(page)}")[1]["restocks"][0]["notified"] == 2
    shot(page, size, "5-operations-redriven")
    assert page.problems == []
    page.context.close()


def test_support_on_a_phone_is_not_offered_export_or_forget(
    browser: Any, stack: RunningStack, shop: dict[str, Any]
) -> None:
    size = "phone"
    page = new_dashboard_tab(browser, size)
    token = sign_in(page, stack, SUPPORT_EMAIL)
    assert page.locator("#who-role").inner_text() == "support"
    page.locator("figure", has=page.locator("#demand-table")).locator("svg g.bar").first.wait_for()
    shot(page, size, "1-demand")

    page.get_by_role("tab", name="Restocks").click()
    page.locator(f'#restocks-table tr[data-restock="{shop["restock"]["restock_id"]}"]').get_by_role(
        "button", name="Show funnel"
    ).click()
    page.locator("#restock-detail svg[role=img] g.stage").first.wait_for()
    shot(page, size, "2-restock-funnel")

    page.get_by_role("tab", name="Support").click()
    page.get_by_label("Email address or phone number, typed in full").fill(GRACE)
    page.get_by_role("button", name="Explain").click()
    page.locator("#decisions-table tbody tr").first.wait_for()
    assert page.get_by_role("button", name="Export (GDPR)").count() == 0
    assert page.get_by_role("button", name="Forget (GDPR)…").count() == 0
    assert page.get_by_text("Export and forget are for the shop's owner.").is_visible()
    # On a phone the decisions fit their box: a long restock id wraps rather than squeezing the reason away.
    fits = page.locator("#decisions-table").evaluate("t => t.scrollWidth <= t.parentElement.clientWidth")
    assert fits
    shot(page, size, "3-support-explain")
    # Nor does the API let support do them with a real token.
    for path, body in (
        ("contacts/export", {"contact": GRACE}),
        ("contacts/forget", {"contact": GRACE, "confirm": True}),
    ):
        status, refused = api_call(stack, token, "POST", path, body)
        assert (status, refused["error"]) == (403, "forbidden"), (path, refused)

    page.get_by_role("tab", name="Operations").click()
    page.locator(f'#queues-table tr[data-queue="{DLQ}"]').wait_for()
    shot(page, size, "4-operations")
    assert page.problems == []
    page.context.close()
