"""A person's new message is logged by the bot's hand-on itself (bot.hand_on), in the round trip that deduplicates
it: no task, no worker. Whatever a worker must decide still goes to one: a message a watch could concern (an
outcome), one whose ts is logged already, an edit, an upload, one written by a learnt bot user. The bot is served
in-process over real HTTP on real Redis; the inline worker is paused, so what was handed on stays noted."""

from __future__ import annotations

import time

from capture.conversation_log import ConversationLog
from capture.directory import BotUsers
from capture.outcome_watches import WatchBoard
from capture.outcomes import Watch
from capture.pairing import Author, logged_message
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET

C = "C_SUPPORT"


def post(bot: ServedBot, event: dict, event_id: str) -> None:
    with bot.worker.paused():
        assert sr.post(bot.url, sr.envelope(event, event_id=event_id), SECRET).status_code == 200


def conversation(bot: ServedBot) -> ConversationLog:
    return ConversationLog(bot.runtime.redis, bot.settings.question_ttl_seconds)


def test_a_persons_new_message_is_logged_without_a_task(bot: ServedBot) -> None:
    post(bot, sr.human_message(C, sr.next_ts(), "Warm-up"), "EvWARM")  # Bolt's listener: relmon's identity learnt
    question = sr.human_message(C, sr.next_ts(), "How do I export my data?")
    post(bot, question, "EvQUESTION")
    logged = conversation(bot).get(C, question["ts"])
    assert logged is not None
    assert (logged.author, logged.user, logged.content["text"]) == (Author.HUMAN, "U_ASKER", question["text"])
    assert set(bot.notes()) == set()
    # Indexed as the worker's capture indexes it: the channel's top level and the asker's own.
    assert question["ts"].encode() in bot.runtime.redis.zrange(f"relmon:top:{C}", 0, -1)
    assert bot.runtime.redis.zrange(f"relmon:top:{C}:by:U_ASKER", -1, -1) == [question["ts"].encode()]


def test_a_retried_delivery_of_a_logged_message_changes_nothing(bot: ServedBot) -> None:
    question = sr.human_message(C, sr.next_ts(), "How do I export my data?")
    post(bot, question, "EvSAME")
    bot.runtime.redis.delete(conversation(bot).msg_key(C, question["ts"]))  # a later write would show
    post(bot, question, "EvSAME")
    assert conversation(bot).get(C, question["ts"]) is None
    assert set(bot.notes()) == set()


def test_a_message_a_watch_could_concern_goes_to_a_worker(bot: ServedBot) -> None:
    answer_ts = sr.next_ts()
    watch = Watch(pair_id=7, answer_ts=answer_ts, thread_key=answer_ts, asker="U_ASKER", closes_at=time.time() + 600)
    WatchBoard(bot.runtime.redis).add(C, watch)
    post(bot, sr.human_message(C, sr.next_ts(), "Thanks, that worked", thread_ts=answer_ts), "EvREPLY")
    post(bot, sr.human_message(C, sr.next_ts(), "One more question"), "EvASKER")
    assert set(bot.notes()) == {"EvREPLY", "EvASKER"}


def test_a_message_whose_ts_is_logged_already_goes_to_a_worker(bot: ServedBot) -> None:
    """A deletion that came before the message itself left a tombstone: the worker decides (it keeps it deleted)."""
    question = sr.human_message(C, sr.next_ts(), "A question deleted at once")
    conversation(bot).mark_deleted(C, question["ts"], fallback=logged_message(question, Author.HUMAN))
    post(bot, question, "EvLATE")
    assert set(bot.notes()) == {"EvLATE"}
    assert conversation(bot).get(C, question["ts"]).deleted


def test_a_learnt_bot_users_message_goes_to_a_worker(bot: ServedBot) -> None:
    bot.runtime.redis.hset(BotUsers.KEY, "B_SUPPORT", "U_SUPPORT_BOT")
    post(bot, sr.human_message(C, sr.next_ts(), "Posted as the bot's user", user="U_SUPPORT_BOT"), "EvBOTUSER")
    assert set(bot.notes()) == {"EvBOTUSER"}


def test_a_persons_message_that_is_not_new_plain_text_goes_to_a_worker(bot: ServedBot) -> None:
    question = sr.human_message(C, sr.next_ts(), "How do I export?")
    post(bot, question, "EvFIRST")
    post(bot, sr.message_changed(question, "How do I export to CSV?"), "EvEDIT")
    upload = dict(sr.human_message(C, sr.next_ts(), "Here is the log"), files=[{"id": "F1", "name": "log.txt"}])
    post(bot, upload, "EvUPLOAD")
    reply = sr.human_message(C, sr.next_ts(), "Also here", thread_ts=question["ts"])
    broadcast = dict(reply, subtype="thread_broadcast")
    post(bot, broadcast, "EvBROADCAST")
    assert set(bot.notes()) == {"EvEDIT", "EvUPLOAD", "EvBROADCAST"}
