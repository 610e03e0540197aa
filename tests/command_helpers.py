"""The served bot of the /judge tests (real Redis, SQLite/PostgreSQL and FakeSlack), its channels and messages, and
the helpers that send it slash commands and read what it stored or queued: shared by tests/integration/test_commands.py
and the test_command_*.py modules beside it."""

from __future__ import annotations

import json
import time

import pytest
import redis
from sqlalchemy import select

from store.models import Pair
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.bot_harness import BotServer, ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack

C = "C_SUPPORT"
OTHER = "C_OTHER"  # U_ASKER is not a member
PRIVATE = "G_PRIVATE"  # U_ASKER is a member, U_STRANGER is not
QUESTION_TS = "1712345600.000100"
ANSWER_TS = "1712345678.123456"
LINK = f"https://example.slack.com/archives/{C}/p1712345678123456?thread_ts={QUESTION_TS}&cid={C}"


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_user("U_ASKER", "ana", "Ana Diaz")
        fake.add_channel(C, "support", members=["U_ASKER", "U_RELMON"])
        fake.add_channel(OTHER, "finance", members=["U_BOSS", "U_RELMON"])
        fake.add_channel(PRIVATE, "secret", is_private=True, members=["U_ASKER", "U_RELMON"])
        fake.add_channel("C_ALERTS", "alerts", members=["U_ASKER", "U_RELMON"])
        fake.add_message(C, QUESTION_TS, "U_ASKER", "How do I reset my password?")
        fake.add_message(C, ANSWER_TS, "U_SUPPORT", "offtopic: our office is open 9 to 5", QUESTION_TS,
                         bot_id="B_SUPPORT")  # fmt: skip
        fake.add_message(OTHER, "1712345000.000001", "U_BOSS", "What is the Q3 budget?")
        fake.add_message(OTHER, "1712345001.000002", "U_SUPPORT", "The Q3 budget is 4 million.", bot_id="B_SUPPORT")
        fake.add_message(PRIVATE, "1712345100.000001", "U_ASKER", "When are the layoffs?")
        fake.add_message(PRIVATE, "1712345101.000002", "U_SUPPORT", "The layoffs are in May.", bot_id="B_SUPPORT")
        yield fake


@pytest.fixture
def bot(settings_for, slack):
    settings = settings_for(slack_api_url=slack.api_url)
    server = BotServer(settings)
    yield server.__enter__()
    server.__exit__()


def queued(redis_url: str, queue: str) -> list[dict]:
    """Task messages waiting in a Celery queue (no worker here): their task names and arguments."""
    client = redis.Redis.from_url(redis_url)
    messages = []
    for raw in client.lrange(queue, 0, -1):
        envelope = json.loads(raw)
        messages.append({"task": envelope["headers"]["task"], "args": envelope["headers"].get("argsrepr")})
    return messages


def command(bot: ServedBot, text: str, slack: FakeSlack, key: str = "cmd", **kwargs):
    started = time.monotonic()
    response = sr.post(bot.url, si.slash_command(text, response_url=slack.response_url(key), **kwargs), SECRET)
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert elapsed < 3.0  # Slack's deadline for the acknowledgement
    return response


def pairs(bot: ServedBot) -> list[Pair]:
    with bot.runtime.db.session() as session:
        return list(session.execute(select(Pair).where(Pair.source != "capture").order_by(Pair.id)).scalars())
