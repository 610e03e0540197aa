"""A bot's rule (`bots:` in the rules file) and the reports' key of its exchanges in no Slack channel: plain
functions over plain data. Quoting a dm or private exchange is off by default and on only in the alert channel its
own rule names; only the viewers its rule names (users, or members of named user groups) may open its words."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from common.exchange_access import may_view
from common.messages.blocks import channel_mention
from common.messages.exchange_view import exchange_modal, refusal_text
from common.messages.readable import Readable
from common.privacy import Destination, may_quote, may_quote_exchange, may_show_figures
from relmon.doctor.channels import channels_to_check
from store import bot_groups
from store.rules import BotRule, ChannelRules
from tests.builders import make_settings

SETTINGS = make_settings(alert_channel="C_DEFAULT", watched_channels=["C_SUPPORT"])
RULES = ChannelRules.model_validate(
    {
        "defaults": {"threshold": 2},
        "channels": {"C_SUPPORT": {"alert_channel": "C_SUPPORT_ALERTS", "quote_private": True}},
        "bots": {
            "helpdesk": {"alert_channel": "C_BOT_ALERTS", "quote_private": True, "threshold": 1, "viewers": ["U_LEAD"]},
            "widget": {"viewers": ["S_LEADS"]},
        },
    }
)
HELPDESK, WIDGET, OTHER = (bot_groups.key_of(name) for name in ("helpdesk", "widget", "other"))


def test_a_bots_key_is_never_a_channel() -> None:
    assert HELPDESK == "bot:helpdesk" and bot_groups.bot_of(HELPDESK) == "helpdesk"
    assert bot_groups.bot_of("C_SUPPORT") is None and bot_groups.bot_of(None) is None
    assert channel_mention(HELPDESK) == "helpdesk (bot conversations)" and channel_mention("C1") == "<#C1>"
    assert Readable(names={"C1": "support"}).channel(HELPDESK) == "helpdesk (bot conversations)"


def test_a_bots_rule_layers_over_the_defaults_and_its_exchanges_are_watched() -> None:
    rule = RULES.for_channel(HELPDESK, SETTINGS)
    assert rule.alert_channel == "C_BOT_ALERTS" and rule.thresholds["relevancy"] == 1 and rule.quote_private
    other = RULES.for_channel(OTHER, SETTINGS)  # a bot with no rule: the defaults, its alerts to the default
    assert other.alert_channel == "C_DEFAULT" and other.thresholds["relevancy"] == 2 and not other.quote_private
    # RELMON_WATCHED_CHANNELS lists Slack channels: a bot's exchanges were sent on purpose, so they are watched.
    assert other.watch and not RULES.for_channel("C_ELSEWHERE", SETTINGS).watch
    assert RULES.own(HELPDESK) is RULES.bots["helpdesk"] and RULES.own(OTHER) is None
    assert RULES.own("helpdesk") is None  # a channel id, not a bot's key


def test_a_dm_exchange_is_quoted_only_in_the_alert_channel_its_bots_own_rule_names() -> None:
    assert not may_quote_exchange("dm") and not may_quote_exchange("private", None, "C_DEFAULT")
    assert may_quote_exchange("dm", RULES.bot("helpdesk"), "C_BOT_ALERTS")
    assert not may_quote_exchange("dm", RULES.bot("helpdesk"), "C_DEFAULT")
    assert not may_quote_exchange("dm", RULES.bot("widget"), None)  # names no alert channel
    assert may_quote_exchange("public", None, None)


@pytest.mark.parametrize(
    ("key", "where", "quoted"),
    [
        (HELPDESK, "C_BOT_ALERTS", True),  # its own rule's alert channel, quoting on
        (HELPDESK, "C_DIGEST", False),
        (HELPDESK, None, False),  # App Home, a terminal: no channel chosen for it
        (WIDGET, "C_DEFAULT", False),  # its rule names viewers only
        (OTHER, "C_DEFAULT", False),  # no rule: never
    ],
)
def test_the_reports_quote_a_bots_private_exchanges_as_its_rule_says(key: str, where: str | None, quoted: bool):
    assert may_quote(key, True, RULES, SETTINGS, where) is quoted


def test_no_one_reader_is_quoted_a_bots_private_exchange_but_its_figures_show_in_its_channel() -> None:
    nobody = Destination("C_BOT_ALERTS", lambda channel: False)
    assert not may_quote(HELPDESK, True, RULES, SETTINGS, nobody)
    assert may_show_figures(HELPDESK, True, RULES, SETTINGS, "C_BOT_ALERTS")


def test_a_defaults_section_cannot_quote_a_bots_private_exchanges() -> None:
    rules = ChannelRules.model_validate({"defaults": {"alert_channel": "C_A", "quote_private": True}})
    assert not may_quote(OTHER, True, rules, SETTINGS, "C_A")


def test_viewers_are_named_users_or_members_of_named_groups() -> None:
    groups = {"S_LEADS": {"U_GROUPIE"}}
    members = lambda group: groups.get(group, set())  # noqa: E731
    assert may_view("U_LEAD", ["U_LEAD", "S_LEADS"], members)
    assert may_view("U_GROUPIE", ["U_LEAD", "S_LEADS"], members)
    assert not may_view("U_STRANGER", ["U_LEAD", "S_LEADS"], members)
    assert not may_view("U_LEAD", [], members) and not may_view(None, ["U_LEAD"], members)
    assert not may_view("U_GROUPIE", ["U_GROUPIE_NOT_A_GROUP"], members)


def test_a_bad_bots_section_is_refused() -> None:
    with pytest.raises(ValidationError):
        ChannelRules.model_validate({"bots": {"helpdesk": {"quote": True}}})  # not a field
    assert BotRule().viewers == []


def test_the_refusal_names_whom_to_ask_and_the_modal_holds_the_words_as_plain_text() -> None:
    assert refusal_text("helpdesk", ["U_LEAD", "S_LEADS"]).endswith("ask <@U_LEAD>, <!subteam^S_LEADS>.")
    assert "ask a relmon admin" in refusal_text("helpdesk", [])
    modal = exchange_modal("helpdesk", "dm", "Refund *now* <!channel>?", "No.")
    texts = [b["text"] for b in modal["blocks"] if b["type"] == "section"]
    assert [t["type"] for t in texts] == ["plain_text", "plain_text"]
    assert texts[0]["text"] == "Question:\nRefund *now* <!channel>?" and texts[1]["text"] == "Answer:\nNo."


def test_doctor_checks_relmon_is_in_each_bots_alert_channel(tmp_path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text("bots:\n  helpdesk:\n    alert_channel: C_BOT_ALERTS\n  widget:\n    viewers: [U_LEAD]\n")
    wanted = dict(channels_to_check(make_settings(channel_rules_file=rules, alert_channel="C_DEFAULT")))
    assert wanted["C_BOT_ALERTS"] == "alert channel for bot helpdesk (channel rules)"
    assert "C_DEFAULT" in wanted and len(wanted) == 2
