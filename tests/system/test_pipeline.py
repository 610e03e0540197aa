"""The judging pipeline end to end: real `relmon worker` processes, a real Redis, SQLite and PostgreSQL, the fake
OpenAI and Slack servers over HTTP. Pending pairs are inserted with SQL and judge_pair is enqueued by name, as the
settle task would; the bot is not involved."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
import redis
from sqlalchemy import select, update

from common.celery_app import QUEUE_JUDGE
from store.db import Database
from store.models import DailyUsage, JudgingFailure, Judgment, Pair, PairStatus
from store.settings import MIN_LEASE_SECONDS
from tests import pipeline_helpers
from tests.broker import IdleWatch, wait_until_idle
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.pipeline_helpers import add_pairs, count_judgments, judgments_per_pair, statuses, sweep_as_beat_would
from tests.processes import RelmonProcess, WaitTimeout, relmon_env, start_worker, wait_for
from workers.sampling import is_sampled_in

pytestmark = pytest.mark.slow

JUDGE_PAIR = "workers.tasks.judging.judge_pair"
ALERT_CHANNEL = "C_ALERTS"


# Fixtures and helpers ----------------------------------------------------------------------------------------

fake_openai = pipeline_helpers.fake_openai  # the fixture of tests/pipeline_helpers.py, bound here for pytest to find


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def env_for(redis_url: str, db_url: str, fake_openai: FakeOpenAI, fake_slack: FakeSlack, tmp_path: Path):
    """An environment for `relmon worker`, with test-speed retries; keyword arguments override. (The kill test here
    takes the shortest lease; tests/system/test_reliability.py shows the default one recovers.)"""

    def make(**overrides: object) -> dict[str, str]:
        settings = {
            "RELMON_WORKER_CONCURRENCY": 8,
            "RELMON_RETRY_BASE_SECONDS": 0.05,
            "RELMON_LLM_TIMEOUT": 10,  # a stalled reply is not retried (tests count LLM calls); fault tests set 1
            "RELMON_ALERT_CHANNEL": ALERT_CHANNEL,
            **overrides,
        }
        return relmon_env(
            redis_url=redis_url,
            database_url=db_url,
            slack_api_url=fake_slack.api_url,
            openai_base_url=fake_openai.base_url,
            data_dir=tmp_path / "data",
            **settings,
        )

    return make


@pytest.fixture
def worker_logs(tmp_path: Path) -> Path:
    return tmp_path / "logs"


def enqueue(producer, pair_ids: list[int]) -> None:
    for pair_id in pair_ids:
        producer.send_task(JUDGE_PAIR, args=[pair_id], queue=QUEUE_JUDGE)


def settled(database: Database, pair_ids: list[int]) -> bool:
    return statuses(database, pair_ids).get(PairStatus.PENDING, 0) == 0


# (a) exactly once across a SIGKILL ----------------------------------------------------------------------------


def test_killed_worker_mid_batch_every_pair_judged_exactly_once(
    database: Database, env_for, producer, fake_openai: FakeOpenAI, worker_logs: Path
) -> None:
    fake_openai.set_behavior(latency_ms=150)
    env = env_for(RELMON_VISIBILITY_TIMEOUT=MIN_LEASE_SECONDS)  # the killed worker's messages come back sooner
    pair_ids = add_pairs(database, 200)
    worker = start_worker(env, log_dir=worker_logs)
    try:
        enqueue(producer, pair_ids)
        wait_for(lambda: count_judgments(database) >= 40, timeout=60, what="40 judgments before the kill")
        worker.kill()
        judged_before_kill = count_judgments(database)
        assert judged_before_kill < len(pair_ids), "the kill must land mid-batch"
        # The killed worker's reserved tasks sit unacked in Redis until the visibility timeout.
        assert redis.Redis.from_url(producer.conf.broker_url).hlen("unacked") > 0
    finally:
        worker.stop()

    restarted = start_worker(env, log_dir=worker_logs)
    broker = redis.Redis.from_url(producer.conf.broker_url)
    idle = IdleWatch(broker)
    try:
        # Everything Redis still holds (queued, or unacknowledged by the killed worker) comes back and is judged.
        wait_for(
            lambda: settled(database, pair_ids) or idle(),
            timeout=90,
            what="the queues to drain after the restart",
        )
        # kombu pops a message (BRPOP) before it records it as unacknowledged: a kill between the two loses that
        # message, and its pair stays pending. The stale sweeper (beat, every 5 minutes) is the backstop; run it
        # now, as beat would once the pair is 10 minutes old.
        stranded = [pid for pid in pair_ids if statuses(database, [pid]).get(PairStatus.PENDING)]
        assert len(stranded) <= int(env["RELMON_WORKER_CONCURRENCY"])
        if stranded:
            sweep_as_beat_would(database, broker_url=producer.conf.broker_url, db_url=database.url, pair_ids=stranded)
        wait_for(lambda: settled(database, pair_ids), timeout=60, what="every pair judged after the restart")
    except WaitTimeout as error:
        raise WaitTimeout(
            f"{error}: pairs {dict(statuses(database, pair_ids))}, queued {broker.llen(QUEUE_JUDGE)}, "
            f"unacked {broker.hlen('unacked')}, LLM requests {len(fake_openai.requests)}\n{restarted.tail(40)}"
        ) from None
    finally:
        restarted.stop()

    per_pair = judgments_per_pair(database)
    assert set(per_pair) == set(pair_ids)
    assert set(per_pair.values()) == {1}  # one judgment per pair and judge: never a second row
    assert statuses(database, pair_ids) == Counter({PairStatus.JUDGED: len(pair_ids)})
    # Each pair reached the LLM once, except those in flight at the kill (at most one per execution slot).
    requests = len(fake_openai.requests)
    assert len(pair_ids) <= requests <= len(pair_ids) + int(env["RELMON_WORKER_CONCURRENCY"])
    assert redis.Redis.from_url(producer.conf.broker_url).hlen("unacked") == 0


# (b) LLM faults -----------------------------------------------------------------------------------------------


def test_llm_faults_leave_every_pair_judged_or_stored_as_error(
    database: Database, env_for, producer, fake_openai: FakeOpenAI, worker_logs: Path
) -> None:
    # 30% of calls fail: 429 (Retry-After), 500, a timeout past the client's 1 s, or unreadable garbage.
    fake_openai.set_behavior(latency_ms=20, fault_rate=0.3, seed=11, timeout_seconds=1.5)
    pair_ids = add_pairs(database, 120)
    with start_worker(env_for(RELMON_WORKER_CONCURRENCY=16, RELMON_LLM_TIMEOUT=1), log_dir=worker_logs):
        enqueue(producer, pair_ids)
        wait_for(lambda: settled(database, pair_ids), timeout=90, what="every pair judged or errored")

    per_pair = judgments_per_pair(database)
    assert set(per_pair) == set(pair_ids) and set(per_pair.values()) == {1}  # none lost, none twice
    assert statuses(database, pair_ids) == Counter({PairStatus.JUDGED: len(pair_ids)})
    with database.session() as session:
        rows = session.execute(select(Judgment.status, Judgment.error, Judgment.raw_output)).all()
    by_status = Counter(status for status, _, _ in rows)
    assert set(by_status) <= {"ok", "error"} and by_status["ok"] > 0
    # Transient faults were retried (the fake answered 429/5xx and timed out) and mostly recovered; garbage is a
    # permanent error, stored with its reason and the raw text, never a guessed score.
    seen = fake_openai.statuses
    assert seen.get(429, 0) > 0 and seen.get(500, 0) > 0
    # Every fault kind was served, the timeout included (its late 200 looks like a success in `statuses`).
    served = fake_openai.faults_served
    assert all(served.get(kind, 0) > 0 for kind in ("429", "500", "timeout", "garbage")), served
    assert len(fake_openai.requests) > len(pair_ids)
    errors = [(error, raw) for status, error, raw in rows if status == "error"]
    assert errors, "some garbage replies must be stored as errors"
    assert all(error for error, _ in errors)
    assert any(raw and "lost its train of thought" in raw for _, raw in errors)


def test_a_429_retry_waits_for_retry_after_at_the_cost_of_one_budget_unit(
    database: Database, env_for, producer, fake_openai: FakeOpenAI, worker_logs: Path
) -> None:
    # The first two calls are rate-limited with Retry-After: 1.5 s; the backoff alone would wait 0.05 s, 0.1 s.
    fake_openai.set_behavior(fault_first=2, faults=["429"], retry_after_seconds=1.5)
    pair_ids = add_pairs(database, 1)
    with start_worker(env_for(), log_dir=worker_logs) as worker:
        enqueue(producer, pair_ids)
        wait_for(lambda: settled(database, pair_ids), timeout=60, what="the rate-limited pair")
        worker.wait_for_log('"event": "judged"', timeout=10)
        lines = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]

    assert fake_openai.statuses == {429: 2, 200: 1}
    times = fake_openai.request_times
    gaps = [later - earlier for earlier, later in pairwise(times)]
    assert len(gaps) == 2 and min(gaps) >= 1.4, gaps
    with database.session() as session:
        judgment = session.scalars(select(Judgment)).one()
        usage = session.scalars(select(DailyUsage)).one()
    assert judgment.status == "ok"
    # A budget of judgments, not of attempts: three calls for one pair and judge spend one unit.
    assert usage.llm_calls == 1
    # One structured line per stored judgment, with identifiers and the outcome, never the texts.
    judged = [line for line in lines if line.get("event") == "judged"]
    assert len(judged) == 1
    assert {key: judged[0].get(key) for key in ("channel", "message_ts", "judgment_id", "pair_id", "judge")} == {
        "channel": "C_SUPPORT",
        "message_ts": "1700000000.000000",
        "judgment_id": judgment.id,
        "pair_id": pair_ids[0],
        "judge": "relevancy",
    }
    assert (judged[0]["score"], judged[0]["status"]) == (judgment.score, "ok")
    assert "password" not in json.dumps(judged[0]).lower()


def thread_niceness(pid: int) -> set[int]:
    """The niceness of each of the process's threads (one that ends between the listing and its read is skipped)."""
    found = set()
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            found.add(os.getpriority(os.PRIO_PROCESS, int(thread)))
        except ProcessLookupError:
            continue
    return found


