"""Support on the dashboard: a contact typed in full, explained, opted out, exported or forgotten.

One implementation with the `bisn` CLI: every answer comes from the support desk (chalicelib/support_desk.py);
this only shapes it for the JSON API, checks the staff member's role, and audits each action with who did it.
Answers carry the contact masked (the staff member typed it; the export, which is the person's own data, is
the one place it appears in full).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.admin.auth import Staff
from chalicelib.clock import Clock, iso
from chalicelib.contacts import mask
from chalicelib.errors import BadRequest, Forbidden
from chalicelib.line import PlaceInLine
from chalicelib.shopper.optin import OptIns
from chalicelib.support_desk import SupportDesk
from chalicelib.tables.audit import AuditTable

# The audit partition of staff actions on the dashboard (a SKU is never written with a leading '@').
STAFF_PARTITION = "@staff"
OWNER_ONLY = ("export", "forget")
MAX_CONTACT = 320


def contact_field(data: Mapping[str, Any]) -> str:
    """The contact as typed: a non-empty string of at most 320 characters."""
    value = data.get("contact")
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_CONTACT:
        raise BadRequest(
            "`contact` is required: a phone number or an email address, typed in full.", code="invalid_field"
        )
    return value.strip()


@dataclass(frozen=True, kw_only=True, eq=False)
class StaffAudit:
    """Appends one fact per staff action, naming the staff member (email and Cognito sub)."""

    audit: AuditTable
    clock: Clock

    def record(self, staff: Staff, action: str, **facts: Any) -> None:
        """The fact that `staff` did `action` (a person it concerns appears only as their keyed hash)."""
        self.audit.record(
            STAFF_PARTITION,
            "staff_action",
            self.clock.now(),
            action=action,
            staff_email=staff.email,
            staff_sub=staff.sub,
            staff_role=staff.role,
            **facts,
        )


@dataclass(frozen=True, kw_only=True, eq=False)
class ContactSupport:
    """The Support tab's actions."""

    desk: SupportDesk
    staff_audit: StaffAudit
    optins: OptIns

    def _allowed(self, staff: Staff, action: str) -> None:
        if action in OWNER_ONLY and staff.role != "owner":
            raise Forbidden(f"Only the shop's owner may {action} a person's data.")

    def explain(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """Every place they have and every decision about them, per product, as `bisn explain` tells it."""
        raw = contact_field(data)
        contact, keys = self.desk.contact_keys(raw)
        key = keys[0]
        places = self.desk.places(keys)
        # Passed over at every restock until the address confirms (the notifier's SkipReason.UNCONFIRMED).
        unconfirmed = {p.sku for p in places if p.live and p.unconfirmed}
        skus = sorted({p.sku for p in places} | {str(f["sku"]) for f in self.desk.facts(keys)})
        skus = [sku for sku in skus if not sku.startswith("@")]
        opted = self.desk.opt_outs(keys)
        rows: list[dict[str, Any]] = []
        decisions: list[dict[str, Any]] = []
        for sku in skus:
            explanation = self.desk.explain(sku, raw)
            if explanation.state is not None:
                rows.append(
                    {
                        "sku": sku,
                        "state": explanation.state,
                        "position": _position(explanation.place),
                        "unconfirmed": sku in unconfirmed,
                    }
                )
            for verdict in explanation.restocks:
                decisions.append(
                    {
                        "at": iso(verdict.detected_at)[:19] + "Z",
                        "what": f"{sku} restock {verdict.restock_id} ({verdict.units_total} units): {verdict.verdict}",
                        "why": "; ".join([verdict.detail, *verdict.follow_ups]),
                    }
                )
            decisions.extend({"at": line[:20], "what": f"{sku}", "why": line[21:]} for line in explanation.history)
        self.staff_audit.record(staff, "explain", contact_key=key)
        return {
            "contact": mask(contact.address),
            "opted_out": bool(opted),
            "places": rows,
            "decisions": sorted(decisions, key=lambda d: str(d["at"])),
        }

    def opt_out(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """Suppress the contact (source 'admin') and take them off every list."""
        raw = contact_field(data)
        _, key = self.desk.contact(raw)
        result = self.desk.optout_add(raw)
        self.staff_audit.record(staff, "optout", contact_key=key, newly=result.newly)
        return {"status": "opted_out"}

    def opt_in(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """Send the person a link that lifts their own opt-out, in `lang` if given; staff never see the link, so
        only the contact's owner can use it."""
        raw = contact_field(data)
        lang = data.get("lang")
        if lang is not None and not isinstance(lang, str):
            raise BadRequest("`lang` must be a language tag, such as de.", code="invalid_field")
        contact, keys = self.desk.contact_keys(raw)
        # The link is made for a key that holds an opt-out (the mailbox's, else the older spelling's), and lifts
        # every one the contact has, so nothing stored before mailboxes were matched keeps suppressing it.
        key = next((k for k in keys if self.desk.tables.optout.get(k) is not None), keys[0])
        also = tuple(k for k in keys if k != key)
        answer = self.optins.start(
            contact, key, started_by={"email": staff.email, "sub": staff.sub}, lang=lang, also=also
        )
        self.staff_audit.record(staff, "optin", contact_key=key)
        return answer

    def export(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """Everything held about the person (owner only)."""
        self._allowed(staff, "export")
        raw = contact_field(data)
        exported = self.desk.export(raw)
        self.staff_audit.record(staff, "export", contact_key=str(exported["contact_key"]))
        return {"contact": exported["contact"], "data": exported}

    def forget(self, staff: Staff, data: Mapping[str, Any]) -> dict[str, Any]:
        """Erase the person (owner only, and only with `confirm: true`)."""
        self._allowed(staff, "forget")
        raw = contact_field(data)
        if data.get("confirm") is not True:
            raise BadRequest(
                "Forgetting a person cannot be undone: send `confirm: true` to go ahead.", code="confirm_required"
            )
        report = self.desk.forget(raw)
        # Written after the erasure, so this fact keeps no hash of the person it was about.
        self.staff_audit.record(staff, "forget", requests_erased=report.requests_erased)
        return {"status": "forgotten"}


def _position(place: PlaceInLine | None) -> int | str | None:
    """A live place as the page shows it: its number when the figures pin it down, else the range it lies in."""
    if place is None:
        return None
    return place.exact if place.exact is not None else f"{place.lowest}-{place.highest}"
