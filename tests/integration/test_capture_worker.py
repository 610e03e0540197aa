"""The worker's side of capture (workers.pairs.capturing, in the `capture_event` task): tasks run again, out of order,
at once, or after Redis lost the log still leave one pair holding the answer's latest state, and never re-open an
answer judged meanwhile; a task message lost on the way is sent again; the capture lock is the thread's.

The bot is served over HTTP as in test_bot_capture (its capture tasks run inline: tests.bot_harness.InlineWorker);
here the same step is also run directly, as a redelivered or late message would be. Settling and judging after
capture: test_capture_judging.py."""

from __future__ import annotations

import json
import threading
import time

import pytest

from capture.conversation_log import ConversationLog, to_wire
from capture.pairing import Author, LoggedMessage
from common import celery_app, task_names, task_notes
from common.celery_app import QUEUE_FORGET, QUEUE_JUDGE, QUEUES
from store.judgments import set_pair_status
from store.models import PairStatus
from tests import slack_requests as sr
from tests import slack_shapes as ss
from tests.bot_harness import ServedBot
from tests.capture_helpers import C, run_again, send
from workers.judging.queued import queued_notes
from workers.pairs import capturing
from workers.pairs.capturing import capture_answer_in
from workers.pairs.settling import settle
from workers.sweeps import requeue_lost_tasks
from workers.tasks import events


def test_a_task_run_again_changes_nothing(bot_keeping_settles: ServedBot, settles: list) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot_keeping_settles, sr.human_message(C, q_ts, "How do I reset my password?"))
    send(bot_keeping_settles, sr.bot_message(C, a_ts, "Open Settings, then Security.", thread_ts=q_ts))
    [pair] = bot_keeping_settles.pairs()
    assert (pair.version, len(settles)) == (1, 1)
    assert run_again(bot_keeping_settles, a_ts, q_ts) == "unchanged"  # redelivered after its worker died, say
    assert [p.version for p in bot_keeping_settles.pairs()] == [1] and len(settles) == 1


def test_a_late_task_does_not_reopen_an_answer_judged_meanwhile(bot_keeping_settles: ServedBot, settles: list) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot_keeping_settles, sr.human_message(C, q_ts, "Where is my invoice?"))
    send(bot_keeping_settles, sr.bot_message(C, a_ts, "Billing, then Invoices.", thread_ts=q_ts))
    [pair] = bot_keeping_settles.pairs()
    assert settle(bot_keeping_settles.runtime, pair.id, pair.version) == PairStatus.PENDING
    with bot_keeping_settles.runtime.db.session() as session:
        set_pair_status(session, pair.id, PairStatus.JUDGED, only_from=[PairStatus.PENDING])
    assert run_again(bot_keeping_settles, a_ts, q_ts) == "unchanged"
    [after] = bot_keeping_settles.pairs()
    assert (after.status, after.version, after.rejudges or 0) == (PairStatus.JUDGED, 1, 0)


