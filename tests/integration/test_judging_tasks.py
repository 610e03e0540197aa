"""judge_pair and the stale sweeper run in this process (`.apply()` on the worker's runtime), against a real Redis,
SQLite and PostgreSQL and the fake OpenAI server: outages, in-process cache hits, retries counted apart, a broker
that refuses the hand-on. The same pipeline with real `relmon worker` processes: tests/system/test_pipeline.py."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import redis
from sqlalchemy import func, select, update

from common import task_names, task_notes
from common.celery_app import QUEUE_JUDGE
from store.db import Database
from store.models import DailyUsage, JudgingFailure, Judgment, Pair, PairStatus
from tests import pipeline_helpers
from tests.builders import installed_runtime, make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.pipeline_helpers import add_pairs, count_judgments, statuses, sweep_as_beat_would

pytestmark = pytest.mark.slow

fake_openai = pipeline_helpers.fake_openai  # the fixture of tests/pipeline_helpers.py, bound here for pytest to find


def failures_of(database: Database, pair_id: int) -> int:
    with database.session() as session:
        return session.scalar(select(JudgingFailure.failures).where(JudgingFailure.pair_id == pair_id)) or 0


def test_an_outage_is_not_counted(database: Database, redis_url: str, runtime_for) -> None:
    """An outage of the database or Redis fails judge_pair after its retries, but counts for nothing: it would
    give up on healthy pairs."""
    from kombu.exceptions import OperationalError as BrokerError
    from sqlalchemy.exc import OperationalError

    from workers.judging.rules import MAX_FAILED_RUNS
    from workers.tasks.judging import _log_failure

    pair_id = add_pairs(database, 1)[0]
    runtime_for(make_settings(redis_url=redis_url, database_url=database.url))
    outages = [
        OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly")),
        BrokerError("Error 111 connecting to localhost:6379. Connection refused."),  # send_task in send_follow_ups
        redis.exceptions.ConnectionError("Connection refused"),
        ConnectionResetError(104, "Connection reset by peer"),
    ]
    for _ in range(MAX_FAILED_RUNS):  # an outage spanning many sweeps
        for error in outages:
            _log_failure(task_id="t", exception=error, args=[pair_id])
    assert failures_of(database, pair_id) == 0


def test_a_recent_failure_is_judged_again_not_given_up_on(database: Database, redis_url: str, runtime_for) -> None:
    """A bug counts; yet while the last failure is recent a twin run (a redelivery, a duplicate) may still be
    storing the real verdict, so the sweeper re-enqueues the pair and gives up only at a sweep after a quiet
    interval."""
    from workers.judging.rules import MAX_FAILED_RUNS
    from workers.tasks.judging import _log_failure

    pair_id = add_pairs(database, 1)[0]
    runtime_for(make_settings(redis_url=redis_url, database_url=database.url))
    for _ in range(MAX_FAILED_RUNS):
        _log_failure(task_id="t", exception=ValueError("unknown judge: no_such_judge"), args=[pair_id])
    assert failures_of(database, pair_id) == MAX_FAILED_RUNS

    broker = redis.Redis.from_url(redis_url)
    # The last failure is recent: re-enqueued (a run), not given up on.
    assert (
        sweep_as_beat_would(database, broker_url=redis_url, db_url=database.url, pair_ids=[pair_id], age_failures=False)
        == 1
    )
    assert statuses(database, [pair_id]) == Counter({PairStatus.PENDING: 1})
    assert broker.llen(QUEUE_JUDGE) == 1
    assert count_judgments(database) == 0
    # A sweep after a quiet interval (that run never came, or failed again long ago): given up on.
    assert sweep_as_beat_would(database, broker_url=redis_url, db_url=database.url, pair_ids=[pair_id]) == 1
    assert statuses(database, [pair_id]) == Counter({PairStatus.JUDGED: 1})
    with database.session() as session:
        error = session.scalar(select(Judgment.error).where(Judgment.pair_id == pair_id))
    assert f"gave up after {MAX_FAILED_RUNS} failed attempts" in error and "no_such_judge" in error


def test_a_twin_found_in_the_in_process_cache_is_free(
    settings_for, database: Database, fake_openai: FakeOpenAI
) -> None:
    """The SQL cache missed (the twin's row is not stored yet) but this process judged the same texts moments
    ago: the verdict is copied from the client's cache, charged nothing and recorded without tokens."""
    from judges import RelevancyJudge
    from workers.tasks.judging import judge_pair

    with installed_runtime(
        settings_for(
            openai_base_url=fake_openai.base_url,
            openai_api_key="sk-test-key",
            llm_max_retries=0,
        )
    ) as runtime:
        question, answer = "How do I reset?", "Use the Reset button."
        twin = add_pairs(database, 1, question=question, answer=answer)
        first = RelevancyJudge().evaluate(runtime.llm, question, answer)  # a twin's judgment, not stored yet
        assert first.prompt_tokens and len(fake_openai.requests) == 1
        assert judge_pair.apply(args=[twin[0]]).get() == PairStatus.JUDGED
    assert len(fake_openai.requests) == 1  # no second call
    with database.session() as session:
        judgment = session.scalars(select(Judgment).where(Judgment.pair_id == twin[0])).one()
        charged = session.scalar(select(func.coalesce(func.sum(DailyUsage.llm_calls), 0)))
    assert judgment.cached and judgment.score == first.score
    assert (judgment.prompt_tokens, judgment.completion_tokens, judgment.latency_ms) == (0, 0, 0.0)
    assert charged == 0


# The stale sweeper --------------------------------------------------------------------------------------------


def test_stale_sweeper_reenqueues_lost_pairs_once_per_period(settings_for, database: Database, redis_url: str) -> None:
    from workers.tasks.sweeper import requeue_stale

    with installed_runtime(settings_for()):
        fresh = add_pairs(database, 2)
        lost = add_pairs(database, 3, start=10)
        old = datetime.now(UTC) - timedelta(minutes=30)
        with database.session() as session:
            session.execute(update(Pair).where(Pair.id.in_(lost)).values(updated_at=old))
        assert requeue_stale.apply().get() == 3
        queue = redis.Redis.from_url(redis_url)
        assert queue.llen(QUEUE_JUDGE) == 3
        assert requeue_stale.apply().get() == 0  # touched: the next sweep leaves them alone
        assert statuses(database, fresh + lost) == Counter({PairStatus.PENDING: 5})


def test_database_retries_before_llm_failures_do_not_shorten_the_llm_retries(
    settings_for, database: Database, fake_openai: FakeOpenAI
) -> None:
    """judge_pair run as Celery would after eight database autoretries (request.retries = 8): the LLM still gets
    its RELMON_LLM_MAX_RETRIES retries; when they run out, the endpoint is down and the pair waits (pending, no
    error verdict)."""
    from workers.judging import outage
    from workers.tasks.judging import judge_pair

    with installed_runtime(
        settings_for(
            openai_base_url=fake_openai.base_url,
            openai_api_key="sk-test-key",
            llm_max_retries=3,
            retry_base_seconds=0.01,
        )
    ) as runtime:
        fake_openai.set_behavior(always_status=503, retry_after_seconds=0)
        (pair_id,) = add_pairs(database, 1)
        assert judge_pair.apply(args=[pair_id], retries=8).get() == "waiting"
        down = outage.current(runtime.redis)
        assert down is not None and down.failure == "503"
        assert outage.waiting_ids(runtime.redis) == {pair_id}
    assert len(fake_openai.requests) == 4  # the first call and three retries
    assert count_judgments(database) == 0
    assert statuses(database, [pair_id]) == Counter({PairStatus.PENDING: 1})


def test_a_judgment_stored_while_the_broker_is_down_is_still_handed_to_the_alert_policy(
    settings_for, database: Database, redis_url: str, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judgment and the pair's `judged` status commit together; the alert task is queued after. When the
    broker refuses that (Redis restarting), the pair is already judged, so neither a plain retry nor the stale
    sweeper would look at it again: the task retries as a resumed run that hands the stored judgment on."""
    from kombu.exceptions import OperationalError as BrokerError

    from workers.tasks import judging

    with installed_runtime(
        settings_for(
            openai_base_url=fake_openai.base_url,
            openai_api_key="sk-test-key",
            alert_channel="C_ALERTS",
        )
    ):
        queued: list[tuple[str, list]] = []
        refusals = iter([True])  # the first send fails, as against a restarting Redis

        def send_task(name: str, args: list, **_options) -> None:
            if next(refusals, False):
                raise BrokerError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
            queued.append((name, args))

        monkeypatch.setattr(judging.celery, "send_task", send_task)
        (pair_id,) = add_pairs(database, 1, answer="Our offtopic cafeteria menu is pasta.")
        assert judging.judge_pair.apply(args=[pair_id]).get() == PairStatus.JUDGED
    with database.session() as session:
        judgment = session.scalars(select(Judgment).where(Judgment.pair_id == pair_id)).one()
    assert judgment.score == 0
    assert queued == [(task_names.CONSIDER_ALERT, [judgment.id])]
    assert len(fake_openai.requests) == 1  # the resumed run judged nothing again
    # Noted until it ends, so that a message lost in a dying worker's hands is sent again (common.task_notes).
    noted = redis.Redis.from_url(redis_url).hkeys(task_notes.KEY)
    assert noted == [task_notes.call_id(task_names.CONSIDER_ALERT, [judgment.id]).encode()]
