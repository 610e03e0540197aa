"""Live capture when the event does not say how private its channel is (no channel_type, no envelope flag): the
worker asks conversations.info, and a channel Slack cannot describe (a missing scope, an unknown channel) is
stored as private, as is one shared across workspaces or an organisation; one it describes as public is public.
A failed look-up is not remembered: the next capture asks again."""

from __future__ import annotations

import time

from capture.conversation_log import ConversationLog
from capture.pairing import Author, LoggedMessage
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.integration.test_capture_truth import send, settle_all
from workers.pairs.capturing import capture_answer_in


def capture_unannounced(bot: ServedBot, channel: str) -> tuple[bool, bool]:
    """A question and the bot's answer in `channel`, captured from a task that knows neither the channel's type
    nor whether it is shared; the stored pair's (channel_is_private, channel_is_ext_shared)."""
    log = ConversationLog(bot.runtime.redis, 3600)
    now = time.time()
    question = LoggedMessage(f"{now - 2:.6f}", None, Author.HUMAN, user="U_ASKER", content={"text": "Where?"})
    answer = LoggedMessage(f"{now - 1:.6f}", question.ts, Author.MONITORED_BOT, content={"text": "There."})
    for message in (question, answer):
        log.record(channel, message)
    assert capture_answer_in(bot.runtime, channel, answer.ts, thread_ts=question.ts) == "captured"
    [pair] = [p for p in bot.pairs() if p.channel_id == channel and p.answer_ts == answer.ts]
    return pair.channel_is_private, pair.channel_is_ext_shared


def test_a_channel_slack_describes_keeps_its_privacy(bot_keeping_settles: ServedBot, slack) -> None:
    slack.add_channel("C_GRID", "grid", members=["U_RELMON"], is_org_shared=True)
    slack.add_channel("C_CONNECT", "connect", members=["U_RELMON"], is_ext_shared=True)
    assert capture_unannounced(bot_keeping_settles, "C_SUPPORT") == (False, False)
    assert capture_unannounced(bot_keeping_settles, "C_GRID") == (True, True)
    assert capture_unannounced(bot_keeping_settles, "C_CONNECT") == (True, True)


def test_a_channel_slack_cannot_describe_is_private(bot_keeping_settles: ServedBot, slack) -> None:
    assert capture_unannounced(bot_keeping_settles, "C_UNKNOWN") == (True, False)  # channel_not_found
    slack.refuse("conversations.info", "missing_scope", times=1)
    assert capture_unannounced(bot_keeping_settles, "C_SUPPORT") == (True, False)


def test_a_channel_slack_could_not_describe_is_asked_about_again(bot_keeping_settles: ServedBot, slack) -> None:
    slack.refuse("conversations.info", "missing_scope", times=1)
    assert capture_unannounced(bot_keeping_settles, "C_SUPPORT") == (True, False)
    asked = len(slack.calls_to("conversations.info"))
    assert capture_unannounced(bot_keeping_settles, "C_SUPPORT") == (False, False)  # Slack answers now: public
    assert len(slack.calls_to("conversations.info")) == asked + 1


def test_an_org_shared_channel_is_found_on_the_live_path_asking_once(bot_keeping_settles: ServedBot, slack) -> None:
    """Signed events from an Enterprise Grid org-shared channel say only "public channel, not Slack Connect": the
    worker still learns it is shared (conversations.info, once per channel while cached) and stores it private."""
    slack.add_channel("C_GRID", "grid", members=["U_RELMON", "U_ASKER"], is_org_shared=True)
    for question in ("Where is my order?", "And my refund?"):
        q = sr.human_message("C_GRID", sr.next_ts(), question)
        send(bot_keeping_settles, q)
        send(bot_keeping_settles, sr.bot_message("C_GRID", sr.next_ts(), "Here.", thread_ts=q["ts"]))
    settle_all(bot_keeping_settles)
    pairs = [p for p in bot_keeping_settles.pairs() if p.channel_id == "C_GRID"]
    assert len(pairs) == 2 and all(p.channel_is_private and p.channel_is_ext_shared for p in pairs)
    assert [c["channel"] for c in slack.calls_to("conversations.info")].count("C_GRID") == 1
