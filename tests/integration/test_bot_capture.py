"""The bot over real HTTP: signed events as Slack sends them → conversation log and pairs; settling: threaded and
top-level answers, Slack's retries, events spooled while Redis or the broker is down, thread broadcasts, answers
in several parts or out of order.

The WSGI app is served in-process; Redis, the database and the fake Slack are real servers. Settling is
run directly with `settle` (the settle task's body); the end-to-end test uses a real worker."""

from __future__ import annotations

import time

import redis

from common import celery_app
from common.celery_app import QUEUE_JUDGE
from store.models import PairStatus
from tests import slack_requests as sr
from tests.bot_events import C, send, settle_all
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.services import RedisProcess, free_port
from workers.pairs.settling import settle
from workers.tasks import events

# Capture -----------------------------------------------------------------------------------------


def test_a_threaded_answer_becomes_a_pair_with_its_question(bot: ServedBot, slack: FakeSlack) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "How do I reset my password, <@U_RELMON>?"))
    send(bot, sr.bot_message(C, a_ts, "Go to *Settings* > Security.", thread_ts=q_ts))
    [pair] = bot.pairs()
    assert (pair.channel_id, pair.answer_ts, pair.thread_ts, pair.status, pair.version) == (
        C,
        a_ts,
        q_ts,
        PairStatus.SETTLING,
        1,
    )
    assert pair.answer_bot_id == "B_SUPPORT"
    assert pair.channel_is_private is False
    assert pair.team_id == "T_TEST"

    assert settle_all(bot) == {pair.id: PairStatus.PENDING}
    [pair] = bot.pairs()
    assert pair.question_ts == q_ts
    assert pair.question_user == "U_ASKER"
    assert pair.question_text == "How do I reset my password, @relmon?"
    assert pair.answer_text == "Go to *Settings* > Security."


def test_retry_of_the_same_event_makes_one_pair(bot: ServedBot) -> None:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "question"))
    answer = sr.envelope(sr.bot_message(C, a_ts, "answer", thread_ts=q_ts))
    for retry in range(3):
        headers = {"X-Slack-Retry-Num": str(retry + 1), "X-Slack-Retry-Reason": "http_timeout"} if retry else {}
        assert sr.post(bot.url, answer, SECRET, headers=headers).status_code == 200
    [pair] = bot.pairs()
    assert pair.version == 1  # the retries were not processed again


def test_events_spooled_while_redis_is_down_are_captured_in_order_exactly_once(bot: ServedBot, redis_server) -> None:
    """Redis down: Slack gets 200 (no failed delivery), the events wait on local disk, and once Redis is back
    they are captured in the order they came; Slack's retry of one of them changes nothing."""
    q_ts = sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "question"))
    first = sr.envelope(sr.bot_message(C, sr.next_ts(), "answer one", thread_ts=q_ts))
    q2_ts = sr.next_ts()
    redis_server.stop()
    try:
        assert sr.post(bot.url, first, SECRET).status_code == 200
        send(bot, sr.human_message(C, q2_ts, "second question"))
        assert (
            sr.post(bot.url, sr.envelope(sr.bot_message(C, sr.next_ts(), "two", thread_ts=q2_ts)), SECRET).status_code
            == 200
        )
        assert bot.pairs() == []
    finally:
        redis_server.start()
    pairs = wait_for(lambda: len(bot.pairs()) == 2 and bot.pairs(), timeout=20, what="the spooled events captured")
    assert [p.answer_text for p in sorted(pairs, key=lambda p: p.id)] == ["answer one", "two"]
    assert sr.post(bot.url, first, SECRET, headers={"X-Slack-Retry-Num": "1"}).status_code == 200
    assert [p.version for p in bot.pairs()] == [1, 1]  # once: the retry was a duplicate
    assert set(settle_all(bot).values()) == {PairStatus.PENDING}  # each found its question (spooled in order)


def point_broker_at(url: str) -> None:
    """Re-point this process's Celery app at another broker (dropping its pooled connections)."""
    celery_app.celery.conf.broker_url = url
    celery_app.celery._pool = None
    celery_app.celery.amqp._producer_pool = None


def test_an_event_spooled_while_the_broker_is_down_is_not_lost(make_bot, redis_url) -> None:
    """Broker down while Redis for the log is up: the answer is logged but cannot be handed to a worker; the
    event is spooled (200) and handed on once the broker is back: one pair, stored once."""
    bot = make_bot()
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "question"))
    answer = sr.envelope(sr.bot_message(C, a_ts, "answer", thread_ts=q_ts))
    good = celery_app.celery.conf.broker_url
    point_broker_at(f"redis://127.0.0.1:{free_port()}/0")  # a closed port
    try:
        assert sr.post(bot.url, answer, SECRET).status_code == 200
    finally:
        point_broker_at(good)
    assert bot.pairs() == []  # nothing stored before a worker has it
    wait_for(lambda: [p.version for p in bot.pairs()] == [1], timeout=20, what="the spooled event handed on")
    [pair] = bot.pairs()
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING


