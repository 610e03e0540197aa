"""The Redis round trips of the worker's capture (workers.pairs.capture_context, capture.conversation_log): a message
read with what is around it in two round trips, the stored mark in the first, and a top-level answer's question read
back a batch at a time, not the whole window."""

from __future__ import annotations

import time
from functools import partial
from typing import NamedTuple

import pytest
import redis

from capture.conversation_log import ConversationLog
from capture.pairing import Author, LoggedMessage
from tests.bot_harness import log_message, redis_calls, redis_calls_since
from tests.capture_helpers import C
from workers.pairs.capture_context import CaptureStore, Held


class LoggedThread(NamedTuple):
    """A question, the bot's reply in its thread and a later top-level answer of the bot's, logged in C, with the
    capture's store for C."""

    client: redis.Redis
    log: ConversationLog
    store: CaptureStore
    now: float
    question: LoggedMessage
    reply: LoggedMessage
    top: LoggedMessage


@pytest.fixture
def logged_thread(make_bot) -> LoggedThread:
    bot = make_bot()
    client = bot.runtime.redis
    log = ConversationLog(client, 3600)
    store = CaptureStore(bot.runtime, C, channel_type="channel", ext_shared=False)
    bot.runtime.known_channels.flags(C, "channel", False)  # knows the channel's sharing, as a running worker does
    now, logged = time.time(), partial(log_message, log, C)
    question = logged(now - 30)
    reply = logged(now - 20, thread=question.ts, author=Author.MONITORED_BOT)
    top = logged(now - 10, author=Author.MONITORED_BOT)
    return LoggedThread(client, log, store, now, question, reply, top)


def test_the_capture_reads_a_message_with_what_is_around_it_in_two_round_trips(logged_thread: LoggedThread) -> None:
    """`CaptureStore.load`: what `get` then `around` give, with the index reads and the stored mark's read sent
    beside the GET (placed by the task's thread_ts), then one MGET; read again when the log places the message
    elsewhere than its sender did."""
    client, log, store, _, question, reply, top = logged_thread
    for message, thread_ts, index_reads in ((reply, question.ts, 1), (top, None, 1), (reply, None, 2)):
        before = redis_calls(client)
        context = store.load(message.ts, thread_ts)
        made = {
            k: v - before.get(k, 0)
            for k, v in redis_calls(client).items()
            if k != "cmdstat_info" and v != before.get(k, 0)
        }
        assert context.message == log.get(C, message.ts) and context.held == Held()
        assert [m.ts for m in context.around] == [m.ts for m in log.around(C, message, 60)]
        # A pipeline (the message's GET, the mark's GET and the index reads) and an MGET; placed wrong, the thread's
        # index is read again.
        assert (made.get("get"), made["zrange"], made["mget"]) == (2, index_reads, 1)


def test_the_capture_finds_nothing_around_a_message_never_logged(logged_thread: LoggedThread) -> None:
    missing = logged_thread.store.load(f"{logged_thread.now - 5:.6f}", None)
    assert (missing.message, missing.around, missing.run) == (None, [], [])


def test_the_capture_reads_the_stored_mark_in_its_first_round_trip(logged_thread: LoggedThread) -> None:
    """The mark of what was last stored of the answer comes with the first round trip."""
    client, _, store, _, question, reply, _ = logged_thread
    store.keep(reply.ts, "abc", 7)
    before = redis_calls(client)
    context = store.load(reply.ts, question.ts)
    assert context.message == reply and context.held == Held("abc", 7)
    made = {k: v - before.get(k, 0) for k, v in redis_calls(client).items() if k != "cmdstat_info"}
    assert made.get("get") == 2 and made["mget"] == 1  # the message's GET and the mark's: still one pipeline


def test_the_settle_reads_a_message_with_what_is_around_it_in_two_round_trips(logged_thread: LoggedThread) -> None:
    """`get_around`: the capture's two round trips without the mark."""
    client, log, _, _, question, reply, top = logged_thread
    for message, thread_ts in ((reply, question.ts), (top, None)):
        before = redis_calls(client)
        found, around = log.get_around(C, message.ts, thread_ts, 60)
        made = redis_calls_since(client, before)
        assert made == {"get": 1, "zrange": 1, "mget": 1} | ({} if thread_ts else {"zrevrangebyscore": 1})
        assert found == message and [m.ts for m in around] == [m.ts for m in log.around(C, message, 60)]


def test_a_top_level_answer_reads_back_to_its_question_not_the_whole_window(redis_url) -> None:
    """In a busy channel a top-level answer's question is read from the newest top-level messages before it, a
    batch at a time, back to one that could be its question: not every message of the window (`around`)."""
    from capture.conversation_log import TOP_BATCH
    from capture.pairing import resolve

    client = redis.Redis.from_url(redis_url)
    log = ConversationLog(client, 3600)
    now = time.time()

    def top(at: float, author: Author, user: str = "U_ASKER", text: str = "hi") -> LoggedMessage:
        message = LoggedMessage(f"{at:.6f}", None, author, user=user, content={"text": text})
        log.record(C, message)
        return message

    for i in range(1000):  # an hour-old backlog of the channel's chatter, inside the window
        top(now - 500 + i * 0.1, Author.HUMAN, f"U{i}", f"question {i}")
    question = top(now - 390, Author.HUMAN, text="How do I export my data?")
    for i in range(150):  # then other bots' notices: none of them could be a question
        top(now - 380 + i, Author.OTHER, "U_OTHER_BOT")
    answer = top(now - 20, Author.MONITORED_BOT, "U_BOT", "Settings, then Export.")

    before = redis_calls(client)
    around = log.around(C, answer, 600)
    made = redis_calls_since(client, before)
    assert resolve(answer.ts, around, 600).question == question
    # Batches of 20, 80 and 320 top-level messages: the question is in the third; the backlog behind it is not read.
    assert made["zrevrangebyscore"] == 3 and made["mget"] == 3
    assert len([m for m in around if not m.in_thread]) == TOP_BATCH + 80 + 320

    late_question = top(now - 10, Author.HUMAN, text="And as CSV?")
    second = top(now - 5, Author.MONITORED_BOT, "U_BOT", "Choose CSV.")
    before = redis_calls(client)
    around = log.around(C, second, 600)
    assert resolve(second.ts, around, 600).question == late_question
    assert redis_calls_since(client, before) == {"zrange": 1, "zrevrangebyscore": 1, "mget": 1}
    assert len(around) <= TOP_BATCH
