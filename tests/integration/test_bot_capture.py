"""The bot over real HTTP: signed events as Slack sends them → conversation log and pairs; settling.

The WSGI app is served in-process; Redis, the database and the fake Slack are real servers. Settling is
run directly with `settle` (the worker's task body); the end-to-end test uses a real worker."""

from __future__ import annotations

import time

import pytest

from capture.conversation_log import ConversationLog
from common import celery_app
from store.models import Pair, PairStatus
from store.rules import ChannelRule, ChannelRules
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.services import free_port
from workers.pairs.settling import settle

C = "C_SUPPORT"


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_user("U_ASKER", "ana", "Ana Diaz")
        fake.add_channel(C, "support", members=["U_ASKER", "U_RELMON"])
        fake.add_channel("G_PRIVATE", "secret", is_private=True, members=["U_ASKER", "U_RELMON"])
        yield fake


@pytest.fixture
def bot(make_bot) -> ServedBot:
    return make_bot()


def send(bot: ServedBot, event: dict, **kwargs):
    response = sr.post(bot.url, sr.envelope(event, **kwargs), SECRET)
    assert response.status_code == 200, response.text
    return response


def settle_all(bot: ServedBot) -> dict[int, str]:
    """Settle every pair at its current version, as the worker would after the quiet time."""
    return {p.id: settle(bot.runtime, p.id, p.version) for p in bot.pairs()}


# The HTTP edge -------------------------------------------------------------------------------------


def test_url_verification(bot: ServedBot) -> None:
    response = sr.post(bot.url, sr.url_verification("abc123"), SECRET)
    assert response.status_code == 200
    assert response.json()["challenge"] == "abc123"


def test_forged_signature_is_401(bot: ServedBot) -> None:
    response = sr.post(bot.url, sr.envelope(sr.human_message(C, sr.next_ts(), "hi")), "not-the-secret")
    assert response.status_code == 401


def test_stale_timestamp_is_401(bot: ServedBot) -> None:
    old = int(time.time()) - 6 * 60
    response = sr.post(bot.url, sr.envelope(sr.human_message(C, sr.next_ts(), "hi")), SECRET, timestamp=old)
    assert response.status_code == 401


def test_unsigned_is_401(bot: ServedBot) -> None:
    import httpx

    response = httpx.post(bot.url, content=b"{}", headers={"Content-Type": "application/json"})
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (b'{"type": "event_callback", "event": {', "application/json", 400),
        (b"[1, 2]", "application/json", 400),
        (b'{"type": "event_callback"}', "application/json", 400),
        (b"payload=%7Bnot-json", "application/x-www-form-urlencoded", 400),
        (b"hello=world", "application/x-www-form-urlencoded", 400),
        (b"\xff\xfe", "application/json", 400),
        (b"<xml/>", "text/xml", 415),
    ],
)
def test_bad_bodies_are_4xx_without_retry(bot: ServedBot, body: bytes, content_type: str, status: int) -> None:
    response = sr.post(bot.url, body, SECRET, content_type)
    assert response.status_code == status
    assert response.headers["X-Slack-No-Retry"] == "1"


def test_oversized_body_is_413(bot: ServedBot) -> None:
    response = sr.post(bot.url, b"x" * (1024 * 1024 + 1), SECRET, "application/json")
    assert response.status_code == 413