def test_tasks_out_of_order_store_the_streams_final_state(bot_keeping_settles: ServedBot, settles: list) -> None:
    """The completion's task ran first, the opener's (sent earlier) later: both read the log, which holds the
    completion, so the pair settles at once and is never left waiting for a completion already handled."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot_keeping_settles, sr.human_message(C, q_ts, "What changed in v2?"))
    opener = ss.stream_opener(C, a_ts, q_ts)
    send(bot_keeping_settles, ss.stream_completion(opener, "v2 adds single sign-on."))
    send(bot_keeping_settles, opener)  # the bot drops an opener after its completion (the log keeps the completion)
    # The opener's task, had it been sent earlier and run late:
    assert run_again(bot_keeping_settles, a_ts, q_ts) == "unchanged"
    [pair] = bot_keeping_settles.pairs()
    assert pair.answer_text == "v2 adds single sign-on."
    assert settles == [([pair.id, pair.version], 0)]  # settled at once: a finished stream needs no wait
    assert settle(bot_keeping_settles.runtime, pair.id, pair.version) == PairStatus.PENDING


def test_the_bots_copy_is_used_when_redis_lost_the_log(bot_keeping_settles: ServedBot, settles: list) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    answer = sr.bot_message(C, a_ts, "Restart the router.", thread_ts=q_ts)
    send(bot_keeping_settles, sr.human_message(C, q_ts, "My internet is down"))
    send(bot_keeping_settles, answer)
    log = ConversationLog(bot_keeping_settles.runtime.redis, bot_keeping_settles.settings.question_ttl_seconds)
    logged = to_wire(log.get(C, a_ts))
    # Redis restarted without its data between the bot's send and the worker:
    bot_keeping_settles.runtime.redis.flushdb()
    assert run_again(bot_keeping_settles, a_ts, q_ts) == "missing"  # a task without the copy has nothing to store
    kept = capture_answer_in(
        bot_keeping_settles.runtime, C, a_ts, thread_ts=q_ts, channel_type="channel", logged=logged
    )
    assert kept == "captured"
    assert log.get(C, a_ts) is not None  # logged again, for the settle task to read
    [pair] = bot_keeping_settles.pairs()
    assert (pair.answer_text, pair.version) == ("Restart the router.", 2)


def test_parts_captured_at_once_by_many_workers_make_one_answer(bot_keeping_settles: ServedBot, settles: list) -> None:
    q_ts = sr.next_ts()
    parts = [sr.next_ts() for _ in range(4)]
    send(bot_keeping_settles, sr.human_message(C, q_ts, "How do I export my data?"))
    for number, ts in enumerate(parts):
        send(bot_keeping_settles, sr.bot_message(C, ts, f"Step {number + 1}.", thread_ts=q_ts))
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda ts=ts: results.append(run_again(bot_keeping_settles, ts, q_ts)))
        for ts in parts * 3
    ]  # every part's task three times over, all at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 12 and set(results) == {"unchanged"}  # the bot's own runs stored the latest state
    live = [p for p in bot_keeping_settles.pairs() if p.status not in (PairStatus.MERGED,)]
    [pair] = live
    assert pair.answer_ts == parts[0]
    assert pair.answer_text == "Step 1.\nStep 2.\nStep 3.\nStep 4."
    assert settle(bot_keeping_settles.runtime, pair.id, pair.version) == PairStatus.PENDING


# A task message lost on the way ------------------------------------------------------------------------------


def overdue_notes(bot: ServedBot, *, within: float = 1) -> dict:
    now = time.time()
    return task_notes.overdue(bot.runtime.redis, noted_before=now + within, now=now, limit=10)


def test_a_stored_answer_leaves_no_note_behind(bot_keeping_settles: ServedBot) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot_keeping_settles, sr.human_message(C, q_ts, "Can I change my plan?"))
    send(bot_keeping_settles, sr.bot_message(C, a_ts, "Yes, under Billing.", thread_ts=q_ts))
    assert overdue_notes(bot_keeping_settles) == {}


def capture_call(event: dict, event_id: str) -> task_notes.Call:
    entry = {"body": sr.envelope(event, event_id=event_id), "own": sr.RELMON_IDENTITY}
    return task_notes.Call(task_names.CAPTURE_EVENT, kwargs={"entry": entry})


def test_a_lost_capture_task_is_sent_again_once_its_lease_is_over(bot_keeping_settles: ServedBot, monkeypatch) -> None:
    """The bot noted the task and sent it, but the message vanished (kombu's delivery window): the orphan check
    sends it again, once, and only for notes with no message queued or held."""
    redis = bot_keeping_settles.runtime.redis
    lost = capture_call(sr.human_message(C, sr.next_ts(), "lost"), "EvLOST")
    waiting = capture_call(sr.human_message(C, sr.next_ts(), "waiting"), "EvWAITING")
    task_notes.note(redis, [lost, waiting], now=time.time() - 120)
    with bot_keeping_settles.worker.paused():  # a real message, waiting on the queue
        celery_app.celery.send_task(waiting.task, kwargs=waiting.kwargs, task_id=waiting.id)
    assert queued_notes(redis, QUEUE_JUDGE) == {waiting.id}
    sent: list[tuple] = []
    monkeypatch.setattr(
        celery_app.celery, "send_task", lambda name, kwargs=None, task_id=None, **_: sent.append((kwargs, task_id))
    )
    assert requeue_lost_tasks(bot_keeping_settles.runtime, time.time(), lease_seconds=30) == 1
    assert sent == [(lost.kwargs, None)]
    # Within its lease: waits.
    assert requeue_lost_tasks(bot_keeping_settles.runtime, time.time() - 119, lease_seconds=30) == 0


def test_an_event_whose_task_was_lost_is_captured_when_the_orphan_check_sends_it_again(
    bot_keeping_settles: ServedBot,
) -> None:
    """The bot marked, noted and sent the question's and the answer's events (bot.publishing), but the messages
    vanished: the orphan check sends `capture_event` again from the notes, the worker captures them, and the notes
    are gone."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    with bot_keeping_settles.worker.paused():
        send(bot_keeping_settles, sr.human_message(C, q_ts, "Is there an API?"))
        send(bot_keeping_settles, sr.bot_message(C, a_ts, "Yes: see the developer docs.", thread_ts=q_ts))
    bot_keeping_settles.runtime.redis.delete(QUEUE_JUDGE)  # the messages vanish on the way
    assert bot_keeping_settles.pairs() == []
    assert requeue_lost_tasks(bot_keeping_settles.runtime, time.time() + 60, lease_seconds=30) == 2
    [pair] = bot_keeping_settles.pairs()
    assert settle(bot_keeping_settles.runtime, pair.id, pair.version) == PairStatus.PENDING
    [pair] = bot_keeping_settles.pairs()
    assert (pair.answer_ts, pair.question_ts, pair.question_text) == (a_ts, q_ts, "Is there an API?")
    assert overdue_notes(bot_keeping_settles, within=60) == {}


def resent_once_stored(bot: ServedBot) -> task_notes.Call:
    """A lost capture task sent again (its note two minutes old) after another delivery of the same answer stored
    it: the lost task's call."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "Is there a dark mode?"))
    answer = sr.bot_message(C, a_ts, "Yes: Settings, Appearance.", thread_ts=q_ts)
    lost = capture_call(answer, "EvLOST")
    task_notes.note(bot.runtime.redis, [lost], now=time.time() - 120)
    send(bot, answer)  # captured by this delivery's own task; the lost one's note is still there
    events.capture_event.apply(kwargs=lost.kwargs, task_id=lost.id, throw=True)  # as a worker runs it
    return lost


def test_the_resent_task_leaves_the_stored_answer_as_it_is(bot_keeping_settles: ServedBot) -> None:
    resent_once_stored(bot_keeping_settles)
    assert [p.version for p in bot_keeping_settles.pairs()] == [1]


def test_the_resent_task_clears_its_note(bot_keeping_settles: ServedBot) -> None:
    lost = resent_once_stored(bot_keeping_settles)
    assert lost.id not in overdue_notes(bot_keeping_settles)


def test_the_task_messages_headers_name_the_answer_never_its_words(bot_keeping_settles: ServedBot) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot_keeping_settles, sr.human_message(C, q_ts, "Why was I charged twice?"))
    send(bot_keeping_settles, sr.bot_message(C, a_ts, "Refunds for duplicate charges take five days.", thread_ts=q_ts))
    # The bot's messages (capture_event): the event's envelope is their body; the headers name where it is.
    [raw] = [
        m
        for m in bot_keeping_settles.runtime.redis.lrange(QUEUE_JUDGE, 0, -1)
        if a_ts in json.loads(m)["headers"]["kwargsrepr"]
    ]
    headers = json.loads(raw)["headers"]
    assert a_ts in headers["kwargsrepr"] and "duplicate charges" not in json.dumps(headers)


def test_the_capture_lock_is_the_threads_not_the_channels_top_level(make_bot, monkeypatch) -> None:
    """A top-level message is the root of its own thread: its capture waits only for captures of that thread (its
    own later parts), never for another top-level answer of the channel."""
    bot = make_bot(settle_seconds=0)
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
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    [pair] = bot.pairs()
    assert (pair.answer_ts, pair.status, pair.question_text) == (root.ts, PairStatus.PENDING, "Where is billing?")


def test_a_deletions_capture_task_waits_on_the_forget_queue_and_is_not_sent_again(
    bot_keeping_settles: ServedBot,
) -> None:
    """The bot hands a deletion on to the forget queue (common.celery_app.route_task), ahead of any judging backlog;
    the orphan check finds its message there and sends nothing again."""
    redis = bot_keeping_settles.runtime.redis
    question = sr.human_message(C, sr.next_ts(), "Is there an API?")
    send(bot_keeping_settles, question)
    redis.delete(QUEUE_JUDGE, QUEUE_FORGET)  # the copies the in-process worker left (it ran them already)
    with bot_keeping_settles.worker.paused():  # sent, not run: waiting for a worker
        send(bot_keeping_settles, sr.message_deleted(question))
    [raw] = redis.lrange(QUEUE_FORGET, 0, -1)
    assert json.loads(raw)["headers"]["task"] == task_names.CAPTURE_EVENT and redis.llen(QUEUE_JUDGE) == 0
    assert len(queued_notes(redis, *QUEUES) or ()) == 1
    assert requeue_lost_tasks(bot_keeping_settles.runtime, time.time() + 60, lease_seconds=30) == 0
