"""Short manage ids: issuing a person's `/m/{id}` link for an SMS, and reading one back.

A person keeps one id while it is young, so an SMS costs no write for it; the first SMS (and the first after
signing out everywhere, or once the id is half its lifetime old) issues a new one. An id works for its whole
lifetime (a place's lifetime, REQUEST_TTL_DAYS, as a signed manage link does), so every SMS's manage link works
for at least half of it. Signing out everywhere refuses every id issued before it (by version).
"""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.link_ids import new_link_id
from chalicelib.tables.optout import OptoutTable, PersonLinks
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
        lacks one. A person whose id could not be issued (their state kept moving) keeps no id: their SMS falls
        back to the signed manage link, longer but as good."""
        people = self.optout.people_links(contact_keys)
        for key in sms_keys:
            person = people.get(key, PersonLinks())
            for _ in range(ISSUE_ATTEMPTS):
                if self._young(person, now):
                    break
                fresh = new_link_id()
                expires_at = int(now) + self.lifetime_s
                if self.optout.issue_manage_id(key, person, fresh, now, expires_at):
                    person = PersonLinks(person.version, fresh, int(now))
                    break
                person = self.optout.person_links(key)
            people[key] = person if self._young(person, now) else PersonLinks(person.version)
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
