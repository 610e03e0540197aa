"""Pairing rules as a table: for a set of logged messages, which answer root, parts and question."""

from __future__ import annotations

import itertools
import random

import pytest

from capture.pairing import (
    Author,
    Identity,
    LoggedMessage,
    author_of,
    channel_ignore_reason,
    is_monitored_bot,
    logged_message,
    message_of,
    resolve,
)
from store.rules import ChannelRule, ChannelRules
from tests import slack_requests as sr
from tests.builders import make_settings

H, B, X = Author.HUMAN, Author.MONITORED_BOT, Author.OTHER  # X: another bot
WINDOW = 600


def m(ts: float, author: Author, thread: float | None = None, *, deleted: bool = False) -> LoggedMessage:
    """A logged message at `ts` seconds; `thread` is its root's ts for replies."""
    return LoggedMessage(
        ts=f"{ts:.6f}", thread_ts=None if thread is None else f"{thread:.6f}", author=author, deleted=deleted
    )


def t(ts: float) -> str:
    return f"{ts:.6f}"


# (case, messages, answer ts, expected status, expected question ts, expected parts)
CASES = [
    ("thread reply answers the root", [m(1, H), m(2, B, 1)], 2, "pending", 1, [2]),
    (
        "thread reply answers the latest human before it",
        [m(1, H), m(2, B, 1), m(3, H, 1), m(4, B, 1)],
        4,
        "pending",
        3,
        [4],
    ),
    ("a later human message is not the question", [m(1, H), m(2, B, 1), m(3, H, 1)], 2, "pending", 1, [2]),
    ("top level within the window", [m(1000, H), m(1100, B)], 1100, "pending", 1000, [1100]),
    ("top level picks the latest human", [m(1000, H), m(1050, H), m(1100, B)], 1100, "pending", 1050, [1100]),
    (
        "top level outside the window",
        [m(1000, H), m(1000 + WINDOW + 1, B)],
        1000 + WINDOW + 1,
        "no_question",
        None,
        None,
    ),
    ("top level ignores thread replies", [m(1000, H), m(1050, H, 1000), m(1100, B)], 1100, "pending", 1000, [1100]),
    ("top level ignores other bots", [m(1000, X), m(1100, B)], 1100, "no_question", None, None),
    ("thread broadcast is a thread reply", [m(1, H), m(5000, B, 1)], 5000, "pending", 1, [5000]),
    ("several bot messages: one answer", [m(1, H), m(2, B, 1), m(3, B, 1), m(4, B, 1)], 2, "pending", 1, [2, 3, 4]),
    ("a later part is merged into the first", [m(1, H), m(2, B, 1), m(3, B, 1)], 3, "merged", None, [2, 3]),
    (
        "a human reply splits the runs",
        [m(1, H), m(2, B, 1), m(3, H, 1), m(4, B, 1), m(5, B, 1)],
        4,
        "pending",
        3,
        [4, 5],
    ),
    ("an other bot splits the runs", [m(1, H), m(2, B, 1), m(3, X, 1), m(4, B, 1)], 4, "pending", 1, [4]),
    ("two top-level bot messages stay apart", [m(1000, H), m(1001, B), m(1002, B)], 1002, "pending", 1000, [1002]),
    (
        "a top-level answer and its own replies are one answer",
        [m(1000, H), m(1001, B), m(1002, B, 1001)],
        1001,
        "pending",
        1000,
        [1001, 1002],
    ),
    ("deleted answer", [m(1, H), m(2, B, 1, deleted=True)], 2, "deleted", None, None),
    ("deleted question is no question", [m(1, H, deleted=True), m(2, B, 1)], 2, "no_question", None, None),
    (
        "deleting an earlier part makes this the root",
        [m(1, H), m(2, B, 1, deleted=True), m(3, B, 1)],
        3,
        "pending",
        1,
        [3],
    ),
    ("no human in the thread", [m(1, B), m(2, B, 1)], 1, "no_question", None, None),
]


@pytest.mark.parametrize(
    ("case", "messages", "answer", "status", "question", "parts"), CASES, ids=[c[0] for c in CASES]
)
def test_resolution(case, messages, answer, status, question, parts) -> None:
    resolution = resolve(t(answer), messages, WINDOW)
    assert resolution is not None
    assert resolution.status == status
    assert (resolution.question.ts if resolution.question else None) == (t(question) if question else None)
    if parts is not None:
        assert [p.ts for p in resolution.parts] == [t(p) for p in parts]


