"""The worker's side of capture (workers.tasks.answers): tasks run again, out of order, at once, or after Redis
lost the log still leave one pair holding the answer's latest state, and never re-open an answer judged meanwhile.

The bot is served over HTTP as in test_bot_capture (its capture tasks run inline: tests.bot_harness.InlineWorker);
here the same task is also run directly, as a redelivered or late message would be."""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from typing import NamedTuple

import pytest
import redis

from capture import handoffs
from capture.conversation_log import ConversationLog, to_wire
from capture.pairing import Author, LoggedMessage
from common import celery_app, task_names
from common.celery_app import QUEUE_JUDGE
from store.judgments import set_pair_status
from store.models import Pair, PairStatus
from tests import slack_requests as sr
from tests import slack_shapes as ss
from tests.bot_harness import ServedBot, log_message, redis_calls, redis_calls_since
from tests.builders import SECRET
from tests.fakes.openai_server import FakeOpenAI
from workers.judging.queued import queued_handoffs
from workers.pairs import capturing
from workers.pairs.capture_context import CaptureStore, Held
from workers.pairs.capturing import capture_answer_in
from workers.pairs.settling import settle, settle_and_judge
from workers.sweeps import requeue_lost_captures
from workers.tasks import answers

C = "C_SUPPORT"


@pytest.fixture
def bot(make_bot, settles) -> ServedBot:
    return make_bot()


def send(bot: ServedBot, event: dict) -> None:
    assert sr.post(bot.url, sr.envelope(event), SECRET).status_code == 200


def run_again(bot: ServedBot, ts: str, thread_ts: str | None) -> str:
    return capture_answer_in(bot.runtime, C, ts, thread_ts=thread_ts, channel_type="channel", ext_shared=False)


def test_a_task_run_again_changes_nothing(bot: ServedBot, settles: list) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "How do I reset my password?"))
    send(bot, sr.bot_message(C, a_ts, "Open Settings, then Security.", thread_ts=q_ts))
    [pair] = bot.pairs()
    assert (pair.version, len(settles)) == (1, 1)
    assert run_again(bot, a_ts, q_ts) == "unchanged"  # redelivered after its worker died, say
    assert [p.version for p in bot.pairs()] == [1] and len(settles) == 1


def test_a_late_task_does_not_reopen_an_answer_judged_meanwhile(bot: ServedBot, settles: list) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "Where is my invoice?"))
    send(bot, sr.bot_message(C, a_ts, "Billing, then Invoices.", thread_ts=q_ts))
    [pair] = bot.pairs()
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    with bot.runtime.db.session() as session:
        set_pair_status(session, pair.id, PairStatus.JUDGED, only_from=[PairStatus.PENDING])
    assert run_again(bot, a_ts, q_ts) == "unchanged"
    [after] = bot.pairs()
    assert (after.status, after.version, after.rejudges or 0) == (PairStatus.JUDGED, 1, 0)


