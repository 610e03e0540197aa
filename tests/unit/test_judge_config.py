"""`/judge config` as plain functions: its grammar (bot.config_grammar), what a change stores (changed_values), who
may change (may_change), the layering of the changes made in Slack over the rules file (ChannelRules.with_overrides,
value_sources), and how they are read by the one reader of the rules (store.rule_overrides.RuleSource) on a real
SQLite database: a change made elsewhere is in force after the refresh period, one forgotten at once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.config_grammar import ChannelRef, ConfigError, ConfigRequest, Target, parse_config
from bot.judge_config import changed_values, may_change
from bot.listeners.commands import route
from common.messages.judge_config import rule_message
from common.messages.verdicts import help_message
from store.db import Database
from store.rule_overrides import RuleSource, override_of, save_override
from store.rules import (
    FROM_DEFAULT,
    FROM_FILE,
    FROM_FILE_DEFAULTS,
    FROM_SLACK,
    THRESHOLD_FIELDS,
    ChannelRules,
    value_sources,
)
from tests.builders import make_settings
from tests.processes import wait_for

KNOWN = ("relevancy", "correctness", "grounded", "refund_policy")


# The grammar -------------------------------------------------------------------------------------------------


def test_config_is_routed_with_its_words() -> None:
    assert route("config bot:helpdesk quote on") == route("CONFIG  bot:helpdesk quote on")
    assert route("config bot:helpdesk quote on").kind == "config"
    assert route("config").argument == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ConfigRequest(Target(), "show")),
        ("<#C0SUPPORT|support>", ConfigRequest(Target(ChannelRef("C0SUPPORT")), "show")),
        ("#support", ConfigRequest(Target(ChannelRef(name="support")), "show")),
        ("bot:helpdesk", ConfigRequest(Target(bot="helpdesk"), "show")),
        ("bot:helpdesk quote on", ConfigRequest(Target(bot="helpdesk"), "set", {"quote_private": True})),
        ("quote OFF", ConfigRequest(Target(), "set", {"quote_private": False})),
        (
            "#support judges relevancy,refund_policy",
            ConfigRequest(Target(ChannelRef(name="support")), "set", {"judges": ["relevancy", "refund_policy"]}),
        ),
        (
            "bot:helpdesk viewers <@U0LEAD|lead> <!subteam^S0TEAM|@support team> W0OTHER",
            ConfigRequest(Target(bot="helpdesk"), "set", {"viewers": ["U0LEAD", "S0TEAM", "W0OTHER"]}),
        ),
        ("bot:helpdesk viewers none", ConfigRequest(Target(bot="helpdesk"), "set", {"viewers": []})),
        (
            "bot:helpdesk viewers @lead @support-team",
            ConfigRequest(Target(bot="helpdesk"), "set", {"viewers": ["@lead", "@support-team"]}),
        ),
        (
            "alert <#C0ALERTS> quote on threshold 3",
            ConfigRequest(
                Target(), "set", {"alert_channel": ChannelRef("C0ALERTS"), "quote_private": True, "threshold": 3}
            ),
        ),
        ("threshold grounded 2", ConfigRequest(Target(), "set", {"grounded_threshold": 2})),
        ("threshold refund_policy 0", ConfigRequest(Target(), "set", {"thresholds": {"refund_policy": 0}})),
        ("#support reset", ConfigRequest(Target(ChannelRef(name="support")), "reset")),
        (
            "bot:helpdesk reset quote threshold",
            ConfigRequest(
                Target(bot="helpdesk"),
                "reset",
                reset_fields=("quote_private", *THRESHOLD_FIELDS.values(), "thresholds"),
            ),
        ),
    ],
)
def test_the_grammar_reads_each_form(text: str, expected: ConfigRequest) -> None:
    assert parse_config(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("quote maybe", "quote on"),
        ("quote", "quote on"),
        ("alert", "alert #channel"),
        ("alert #a #b", "alert #channel"),
        ("#support viewers @lead", "bot:NAME viewers"),  # a channel has no viewers
        ("bot:helpdesk viewers lead", "mentions"),
        ("bot:helpdesk viewers", "mentions"),
        ("judges", "Name the judges"),
        ("judges Bad!Name", "Name the judges"),
        ("threshold", "Give a judge and a score"),
        ("threshold relevancy two", "Give a judge and a score"),
        ("threshold Bad!Name 1", "Give a judge and a score"),
        ("frobnicate 3", "doesn't know"),
        ("reset everything", "Nothing called"),
        ("bot:helpdesk " + "viewers " + " ".join(f"U{n:07d}" for n in range(60)), "at most 50"),
    ],
)
def test_bad_input_is_one_short_sentence(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(text)
    assert says in str(raised.value) and len(str(raised.value)) < 200


# What a change stores ------------------------------------------------------------------------------------------


def test_a_change_is_laid_over_what_was_stored_and_a_reset_drops_it() -> None:
    stored = changed_values({"quote_private": False}, parse_config("judges refund_policy"), KNOWN, is_bot=False)
    assert stored == {"quote_private": False, "judges": ["refund_policy"]}
    assert changed_values(stored, parse_config("reset judges"), KNOWN, is_bot=False) == {"quote_private": False}
    assert changed_values(stored, parse_config("reset"), KNOWN, is_bot=False) == {}


def test_an_unknown_judge_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError) as raised:
        changed_values({}, parse_config("judges relevancy,refund,tone"), KNOWN, is_bot=False)
    assert str(raised.value) == (
        "No judge called refund, tone: the judges are relevancy, correctness, grounded, refund_policy."
    )


def test_a_team_judge_s_threshold_is_kept_beside_the_others_and_checked_against_its_scale() -> None:
    scales = {"refund_policy": (0, 1), "tone": (1, 5)}
    known = (*KNOWN, "tone")
    stored = changed_values({"thresholds": {"tone": 2}}, parse_config("threshold refund_policy 0"), known,
                            is_bot=False, team_scales=scales)  # fmt: skip
    assert stored == {"thresholds": {"tone": 2, "refund_policy": 0}}
    refused = {
        "threshold tone 5": "tone's threshold is a whole number from 1 to 4",
        "threshold tone 2.5": "from 1 to 4",
        "threshold nope 1": "No judge called nope",
    }
    for text, says in refused.items():
        with pytest.raises(ConfigError, match=says):
            changed_values({}, parse_config(text), known, is_bot=False, team_scales=scales)
    assert changed_values(stored, parse_config("reset threshold"), known, is_bot=False) == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [("threshold 7", "relevancy's threshold is 0 to 4"), ("threshold grounded 0", "grounded's threshold is 1 to 5"),
     ("threshold correctness 1.5", "correctness's threshold is 0 to 2")],
)  # fmt: skip
def test_a_threshold_out_of_its_judge_s_range_is_refused(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        changed_values({}, parse_config(text), KNOWN, is_bot=False)


def test_admins_owners_and_the_named_may_change() -> None:
    groups = {"S0ADMINS": {"U0GROUPIE"}}.get

    def allowed(user_id: str, user: dict | None, admins: list[str]) -> bool:
        return may_change(user_id, user, admins, lambda group: groups(group, set()))

    assert allowed("U1", {"is_admin": True}, [])
    assert allowed("U1", {"is_owner": True}, [])
    assert allowed("U1", {"is_primary_owner": True}, [])
    assert not allowed("U1", {"is_admin": False}, [])
    assert not allowed("U1", None, [])  # users.info failed: the safe side
    assert allowed("U1", None, ["U1"])
    assert allowed("U0GROUPIE", {}, ["S0ADMINS"])
    assert not allowed("U0OTHER", {}, ["S0ADMINS", "U1"])


# Layering ------------------------------------------------------------------------------------------------------

FILE = {
    "defaults": {"judges": ["relevancy"], "threshold": 1},
    "channels": {"C0SUPPORT": {"alert_channel": "C0ALERTS", "quote_private": False}},
    "bots": {"helpdesk": {"alert_channel": "C0BOTALERTS", "viewers": ["U0LEAD"]}},
}


def file_rules() -> ChannelRules:
    return ChannelRules.model_validate(FILE)


def test_a_change_made_in_slack_wins_over_the_file_which_wins_over_the_defaults() -> None:
    settings = make_settings(alert_channel="C0DEFAULT")
    overrides = {
        "C0SUPPORT": {"quote_private": True, "judges": ["relevancy", "refund_policy"]},
        "bot:helpdesk": {"quote_private": True, "viewers": ["U0OTHER", "S0TEAM"]},
    }
    rules = file_rules().with_overrides(overrides)
    support = rules.for_channel("C0SUPPORT", settings)
    assert (support.alert_channel, support.quote_private, support.judges) == (
        "C0ALERTS", True, ["relevancy", "refund_policy"])  # fmt: skip
    assert support.thresholds["relevancy"] == 1  # the file's defaults
    helpdesk = rules.bot("helpdesk")
    assert (
        helpdesk is not None and helpdesk.viewers == ["U0OTHER", "S0TEAM"] and helpdesk.alert_channel == "C0BOTALERTS"
    )
    assert rules.own("bot:helpdesk") == helpdesk and rules.for_channel("bot:helpdesk", settings).quote_private
    # The file's own rules are untouched.
    assert file_rules().for_channel("C0SUPPORT", settings).quote_private is False

    with_file_team = ChannelRules.model_validate(
        {**FILE, "channels": {"C0SUPPORT": {"thresholds": {"tone": 3, "refund_policy": 0}}}}
    )
    with_team = with_file_team.with_overrides({"C0SUPPORT": {"thresholds": {"refund_policy": 1}}})
    assert with_team.for_channel("C0SUPPORT", settings).thresholds["refund_policy"] == 1
    assert with_team.for_channel("C0SUPPORT", settings).thresholds["tone"] == 3  # the file's, kept
    team_sources = value_sources(file_rules(), "C0SUPPORT", {"thresholds": {"refund_policy": 1}})
    assert team_sources["threshold:refund_policy"] == FROM_SLACK
    with pytest.raises(ValueError, match="relevancy: use threshold"):
        ChannelRules.model_validate({"channels": {"C0X": {"thresholds": {"relevancy": 1}}}})

    sources = value_sources(file_rules(), "C0SUPPORT", overrides["C0SUPPORT"])
    assert sources["quote_private"] == sources["judges"] == FROM_SLACK
    assert sources["alert_channel"] == FROM_FILE
    assert sources["threshold"] == FROM_FILE_DEFAULTS
    assert sources["grounded_threshold"] == FROM_DEFAULT
    assert value_sources(file_rules(), "bot:helpdesk", None)["viewers"] == FROM_FILE


def test_a_change_for_a_channel_the_file_does_not_name_does_not_start_watching_it() -> None:
    settings = make_settings(watched_channels=["C0SUPPORT"])
    rules = file_rules().with_overrides({"C0ELSEWHERE": {"judges": ["grounded"]}})
    elsewhere = rules.for_channel("C0ELSEWHERE", settings)
    assert elsewhere.judges == ["grounded"] and not elsewhere.watch
    assert rules.for_channel("C0SUPPORT", settings).watch


def test_an_override_that_no_longer_validates_is_left_out() -> None:
    rules = file_rules().with_overrides({"C0SUPPORT": {"threshold": 9}, "C0OTHER": {"quote_private": True}})
    settings = make_settings()
    assert rules.for_channel("C0SUPPORT", settings).thresholds["relevancy"] == 1
    assert rules.for_channel("C0OTHER", settings).quote_private


def test_the_rule_message_names_each_value_s_source() -> None:
    settings = make_settings()
    overrides = {"quote_private": True}
    rules = file_rules().with_overrides({"C0NEW": overrides})
    shown = rule_message(
        "C0NEW",
        rules.for_channel("C0NEW", settings),
        value_sources(file_rules(), "C0NEW", overrides),
        own_alert_channel=None,
        viewers=None,
        changed=True,
    )
    text = shown["blocks"][0]["text"]["text"]
    assert "Rule changed for <#C0NEW>" in text and "Quote private text there: on _(Slack)_" in text
    assert "Judges: relevancy _(file defaults)_" in text and "relevancy ≤ 1 _(file defaults)_" in text
    assert "Viewers" not in text
    assert "alert channel of its own" in shown["blocks"][1]["elements"][0]["text"]


def test_help_lists_config() -> None:
    assert "/judge config" in help_message()["blocks"][0]["text"]["text"]


# The one reader ------------------------------------------------------------------------------------------------


def test_the_reader_sees_a_change_after_its_refresh_or_at_once_when_told(tmp_path: Path, migrated_sqlite) -> None:
    path = tmp_path / "db.sqlite3"
    path.write_bytes(migrated_sqlite.read_bytes())
    database = Database(f"sqlite:///{path}")
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump(FILE), encoding="utf-8")
    now = [0.0]
    source = RuleSource(rules_file, lambda: database, refresh_seconds=20, clock=lambda: now[0])
    settings = make_settings()
    try:
        assert not source.current().for_channel("C0SUPPORT", settings).quote_private
        with database.session() as session:  # another process's change
            save_override(session, "C0SUPPORT", {"quote_private": True}, "U0ADMIN")
        now[0] = 19.0
        assert not source.current().for_channel("C0SUPPORT", settings).quote_private  # still the copy read
        now[0] = 20.0
        assert source.current().for_channel("C0SUPPORT", settings).quote_private
        with database.session() as session:
            save_override(session, "C0SUPPORT", {}, "U0ADMIN")  # nothing left: the row goes
            assert override_of(session, "C0SUPPORT") == {}
        source.forget()
        assert not source.current().for_channel("C0SUPPORT", settings).quote_private
        # peek (the bot's acknowledgement path) never waits: a due read runs in the background.
        with database.session() as session:
            save_override(session, "C0SUPPORT", {"quote_private": True}, "U0ADMIN")
        now[0] = 100.0
        assert not source.peek().for_channel("C0SUPPORT", settings).quote_private  # the copy in use, at once
        wait_for(lambda: source.peek().for_channel("C0SUPPORT", settings).quote_private, timeout=10, what="the read")
        with database.session() as session:
            save_override(session, "C0SUPPORT", {}, "U0ADMIN")
        # The file edited: read again; broken after: the last good one stays.
        rules_file.write_text(
            yaml.safe_dump({"channels": {"C0SUPPORT": {"quote_private": True, "alert_channel": "C"}}})
        )
        source.forget()
        assert source.current().for_channel("C0SUPPORT", settings).quote_private
        rules_file.write_text("channels: {C0SUPPORT: {threshold: 99}}\n")
        source.forget()
        assert source.current().for_channel("C0SUPPORT", settings).quote_private
        assert source.file_rules().own("C0SUPPORT") is not None
    finally:
        database.dispose()
