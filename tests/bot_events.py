"""Signed events sent to a served bot, and its pairs settled, for the bot-capture tests
(tests/integration/test_bot_*.py)."""

from __future__ import annotations

from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from workers.pairs.settling import settle

C = "C_SUPPORT"


def send(bot: ServedBot, event: dict, **kwargs):
    response = sr.post(bot.url, sr.envelope(event, **kwargs), SECRET)
    assert response.status_code == 200, response.text
    return response


def settle_all(bot: ServedBot) -> dict[int, str]:
    """Settle every pair at its current version, as the worker would after the quiet time."""
    return {p.id: settle(bot.runtime, p.id, p.version) for p in bot.pairs()}
