"""Judging in the worker's capture and settle tasks (workers.pairs.capturing, workers.pairs.settling): an answer
settled at once, or after its quiet time, is judged in the same run with no judge_pair task; a replay, a transient
LLM error or any other failure hands the pair to judge_pair.

The bot is served over HTTP as in test_bot_capture (its capture tasks run inline: tests.bot_harness.InlineWorker);
here the same task is also run directly, as a redelivered or late message would be."""

from __future__ import annotations

import pytest

from common import celery_app, task_names
from store.models import Pair, PairStatus
from tests import slack_requests as sr
from tests import slack_shapes as ss
from tests.bot_harness import ServedBot
from tests.capture_helpers import C, run_again, send
from tests.fakes.openai_server import FakeOpenAI
from workers.pairs.capturing import capture_answer_in
from workers.pairs.settling import settle_and_judge


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


def finished_stream(bot: ServedBot, question: str, answer: str) -> tuple[str, str]:
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, question))
    send(bot, ss.stream_completion(ss.stream_opener(C, a_ts, q_ts), answer))
    return q_ts, a_ts


def test_an_answer_settled_at_once_is_judged_by_its_capture_task(make_bot, sent: list) -> None:
    """No quiet time to wait: the capture task settles the answer and judges it itself, no judge_pair task sent."""
    with FakeOpenAI() as llm:
        bot = make_bot(openai_base_url=llm.base_url)
        finished_stream(bot, "How do I export my data?", "Settings, then Export, then Download.")
        [pair] = bot.pairs()
        assert pair.status == PairStatus.JUDGED
        assert len(llm.requests) == 1 and judge_tasks(sent) == []


def settling_pair(bot: ServedBot) -> Pair:
    """An answer in its question's thread, captured and waiting out its quiet time."""
    q_ts, a_ts = sr.next_ts(), sr.next_ts()
    send(bot, sr.human_message(C, q_ts, "How do I export my data?"))
    send(bot, sr.bot_message(C, a_ts, "Settings, then Export, then Download.", thread_ts=q_ts))
    [pair] = bot.pairs()
    return pair


def test_the_settle_task_judges_its_pair_itself(make_bot, sent: list) -> None:
    """After the quiet time the settle task settles the answer and judges it in the same run: no judge_pair task
    (one task fewer per answer)."""
    with FakeOpenAI() as llm:
        bot = make_bot(openai_base_url=llm.base_url)
        pair = settling_pair(bot)
        assert pair.status == PairStatus.SETTLING
        assert settle_and_judge(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
        [pair] = bot.pairs()
        assert pair.status == PairStatus.JUDGED
        assert len(llm.requests) == 1 and judge_tasks(sent) == []


def test_a_replayed_settle_task_hands_its_judged_pair_to_judge_pair(make_bot, sent: list) -> None:
    """The replay of a settle task that judged its pair (a redelivery or a retry) finds the pair judged and sends
    judge_pair, resumed, to finish whatever the earlier run left (its follow-ups)."""
    with FakeOpenAI() as llm:
        bot = make_bot(openai_base_url=llm.base_url)
        first = settling_pair(bot)
        settle_and_judge(bot.runtime, first.id, first.version)  # the run that judged it
        [pair] = bot.pairs()
        assert settle_and_judge(bot.runtime, pair.id, pair.version) == f"skipped:{PairStatus.JUDGED}"
        assert judge_tasks(sent) == []  # a second run that is no replay sends nothing
        assert settle_and_judge(bot.runtime, pair.id, pair.version, replayed=True) == "resumed"
        assert judge_tasks(sent) == [([pair.id], {"resumed": True}, None)] and len(llm.requests) == 1


def test_a_transient_llm_error_in_the_capture_task_is_retried_by_a_judge_task(make_bot, sent: list) -> None:
    bot = make_bot()  # its LLM endpoint refuses connections: a transient error
    finished_stream(bot, "How do I export my data?", "Settings, then Export, then Download.")
    [pair] = bot.pairs()
    assert pair.status == PairStatus.PENDING
    [(args, kwargs, countdown)] = judge_tasks(sent)
    assert args == [pair.id] and kwargs.get("llm_attempts") == 1 and countdown and countdown > 0


def test_any_other_failure_in_the_capture_tasks_judging_hands_the_pair_to_judge_pair(
    make_bot, sent: list, monkeypatch
) -> None:
    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug in judging")

    monkeypatch.setattr("workers.judging.run.find_cached_many", broken)
    bot = make_bot()
    finished_stream(bot, "How do I export my data?", "Settings, then Export, then Download.")
    [pair] = bot.pairs()
    assert pair.status == PairStatus.PENDING  # stored and settled: only its judging is left, to judge_pair
    assert judge_tasks(sent) == [([pair.id], {"resumed": True}, None)]


def test_a_redelivered_capture_task_hands_its_stored_answer_to_judge_pair(make_bot, sent: list) -> None:
    """Its first run may have died while judging the answer: the replay changes nothing, but judge_pair (resumed)
    finishes whatever that run left. A replay that is no redelivery sends nothing."""
    bot = make_bot()
    q_ts, a_ts = finished_stream(bot, "How do I export my data?", "Settings, then Export, then Download.")
    [pair] = bot.pairs()
    sent.clear()
    assert run_again(bot, a_ts, q_ts) == "unchanged" and judge_tasks(sent) == []
    replay = capture_answer_in(
        bot.runtime, C, a_ts, thread_ts=q_ts, channel_type="channel", ext_shared=False, redelivered=True
    )
    assert replay == "unchanged"
    assert judge_tasks(sent) == [([pair.id], {"resumed": True}, None)]