def test_events_are_published_the_same_way_when_the_broker_is_another_redis(make_bot, tmp_path) -> None:
    """One publishing path whatever the broker: with Celery's broker on a Redis of its own, the bot's event mark and
    note stay in relmon's Redis, the task message goes to the broker's queue, and the capture task stores the pair."""
    bot = make_bot()
    broker = RedisProcess(tmp_path / "broker")
    broker.start()
    good = celery_app.celery.conf.broker_url
    point_broker_at(broker.url)
    try:
        q_ts, a_ts = sr.next_ts(), sr.next_ts()
        send(bot, sr.human_message(C, q_ts, "Where do I change my email?"))
        with bot.worker.paused():  # the answer's message waits on the broker: a worker takes it below
            send(bot, sr.bot_message(C, a_ts, "Settings, then Profile.", thread_ts=q_ts))
        queued = redis.Redis.from_url(broker.url).lrange(QUEUE_JUDGE, 0, -1)
        assert len(queued) == 2 and bot.runtime.redis.llen(QUEUE_JUDGE) == 0
        [call] = [c for c in bot.notes().values() if c.kwargs["entry"]["body"]["event"]["ts"] == a_ts]
        assert bot.pairs() == []
        events.capture_event.apply(kwargs=call.kwargs, task_id=call.id, throw=True)  # as a worker runs it
    finally:
        point_broker_at(good)
        broker.stop()
    [pair] = bot.pairs()
    assert pair.answer_ts == a_ts and bot.notes() == {}
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING


def test_a_top_level_answer_within_the_window_is_paired(make_bot) -> None:
    bot = make_bot(toplevel_window_seconds=60)
    now = time.time()
    q_ts = sr.next_ts(now - 30)
    a_ts = sr.next_ts(now)
    send(bot, sr.human_message(C, q_ts, "anyone know the VPN address?"))
    send(bot, sr.bot_message(C, a_ts, "vpn.example.com"))
    results = settle_all(bot)
    by_channel = {p.channel_id: p for p in bot.pairs()}
    assert results[by_channel[C].id] == PairStatus.PENDING
    assert by_channel[C].question_ts == q_ts


def test_a_top_level_answer_outside_the_window_has_no_question(make_bot) -> None:
    bot = make_bot(toplevel_window_seconds=60)
    now = time.time()
    old_q, late_a = sr.next_ts(now - 500), sr.next_ts(now - 400)
    send(bot, sr.human_message("C_OTHER", old_q, "old question"))
    send(bot, sr.bot_message("C_OTHER", late_a, "late answer"))
    results = settle_all(bot)
    by_channel = {p.channel_id: p for p in bot.pairs()}
    assert results[by_channel["C_OTHER"].id] == PairStatus.NO_QUESTION


def test_thread_broadcast_answers_its_thread(bot: ServedBot) -> None:
    root = sr.human_message(C, sr.next_ts(), "is the API down?")
    send(bot, sr.human_message(C, sr.next_ts(), "unrelated top-level chatter"))
    reply = sr.bot_message(C, sr.next_ts(), "No, all systems normal.", thread_ts=root["ts"])
    # Only the broadcast reaches relmon (say it joined after the root was posted): the root comes with it.
    send(bot, sr.thread_broadcast(reply, root))
    settle_all(bot)
    [pair] = bot.pairs()
    assert (pair.status, pair.question_ts, pair.question_text) == (PairStatus.PENDING, root["ts"], "is the API down?")


def test_several_bot_messages_form_one_answer(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "how do I export?")
    parts = [sr.bot_message(C, sr.next_ts(), f"step {n}", thread_ts=q["ts"]) for n in (1, 2, 3)]
    send(bot, q)
    for part in parts:
        send(bot, part)
    settle_all(bot)
    [pair] = bot.pairs()
    assert pair.answer_ts == parts[0]["ts"]
    assert pair.answer_text == "step 1\nstep 2\nstep 3"
    assert pair.status == PairStatus.PENDING


def test_out_of_order_events_make_one_answer_with_its_question(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "how do I export?")
    first = sr.bot_message(C, sr.next_ts(), "part one", thread_ts=q["ts"])
    second = sr.bot_message(C, sr.next_ts(), "part two", thread_ts=q["ts"])
    send(bot, second)  # the later part arrives first ...
    send(bot, first)
    send(bot, q)  # ... and the question last
    results = settle_all(bot)
    by_ts = {p.answer_ts: p for p in bot.pairs()}
    assert by_ts[second["ts"]].status == PairStatus.MERGED
    assert results[by_ts[first["ts"]].id] == PairStatus.PENDING
    assert by_ts[first["ts"]].answer_text == "part one\npart two"
    assert by_ts[first["ts"]].question_ts == q["ts"]