def test_healthz(bot: ServedBot) -> None:
    import httpx

    answer = httpx.get(bot.base_url + "/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "checks": {"redis": "ok"}}


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


def streamed(bot: ServedBot) -> Pair:
    """The support bot streams an answer: its first word, two edits in progress, then the completed text. The pair."""
    q = sr.human_message(C, sr.next_ts(), "summarise the outage")
    answer = sr.streaming(sr.bot_message(C, sr.next_ts(), "The", thread_ts=q["ts"]), "in_progress")
    send(bot, q)
    send(bot, answer)
    for text in ("The outage", "The outage lasted"):
        send(bot, sr.message_changed(answer, text, streaming_state="in_progress"))
    send(bot, sr.message_changed(answer, "The outage lasted 5 minutes.", streaming_state="completed"))
    [pair] = bot.pairs()
    return pair


def test_streaming_edits_bump_the_version(bot: ServedBot) -> None:
    assert streamed(bot).version == 4


def test_a_completed_stream_settles_at_once(bot: ServedBot) -> None:
    assert streamed(bot).status == PairStatus.PENDING  # the completion settled it at once (no quiet time)


def test_a_streamed_answer_settles_once(bot: ServedBot) -> None:
    pair = streamed(bot)
    assert settle(bot.runtime, pair.id, 2) == "stale"  # an older edit's settle does nothing
    assert settle(bot.runtime, pair.id, 4) == "requeued"  # a repeat re-enqueues judging, nothing else
    [pair] = bot.pairs()
    assert pair.answer_text == "The outage lasted 5 minutes."


def test_edit_after_judging_is_ignored_without_rejudgments(make_bot) -> None:
    """RELMON_MAX_REJUDGE=0: a judged answer stays as judged (tests/integration/test_rejudge.py: the default)."""
    bot = make_bot(max_rejudge=0)
    q = sr.human_message(C, sr.next_ts(), "q")
    answer = sr.bot_message(C, sr.next_ts(), "original", thread_ts=q["ts"])
    send(bot, q)
    send(bot, answer)
    settle_all(bot)
    [pair] = bot.pairs()
    with bot.runtime.db.session() as session:
        session.get(type(pair), pair.id).status = PairStatus.JUDGED
    send(bot, sr.message_changed(answer, "rewritten"))
    [pair] = bot.pairs()
    # Not judged again; the word the edit took out is not kept either (workers.tasks.forgetting).
    assert (pair.status, pair.answer_text, pair.version) == (PairStatus.JUDGED, "[removed]", 1)


def test_deleted_answer_is_never_judged(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "q")
    answer = sr.bot_message(C, sr.next_ts(), "oops", thread_ts=q["ts"])
    send(bot, q)
    send(bot, answer)
    [pair] = bot.pairs()
    send(bot, sr.message_deleted(answer))
    assert settle(bot.runtime, pair.id, pair.version) == "stale"
    [pair] = bot.pairs()
    assert pair.status == PairStatus.DELETED
    send(bot, sr.message_changed(answer, "edit after delete"))  # late edit: stays deleted
    [pair] = bot.pairs()
    assert pair.status == PairStatus.DELETED


def test_deleting_a_later_part_shortens_the_answer(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "q")
    one = sr.bot_message(C, sr.next_ts(), "one", thread_ts=q["ts"])
    two = sr.bot_message(C, sr.next_ts(), "two", thread_ts=q["ts"])
    for event in (q, one, two):
        send(bot, event)
    send(bot, sr.message_deleted(two))
    settle_all(bot)
    root = next(p for p in bot.pairs() if p.answer_ts == one["ts"])
    assert (root.status, root.answer_text) == (PairStatus.PENDING, "one")


def test_a_files_only_answer(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "where is the guide?")
    files_only = sr.file_share(sr.bot_message(C, sr.next_ts(), "", thread_ts=q["ts"]), "guide.pdf", "Setup guide")
    for event in (q, files_only):
        send(bot, event)
    settle_all(bot)
    texts = {p.question_text: (p.status, p.answer_text) for p in bot.pairs()}
    assert texts["where is the guide?"] == (PairStatus.PENDING, "[file: Setup guide]")


def test_a_blocks_only_answer(bot: ServedBot) -> None:
    q2 = sr.human_message(C, sr.next_ts(), "and pricing?")
    blocks_only = sr.bot_message(
        C,
        sr.next_ts(),
        "",
        thread_ts=q2["ts"],
        blocks=sr.rich_text_blocks(sr.rich_section(sr.text_part("Pro is "), sr.text_part("$10", bold=True))),
    )
    for event in (q2, blocks_only):
        send(bot, event)
    settle_all(bot)
    texts = {p.question_text: (p.status, p.answer_text) for p in bot.pairs()}
    assert texts["and pricing?"] == (PairStatus.PENDING, "Pro is $10")


def test_empty_answer(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "hello?")
    send(bot, q)
    send(bot, sr.bot_message(C, sr.next_ts(), "", thread_ts=q["ts"]))
    assert list(settle_all(bot).values()) == [PairStatus.EMPTY]


def test_private_channel_is_flagged(bot: ServedBot) -> None:
    q = sr.human_message("G_PRIVATE", sr.next_ts(), "secret question")
    send(bot, q)
    send(bot, sr.bot_message("G_PRIVATE", sr.next_ts(), "secret answer", thread_ts=q["ts"]))
    [pair] = bot.pairs()
    assert pair.channel_is_private is True


MUTED_RULES = ChannelRules(channels={"C_MUTED": ChannelRule(watch=False)})


@pytest.mark.parametrize(
    ("event", "overrides"),
    [
        (sr.bot_message(C, "0", "other bot", bot_id="B_OTHER", app_id="A_OTHER", user="U_OTHER"), {}),
        (sr.classic_bot_message(C, "0", "classic other bot"), {}),
        (sr.bot_message(C, "0", "relmon itself", bot_id="B_RELMON", app_id="A_RELMON", user="U_RELMON"), {}),
        (sr.bot_message("C_ALERTS", "0", "in the alert channel"), {}),
        (sr.bot_message("C_ELSEWHERE", "0", "unwatched channel"), {"watched_channels": [C]}),
        (
            sr.bot_message("C_MUTED", "0", "watch false"),
            {"rules": ChannelRules(channels={"C_MUTED": ChannelRule(watch=False)})},
        ),
    ],
    ids=["other bot", "classic bot", "relmon", "alert channel", "unwatched", "watch false"],
)
def test_ignored_messages_make_no_pair(make_bot, event: dict, overrides: dict) -> None:
    overrides = dict(overrides)  # the parameter is shared by the sqlite and postgres runs
    rules = overrides.pop("rules", None)
    bot = make_bot(**overrides)
    if rules is not None:
        bot.runtime.__dict__["rules"] = rules  # the runtime caches the rules file's content
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
