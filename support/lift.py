"""Lifting an opt-out by hand (`bisn optout remove`): staff only, with their own AWS credentials.

Not in the shipped desk (chalicelib/support_desk.py): it asks SNS whether the number is still blocked, which no
function's role may (the dashboard opts people back in only through their own link, chalicelib/shopper/optin.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.support_desk import SupportDesk


@dataclass(frozen=True)
class OptoutRemoval:
    """The result of lifting an opt-out."""

    removed: bool
    sms_still_opted_out: bool | None  # for phone numbers: SNS still blocks them (a STOP reply); None for email


def optout_remove(desk: SupportDesk, raw_contact: str) -> OptoutRemoval:
    """Lift a suppression under every key the contact's opt-outs may be stored by (one from before mailboxes were
    matched would otherwise still suppress the address); says whether SNS still blocks the number (only the
    shopper can undo a STOP)."""
    contact, keys = desk.contact_keys(raw_contact)
    removed = any([desk.tables.optout.remove(key) for key in keys])
    still = None
    if contact.channel == "sms":
        answer = desk.sns.check_if_phone_number_is_opted_out(phoneNumber=contact.address)
        still = bool(answer.get("isOptedOut"))
    return OptoutRemoval(removed=removed, sms_still_opted_out=still)