@pytest.mark.parametrize(
    ("case", "messages", "answer", "status", "question", "parts"), CASES, ids=[c[0] for c in CASES]
)
def test_arrival_order_does_not_matter(case, messages, answer, status, question, parts) -> None:
    expected = resolve(t(answer), messages, WINDOW)
    orders = list(itertools.permutations(messages)) if len(messages) <= 5 else []
    orders += [random.Random(seed).sample(messages, len(messages)) for seed in range(5)]
    for order in orders:
        assert resolve(t(answer), order, WINDOW) == expected


def test_answer_not_logged() -> None:
    assert resolve(t(9), [m(1, H)], WINDOW) is None


# Who wrote it ------------------------------------------------------------------------------------

OWN = Identity(user_id="U_RELMON", bot_id="B_RELMON", app_id="A_RELMON")
MONITORED = ["B_SUPPORT"]
RELMON_MESSAGE = sr.bot_message("C1", "1.4", "x", bot_id="B_RELMON", app_id="A_RELMON", user="U_RELMON")


@pytest.mark.parametrize(
    ("event", "monitored", "expected"),
    [
        (sr.human_message("C1", "1.1", "hi"), MONITORED, Author.HUMAN),
        (sr.bot_message("C1", "1.2", "answer"), ["B_SUPPORT"], Author.MONITORED_BOT),
        (sr.bot_message("C1", "1.2", "answer"), ["A_SUPPORT"], Author.MONITORED_BOT),  # by app ID
        (sr.bot_message("C1", "1.2", "answer"), ["U_SUPPORT"], Author.MONITORED_BOT),  # by bot user ID
        (sr.bot_message("C1", "1.2", "x", bot_id="B_OTHER", app_id="A_OTHER", user="U_OTHER"), MONITORED, Author.OTHER),
        (sr.classic_bot_message("C1", "1.3", "x", bot_id="B_SUPPORT"), MONITORED, Author.MONITORED_BOT),
        (sr.classic_bot_message("C1", "1.3", "x"), MONITORED, Author.OTHER),
        (
            RELMON_MESSAGE,
            MONITORED,
            Author.OWN,
        ),
        # relmon is never judged, even if someone lists it as monitored.
        (
            RELMON_MESSAGE,
            ["B_RELMON"],
            Author.OWN,
        ),
        (
            sr.human_message("C1", "1.5", "joined", subtype="channel_join"),
            MONITORED,
            Author.OTHER,
        ),  # a notice: nobody's words
    ],
)
def test_author_of(event: dict, monitored: list[str], expected: Author) -> None:
    assert author_of(event, monitored, OWN) == expected


def test_a_human_is_not_monitored_by_bot_ids() -> None:
    assert not is_monitored_bot(sr.human_message("C1", "1.1", "hi", user="U_ASKER"), ["B_SUPPORT", "A_SUPPORT"])


def test_edit_is_read_from_the_new_message() -> None:
    original = sr.bot_message("C1", "1.2", "draft")
    changed = sr.message_changed(original, "final")
    inner = message_of(changed)
    assert inner["text"] == "final"
    assert is_monitored_bot(inner, MONITORED)
    assert logged_message(inner, Author.MONITORED_BOT).content == {"text": "final"}


# Which channels --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channel", "config", "rules", "expected"),
    [
        ("C_SUPPORT", {}, ChannelRules(), None),
        ("C_ALERTS", {}, ChannelRules(), "relmon_channel"),
        ("C_DIGEST", {"digest_channel_setting": "C_DIGEST"}, ChannelRules(), "relmon_channel"),
        ("C_A2", {}, ChannelRules(channels={"C_X": ChannelRule(alert_channel="C_A2")}), "relmon_channel"),
        ("C_OTHER", {"watched_channels": ["C_SUPPORT"]}, ChannelRules(), "unwatched"),
        ("C_SUPPORT", {"watched_channels": ["C_SUPPORT"]}, ChannelRules(), None),
        ("C_SUPPORT", {}, ChannelRules(channels={"C_SUPPORT": ChannelRule(watch=False)}), "unwatched"),
        ("D123", {}, ChannelRules(), "direct_message"),
        (None, {}, ChannelRules(), "no_channel"),
    ],
)
def test_channel_ignore_reason(channel, config, rules, expected) -> None:
    assert channel_ignore_reason(channel, make_settings(**config), rules) == expected