def test_a_worker_lowers_its_own_cpu_priority_so_the_bot_acks_first(
    database: Database, env_for, producer, worker_logs: Path
) -> None:
    """RELMON_WORKER_NICENESS (10 by default) is added to the worker's niceness, its threads' too; 0 keeps it."""
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    pair_ids = add_pairs(database, 1)
    with start_worker(env_for(), log_dir=worker_logs) as worker:
        enqueue(producer, pair_ids)
        wait_for(lambda: settled(database, pair_ids), timeout=60, what="the pair judged by the niced worker")
        assert thread_niceness(worker.pid) == {min(19, ours + 10)}
    with start_worker(env_for(RELMON_WORKER_NICENESS=0), log_dir=worker_logs) as worker:
        assert os.getpriority(os.PRIO_PROCESS, worker.pid) == ours


def test_a_pair_whose_judging_keeps_failing_is_given_up_on_as_an_error(
    database: Database, env_for, producer, fake_openai: FakeOpenAI, worker_logs: Path
) -> None:
    """A bug (here an unknown judge in the pair's list) fails the task every time: the sweeper re-enqueues it
    until it has failed MAX_FAILED_RUNS times, then stores an error with the reason; never a loop, never lost."""
    from workers.judging.rules import MAX_FAILED_RUNS

    broken = add_pairs(database, 1)
    healthy = add_pairs(database, 1, start=1)
    with database.session() as session:
        session.execute(update(Pair).where(Pair.id == broken[0]).values(judges=["relevancy", "no_such_judge"]))

    def failures() -> int:
        with database.session() as session:
            return session.scalar(select(JudgingFailure.failures).where(JudgingFailure.pair_id == broken[0])) or 0

    broker_url = producer.conf.broker_url
    with start_worker(env_for(), log_dir=worker_logs):
        enqueue(producer, broken + healthy)
        wait_for(lambda: settled(database, healthy), timeout=30, what="the healthy pair")
        for attempt in range(1, MAX_FAILED_RUNS + 1):
            wait_for(lambda attempt=attempt: failures() == attempt, timeout=30, what=f"failed run {attempt}")
            assert statuses(database, broken) == Counter({PairStatus.PENDING: 1})  # still waiting, never dropped
            # The sweep after the last failure gives up instead of re-enqueuing.
            assert sweep_as_beat_would(database, broker_url=broker_url, db_url=database.url, pair_ids=broken) == 1
        assert statuses(database, broken) == Counter({PairStatus.JUDGED: 1})
        wait_until_idle(broker_url)  # every run sent has ended: a further failing run would be counted now
        assert failures() == MAX_FAILED_RUNS
        # Judged now: later sweeps leave it alone.
        assert sweep_as_beat_would(database, broker_url=broker_url, db_url=database.url, pair_ids=broken) == 0

    with database.session() as session:
        rows = session.execute(
            select(Judgment.judge, Judgment.status, Judgment.error).where(Judgment.pair_id == broken[0])
        ).all()
    assert {judge for judge, _, _ in rows} == {"relevancy", "no_such_judge"}
    for _, status, error in rows:
        assert status == "error"
        assert f"gave up after {MAX_FAILED_RUNS} failed attempts" in error and "no_such_judge" in error
    assert statuses(database, healthy) == Counter({PairStatus.JUDGED: 1})


