"""TOKEN_KEY rotation: links are signed with the newest key and verified with every key listed."""

from __future__ import annotations

import pytest

from chalicelib.confirm import CodeKey
from chalicelib.manage import FormGuard, FormRefused
from chalicelib.secrets import split_values
from chalicelib.shopper.resubscribe import ProofCodes
from chalicelib.tokens import TokenInvalid, Tokens
from chalicelib.wiring import Services

OLD = "old-token-key-0123456789abcdef"
NEW = "new-token-key-fedcba9876543210"


def test_a_link_signed_with_the_old_key_verifies_during_a_rotation_and_is_refused_once_the_key_is_dropped() -> None:
    before = Tokens([OLD])
    link = before.manage("contact-1")
    during = Tokens([NEW, OLD])  # newest first
    assert during.read_manage(link).value == "contact-1"
    after = Tokens([NEW])
    with pytest.raises(TokenInvalid):
        after.read_manage(link)


def test_during_a_rotation_new_links_are_signed_with_the_newest_key() -> None:
    during = Tokens([NEW, OLD])
    link = during.unsubscribe("contact-1")
    assert Tokens([NEW]).read_unsubscribe(link).value == "contact-1"
    with pytest.raises(TokenInvalid):
        Tokens([OLD]).read_unsubscribe(link)


def test_a_rotation_reaches_tokens_built_once_when_the_key_source_changes() -> None:
    # Services builds Tokens once per container on a callable that reads TOKEN_KEY through the secrets cache.
    configured = [OLD]
    tokens = Tokens(lambda: list(configured))
    old_link = tokens.reserve("offer-1")
    configured[:] = [NEW, OLD]
    new_link = tokens.reserve("offer-2")
    assert tokens.read_reserve(old_link).value == "offer-1"
    configured[:] = [NEW]
    assert tokens.read_reserve(new_link).value == "offer-2"
    with pytest.raises(TokenInvalid):
        tokens.read_reserve(old_link)


def test_the_setting_lists_keys_newest_first_separated_by_spaces_or_commas() -> None:
    assert split_values(f"{NEW} {OLD}") == [NEW, OLD]
    assert split_values(f"{NEW},{OLD}") == [NEW, OLD]
    assert split_values(f" {NEW} ,  {OLD} ") == [NEW, OLD]
    link = Tokens(split_values(f"{NEW} {OLD}")).manage("c")
    assert Tokens(NEW).read_manage(link).value == "c"


def test_an_empty_key_list_is_a_configuration_error_not_an_invalid_link() -> None:
    with pytest.raises(ValueError, match="TOKEN_KEY"):
        Tokens([]).read_manage("anything")


def test_manage_page_form_tokens_follow_the_same_rotation() -> None:
    token = FormGuard([OLD]).issue("person-a", "leave", 7200.0)
    FormGuard([NEW, OLD]).check("person-a", "leave", token, 7200.0)
    with pytest.raises(FormRefused):
        FormGuard([NEW]).check("person-a", "leave", token, 7200.0)
    fresh = FormGuard([NEW, OLD]).issue("person-a", "leave", 7200.0)
    FormGuard(NEW).check("person-a", "leave", fresh, 7200.0)


@pytest.mark.parametrize("codes_for", [CodeKey, ProofCodes], ids=["switch", "resubscribe"])
def test_codes_are_issued_under_the_newest_key_and_match_under_any_listed(codes_for: type[CodeKey]) -> None:
    # A code texted by a container that still had only the old key is typed into one that has both, newest first.
    nonce = "nonce-1"
    sent_before = codes_for([OLD]).code(nonce)
    during = codes_for([NEW, OLD])
    assert during.matches(nonce, sent_before)
    # New codes are issued under the newest key: a container with only the new key takes them.
    sent_during = during.code(nonce)
    assert sent_during == codes_for([NEW]).code(nonce)
    assert codes_for([NEW]).matches(nonce, sent_during)
    # Once the old key is dropped, a code issued under it no longer matches (unless both keys give the same digits).
    if sent_before != sent_during:
        assert not codes_for([NEW]).matches(nonce, sent_before)


def test_a_rotation_reaches_a_warm_containers_codes_without_a_restart() -> None:
    # The container reads TOKEN_KEY through the secrets cache on every use, as links do.
    keys = [OLD]
    codes = CodeKey(lambda: keys)
    sent = codes.code("nonce-2")
    keys[:] = [NEW, OLD]
    assert codes.code("nonce-2") == CodeKey([NEW]).code("nonce-2")
    assert codes.matches("nonce-2", sent)


def test_the_stages_codes_follow_a_rotation_of_token_key(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    wired = [services.messages.codes, services.manage.codes, services.proofs.codes, services.resubscribe.codes]
    sent = [codes.code("nonce-3") for codes in wired]
    current = services.token_keys()
    read_all = services.secrets.get_all
    monkeypatch.setattr(
        services.secrets, "get_all", lambda name: [NEW, *current] if name == "TOKEN_KEY" else read_all(name)
    )
    for codes, before in zip(wired, sent, strict=True):
        # The same objects, built before the rotation: codes sent before it still match, new ones use NEW.
        assert codes.matches("nonce-3", before)
        assert codes.code("nonce-3") == type(codes)([NEW]).code("nonce-3")
