"""The dashboard's JSON API behind one facade: who is asking (their verified token), what they may do, and
the tables each list answers as CSV. app.py's /admin/api routes call only this."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from chalicelib.admin.auth import Staff, StaffGroups, TokenRefused, TokenVerifier
from chalicelib.admin.contacts import ContactSupport, StaffAudit
from chalicelib.admin.csvs import to_csv
from chalicelib.admin.dashboard import Dashboard
from chalicelib.admin.operations import Operations
from chalicelib.admin.periods import period_of, unseal
from chalicelib.admin.signin import SignIn
from chalicelib.clock import Clock
from chalicelib.errors import BadRequest, Conflict, DomainError, Forbidden, NotFound, PayloadTooLarge
from chalicelib.leaving import GONE, HOLDING
from chalicelib.tables.catalog import BACKORDER_OFFERS, DEFAULT_BACKORDER_OFFER

if TYPE_CHECKING:
    from chalicelib.importer import ImportService

# The columns of each list's CSV (the JSON list they come from is named beside them).
CSV_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "demand": (
        "skus",
        (
            "sku",
            "name",
            "waiting",
            "unconfirmed",
            "new_in_period",
            "threshold",
            "notify_from",
            "restock_hint",
            "advice",
        ),
    ),
    "demand_daily": ("daily", ("date", "new")),
    "restocks": (
        "restocks",
        (
            "restock_id",
            "sku",
            "name",
            "opened_at",
            "units",
            "notified",
            "held",
            "bought",
            "lapsed",
            "expired",
            "sold_out_seconds",
            "revenue",
            "currency",
        ),
    ),
    "by_channel": ("by_channel", ("channel", "notified", "bought", "rate")),
    "restock": ("funnel", ("stage", "count")),
    "waiting": ("entries", ("position", "contact", "channel", "state", "unconfirmed", "joined_at", "action")),
    "queues": ("queues", ("name", "dlq_depth")),
    "dead_events": ("events", ("event_id", "type", "sku", "occurred", "destination", "queued_at")),
    "alarms": ("alarms", ("name", "state")),
}


class Unauthorized(DomainError):
    """No valid id token of the staff pool."""

    code = "unauthorized"


def csv_of(table: str, answer: Mapping[str, Any]) -> str:
    """One of an answer's lists as CSV."""
    key, columns = CSV_TABLES[table]
    return to_csv(answer.get(key, []), columns)