def test_llm_down_past_the_retries_leaves_the_answers_waiting_not_errors(
    database: Database, env_for, producer, fake_openai: FakeOpenAI, worker_logs: Path, redis_url: str
) -> None:
    """The LLM answers 503 to everything: each task retries (one layer: Celery's 6 retries, no SDK retries
    inside); the first whose retries run out marks the endpoint down, and every pair waits, pending, with no
    error verdict (the endpoint coming back: tests/system/test_llm_outage_processes.py)."""
    from workers.judging import outage

    client = redis.Redis.from_url(redis_url)
    fake_openai.set_behavior(always_status=503, retry_after_seconds=0)
    pair_ids = add_pairs(database, 3)
    with start_worker(env_for(RELMON_LLM_PROBE_SECONDS=3600), log_dir=worker_logs):
        enqueue(producer, pair_ids)
        wait_for(lambda: outage.waiting_count(client) == 3, timeout=60, what="every pair waiting")
    assert outage.current(client).failure == "503"
    assert count_judgments(database) == 0
    assert statuses(database, pair_ids) == Counter({PairStatus.PENDING: 3})
    assert 7 <= len(fake_openai.requests) <= 3 * 7  # once down, the other tasks' next retries make no call


# (c) durable cache and (d) sampling --------------------------------------------------------------------------


