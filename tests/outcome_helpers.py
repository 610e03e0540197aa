"""Shared set-up for the outcome tests (tests/integration/test_outcome*.py): the fake Slack with an asker, a
teammate and the support group, the tasks the workers send (kept for the test to run), signed events sent to the
bot, and an answer captured with its window open."""

from __future__ import annotations

import pytest

from common import celery_app, task_names
from store import outcomes as store
from store.models import Pair, PairStatus
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from workers import outcome_watching
from workers.pairs.settling import settle_and_judge

C = "C_SUPPORT"


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_user("U_ASKER", "ana", "Ana Diaz")
        fake.add_user("U_AGENT", "sam", "Sam Lee")
        fake.add_usergroup("S_SUPPORT", ["U_AGENT"])
        fake.add_channel(C, "support", members=["U_ASKER", "U_AGENT", "U_RELMON"])
        # The alert channel's members are staff when RELMON_SUPPORT_TEAM is unset (capture.teammates).
        fake.add_channel("C_ALERTS", "alerts", members=["U_AGENT", "U_RELMON"])
        yield fake


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, list]]:
    """The tasks the workers send by name, not queued: the test runs them. The bot's hand-on of each event
    (capture_event) is run at once by the bot's harness (tests.bot_harness.InlineWorker), so it is not listed."""
    tasks: list[tuple[str, list]] = []

    def record(name, args=None, **kwargs):
        if name not in (task_names.CAPTURE_EVENT, task_names.JUDGE_PAIR):  # judging is not what these tests watch
            tasks.append((name, list(args or [])))

    monkeypatch.setattr(celery_app.celery, "send_task", record)
    return tasks


def send(bot: ServedBot, event: dict, event_id: str | None = None) -> None:
    response = sr.post(bot.url, sr.envelope(event, event_id=event_id), SECRET)
    assert response.status_code == 200, response.text


def run(bot: ServedBot, sent: list) -> None:
    """Run the observation tasks sent so far, as a worker would."""
    while sent:
        name, args = sent.pop(0)
        if name == task_names.OBSERVE_MESSAGE:
            outcome_watching.observe_message_in(bot.runtime, *args)
        elif name == task_names.OBSERVE_REACTION:
            outcome_watching.observe_reaction_in(bot.runtime, *args)


def answered(bot: ServedBot, sent: list, question: str = "How do I rotate my key?") -> tuple[dict, dict, Pair]:
    q = sr.human_message(C, sr.next_ts(), question)
    answer = sr.bot_message(C, sr.next_ts(), "Press Rotate in Settings.", thread_ts=q["ts"])
    send(bot, q)
    send(bot, answer)
    [pair] = bot.pairs()
    assert settle_and_judge(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    run(bot, sent)
    return q, answer, pair


def signals(bot: ServedBot, pair_id: int) -> set[str]:
    with bot.runtime.db.session() as session:
        return store.signal_names(session, pair_id)
