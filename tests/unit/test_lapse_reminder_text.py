"""The reminder before an offer lapses: its email and SMS in every language (the time left, the link, the opt-out,
no English left in another language, the SMS within its 2 GSM-7 segments), which offers get one, and its settings."""

from __future__ import annotations

import re

import pytest

from chalicelib import i18n
from chalicelib.config import ConfigError, Settings, settings_from_env
from chalicelib.i18n import LANGUAGES
from chalicelib.link_ids import new_link_id
from chalicelib.messages.compose import (
    REMINDER_TEXT,
    SMS_TOTAL_SEGMENTS,
    compose_reminder_email,
    compose_reminder_sms,
    facts_for,
    window_words,
)
from chalicelib.messages.senders import EMAIL
from chalicelib.messages.sms import is_gsm, sms_segments, to_gsm
from chalicelib.reminders import ReminderPolicy
from chalicelib.tables.catalog import Product
from infra.stages import stage_env
from tests.unit.test_messages_locales import CHAIR_ITEM, FOREIGN, LINKS, LONG_NAME, LONG_SHOP, english_in

RESERVE, MANAGE, UNSUBSCRIBE = "https://a.example/r/x", "https://a.example/m/y", "https://a.example/u/z"


def reminder_email(lang: str, name: str = "Ada") -> tuple[str, str, str]:
    facts = facts_for(Product.from_item(CHAIR_ITEM), "Walnut & Wool", lang)
    email = compose_reminder_email(
        facts,
        window_words(600, lang),
        to="ada@example.com",
        name=name,
        reserve_url=RESERVE,
        manage_url=MANAGE,
        unsubscribe_url=UNSUBSCRIBE,
    )
    assert email.channel == EMAIL and email.unsubscribe_url == UNSUBSCRIBE  # List-Unsubscribe, as every notice
    return email.subject, email.text, email.html


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_reminder_email_says_the_time_left_with_the_hold_link_and_the_opt_out_in_the_places_language(
    lang: str,
) -> None:
    t = i18n.text("messages", lang)
    subject, text, html = reminder_email(lang)
    ten = window_words(600, lang)
    assert ten in subject and "Walnut" in subject
    assert t(REMINDER_TEXT, product="Walnut dining chair", window=ten) in text
    for link in (RESERVE, MANAGE, UNSUBSCRIBE):
        assert link in text and link in html
    assert t("Hold one for me") in text and t("Unsubscribe") in html
    assert f'<html lang="{lang}"' in html


@pytest.mark.parametrize("lang", FOREIGN)
def test_no_english_fixed_string_leaks_into_a_reminder_in_another_language(lang: str) -> None:
    facts = facts_for(Product.from_item(CHAIR_ITEM), "Walnut & Wool", lang)
    sms = [compose_reminder_sms(facts, window_words(600, lang), RESERVE, MANAGE, two_way=w) for w in (False, True)]
    for text in [*reminder_email(lang), *sms]:
        words = i18n_free(text)
        assert english_in(words, lang) == [], (lang, text)


def i18n_free(text: str) -> str:
    """The words of a message without its names, links and markup."""
    return re.sub(r"<[^>]+>|https?://\S+|Walnut & Wool|Walnut dining chair|Walnut &amp; Wool", " ", text)


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("two_way", [False, True])
def test_the_reminder_sms_fits_two_gsm7_segments_with_real_links_and_a_long_name(lang: str, two_way: bool) -> None:
    product = Product.from_item({**CHAIR_ITEM, "name": LONG_NAME})
    facts = facts_for(product, LONG_SHOP, lang)
    reserve, manage = LINKS.reserve(new_link_id()), LINKS.manage_short(new_link_id())
    assert len(reserve) >= 83 and len(manage) >= 83  # a real id under a gateway stage URL
    text = compose_reminder_sms(facts, window_words(600, lang), reserve, manage, two_way=two_way)
    assert is_gsm(text) and sms_segments(text) <= SMS_TOTAL_SEGMENTS
    assert reserve in text and manage in text and ("STOP" in text) == two_way
    assert text.startswith(to_gsm(LONG_SHOP[:27]))  # the shop first (shortened beyond 30 characters)


def test_only_the_channels_turned_on_are_reminded_and_only_offers_longer_than_the_lead() -> None:
    off, email, both = (ReminderPolicy(channels=c, lead_s=600) for c in ((), ("email",), ("email", "sms")))
    assert off.remind_before_s("email", 3600) == 0
    assert email.remind_before_s("email", 3600) == 600
    assert email.remind_before_s("sms", 3600) == 0  # SMS only when the shop turns it on too
    assert both.remind_before_s("sms", 3600) == 600
    assert email.remind_before_s("email", 600) == 0  # the reminder would come with the notice itself
    assert email.reminds("email") and not email.reminds("sms") and not off.reminds("email")


def settings(**env: str) -> Settings:
    return settings_from_env({**stage_env("local"), "AWS_DEFAULT_REGION": "eu-west-2", **env})


def test_reminders_are_off_unless_the_shop_turns_them_on_and_email_only_unless_it_adds_sms() -> None:
    default = settings()
    assert (default.lapse_reminder, default.lapse_reminder_minutes) == ("off", 10)
    assert ReminderPolicy.of(default).channels == ()
    assert ReminderPolicy.of(settings(LAPSE_REMINDER="email")).channels == ("email",)
    on = settings(LAPSE_REMINDER="email+sms", LAPSE_REMINDER_MINUTES="5")
    assert ReminderPolicy.of(on) == ReminderPolicy(channels=("email", "sms"), lead_s=300)


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"LAPSE_REMINDER": "sms"}, "off, email or email+sms"),
        ({"LAPSE_REMINDER_MINUTES": "60"}, "less than the default offer window (60 minutes)"),
        ({"LAPSE_REMINDER_MINUTES": "0"}, "at least 1"),
        ({"LAPSE_REMINDER_MINUTES": "ten"}, "whole number"),
    ],
)
def test_a_reminder_setting_that_cannot_work_stops_the_stage_with_a_clear_message(
    env: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=says.replace("+", r"\+").replace("(", r"\(").replace(")", r"\)")):
        settings(**env)
