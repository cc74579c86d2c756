"""Short manage ids in the opt-out table: one per person while young, renewed at half their life, refused after
signing out everywhere or past their life, and never two people's on one id."""

from __future__ import annotations

import pytest

from chalicelib.contacts import contact_key
from chalicelib.link_ids import is_link_id
from chalicelib.manage_ids import ManageIds
from chalicelib.tables.optout import ManageIssue, PersonLinks
from chalicelib.tokens import TokenExpired, TokenInvalid, TokenRevoked
from chalicelib.wiring import Services
from devstack.clocks import FixedClock

DAY = 86400


def ids(services: Services) -> ManageIds:
    return ManageIds(optout=services.tables.optout, lifetime_s=90 * DAY)


def key(services: Services, number: str = "+447400123456") -> str:
    return contact_key(number, services.hash_key)


def issue(contact_key: str, seen: PersonLinks, letter: str, clock: FixedClock) -> ManageIssue:
    return ManageIssue(contact_key, seen, letter * 22, int(clock.now()) + DAY)


def test_a_batch_is_issued_in_one_transaction_less_the_people_whose_state_moved(
    services: Services, clock: FixedClock
) -> None:
    people = [key(services, f"+4474001234{i:02d}") for i in range(49)]  # the largest offer batch
    optout = services.tables.optout
    raced = people[7]
    assert optout.issue_manage_ids([issue(raced, PersonLinks(), "R", clock)], clock.now()) == set()
    calls: list[str] = []
    optout.table.meta.client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    # Everyone read with no id: the raced person's read is stale by the time the batch is issued.
    batch = [ManageIssue(p, PersonLinks(), f"{i:02d}" + "x" * 20, int(clock.now()) + DAY) for i, p in enumerate(people)]
    assert optout.issue_manage_ids(batch, clock.now()) == {raced}
    assert calls == ["TransactWriteItems", "TransactWriteItems"]  # refused whole for one person, then the rest
    assert optout.person_links(raced).link_id == "R" * 22
    assert all(optout.manage_id(f"{i:02d}" + "x" * 20) is not None for i, p in enumerate(people) if p != raced)
    calls.clear()
    # Read again, everyone has a young id: a batch of their next SMS costs the one read and nothing more.
    found = ids(services).for_people(people, set(people), clock.now())
    assert calls == ["BatchGetItem"] and all(is_link_id(found[p].link_id or "") for p in people)


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
    assert optout.issue_manage_ids([issue(ada, seen, "A", clock)], clock.now()) == set()
    # Another message read the same state and raced: its id is not issued, and the winner's stays current.
    assert optout.issue_manage_ids([issue(ada, seen, "B", clock)], clock.now()) == {ada}
    # A sign-out between the read and the issue: the id would be at the old version, so it is refused too.
    current = optout.person_links(ada)
    optout.bump_manage_version(ada, clock.now())
    assert optout.issue_manage_ids([issue(ada, current, "C", clock)], clock.now()) == {ada}
    assert optout.person_links(ada) == PersonLinks(version=1)
    assert optout.manage_id("B" * 22) is None and optout.manage_id("C" * 22) is None


def test_an_id_already_taken_never_names_another_person(services: Services, clock: FixedClock) -> None:
    ada, bea = key(services), key(services, "+447400654321")
    optout = services.tables.optout
    assert optout.issue_manage_ids([issue(ada, PersonLinks(), "A", clock)], clock.now()) == set()
    assert optout.issue_manage_ids([issue(bea, PersonLinks(), "A", clock)], clock.now()) == {bea}
    assert ids(services).read("A" * 22, clock.now()) == ada
    with pytest.raises(TokenInvalid):
        ids(services).read("Z" * 22, clock.now())
