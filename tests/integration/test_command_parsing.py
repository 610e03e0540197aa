"""The pure parts of /judge: Slack message links parsed, the command's text routed, a judge named after a link, a
channel referred to in `/judge stats`. Served through the bot: test_commands.py and the test_command_*.py modules."""

from __future__ import annotations

import pytest

from bot.listeners.commands import JudgeChoice, Route, chosen_judge, named_judge, route
from bot.permalinks import MessageLink, parse_message_link
from bot.stats import channel_reference
from tests.command_helpers import ANSWER_TS, LINK, QUESTION_TS, C


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (LINK, MessageLink(C, ANSWER_TS, QUESTION_TS)),
        (f"<{LINK}>", MessageLink(C, ANSWER_TS, QUESTION_TS)),
        (f"<{LINK}|a label>", MessageLink(C, ANSWER_TS, QUESTION_TS)),
        ("https://acme.slack.com/archives/C0123ABCD/p1712345678123456", MessageLink("C0123ABCD", ANSWER_TS)),
        ("see https://acme.enterprise.slack.com/archives/G01/p1712345678123456 ok", MessageLink("G01", ANSWER_TS)),
        ("https://acme.slack.com/archives/C0123ABCD", None),
        ("https://acme.slack.com/archives/C0123ABCD/p123", None),
        ("https://evil.example.com/archives/C0123ABCD/p1712345678123456", None),
        ("no link here", None),
    ],
)  # fmt: skip
def test_message_links(text, expected):
    assert parse_message_link(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", Route("modal")),
        ("   ", Route("modal")),
        ("help", Route("help")),
        ("HELP", Route("help")),
        ("stats", Route("stats", "")),
        ("stats <#C123|support>", Route("stats", "<#C123|support>")),
        ("digest", Route("digest", "")),
        (LINK, Route("link", LINK)),
        ("https://acme.slack.com/archives/C1", Route("bad_link")),
        ("https://example.com/x", Route("bad_link")),
        ("what is this", Route("unknown")),
    ],
)
def test_route(text, expected):
    assert route(text) == expected


def test_named_judge():
    assert named_judge(f"{LINK} relevancy") == "relevancy"
    assert named_judge(f"<{LINK}> Correctness") == "correctness"
    assert named_judge(LINK) is None


TEAM = ("relevancy", "correctness", "grounded", "refund_policy")


@pytest.mark.parametrize(
    ("after_link", "expected"),
    [
        ("--judge refund_policy", JudgeChoice(name="refund_policy")),
        ("--judge=refund_policy", JudgeChoice(name="refund_policy")),
        ("--JUDGE Relevancy", JudgeChoice(name="relevancy")),
        ("\u2014judge refund_policy", JudgeChoice(name="refund_policy")),  # "--" turned into a dash as typed
        ("refund_policy", JudgeChoice(name="refund_policy")),
        ("--judge refund", JudgeChoice(unknown="refund")),
        ("--judge=", JudgeChoice(unknown="")),
        ("--judge", JudgeChoice(unknown="")),
        ("please", JudgeChoice()),  # a word that is no judge's name, without --judge: the channel's judges
        ("", JudgeChoice()),
    ],
)
def test_chosen_judge(after_link, expected):
    assert chosen_judge(f"<{LINK}> {after_link}", TEAM) == expected


def test_channel_reference():
    assert channel_reference("<#C123ABC|support>") == ("C123ABC", None)
    assert channel_reference("<#C123ABC>") == ("C123ABC", None)
    assert channel_reference("C123ABCD") == ("C123ABCD", None)
    assert channel_reference("#Support") == (None, "support")
    assert channel_reference("") == (None, None)
