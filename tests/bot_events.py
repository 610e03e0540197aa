"""Signed events sent to a served bot, and its pairs settled, for the bot-capture tests
(tests/integration/test_bot_*.py)."""

from __future__ import annotations

from store.models import Pair, PairStatus
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from workers.pairs.settling import settle_and_judge

C = "C_SUPPORT"


def send(bot: ServedBot, event: dict, **kwargs):
    response = sr.post(bot.url, sr.envelope(event, **kwargs), SECRET)
    assert response.status_code == 200, response.text
    return response


def settle_all(bot: ServedBot) -> dict[int, str]:
    """Settle every pair at its current version, as the worker would after the quiet time."""
    return {p.id: settle_and_judge(bot.runtime, p.id, p.version) for p in bot.pairs()}


def judged_exchange(bot: ServedBot, question: str, answer: str) -> tuple[dict, dict, Pair]:
    """A person's question and the support bot's answer in its thread, captured, settled and marked judged:
    (the question's event, the answer's event, the pair)."""
    asked = sr.human_message(C, sr.next_ts(), question)
    answered = sr.bot_message(C, sr.next_ts(), answer, thread_ts=asked["ts"])
    send(bot, asked)
    send(bot, answered)
    settle_all(bot)
    [pair] = bot.pairs()
    with bot.runtime.db.session() as session:
        session.get(Pair, pair.id).status = PairStatus.JUDGED
    return asked, answered, pair
