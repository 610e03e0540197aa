"""What a window reads as it opens, on the test's Redis: the conversation log read in one transaction led by the
watch, only what came after the answer in its thread or from the asker; and the bot reads only the watches a
message could concern."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest
import redis

from capture.conversation_log import ConversationLog
from capture.outcome_watches import decoded_watches
from capture.pairing import Author, LoggedMessage
from tests.bot_harness import log_message, redis_calls, redis_calls_since
from tests.outcome_helpers import C


@dataclass
class AnsweredInAThread:
    """A channel's conversation log (on the test's Redis) holding a question at top level, the asker's next
    message, and the bot's answer in the question's thread; read as a window opens on that answer."""

    client: redis.Redis
    log: ConversationLog
    now: float
    root: LoggedMessage
    answer: LoggedMessage
    watched: list[object] = field(default_factory=list)

    def logged(self, at: float, **kwargs) -> LoggedMessage:
        return log_message(self.log, C, at, **kwargs)

    def since_led_by_the_watch(
        self, answer: LoggedMessage | None = None, asker: str | None = "U_ASKER"
    ) -> tuple[list[LoggedMessage], dict[str, int]]:
        """As a window opens on `answer` (the thread's, by default) (workers.outcome_watching): the watch's
        command first, then the index reads. What was read, and the Redis commands it took."""
        calls_before = redis_calls(self.client)
        pipe = self.client.pipeline(transaction=True)
        pipe.set("relmon:test:watch", "up")
        self.watched.append(pipe)
        count = self.log.queue_since(pipe, C, answer or self.answer, until=self.now + 1, asker=asker)
        since = self.log.since_from(C, pipe.execute()[-count:])
        return since, redis_calls_since(self.client, calls_before)

    def later(self) -> tuple[LoggedMessage, list[LoggedMessage]]:
        """What comes after the answer: a reply in its thread, the asker's two top-level messages, someone else's
        three, a message after the window's end. Returns the reply and the asker's top-level messages."""
        reply = self.logged(self.now - 20, thread=self.root.ts)
        later = [self.logged(self.now - 10), self.logged(self.now - 5)]  # top level, after
        for ago in (9, 8, 7):  # someone else's top-level messages, after the answer too
            message = LoggedMessage(ts=f"{self.now - ago:.6f}", thread_ts=None, author=Author.HUMAN, user="U_OTHER")
            self.log.record(C, message)
        self.logged(self.now + 100)  # after the window's end
        return reply, later


@pytest.fixture
def answered_in_a_thread(redis_url) -> AnsweredInAThread:
    client = redis.Redis.from_url(redis_url)
    log = ConversationLog(client, 3600)
    now = time.time()
    root = log_message(log, C, now - 50)
    log_message(log, C, now - 40)  # top level, before the answer
    answer = log_message(log, C, now - 30, thread=root.ts, author=Author.MONITORED_BOT)
    return AnsweredInAThread(client, log, now, root, answer)


def test_the_windows_read_of_the_log_is_one_transaction_led_by_the_watch(answered_in_a_thread) -> None:
    """As a window opens on an answer in a thread, the log is read in one transaction led by the commands queued
    first (the watch); none of the messages when nothing came after the answer."""
    thread = answered_in_a_thread
    since, made = thread.since_led_by_the_watch()
    assert since == []
    # Nothing came after the answer: one transaction (the watch, the thread's index, the asker's index), no MGET.
    assert made == {"multi": 1, "set": 1, "zrangebyscore": 2, "exec": 1}
    assert thread.client.get("relmon:test:watch") == b"up" and thread.watched


def test_the_windows_read_of_what_came_after_the_answer_takes_one_mget_more(answered_in_a_thread) -> None:
    thread = answered_in_a_thread
    thread.later()
    _, made = thread.since_led_by_the_watch()
    assert made == {"multi": 1, "set": 1, "zrangebyscore": 2, "exec": 1, "mget": 1}


def test_the_windows_read_of_the_log_reads_only_what_came_after_in_the_thread_or_from_the_asker(
    answered_in_a_thread,
) -> None:
    """The thread's later messages and the asker's later top-level ones up to the window's end. Other people's
    top-level messages, and anything before the answer, are not read at all: in a busy channel that read grew
    with the channel's traffic."""
    thread = answered_in_a_thread
    reply, later = thread.later()
    since, _ = thread.since_led_by_the_watch()
    assert [m.ts for m in since] == [reply.ts] + [m.ts for m in later]


def test_the_window_of_a_top_level_answer_reads_no_top_level_message_but_the_askers(answered_in_a_thread) -> None:
    thread = answered_in_a_thread
    _, later = thread.later()
    # An answer at top level: its own thread, and nothing of the channel's top level but the asker's.
    top_answer = thread.logged(thread.now - 6, author=Author.MONITORED_BOT)
    read, _ = thread.since_led_by_the_watch(top_answer)
    assert [m.ts for m in read] == [later[1].ts]


def test_the_window_of_an_answer_without_an_asker_reads_only_its_thread(answered_in_a_thread) -> None:
    thread = answered_in_a_thread
    reply, _ = thread.later()
    read, made = thread.since_led_by_the_watch(asker=None)
    assert [m.ts for m in read] == [reply.ts]
    assert made["zrangebyscore"] == 1


def test_the_bot_reads_only_the_watches_a_message_could_concern(redis_url) -> None:
    """300 open windows in the channel: a reply reads its thread's watches, a top-level message its writer's, a
    reaction the one answer's; what the rule then picks is the same as from every watch of the channel."""
    import redis as redis_client

    from capture.outcome_watches import WatchBoard
    from capture.outcomes import Watch, watching
    from capture.pairing import Author

    board = WatchBoard(redis_client.Redis.from_url(redis_url))
    now = time.time()
    watches = [
        Watch(n, f"{now - 300 + n:.6f}", f"{now - 400 + n // 3:.6f}", f"U{n % 50:03d}", now + 600, parts=(f"p{n}",))
        for n in range(300)
    ]
    pipe = board.redis.pipeline(transaction=True)  # as windows open (workers.outcome_watching)
    for watch in watches:
        board.queue_add(pipe, C, watch)
    pipe.execute()
    reply = LoggedMessage(ts=f"{now:.6f}", thread_ts=watches[7].thread_key, author=Author.HUMAN, user="U999")
    top = LoggedMessage(ts=f"{now:.6f}", thread_ts=None, author=Author.HUMAN, user="U007")
    for message, expected_reads in ((reply, 3), (top, 6)):
        pipe = board.redis.pipeline()
        pipe.hvals(board.candidates_key(C, message))  # as the capture reads them, beside its log write
        read = decoded_watches(pipe.execute()[0])
        assert len(read) == expected_reads  # the thread's three answers; U007's six
        assert watching(read, message, now) == watching(watches, message, now)
    assert board.of_answer(C, "p42").pair_id == 42 and board.of_answer(C, watches[42].answer_ts).pair_id == 42
    board.remove(C, 42, thread_key=watches[42].thread_key, asker="U042", answer_ts=watches[42].answer_ts)
    assert board.of_answer(C, watches[42].answer_ts) is None
    assert 42 not in {w.pair_id for w in board.of_asker(C, "U042")}
