"""The bot over real HTTP: which messages it captures (private channels flagged; other bots, relmon itself, the
alert channel and unwatched or muted channels ignored; classic monitored bots captured), and questions read from
Slack's history when they were not logged.

The WSGI app is served in-process; Redis, the database and the fake Slack are real servers. Settling is
run directly with `settle` (the settle task's body)."""

from __future__ import annotations

import time

import pytest

from capture.conversation_log import ConversationLog
from store.models import PairStatus
from tests import slack_requests as sr
from tests.alert_helpers import write_rules
from tests.bot_events import C, send, settle_all
from tests.bot_harness import ServedBot
from tests.fakes.slack_server import FakeSlack


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_user("U_ASKER", "ana", "Ana Diaz")
        fake.add_channel(C, "support", members=["U_ASKER", "U_RELMON"])
        fake.add_channel("G_PRIVATE", "secret", is_private=True, members=["U_ASKER", "U_RELMON"])
        yield fake


def test_private_channel_is_flagged(bot: ServedBot) -> None:
    q = sr.human_message("G_PRIVATE", sr.next_ts(), "secret question")
    send(bot, q)
    send(bot, sr.bot_message("G_PRIVATE", sr.next_ts(), "secret answer", thread_ts=q["ts"]))
    [pair] = bot.pairs()
    assert pair.channel_is_private is True


@pytest.mark.parametrize(
    ("event", "overrides"),
    [
        (sr.bot_message(C, "0", "other bot", bot_id="B_OTHER", app_id="A_OTHER", user="U_OTHER"), {}),
        (sr.classic_bot_message(C, "0", "classic other bot"), {}),
        (sr.bot_message(C, "0", "relmon itself", bot_id="B_RELMON", app_id="A_RELMON", user="U_RELMON"), {}),
        (sr.bot_message("C_ALERTS", "0", "in the alert channel"), {}),
        (sr.bot_message("C_ELSEWHERE", "0", "unwatched channel"), {"watched_channels": [C]}),
        (sr.bot_message("C_MUTED", "0", "watch false"), {"rules": {"channels": {"C_MUTED": {"watch": False}}}}),
    ],
    ids=["other bot", "classic bot", "relmon", "alert channel", "unwatched", "watch false"],
)
def test_ignored_messages_make_no_pair(make_bot, event: dict, overrides: dict, tmp_path) -> None:
    overrides = dict(overrides)  # the parameter is shared by the sqlite and postgres runs
    rules = overrides.pop("rules", None)
    if rules is not None:
        overrides["channel_rules_file"] = write_rules(tmp_path, rules)
    bot = make_bot(**overrides)
    channel = event["channel"]
    q = sr.human_message(channel, sr.next_ts(), "question")
    send(bot, q)
    send(bot, dict(event, ts=sr.next_ts(), event_ts=sr.next_ts(), thread_ts=q["ts"]))
    assert bot.pairs() == []


def test_classic_monitored_bot_is_captured(make_bot) -> None:
    bot = make_bot(monitored_bots=["B_CLASSIC"])
    q = sr.human_message(C, sr.next_ts(), "question")
    send(bot, q)
    send(bot, sr.classic_bot_message(C, sr.next_ts(), "classic answer", thread_ts=q["ts"]))
    [pair] = bot.pairs()
    assert pair.answer_text == "classic answer"


def test_question_from_history_when_not_logged(bot: ServedBot, slack: FakeSlack) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    slack.add_message(C, q_ts, user="U_ASKER", text="asked before relmon joined")
    slack.add_message(C, a_ts, text="answer", thread_ts=q_ts, bot_id="B_SUPPORT")
    send(bot, sr.bot_message(C, a_ts, "answer", thread_ts=q_ts))
    assert list(settle_all(bot).values()) == [PairStatus.PENDING]
    [pair] = bot.pairs()
    assert pair.question_text == "asked before relmon joined"
    assert len(slack.calls_to("conversations.replies")) == 1


def test_history_fallback_honours_retry_after(bot: ServedBot, slack: FakeSlack) -> None:
    """A 429 that outlasts slack_sdk's retries blocks further history calls until Retry-After passes."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    slack.add_message(C, q_ts, user="U_ASKER", text="old question")
    slack.rate_limit("conversations.replies", times=10, retry_after=30)  # long enough to still stand when checked
    send(bot, sr.bot_message(C, a_ts, "answer", thread_ts=q_ts))
    bot.runtime.slack.retry_handlers.clear()  # fail fast on the 429 in this test
    assert list(settle_all(bot).values()) == [PairStatus.NO_QUESTION]
    calls = len(slack.calls_to("conversations.replies"))
    blocked = ConversationLog(bot.runtime.redis, 60).redis.get("relmon:history:blocked_until")
    assert blocked is not None and float(blocked) > time.time()
    assert calls == 1
