"""Short manage ids in the opt-out table: one per person while young, renewed at half their life, refused after
signing out everywhere or past their life, and never two people's on one id."""

from __future__ import annotations

import pytest

from chalicelib.contacts import contact_key
from chalicelib.link_ids import is_link_id
from chalicelib.manage_ids import ManageIds
from chalicelib.tables.optout import PersonLinks
from chalicelib.tokens import TokenExpired, TokenInvalid, TokenRevoked
from chalicelib.wiring import Services
from devstack.clocks import FixedClock

DAY = 86400


def ids(services: Services) -> ManageIds:
    return ManageIds(optout=services.tables.optout, lifetime_s=90 * DAY)


def key(services: Services, number: str = "+447400123456") -> str:
    return contact_key(number, services.hash_key)


def test_a_person_keeps_one_id_and_emails_issue_none(services: Services, clock: FixedClock) -> None:
    ada, bea = key(services), key(services, "+447400654321")
    first = ids(services).for_people([ada, bea], {ada}, clock.now())
    assert is_link_id(first[ada].link_id or "") and first[bea] == PersonLinks()  # bea gets an email: no id
    clock.advance(30 * DAY)
    again = ids(services).for_people([ada], {ada}, clock.now())
    assert again[ada].link_id == first[ada].link_id
    assert ids(services).read(str(first[ada].link_id), clock.now()) == ada


def test_an_id_is_renewed_at_half_its_life_and_refused_after_all_of_it(services: Services, clock: FixedClock) -> None:
    ada = key(services)
    old = str(ids(services).for_people([ada], {ada}, clock.now())[ada].link_id)
    clock.advance(46 * DAY)
    new = str(ids(services).for_people([ada], {ada}, clock.now())[ada].link_id)
    assert new != old
    assert ids(services).read(old, clock.now()) == ada  # an SMS sent with it last month still works
    clock.advance(45 * DAY)
    with pytest.raises(TokenExpired):
        ids(services).read(old, clock.now())
    assert ids(services).read(new, clock.now()) == ada


def test_signing_out_everywhere_refuses_every_earlier_id(services: Services, clock: FixedClock) -> None:
    ada = key(services)
    old = str(ids(services).for_people([ada], {ada}, clock.now())[ada].link_id)
    services.tables.optout.bump_manage_version(ada, clock.now())
    with pytest.raises(TokenRevoked):
        ids(services).read(old, clock.now())
    fresh = ids(services).for_people([ada], {ada}, clock.now())[ada]
    assert fresh.version == 1 and fresh.link_id not in (None, old)
    assert ids(services).read(str(fresh.link_id), clock.now()) == ada


def test_an_id_issued_from_a_stale_read_is_refused(services: Services, clock: FixedClock) -> None:
    ada = key(services)
    optout = services.tables.optout
    seen = optout.person_links(ada)  # no id yet
    assert optout.issue_manage_id(ada, seen, "A" * 22, clock.now(), int(clock.now()) + DAY)
    # Another message read the same state and raced: its id is not issued, and the winner's stays current.
    assert not optout.issue_manage_id(ada, seen, "B" * 22, clock.now(), int(clock.now()) + DAY)
    # A sign-out between the read and the issue: the id would be at the old version, so it is refused too.
    current = optout.person_links(ada)
    optout.bump_manage_version(ada, clock.now())
    assert not optout.issue_manage_id(ada, current, "C" * 22, clock.now(), int(clock.now()) + DAY)
    assert optout.person_links(ada) == PersonLinks(version=1)
    assert optout.manage_id("B" * 22) is None and optout.manage_id("C" * 22) is None


def test_an_id_already_taken_never_names_another_person(services: Services, clock: FixedClock) -> None:
    ada, bea = key(services), key(services, "+447400654321")
    optout = services.tables.optout
    assert optout.issue_manage_id(ada, PersonLinks(), "A" * 22, clock.now(), int(clock.now()) + DAY)
    assert not optout.issue_manage_id(bea, PersonLinks(), "A" * 22, clock.now(), int(clock.now()) + DAY)
    assert ids(services).read("A" * 22, clock.now()) == ada
    with pytest.raises(TokenInvalid):
        ids(services).read("Z" * 22, clock.now())