def test_tasks_out_of_order_store_the_streams_final_state(bot: ServedBot, settles: list) -> None:
    """The completion's task ran first, the opener's (sent earlier) later: both read the log, which holds the
    completion, so the pair settles at once and is never left waiting for a completion already handled."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "What changed in v2?"))
    opener = ss.stream_opener(C, a_ts, q_ts)
    send(bot, ss.stream_completion(opener, "v2 adds single sign-on."))
    send(bot, opener)  # the bot drops an opener after its completion (the log keeps the completion)
    assert run_again(bot, a_ts, q_ts) == "unchanged"  # the opener's task, had it been sent earlier and run late
    [pair] = bot.pairs()
    assert pair.answer_text == "v2 adds single sign-on."
    assert pair.status == PairStatus.PENDING and settles == []  # settled at once: a finished stream needs no wait


def test_the_bots_copy_is_used_when_redis_lost_the_log(bot: ServedBot, settles: list) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    answer = sr.bot_message(C, a_ts, "Restart the router.", thread_ts=q_ts)
    send(bot, sr.human_message(C, q_ts, "My internet is down"))
    send(bot, answer)
    log = ConversationLog(bot.runtime.redis, bot.settings.question_ttl_seconds)
    logged = to_wire(log.get(C, a_ts))
    bot.runtime.redis.flushdb()  # Redis restarted without its data between the bot's send and the worker
    assert run_again(bot, a_ts, q_ts) == "missing"  # a task without the copy has nothing to store
    kept = capture_answer_in(bot.runtime, C, a_ts, thread_ts=q_ts, channel_type="channel", logged=logged)
    assert kept == "captured"
    assert log.get(C, a_ts) is not None  # logged again, for the settle task to read
    [pair] = bot.pairs()
    assert (pair.answer_text, pair.version) == ("Restart the router.", 2)


def test_parts_captured_at_once_by_many_workers_make_one_answer(bot: ServedBot, settles: list) -> None:
    q_ts = sr.next_ts()
    parts = [sr.next_ts() for _ in range(4)]
    send(bot, sr.human_message(C, q_ts, "How do I export my data?"))
    for number, ts in enumerate(parts):
        send(bot, sr.bot_message(C, ts, f"Step {number + 1}.", thread_ts=q_ts))
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda ts=ts: results.append(run_again(bot, ts, q_ts))) for ts in parts * 3
    ]  # every part's task three times over, all at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 12 and set(results) == {"unchanged"}  # the bot's own runs stored the latest state
    live = [p for p in bot.pairs() if p.status not in (PairStatus.MERGED,)]
    [pair] = live
    assert pair.answer_ts == parts[0]
    assert pair.answer_text == "Step 1.\nStep 2.\nStep 3.\nStep 4."
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING


# A task message lost on the way ------------------------------------------------------------------------------


def test_a_stored_answer_leaves_no_handoff_behind(bot: ServedBot) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "Can I change my plan?"))
    send(bot, sr.bot_message(C, a_ts, "Yes, under Billing.", thread_ts=q_ts))
    assert handoffs.overdue(bot.runtime.redis, noted_before=time.time() + 1, now=time.time(), limit=10) == {}


def test_a_lost_capture_task_is_sent_again_once_its_lease_is_over(bot: ServedBot, monkeypatch) -> None:
    """The bot noted the handoff and sent the task, but the message vanished (kombu's delivery window): the
    orphan check sends it again, once, and only for handoffs with no message queued or held."""
    redis = bot.runtime.redis
    lost = {"channel": C, "ts": sr.next_ts(), "handoff": "lost-one"}
    waiting = {"channel": C, "ts": sr.next_ts(), "handoff": "still-queued"}
    pipe = redis.pipeline()
    handoffs.note(pipe, "lost-one", lost, now=time.time() - 120)
    handoffs.note(pipe, "still-queued", waiting, now=time.time() - 120)
    pipe.execute()
    celery_app.celery.send_task(task_names.CAPTURE_ANSWER, kwargs=waiting)  # a real message, waiting on the queue
    assert queued_handoffs(redis, QUEUE_JUDGE) == {"still-queued"}
    sent: list[dict] = []
    monkeypatch.setattr(celery_app.celery, "send_task", lambda name, kwargs=None, **_: sent.append(kwargs))
    assert requeue_lost_captures(bot.runtime, time.time(), lease_seconds=30) == 1
    assert sent == [lost]
    assert requeue_lost_captures(bot.runtime, time.time() - 119, lease_seconds=30) == 0  # within its lease: waits


def test_an_event_whose_task_was_lost_is_captured_when_the_orphan_check_sends_it_again(bot: ServedBot) -> None:
    """The bot logged the question and marked, noted and sent the answer's event (bot.hand_on), but the message
    vanished: the orphan check sends `capture_event` again from the note, the worker captures it, and the note is
    gone."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    with bot.worker.paused():
        send(bot, sr.human_message(C, q_ts, "Is there an API?"))
        send(bot, sr.bot_message(C, a_ts, "Yes: see the developer docs.", thread_ts=q_ts))
    bot.runtime.redis.delete(QUEUE_JUDGE)  # the answer's message vanishes on the way
    assert bot.pairs() == []
    assert requeue_lost_captures(bot.runtime, time.time() + 60, lease_seconds=30) == 1
    [pair] = bot.pairs()
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    [pair] = bot.pairs()
    assert (pair.answer_ts, pair.question_ts, pair.question_text) == (a_ts, q_ts, "Is there an API?")
    assert handoffs.overdue(bot.runtime.redis, noted_before=time.time() + 60, now=time.time(), limit=10) == {}


def resent_once_stored(bot: ServedBot) -> str:
    """A lost capture task sent again (its note two minutes old) after the bot's own handoff stored the answer:
    what the task did."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "Is there a dark mode?"))
    answer = sr.bot_message(C, a_ts, "Yes: Settings, Appearance.", thread_ts=q_ts)
    kwargs = {"channel": C, "ts": a_ts, "thread_ts": q_ts, "handoff": "h1"}
    pipe = bot.runtime.redis.pipeline()
    handoffs.note(pipe, "h1", kwargs, now=time.time() - 120)
    pipe.execute()
    send(bot, answer)  # logged and stored by the bot's own handoff; the lost one's note is still there
    return answers.capture_answer.run(**kwargs)


def test_the_resent_task_leaves_the_stored_answer_as_it_is(bot: ServedBot) -> None:
    assert resent_once_stored(bot) == "unchanged"
    assert [p.version for p in bot.pairs()] == [1]


def test_the_resent_task_clears_its_note(bot: ServedBot) -> None:
    resent_once_stored(bot)
    assert "h1" not in handoffs.overdue(bot.runtime.redis, noted_before=time.time(), now=time.time(), limit=10)


def test_the_task_messages_headers_name_the_answer_never_its_words(bot: ServedBot) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "Why was I charged twice?"))
    send(bot, sr.bot_message(C, a_ts, "Refunds for duplicate charges take five days.", thread_ts=q_ts))
    # The bot's messages (capture_event): the event's envelope is their body; the headers name where it is.
    [raw] = [m for m in bot.runtime.redis.lrange(QUEUE_JUDGE, 0, -1) if a_ts in json.loads(m)["headers"]["kwargsrepr"]]
    headers = json.loads(raw)["headers"]
    assert a_ts in headers["kwargsrepr"] and "duplicate charges" not in json.dumps(headers)


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, list, dict, float | None]]:
    """The tasks sent (name, args, kwargs, countdown), as well as queued."""
    calls: list[tuple[str, list, dict, float | None]] = []
    original = celery_app.celery.send_task

    def record(name, args=None, kwargs=None, countdown=None, **options):
        calls.append((name, list(args or []), dict(kwargs or {}), countdown))
        return original(name, args=args, kwargs=kwargs, countdown=countdown, **options)

    monkeypatch.setattr(celery_app.celery, "send_task", record)
    return calls


def judge_tasks(sent: list) -> list[tuple[list, dict, float | None]]:
    return [(args, kwargs, countdown) for name, args, kwargs, countdown in sent if name == task_names.JUDGE_PAIR]


def finished_stream(bot: ServedBot, question: str, answer: str) -> tuple[str, str]:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, question))
    send(bot, ss.stream_completion(ss.stream_opener(C, a_ts, q_ts), answer))
    return q_ts, a_ts


def test_an_answer_settled_at_once_is_judged_by_its_capture_task(make_bot, sent: list) -> None:
    """No quiet time to wait: the capture task settles the answer and judges it itself, no judge_pair task sent."""
    with FakeOpenAI() as llm:
        bot = make_bot(openai_base_url=llm.base_url)
        finished_stream(bot, "How do I export my data?", "Settings, then Export, then Download.")
        [pair] = bot.pairs()
        assert pair.status == PairStatus.JUDGED
        assert len(llm.requests) == 1 and judge_tasks(sent) == []


def settling_pair(bot: ServedBot) -> Pair:
    """An answer in its question's thread, captured and waiting out its quiet time."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "How do I export my data?"))
    send(bot, sr.bot_message(C, a_ts, "Settings, then Export, then Download.", thread_ts=q_ts))
    [pair] = bot.pairs()
    return pair


def test_the_settle_task_judges_its_pair_itself(make_bot, sent: list) -> None:
    """After the quiet time the settle task settles the answer and judges it in the same run: no judge_pair task
    (one task fewer per answer)."""
    with FakeOpenAI() as llm:
        bot = make_bot(openai_base_url=llm.base_url)
        pair = settling_pair(bot)
        assert pair.status == PairStatus.SETTLING
        assert settle_and_judge(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
        [pair] = bot.pairs()
        assert pair.status == PairStatus.JUDGED
        assert len(llm.requests) == 1 and judge_tasks(sent) == []


def test_a_replayed_settle_task_hands_its_judged_pair_to_judge_pair(make_bot, sent: list) -> None:
    """The replay of a settle task that judged its pair (a redelivery or a retry) finds the pair judged and sends
    judge_pair, resumed, to finish whatever the earlier run left (its follow-ups)."""
    with FakeOpenAI() as llm:
        bot = make_bot(openai_base_url=llm.base_url)
        first = settling_pair(bot)
        settle_and_judge(bot.runtime, first.id, first.version)  # the run that judged it
        [pair] = bot.pairs()
        assert settle_and_judge(bot.runtime, pair.id, pair.version) == f"skipped:{PairStatus.JUDGED}"
        assert judge_tasks(sent) == []  # a second run that is no replay sends nothing
        assert settle_and_judge(bot.runtime, pair.id, pair.version, replayed=True) == "resumed"
        assert judge_tasks(sent) == [([pair.id], {"resumed": True}, None)] and len(llm.requests) == 1


def test_a_transient_llm_error_in_the_capture_task_is_retried_by_a_judge_task(make_bot, sent: list) -> None:
    bot = make_bot()  # its LLM endpoint refuses connections: a transient error
    finished_stream(bot, "How do I export my data?", "Settings, then Export, then Download.")
    [pair] = bot.pairs()
    assert pair.status == PairStatus.PENDING
    [(args, kwargs, countdown)] = judge_tasks(sent)
    assert args == [pair.id] and kwargs.get("llm_attempts") == 1 and countdown and countdown > 0


def test_any_other_failure_in_the_capture_tasks_judging_hands_the_pair_to_judge_pair(
    make_bot, sent: list, monkeypatch
) -> None:
    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug in judging")

    monkeypatch.setattr("workers.judging.run.find_cached_many", broken)
    bot = make_bot()
    finished_stream(bot, "How do I export my data?", "Settings, then Export, then Download.")
    [pair] = bot.pairs()
    assert pair.status == PairStatus.PENDING  # stored and settled: only its judging is left, to judge_pair
    assert judge_tasks(sent) == [([pair.id], {"resumed": True}, None)]


def test_a_redelivered_capture_task_hands_its_stored_answer_to_judge_pair(make_bot, sent: list) -> None:
    """Its first run may have died while judging the answer: the replay changes nothing, but judge_pair (resumed)
    finishes whatever that run left. A replay that is no redelivery sends nothing."""
    bot = make_bot()
    q_ts, a_ts = finished_stream(bot, "How do I export my data?", "Settings, then Export, then Download.")
    [pair] = bot.pairs()
    sent.clear()
    assert run_again(bot, a_ts, q_ts) == "unchanged" and judge_tasks(sent) == []
    replay = capture_answer_in(
        bot.runtime, C, a_ts, thread_ts=q_ts, channel_type="channel", ext_shared=False, redelivered=True
    )
    assert replay == "unchanged"
    assert judge_tasks(sent) == [([pair.id], {"resumed": True}, None)]


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
    store.keep(reply.ts, "abc", 7, None)
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


@pytest.mark.parametrize("fresh", [False, True], ids=["logged", "fresh"])
def test_an_answer_that_settles_at_once_is_captured_in_six_redis_round_trips(
    make_bot, monkeypatch, fresh: bool
) -> None:
    """The capture task's Redis round trips, each one counted (a pipeline is one): the conversation's lock; the
    message with its index reads and the mark of what was last stored of it; the MGET of its thread; the outcome
    window's watch with its reads of what came after the answer (no MGET: nothing came); the stored mark with the
    bot's note of the task dropped; the lock's release. The note is gone once the answer is stored. The live capture
    hands the message over `fresh` from its event: it is logged in the first round trip, which reads it no more."""
    bot = make_bot(settle_seconds=0)
    monkeypatch.setattr(capturing, "judge_settled", lambda runtime, settled: "judged")  # the LLM call, apart
    log = ConversationLog(bot.runtime.redis, 3600)
    now = time.time()
    question = LoggedMessage(
        f"{now - 2:.6f}", None, Author.HUMAN, user="U_ASKER", content={"text": "Where is billing?"}
    )
    answer = LoggedMessage(f"{now - 1:.6f}", question.ts, Author.MONITORED_BOT, content={"text": "Under Settings."})
    for message in (question, answer)[: 1 if fresh else 2]:
        log.record(C, message)
    kwargs = {"channel": C, "ts": answer.ts, "thread_ts": question.ts, "logged": to_wire(answer)}
    note = handoffs.new_id()
    pipe = bot.runtime.redis.pipeline()
    handoffs.note(pipe, note, kwargs, now)
    pipe.execute()
    with capturing.conversation_lock(bot.runtime.redis, C, "warm-up"):
        pass  # loads the lock's release script, as a running worker has
    bot.runtime.known_channels.flags(C, "channel", False)  # knows the channel's sharing, as a running worker does

    trips: list[str] = []
    direct, pipelined = redis.Redis.execute_command, redis.client.Pipeline.execute

    def one(client, *args, **options):
        if not isinstance(client, redis.client.Pipeline):
            trips.append(str(args[0]))
        return direct(client, *args, **options)

    def many(pipe, *args, **options):
        trips.append("pipeline")
        return pipelined(pipe, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", one)
    monkeypatch.setattr(redis.client.Pipeline, "execute", many)
    result = capture_answer_in(
        bot.runtime,
        C,
        answer.ts,
        thread_ts=question.ts,
        handoff=note,
        channel_type="channel",
        ext_shared=False,
        fresh=answer if fresh else None,
    )
    monkeypatch.undo()
    assert result == "captured" and bot.pairs()[0].status == PairStatus.PENDING
    assert len(trips) == 6, " ".join(trips)
    assert log.get(C, answer.ts) == answer
    assert bot.runtime.redis.hget(handoffs.KEY, note) is None


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


def test_the_capture_lock_is_the_threads_not_the_channels_top_level(make_bot, monkeypatch) -> None:
    """A top-level message is the root of its own thread: its capture waits only for captures of that thread (its
    own later parts), never for another top-level answer of the channel."""
    bot = make_bot(settle_seconds=0)
    monkeypatch.setattr(capturing, "judge_settled", lambda runtime, settled: "judged")
    monkeypatch.setattr(capturing, "LOCK_WAIT_SECONDS", 0.3)
    log = ConversationLog(bot.runtime.redis, 3600)
    now = time.time()
    for at, author, text in ((now - 4, Author.HUMAN, "Where is billing?"), (now - 3, Author.HUMAN, "And invoices?")):
        log.record(C, LoggedMessage(f"{at:.6f}", None, author, user="U_ASKER", content={"text": text}))
    first = LoggedMessage(f"{now - 2:.6f}", None, Author.MONITORED_BOT, content={"text": "Under Settings."})
    second = LoggedMessage(f"{now - 1:.6f}", None, Author.MONITORED_BOT, content={"text": "Under Billing."})
    part = LoggedMessage(f"{now:.6f}", first.ts, Author.MONITORED_BOT, content={"text": "Then Invoices."})
    for message in (first, second, part):
        log.record(C, message)

    def capture(message: LoggedMessage) -> str:
        return capture_answer_in(bot.runtime, C, message.ts, thread_ts=message.thread_ts, channel_type="channel")

    during: list[str] = []
    flags = bot.runtime.known_channels.flags

    def others_meanwhile(*args, **kwargs):  # called inside the first answer's capture, under its lock
        if not during:
            during.append("first")
            during.append(capture(second))  # another top-level answer: not held up
            with pytest.raises(capturing.ConversationBusy):
                capture(part)  # the first answer's later part: waits for its thread's lock
            during.append("busy")
        return flags(*args, **kwargs)

    monkeypatch.setattr(bot.runtime.known_channels, "flags", others_meanwhile)
    assert capture(first) == "captured" and during == ["first", "captured", "busy"]
    assert capture(part) == "unchanged"  # the first answer's capture stored its whole run, this part included


def test_a_later_part_under_a_top_level_answer_settles_with_the_roots_question(make_bot, monkeypatch) -> None:
    """The bot answers at top level, then adds a part in its answer's thread, and the answer settles at once (a
    finished stream): the part's own read was its thread's alone, so the settle reads around the root, whose
    question is on the channel's top level (it was settled as having none when Slack's history was not asked)."""
    bot = make_bot(settle_seconds=0, history_fallback=False)
    monkeypatch.setattr(capturing, "judge_settled", lambda runtime, settled: "judged")
    log = ConversationLog(bot.runtime.redis, 3600)
    now = time.time()
    question = LoggedMessage(
        f"{now - 3:.6f}", None, Author.HUMAN, user="U_ASKER", content={"text": "Where is billing?"}
    )
    root = LoggedMessage(f"{now - 2:.6f}", None, Author.MONITORED_BOT, content={"text": "Under Settings."})
    part = LoggedMessage(f"{now - 1:.6f}", root.ts, Author.MONITORED_BOT, content={"text": "Then Billing."})
    for message in (question, root, part):
        log.record(C, message)
    assert capture_answer_in(bot.runtime, C, part.ts, thread_ts=root.ts, channel_type="channel") == "captured"
    [pair] = bot.pairs()
    assert (pair.answer_ts, pair.status, pair.question_text) == (root.ts, PairStatus.PENDING, "Where is billing?")
