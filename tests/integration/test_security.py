"""Security over real HTTP to the bot's WSGI app served in this process: forged and replayed requests change
nothing. With relmon's own processes (prompt injection, the score's bounds, PII, secrets in logs):
tests/system/test_security_processes.py."""

from __future__ import annotations

import json
import time

import pytest
import redis

from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.bot_harness import BotServer
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.running_system import CHANNEL

pytestmark = pytest.mark.slow


# Signatures ----------------------------------------------------------------------------------------------------


def test_a_request_not_freshly_signed_by_slack_gets_401_without_effect(redis_url: str, settings_for) -> None:
    with FakeSlack() as slack:
        slack.add_channel(CHANNEL, "support")
        settings = settings_for(slack_api_url=slack.api_url)
        with BotServer(settings) as bot:
            keys_before = set(redis.Redis.from_url(redis_url).keys("*"))
            calls_before = list(slack.calls)  # Bolt's auth.test at start-up
            question_ts = sr.next_ts()
            answer = sr.envelope(sr.bot_message(CHANNEL, sr.next_ts(), "An answer", thread_ts=question_ts))
            body = json.dumps(answer).encode()
            now = int(time.time())
            attempts = {
                "forged signature": sr.sign(body, "not-the-secret"),
                "stale timestamp, correctly signed": sr.sign(body, SECRET, timestamp=now - 5 * 60 - 5),
                "future timestamp, correctly signed": sr.sign(body, SECRET, timestamp=now + 5 * 60 + 5),
                "signature of another body": sr.sign(body.replace(b"An answer", b"Another"), SECRET),
                "signature of another timestamp": {
                    **sr.sign(body, SECRET, timestamp=now - 1),
                    "X-Slack-Request-Timestamp": str(now),
                },
                "wrong version prefix": {
                    **sr.sign(body, SECRET),
                    "X-Slack-Signature": sr.sign(body, SECRET)["X-Slack-Signature"].replace("v0=", "v1="),
                },
                "no signature": {"X-Slack-Request-Timestamp": str(now)},
                "nothing": {},
            }
            for what, headers in attempts.items():
                response = bot_post(bot.url, body, headers)
                assert response.status_code == 401, f"{what}: {response.status_code}"
            # A slash command and a shortcut, forged: refused the same way.
            for form in (si.slash_command("https://x.slack.com/archives/C1/p1"), si.message_action(answer["event"])):
                headers = {**sr.sign(form, "not-the-secret"), "Content-Type": "application/x-www-form-urlencoded"}
                assert bot_post(bot.url, form, headers).status_code == 401

            assert bot.pairs() == []
            assert set(redis.Redis.from_url(redis_url).keys("*")) == keys_before
            assert slack.calls == calls_before  # not even a look-up
            # The same request, signed now, is accepted: the refusals were about the signature alone.
            assert sr.post(bot.url, answer, SECRET).status_code == 200
            assert len(bot.pairs()) == 1


def bot_post(url: str, body: bytes, headers: dict[str, str]):
    import httpx

    return httpx.post(url, content=body, headers={"Content-Type": "application/json", **headers}, timeout=10)
