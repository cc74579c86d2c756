"""Short manage ids: issuing a person's `/m/{id}` link for an SMS, and reading one back.

A person keeps one id while it is young, so an SMS costs no write for it; the first SMS (and the first after
signing out everywhere, or once the id is half its lifetime old) issues a new one. An id works for its whole
lifetime (a place's lifetime, REQUEST_TTL_DAYS, as a signed manage link does), so every SMS's manage link works
for at least half of it. Signing out everywhere refuses every id issued before it (by version).
"""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.link_ids import new_link_id
from chalicelib.tables.optout import ManageIssue, OptoutTable, PersonLinks
from chalicelib.tokens import TokenExpired, TokenInvalid, TokenRevoked

ISSUE_ATTEMPTS = 3


@dataclass(frozen=True, kw_only=True, eq=False)
class ManageIds:
    """Issues and reads short manage ids in the opt-out table."""

    optout: OptoutTable
    lifetime_s: int

    def _young(self, person: PersonLinks, now: float) -> bool:
        return person.link_id is not None and now - person.link_at < self.lifetime_s / 2

    def for_people(self, contact_keys: list[str], sms_keys: set[str], now: float) -> dict[str, PersonLinks]:
        """Every person's link state (one batch read), with a young manage id issued for each of `sms_keys` that
        lacks one: all of them in one transaction, so a batch of first-time SMS costs one more call, not one per
        person. A person whose id could not be issued (their state kept moving) keeps no id: their SMS falls back
        to the signed manage link, longer but as good."""
        people = self.optout.people_links(contact_keys)
        needing = [k for k in dict.fromkeys(contact_keys) if k in sms_keys and not self._young(people[k], now)]
        for _ in range(ISSUE_ATTEMPTS):
            if not needing:
                break
            issues = [ManageIssue(k, people[k], new_link_id(), int(now) + self.lifetime_s) for k in needing]
            moved = self.optout.issue_manage_ids(issues, now)
            for issue in issues:
                if issue.contact_key not in moved:
                    people[issue.contact_key] = PersonLinks(issue.seen.version, issue.link_id, int(now))
            # Someone else moved these people's state: read it again (another message's id may serve).
            for key in moved:
                people[key] = self.optout.person_links(key)
            needing = [k for k in moved if not self._young(people[k], now)]
        for key in needing:
            people[key] = PersonLinks(people[key].version)
        return people

    def read(self, link_id: str, now: float) -> str:
        """The contact key a short manage id names: one GetItem for an unknown id (TokenInvalid); TokenExpired
        past its lifetime; TokenRevoked when issued before the person signed out everywhere."""
        found = self.optout.manage_id(link_id)
        if found is None:
            raise TokenInvalid("no such manage id")
        if now - found.issued_at > self.lifetime_s:
            raise TokenExpired("manage id past its lifetime")
        if found.version < self.optout.manage_version(found.contact_key):
            raise TokenRevoked("issued before the person signed out everywhere")
        return found.contact_key