def test_judging_is_reproducible_across_processes(
    database: Database, env_for, producer, fake_openai: FakeOpenAI, worker_logs: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text("channels:\n  C_SAMPLED:\n    sample_rate: 0.3\n", encoding="utf-8")
    with start_worker(env_for(RELMON_CHANNEL_RULES=rules), log_dir=worker_logs):
        # (c) The same question and answer in two messages: the second is copied, not sent to the LLM again.
        first = add_pairs(database, 1, question="How do I reset?", answer="Use the Reset button.", start=500)
        enqueue(producer, first)
        wait_for(lambda: settled(database, first), timeout=30, what="the first pair")
        first_twin = add_pairs(database, 1, question="How do I reset?", answer="Use the Reset button.", start=501)
        # Enqueuing the first pair again adds nothing either: it is judged already.
        enqueue(producer, first + first_twin)
        wait_for(lambda: settled(database, first_twin), timeout=30, what="the twin pair")
        requests_after_cache = len(fake_openai.requests)

        # (d) A channel sampled at 30%: exactly the predicted messages are judged; on-demand ones always are.
        sampled = add_pairs(database, 60, channel="C_SAMPLED")
        on_demand = add_pairs(database, 5, channel="C_SAMPLED", source="command", start=1000)
        enqueue(producer, sampled + on_demand)
        wait_for(lambda: settled(database, sampled + on_demand), timeout=60, what="the sampled channel")

    assert requests_after_cache == 1
    with database.session() as session:
        twin = session.scalars(select(Judgment).where(Judgment.pair_id == first_twin[0])).one()
        original = session.scalars(select(Judgment).where(Judgment.pair_id == first[0])).one()
        assert twin.cached and not original.cached
        assert (twin.score, twin.cache_key, twin.reasoning) == (original.score, original.cache_key, original.reasoning)
        assert twin.prompt_tokens == 0  # a copy costs nothing
        # The provider's prompt cache: the first call pays in full, later ones read the constant prefix from it.
        later = session.scalars(select(Judgment).where(Judgment.pair_id.in_(on_demand))).all()
        assert original.cached_tokens == 0 and twin.cached_tokens == 0
        assert all(1024 <= judgment.cached_tokens < judgment.prompt_tokens for judgment in later)
        rows = session.execute(select(Pair.id, Pair.answer_ts, Pair.status).where(Pair.id.in_(sampled))).all()
    expected = {pid: is_sampled_in("C_SAMPLED", ts, 0.3, source="capture") for pid, ts, _ in rows}
    actual = {pid: status == PairStatus.JUDGED for pid, _, status in rows}
    assert actual == expected
    assert 0 < sum(actual.values()) < len(sampled)
    assert {status for _, _, status in rows} == {PairStatus.JUDGED, PairStatus.SKIPPED_SAMPLING}
    assert statuses(database, on_demand) == Counter({PairStatus.JUDGED: 5})
    per_pair = judgments_per_pair(database)
    assert all(per_pair[pid] == 1 for pid, judged in actual.items() if judged)
    assert all(pid not in per_pair for pid, judged in actual.items() if not judged)
    assert len(fake_openai.requests) == 1 + sum(actual.values()) + 5


# (e) daily budget ---------------------------------------------------------------------------------------------


def test_a_spent_budget_skips_pairs_with_one_notice(
    database: Database, env_for, producer, fake_openai: FakeOpenAI, fake_slack: FakeSlack, worker_logs: Path
) -> None:
    pair_ids = add_pairs(database, 12)
    with start_worker(env_for(RELMON_DAILY_BUDGET=5), log_dir=worker_logs):
        enqueue(producer, pair_ids)
        wait_for(lambda: settled(database, pair_ids), timeout=60, what="budgeted pairs")
        # The skipped status is stored before the notice is posted: wait for the notice too.
        wait_for(lambda: budget_notices(fake_slack), timeout=30, what="the budget notice")
        more = add_pairs(database, 3, start=100)  # later in the day: still skipped, still no second notice
        enqueue(producer, more)
        wait_for(lambda: settled(database, more), timeout=30, what="later pairs")

    assert statuses(database, pair_ids + more) == Counter(
        {PairStatus.JUDGED: 5, PairStatus.SKIPPED_BUDGET: len(pair_ids) + 3 - 5}
    )
    assert len(fake_openai.requests) == 5
    with database.session() as session:
        usage = session.scalars(select(DailyUsage)).one()
    assert usage.llm_calls == 5 and usage.budget_notice_sent
    notices = budget_notices(fake_slack)
    assert len(notices) == 1
    assert "RELMON_DAILY_BUDGET" in notices[0]["text"]


def budget_notices(fake_slack: FakeSlack) -> list[dict]:
    return [m for m in fake_slack.posted(ALERT_CHANNEL) if "daily budget" in (m.get("text") or "")]


def test_a_worker_process_runs_its_life_cleanly(env_for, producer, worker_logs: Path) -> None:
    worker = RelmonProcess("worker", env=env_for(), log_dir=worker_logs).start()
    try:
        worker.wait_until_ready(timeout=60)
        # judge_pair is registered (the worker prints no banner listing tasks): it runs, and finds no such pair.
        enqueue(producer, [987654321])
        worker.wait_for_log('"event": "pair not found"', timeout=30)
    finally:
        assert worker.stop() == 0
