"""Message and reaction events answered by the HTTP server without Bolt (bot.event_path), once Bolt's capture
listener has run: the same hand-on, with the same identity, the same drop of relmon's own events and the same 500
for a bug. The bot is served in-process over real HTTP on real Redis and the fake Slack; the tasks' notes are read
back from Redis (the inline worker paused, so they stay)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
import redis

from capture.conversation_log import ConversationLog
from common.celery_app import QUEUE_JUDGE, create_celery
from common.task_message import task_message
from common.task_names import CAPTURE_EVENT, SETTLE_PAIR
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET, make_settings
from tests.fakes.slack_server import RELMON_BOT_ID, RELMON_USER_ID

C = "C_SUPPORT"


class CountingBolt:
    """The server's Bolt handler, counting the requests it is given."""

    def __init__(self, bolt: Any) -> None:
        self.bolt, self.app, self.calls = bolt, bolt.app, 0

    def __call__(self, environ: dict, start_response: Any) -> Any:
        self.calls += 1
        return self.bolt(environ, start_response)


@pytest.fixture
def bot(make_bot, monkeypatch) -> ServedBot:
    served = make_bot()
    monkeypatch.setattr(served.wsgi, "bolt", CountingBolt(served.wsgi.bolt))
    return served


def post(bot: ServedBot, event: dict, event_id: str | None = None) -> int:
    return sr.post(bot.url, sr.envelope(event, event_id=event_id), SECRET).status_code


def logged(bot: ServedBot, message: dict):
    return ConversationLog(bot.runtime.redis, 3600).get(message["channel"], message["ts"])


def test_after_the_listener_ran_events_skip_bolt_with_the_same_identity(bot: ServedBot) -> None:
    question = sr.human_message(C, sr.next_ts(), "How do I export?")
    answer = sr.bot_message(C, sr.next_ts(), "Settings, Export.", thread_ts=question["ts"])
    with bot.worker.paused():
        assert post(bot, question, "EvQUESTION") == 200  # Bolt's listener: relmon's identity is learnt
        assert post(bot, answer, "EvANSWER") == 200
        assert post(bot, sr.reaction(answer, "+1"), "EvREACTION") == 200
    assert bot.wsgi.bolt.calls == 1
    handed_on = bot.notes()
    assert set(handed_on) == {"EvANSWER", "EvREACTION"}  # the question was logged by the hand-on itself
    assert logged(bot, question) is not None
    own = {"user_id": RELMON_USER_ID, "bot_id": RELMON_BOT_ID, "app_id": "A_RELMON"}
    assert all(note["entry"]["own"] == own for note in handed_on.values())
    assert handed_on["EvANSWER"]["entry"]["body"]["event"] == answer


def test_relmon_own_messages_are_dropped_with_a_200_either_way(bot: ServedBot) -> None:
    """Bolt drops the events of relmon's own user or bot (IgnoringSelfEvents); the server's way drops them too."""
    own_post = sr.bot_message(C, sr.next_ts(), "An alert", bot_id=RELMON_BOT_ID, user=RELMON_USER_ID)
    with bot.worker.paused():
        assert post(bot, own_post, "EvOWN1") == 200  # through Bolt: relmon's identity is not known yet
        human = sr.human_message(C, sr.next_ts(), "Hello?")
        assert post(bot, human, "EvHUMAN") == 200  # through Bolt too
        assert post(bot, dict(own_post, ts=sr.next_ts()), "EvOWN2") == 200
        assert post(bot, sr.reaction(own_post, "eyes", user=RELMON_USER_ID), "EvOWN3") == 200
    assert bot.wsgi.bolt.calls == 2
    assert bot.notes() == {}  # the person's message was logged by the hand-on itself, the others dropped
    assert logged(bot, human) is not None
    assert logged(bot, own_post) is None


def test_a_bug_in_the_hand_on_answers_500_either_way(bot: ServedBot, monkeypatch) -> None:
    """A bug (not an outage) answers 500, so that Slack sends the event again: Bolt's answer for a listener's
    error, and the server's."""

    def broken(entry: dict) -> None:
        raise ValueError("a bug")

    monkeypatch.setattr(bot.wsgi.events, "hand_on", broken)
    assert post(bot, sr.human_message(C, sr.next_ts(), "One?")) == 500  # Bolt's listener
    assert post(bot, sr.human_message(C, sr.next_ts(), "Two?")) == 500  # the server's way
    assert bot.wsgi.bolt.calls == 1
    monkeypatch.undo()
    assert post(bot, sr.human_message(C, sr.next_ts(), "Three?")) == 200


def test_the_built_task_message_is_the_one_send_task_queues(redis_url) -> None:
    """common.task_message against Celery's own publish, field by field (IDs and delivery tags aside)."""
    app = create_celery(make_settings(redis_url=redis_url), redis_url)
    kwargs = {"entry": {"body": {"text": "é ☃ \u2028"}, "own": {}}, "handoff": "h1"}
    app.send_task(CAPTURE_EVENT, kwargs=kwargs, argsrepr="()", kwargsrepr="{'ts': '1.2'}")
    [queued] = redis.Redis.from_url(redis_url).lrange(QUEUE_JUDGE, 0, -1)
    queue, built = task_message(app, CAPTURE_EVENT, kwargs, kwargsrepr="{'ts': '1.2'}")
    assert queue == QUEUE_JUDGE
    sent, made = json.loads(queued), json.loads(built)
    for message in (sent, made):
        assert message["headers"]["id"] == message["headers"]["root_id"] == message["properties"]["correlation_id"]
        del message["headers"]["id"], message["headers"]["root_id"], message["properties"]["correlation_id"]
        del message["properties"]["delivery_tag"]
    assert made == sent


def test_a_built_countdown_message_is_the_one_send_task_queues(redis_url) -> None:
    """The settle task as capture queues it (positional arguments, a countdown) against Celery's own publish: the
    same message but for IDs, delivery tags and the ETA, which is the countdown from each one's own clock."""
    app = create_celery(make_settings(redis_url=redis_url), redis_url)
    app.send_task(SETTLE_PAIR, args=[7, 2], countdown=5)
    [queued] = redis.Redis.from_url(redis_url).lrange(QUEUE_JUDGE, 0, -1)
    queue, built = task_message(app, SETTLE_PAIR, args=[7, 2], countdown=5)
    assert queue == QUEUE_JUDGE
    sent, made = json.loads(queued), json.loads(built)
    etas = []
    for message in (sent, made):
        del message["headers"]["id"], message["headers"]["root_id"], message["properties"]["correlation_id"]
        del message["properties"]["delivery_tag"]
        etas.append(datetime.fromisoformat(message["headers"].pop("eta")))
    assert made == sent
    assert abs((etas[1] - etas[0]).total_seconds()) < 2 and etas[0].tzinfo is not None