@dataclass(frozen=True, kw_only=True, eq=False)
class AdminApi:
    """Everything /admin/api does."""

    verifier: TokenVerifier
    # Where a member's role is read on each request (None: from the token's claim alone).
    groups: StaffGroups | None
    sign_in: SignIn
    dashboard: Dashboard
    contacts: ContactSupport
    operations: Operations
    staff_audit: StaffAudit
    clock: Clock
    imports: ImportService
    import_max_bytes: int  # IMPORT_MAX_BYTES: a bigger file goes through `bisn import`

    def staff(self, authorization: str | None) -> Staff:
        """The staff member an `Authorization: Bearer <id token>` header names; Unauthorized otherwise."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Sign in first: send the id token as `Authorization: Bearer <token>`.")
        current = self.groups.of if self.groups is not None else None
        try:
            return self.verifier.staff(token.strip(), current)
        except TokenRefused as exc:
            raise Unauthorized("That sign-in is not valid any more (or never was): sign in again.") from exc

    def sign_in_start(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/session."""
        return self.sign_in.start(data).body()

    def sign_in_answer(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/session/challenge."""
        return self.sign_in.answer(data).body()

    @staticmethod
    def me(staff: Staff) -> dict[str, Any]:
        """GET /admin/api/me."""
        return {"email": staff.email, "role": staff.role}

    def _today(self) -> date:
        return datetime.fromtimestamp(self.clock.now(), tz=UTC).date()

    def demand(self, params: Mapping[str, str]) -> dict[str, Any]:
        """GET /admin/api/demand."""
        settings = self.contacts.desk.settings
        return self.dashboard.demand(
            period_of(params, self._today()), now=self.clock.now(), confirm_days=settings.email_confirm_days
        )

    def restocks(self, params: Mapping[str, str]) -> dict[str, Any]:
        """GET /admin/api/restocks."""
        return self.dashboard.restocks(period_of(params, self._today()))

    def restock(self, restock_id: str, params: Mapping[str, str]) -> dict[str, Any]:
        """GET /admin/api/restocks/{restock_id}."""
        return self.dashboard.restock(restock_id, period_of(params, self._today()))

    def waiting(self, sku: str, params: Mapping[str, str]) -> dict[str, Any]:
        """GET /admin/api/waiting/{sku}."""
        return self.dashboard.waiting(sku, params.get("cursor") or None)

    def remove(self, staff: Staff, sku: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/waiting/{sku}/remove: take one place off the list (its live offer passes on)."""
        ref = data.get("ref")
        if not isinstance(ref, str) or not ref:
            raise BadRequest("`ref` is required: the row's reference from the waiting list.", code="invalid_field")
        joined_ts = str(unseal(ref, "ref").get("j", ""))
        tables = self.dashboard.tables
        request = tables.requests.get(sku, joined_ts) if joined_ts else None
        if request is None:
            raise NotFound("That place is no longer on the list.", code="gone")
        desk = self.contacts.desk
        exit_ = desk.exits.leave(request, reason="admin")
        if exit_.outcome == HOLDING:
            raise Conflict("They hold a unit right now; the place can go once the hold ends.", code="still_holding")
        if exit_.outcome == GONE:
            raise NotFound("That place is no longer on the list.", code="gone")
        self.staff_audit.record(staff, "remove", contact_key=request.contact_key, product=sku)
        return {"status": "removed"}

    def backorder(self, staff: Staff, sku: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/products/{sku}/backorder: what the widget offers while the store sells the product on
        backorder (`offer`: notify, preorder or none)."""
        offer = data.get("offer")
        if offer not in BACKORDER_OFFERS:
            raise BadRequest(f"`offer` must be one of {', '.join(BACKORDER_OFFERS)}.", code="invalid_field")
        product = self.dashboard.tables.catalog.set_backorder_offer(sku, str(offer))
        if product is None:
            raise NotFound("No product with that SKU is catalogued.", code="unknown_sku")
        self.staff_audit.record(staff, "backorder_offer", product=sku, offer=offer)
        return {
            "sku": sku,
            "backorder": product.backorder,
            "offer": product.backorder_offer or DEFAULT_BACKORDER_OFFER,
            # Whether a tap joins its list now: always while the store does not sell it on backorder.
            "waiting_list_open": product.backorder_mark is None,
        }

    # --- Support: each action is the desk's, checked for the role and audited (chalicelib/admin/contacts.py).

    def explain(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/contacts/explain."""
        return self.contacts.explain(staff, data)

    def opt_out(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/contacts/optout."""
        return self.contacts.opt_out(staff, data)

    def opt_in(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/contacts/optin."""
        return self.contacts.opt_in(staff, data)

    def export(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/contacts/export (owner)."""
        return self.contacts.export(staff, data)

    def forget(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/contacts/forget (owner, confirmed)."""
        return self.contacts.forget(staff, data)

    # --- Operations

    def operations_view(self) -> dict[str, Any]:
        """GET /admin/api/operations."""
        return self.operations.view()

    def dead_events(self) -> dict[str, Any]:
        """GET /admin/api/operations/events."""
        return self.operations.dead_events()

    def redrive(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """POST /admin/api/operations/redrive."""
        answer = self.operations.redrive(data)
        self.staff_audit.record(staff, "redrive", queue=str(data.get("queue")), moved=answer["moved"])
        return answer

    # --- Importing a waiting list from another app (docs/IMPORT.md)

    def import_list(self, staff: Staff, body: bytes, params: Mapping[str, str]) -> dict[str, Any]:
        """POST /admin/api/imports?format=...[&dry_run=true] with the CSV as the body (owner): the report, each row
        not imported with its line and why. Audited with the staff member and the counts, never a contact."""
        if staff.role != "owner":
            raise Forbidden("Only the shop's owner may import a waiting list.")
        if len(body) > self.import_max_bytes:
            raise PayloadTooLarge(
                f"The file is over {self.import_max_bytes} bytes, the most the dashboard imports at once; "
                "import it with `bisn import` instead."
            )
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest("The file must be UTF-8 CSV.", code="import_unreadable") from None
        dry_run = params.get("dry_run", "").lower() in ("1", "true", "yes")
        report = self.imports.run(text, params.get("format", ""), dry_run=dry_run, source=f"staff:{staff.sub}")
        self.staff_audit.record(
            staff,
            "import",
            format=report.format,
            dry_run=report.dry_run,
            rows=report.rows,
            imported=report.imported,
            already=len(report.already),
            refused=len(report.refused),
        )
        return report.body()
