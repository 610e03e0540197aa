"""A person's message is captured by the same task as an answer: the bot only marks, notes and publishes its event
(bot.publishing), and the capture task is the conversation log's one writer (workers.live_capture). The bot is served
in-process over real HTTP on real Redis; with the inline worker paused, what was handed on stays noted and nothing
is logged until the task runs."""

from __future__ import annotations

from capture.conversation_log import ConversationLog
from capture.pairing import Author
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from workers.tasks import events

C = "C_SUPPORT"


def post(bot: ServedBot, event: dict, event_id: str) -> None:
    with bot.worker.paused():
        assert sr.post(bot.url, sr.envelope(event, event_id=event_id), SECRET).status_code == 200


def conversation(bot: ServedBot) -> ConversationLog:
    return ConversationLog(bot.runtime.redis, bot.settings.question_ttl_seconds)


def test_the_bot_logs_nothing_itself(bot: ServedBot) -> None:
    question = sr.human_message(C, sr.next_ts(), "How do I export my data?")
    post(bot, question, "EvQUESTION")
    assert conversation(bot).get(C, question["ts"]) is None
    assert set(bot.notes()) == {"EvQUESTION"}


def test_the_capture_task_logs_a_persons_message(bot: ServedBot) -> None:
    question = sr.human_message(C, sr.next_ts(), "How do I export my data?")
    post(bot, question, "EvQUESTION")
    [call] = bot.notes().values()
    events.capture_event.apply(kwargs=call.kwargs, task_id=call.id, throw=True)  # as a worker runs it
    logged = conversation(bot).get(C, question["ts"])
    assert (logged.author, logged.user, logged.content["text"]) == (Author.HUMAN, "U_ASKER", question["text"])
    assert bot.notes() == {}  # captured: the note is dropped
    # Indexed as every message is: the channel's top level and the asker's own.
    assert question["ts"].encode() in bot.runtime.redis.zrange(f"relmon:top:{C}", 0, -1)
    assert bot.runtime.redis.zrange(f"relmon:top:{C}:by:U_ASKER", -1, -1) == [question["ts"].encode()]


def test_a_retried_delivery_is_handed_on_once(bot: ServedBot) -> None:
    question = sr.human_message(C, sr.next_ts(), "How do I export my data?")
    post(bot, question, "EvSAME")
    post(bot, question, "EvSAME")  # Slack's retry
    assert len(bot.notes()) == 1
