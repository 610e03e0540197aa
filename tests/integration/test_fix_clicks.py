"""The "Mark fixed" button, through the served bot (signed Slack requests), the broker and the real task (SQLite and
PostgreSQL): the click is acknowledged at once and handed on with the topic's key, who clicked, when and where; the
task stores the mark and tells its first verdict in the thread of the clicked message (from App Home: under a
message of its own in the alert channel); a redelivered task marks nothing twice; a forged value hands nothing on."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
import redis
from sqlalchemy import select

from common import task_names
from common.celery_app import QUEUES
from common.messages.fixes import MARK_ACTION_ID
from store import topics as topic_rows
from store.topic_models import TopicFix
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from workers.tasks.fixes import mark_fixed

DIGEST = "C_DIGEST"
ALERTS = "C_ALERTS"
DIGEST_TS = "1764500000.000100"
KEY = "t-refunds-annual"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_user("U_LEAD", "lead", "Lead")
        fake.add_channel(DIGEST, "digest", members=["U_LEAD", "U_RELMON"])
        fake.add_channel(ALERTS, "alerts", members=["U_LEAD", "U_RELMON"])
        fake.add_message(DIGEST, DIGEST_TS, text="relmon digest", bot_id="B_RELMON")
        yield fake


@pytest.fixture
def bot(make_bot) -> ServedBot:
    served = make_bot(alert_channel=ALERTS)
    with served.runtime.db.session() as session:
        topic_rows.save_topics(session, [{"key": KEY, "name": "Annual plan refunds", "named_by": "llm",
                                          "name_sources": [], "anchors": []}])  # fmt: skip
    return served


def queued_marks(client: redis.Redis) -> list[tuple[list, dict]]:
    """The MARK_FIXED messages on the broker (nothing consumes them here): (args, kwargs)."""
    found = []
    for queue in QUEUES:
        for raw in client.lrange(queue, 0, -1):
            message = json.loads(raw)
            if message["headers"]["task"] == task_names.MARK_FIXED:
                args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
                found.append((args, kwargs))
    return found


def fixes(bot: ServedBot) -> list[TopicFix]:
    with bot.runtime.db.session() as session:
        found = list(session.scalars(select(TopicFix)))
        session.expunge_all()
    return found


def test_a_click_on_the_digest_stores_the_mark_and_replies_in_its_thread(bot: ServedBot, slack: FakeSlack):
    body = si.block_actions(f"{MARK_ACTION_ID}:1", KEY, user_id="U_LEAD", channel_id=DIGEST, message_ts=DIGEST_TS)
    response = sr.post(bot.url, body, SECRET)
    assert response.status_code == 200 and response.text in ("", "{}")
    [(args, kwargs)] = wait_for(lambda: queued_marks(bot.runtime.redis), timeout=10, what="the task on the broker")
    assert args[:2] == [KEY, "U_LEAD"] and kwargs == {"channel_id": DIGEST, "message_ts": DIGEST_TS}

    fix_id = mark_fixed.apply(args=args, kwargs=kwargs, throw=True).get()
    [fix] = fixes(bot)
    assert fix.id == fix_id and fix.topic_key == KEY and fix.marked_by == "U_LEAD"
    assert (fix.channel_id, fix.message_ts) == (DIGEST, DIGEST_TS) and fix.verdict == "no_evidence"
    [reply] = [p for p in slack.posted(DIGEST) if p.get("thread_ts") == DIGEST_TS]
    assert "Annual plan refunds" in reply["text"] and "no evidence yet" in reply["text"]

    # The task redelivered (acks late): the same mark, nothing posted again.
    assert mark_fixed.apply(args=args, kwargs=kwargs, throw=True).get() == fix_id
    assert len(fixes(bot)) == 1 and len([p for p in slack.posted(DIGEST) if p.get("thread_ts")]) == 1


def test_a_click_on_app_home_posts_the_mark_in_the_alert_channel(bot: ServedBot, slack: FakeSlack):
    view = {"id": "V_HOME", "type": "home", "blocks": []}
    body = si.block_actions(f"{MARK_ACTION_ID}:2", KEY, user_id="U_LEAD", view=view)
    assert sr.post(bot.url, body, SECRET).status_code == 200
    [(args, kwargs)] = wait_for(lambda: queued_marks(bot.runtime.redis), timeout=10, what="the task on the broker")
    assert kwargs == {"channel_id": None, "message_ts": None}
    mark_fixed.apply(args=args, kwargs=kwargs, throw=True).get()
    [posted] = slack.posted(ALERTS)
    assert "<@U_LEAD> marked *Annual plan refunds* fixed" in posted["blocks"][0]["text"]["text"]
    [fix] = fixes(bot)
    assert fix.channel_id == ALERTS and fix.message_ts == posted.get("ts", fix.message_ts) and fix.message_ts


def test_a_forged_value_hands_nothing_on_and_an_unknown_topic_is_said(bot: ServedBot, slack: FakeSlack):
    forged = si.block_actions(MARK_ACTION_ID, "'; drop table topics; --", user_id="U_LEAD", channel_id=DIGEST)
    assert sr.post(bot.url, forged, SECRET).status_code == 200
    unknown = si.block_actions(MARK_ACTION_ID, "t-gone", user_id="U_LEAD", channel_id=DIGEST, message_ts=DIGEST_TS)
    assert sr.post(bot.url, unknown, SECRET).status_code == 200
    [(args, kwargs)] = wait_for(lambda: queued_marks(bot.runtime.redis), timeout=10, what="the task on the broker")
    assert args[0] == "t-gone"
    assert mark_fixed.apply(args=args, kwargs=kwargs, throw=True).get() is None
    assert fixes(bot) == []
    [told] = [p for p in slack.posted() if p.get("channel") == "U_LEAD"]
    assert "no longer known" in told["text"]
