"""From capture to a verdict, one task a step: the capture task sends `settle_pair` (after the quiet time, or at
once for a finished stream), the settle task hands a settled pair to one `judge_pair` task, which judges it
(workers.pairs.capturing, workers.pairs.settling, workers.tasks.judging).

The bot is served over HTTP as in test_bot_capture (its capture tasks run inline: tests.bot_harness.InlineWorker);
the settle and judge steps are run here directly, as a worker would."""

from __future__ import annotations

import pytest

from common import celery_app, task_names
from store.models import Pair, PairStatus
from tests import slack_requests as sr
from tests import slack_shapes as ss
from tests.bot_harness import ServedBot
from tests.capture_helpers import C, send
from tests.fakes.openai_server import FakeOpenAI
from workers.pairs.settling import settle
from workers.tasks.judging import judge_pair


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, list, dict, float | None]]:
    """The tasks sent (name, args, kwargs, countdown), as well as queued."""
    calls: list[tuple[str, list, dict, float | None]] = []
    original = celery_app.celery.send_task

    def record(name, args=None, kwargs=None, countdown=None, **options):
        calls.append((name, list(args or []), dict(kwargs or {}), countdown))
        return original(name, args=args, kwargs=kwargs, countdown=countdown, **options)

    monkeypatch.setattr(celery_app.celery, "send_task", record)
    return calls


def judge_tasks(sent: list) -> list[tuple[list, dict, float | None]]:
    return [(args, kwargs, countdown) for name, args, kwargs, countdown in sent if name == task_names.JUDGE_PAIR]


def settle_tasks(sent: list) -> list[tuple[list, float | None]]:
    return [(args, countdown) for name, args, _kwargs, countdown in sent if name == task_names.SETTLE_PAIR]


def settling_pair(bot: ServedBot) -> Pair:
    """An answer in its question's thread, captured and waiting out its quiet time."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "How do I export my data?"))
    send(bot, sr.bot_message(C, a_ts, "Settings, then Export, then Download.", thread_ts=q_ts))
    [pair] = bot.pairs()
    return pair


def test_a_captured_answer_waits_out_its_quiet_time_in_a_settle_task(make_bot, sent: list) -> None:
    bot = make_bot(settle_seconds=5)
    pair = settling_pair(bot)
    assert pair.status == PairStatus.SETTLING
    assert settle_tasks(sent) == [([pair.id, pair.version], 5)] and judge_tasks(sent) == []


def test_a_finished_stream_is_settled_at_once(make_bot, sent: list) -> None:
    """No quiet time to wait: the capture task sends the settle task with no countdown."""
    bot = make_bot(settle_seconds=5)
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "How do I export my data?"))
    send(bot, ss.stream_completion(ss.stream_opener(C, a_ts, q_ts), "Settings, then Export, then Download."))
    [pair] = bot.pairs()
    assert settle_tasks(sent) == [([pair.id, pair.version], 0)]


def test_the_settle_task_hands_its_pair_to_one_judge_task(make_bot, sent: list) -> None:
    bot = make_bot()
    pair = settling_pair(bot)
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    assert judge_tasks(sent) == [([pair.id], {}, None)]


def test_a_settle_task_run_again_before_judging_sends_its_judge_task_again(make_bot, sent: list) -> None:
    """Its worker died after the send, say: judge_pair judges each version once, so a second message is harmless,
    and a lost one is not left to the sweeper."""
    bot = make_bot()
    pair = settling_pair(bot)
    settle(bot.runtime, pair.id, pair.version)
    assert settle(bot.runtime, pair.id, pair.version) == "requeued"
    assert judge_tasks(sent) == [([pair.id], {}, None)] * 2


def test_a_settle_task_for_a_judged_pair_sends_nothing(make_bot, sent: list) -> None:
    with FakeOpenAI() as llm:
        bot = make_bot(openai_base_url=llm.base_url)
        pair = settling_pair(bot)
        settle(bot.runtime, pair.id, pair.version)
        judge_pair.run(pair.id)
        sent.clear()
        assert settle(bot.runtime, pair.id, pair.version) == f"skipped:{PairStatus.JUDGED}"
        assert judge_tasks(sent) == [] and len(llm.requests) == 1


def test_the_judge_task_judges_the_settled_pair(make_bot, sent: list) -> None:
    with FakeOpenAI() as llm:
        bot = make_bot(openai_base_url=llm.base_url)
        pair = settling_pair(bot)
        settle(bot.runtime, pair.id, pair.version)
        assert judge_pair.run(pair.id) == PairStatus.JUDGED
        [pair] = bot.pairs()
        assert pair.status == PairStatus.JUDGED and len(llm.requests) == 1
