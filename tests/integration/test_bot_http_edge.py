"""The bot's HTTP edge, over real HTTP: Slack's URL verification, signatures and timestamps, bodies it refuses
(malformed, of the wrong type, oversized) and /healthz.

The WSGI app is served in-process; Redis, the database and the fake Slack are real servers."""

from __future__ import annotations

import time

import pytest

from tests import slack_requests as sr
from tests.bot_events import C
from tests.bot_harness import ServedBot
from tests.builders import SECRET


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
