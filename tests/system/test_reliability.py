"""Fault tests, end to end: signed events over real HTTP to the bot's WSGI app → real Redis → real `relmon worker`
processes → the fake LLM and the fake Slack over HTTP → PostgreSQL (SQLite when no server answers locally).

Each test sends question/answer pairs the way Slack does (a 5xx or a dropped connection is retried, as Slack
retries), breaks something mid-run — a worker killed with SIGKILL, Redis killed and restarted (AOF, fsync always),
PostgreSQL restarted, the LLM failing 30% of calls, Slack answering 429 — then checks the pipeline's promises:
every captured pair is judged, or stored as an error, exactly once per judge; every low score is alerted exactly
once (counted at the fake Slack, per judgment); no error becomes an alert; the LLM saw no more calls than judgments
plus the calls cut short by the fault.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
import redis

from common import task_names
from common.celery_app import create_celery
from store import alerts as alert_store
from store.models import JudgmentStatus
from store.settings import MIN_LEASE_SECONDS, Settings
from tests import slack_requests as sr
from tests.alert_helpers import ALERTS, add_judgment
from tests.processes import json_lines, relmon_env, start_worker, wait_for
from workers import noted_tasks
from workers.judging.queued import UNACKED_KEY

pytestmark = pytest.mark.slow

# The recovery timings are the defaults (the task lease RELMON_VISIBILITY_TIMEOUT, the orphan check every half
# lease, RELMON_SWEEP_AFTER_SECONDS; see tests/running_system.py): a green run means the defaults recover.
RECOVERY_BOUND = 60.0  # a dead worker's answers are judged and alerted this long after a live worker is there


# The faults --------------------------------------------------------------------------------------------------


def test_worker_killed_mid_batch_end_to_end_with_alerts(make_system) -> None:
    """SIGKILL one of two workers while it holds LLM calls in flight; a replacement joins. The killed worker's
    unacked tasks come back once their lease lapses and are finished elsewhere, once."""
    system = make_system(llm_latency_ms=400, concurrency=8)
    victim = system.workers[0]
    system.send_answers(40)
    wait_for(lambda: len(system.judgments()) >= 5, timeout=60, what="judging under way")
    in_flight_before = len(system.llm.requests) - len(system.judgments())
    victim.kill()
    assert not victim.running()
    system.wait_until_finished()  # the supervisor starts a replacement
    assert system.restarts == 1
    tallies = system.check_exactly_once(extra_llm_calls=max(in_flight_before, 0) + 16)
    assert tallies["alerts"] == 10


def test_the_only_worker_killed_while_busy_recovers_within_a_minute_of_its_replacement(make_system) -> None:
    """Issue #19's trial: one worker at the default concurrency, the LLM at 800 ms, 40 answers; the worker is
    SIGKILLed while busy and a replacement starts. Within 60 s of the replacement being ready, every answer is
    judged and every off-topic one alerted, exactly once."""
    system = make_system(llm_latency_ms=800, workers=1, concurrency=64)
    system.send_answers(40)
    wait_for(lambda: len(system.llm.requests) >= 10, timeout=60, what="LLM calls in flight")
    in_flight_before = len(system.llm.requests) - len(system.judgments())
    system.workers[0].kill()
    system.revive_dead_workers()
    system.workers[0].wait_until_ready(timeout=90)
    ready_at = time.monotonic()
    system.wait_until_finished(timeout=RECOVERY_BOUND)
    recovered_in = time.monotonic() - ready_at
    tallies = system.check_exactly_once(extra_llm_calls=max(in_flight_before, 0) + 64)
    assert tallies["pairs"] == 40 and tallies["alerts"] == 10
    assert recovered_in <= RECOVERY_BOUND


def test_an_alert_task_lost_in_a_dying_workers_hands_is_sent_again_by_beat(make_system, redis_url) -> None:
    """A low score whose `consider_alert` message a SIGKILLed worker took off the queue but never recorded as held
    (kombu's window): its note is all that is left. Beat's orphan check sends it again once it is a lease old, and a
    live worker posts the alert, once."""
    system = make_system(workers=1)
    broker = redis.Redis.from_url(redis_url)
    runtime = SimpleNamespace(db=system.database)
    judgment_id = add_judgment(runtime, score=0, answer_ts=sr.next_ts(), answer="Our offtopic cafeteria serves pasta.")
    broker.zadd(noted_tasks.KEY, {noted_tasks.note_of(task_names.CONSIDER_ALERT, [judgment_id]): time.time() - 60})
    # The orphan check runs every half lease (15 s at the default 30 s): the alert lands within one round or two.
    wait_for(lambda: system.slack.posted(ALERTS), timeout=45, interval=0.25, what="the alert, sent again")
    wait_for(lambda: broker.zcard(noted_tasks.KEY) == 0, timeout=10, what="its note dropped")
    time.sleep(1.0)  # a second run would have posted by now
    [alert] = system.slack.posted(ALERTS)
    assert alert["text"].startswith("Low relevancy score 0")
    broker.close()


def test_redis_killed_and_restarted_mid_run(make_system, redis_server) -> None:
    """Redis dies (SIGKILL) half-way through and comes back from its append-only file: events sent meanwhile
    are spooled by the bot and handed on; tasks the workers held are restored; nothing is judged twice."""
    system = make_system(llm_latency_ms=200)
    system.send_answers(20)
    redis_server.restart(kill=True, down_seconds=1.0)
    system.send_answers(20, start=20)
    system.wait_until_finished()
    tallies = system.check_exactly_once(extra_llm_calls=16)
    assert tallies["pairs"] == 40 and tallies["alerts"] == 10
    assert system.restarts == 0  # no worker died of the lost connection: each reconnected


def test_countdowns_a_worker_held_when_redis_restarted_run_once_and_the_worker_lives(
    redis_server, redis_url: str, fresh_db_url: str, tmp_path: Path
) -> None:
    """Celery lets go of the countdowns it held when its connection to Redis breaks. The worker lives (kombu's
    restore on closing the broken channel used to stop it), stops renewing their leases, and once a lease lapses
    restores them itself: each runs once."""
    env = relmon_env(
        redis_url=redis_url,
        database_url=fresh_db_url,
        data_dir=tmp_path / "data",
        RELMON_VISIBILITY_TIMEOUT=MIN_LEASE_SECONDS,
    )
    producer = create_celery(Settings(_env_file=None, redis_url=redis_url), redis_url)
    client = redis.Redis.from_url(redis_url)
    with start_worker(env, log_dir=tmp_path / "logs") as worker:
        missing = [990_001, 990_002, 990_003]  # judge_pair logs "pair not found" for each, and stores nothing
        for pair_id in missing:
            producer.send_task(task_names.JUDGE_PAIR, args=[pair_id], countdown=4)
        wait_for(lambda: client.hlen(UNACKED_KEY) == len(missing), timeout=20, what="the worker holding them")
        redis_server.restart(kill=True, down_seconds=1.0)
        client = redis.Redis.from_url(redis_url)

        def judged() -> list[int]:
            return [line["pair_id"] for line in json_lines(worker.log()) if line.get("event") == "pair not found"]

        wait_for(lambda: len(judged()) >= len(missing), timeout=MIN_LEASE_SECONDS * 4, what="the countdowns run")
        time.sleep(MIN_LEASE_SECONDS / 2)  # a second run would come within a renewal or two
        assert sorted(judged()) == missing
        assert worker.running(), worker.tail()
        assert "Unrecoverable error" not in worker.log()
        assert client.hlen(UNACKED_KEY) == 0
    producer.close()


OUTAGE_SECONDS = 20  # shortened from bench/faults.py's 10 minutes: the spool's behaviour does not depend on it


def test_redis_down_20s_while_events_arrive_spooled_and_handed_on_in_order_once(make_system, redis_server) -> None:
    """Redis is down while Slack keeps delivering: every delivery gets 200 at the first try (Slack never sees a
    failure, so never turns the app's events off), the bot keeps the events on local disk, and once Redis is back
    they are handed on in the order they came, each answer paired with its question, judged and alerted exactly once."""
    system = make_system(llm_latency_ms=50)
    system.send_answers(8)
    redis_server.stop(kill=True)
    statuses: list[int] = []
    down_until = time.monotonic() + OUTAGE_SECONDS
    sent: list[str] = []
    for i in range(8, 24):
        answer_ts, answered = system.post_answer_once(i)
        statuses.extend(answered)
        sent.append(answer_ts)
    time.sleep(max(0.0, down_until - time.monotonic()))
    redis_server.start()
    assert set(statuses) == {200}
    system.wait_until_finished()
    tallies = system.check_exactly_once(extra_llm_calls=16)
    assert tallies["pairs"] == 24 and tallies["alerts"] == 6
    # Handed on in the order Slack sent them, so each answer found its own question (the workers store them in
    # whatever order their threads finish: pair IDs say nothing of the order).
    by_answer = {p.answer_ts: p for p in system.pairs()}
    assert [by_answer[ts].question_text for ts in sent] == [f"How do I reset device {i}?" for i in range(8, 24)]


def _restart_postgres_command(database_url: str) -> list[str] | None:
    """The command that restarts the machine's PostgreSQL server behind `database_url`, or None when this
    process cannot (not root, no pg_ctlcluster, or the URL points at another server)."""
    if os.geteuid() != 0 or shutil.which("pg_ctlcluster") is None or not Path("/etc/postgresql").is_dir():
        return None
    parts = urlsplit(database_url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    for version in sorted(os.listdir("/etc/postgresql")):
        config = Path("/etc/postgresql") / version / "main" / "postgresql.conf"
        port = 5432
        if config.exists():
            for line in config.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "port":
                    port = int(value.split("#")[0].strip())
        if port == (parts.port or 5432):
            return ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"]
    return None


@pytest.mark.serial  # it restarts the machine's PostgreSQL server: no other test may use it meanwhile
def test_postgres_restarted_mid_run(make_system, fresh_db_url: str) -> None:
    """The database goes away under the workers (the bot never waits for it): tasks that hit
    OperationalError are retried by Celery, the first failure on a dead connection makes SQLAlchemy drop the pool."""
    if not fresh_db_url.startswith("postgresql"):
        pytest.skip("needs PostgreSQL")
    command = _restart_postgres_command(fresh_db_url)
    if command is None:
        pytest.skip("cannot restart this PostgreSQL server (needs root and the machine's own cluster)")
    system = make_system(llm_latency_ms=200)
    system.send_answers(20)
    subprocess.run(command, check=True, timeout=60, capture_output=True)
    system.send_answers(20, start=20)
    system.wait_until_finished()
    tallies = system.check_exactly_once(extra_llm_calls=16)
    assert tallies["pairs"] == 40 and tallies["alerts"] == 10
    assert all(worker.running() for worker in system.workers)


def test_llm_failing_thirty_percent_of_calls(make_system) -> None:
    """429s, 5xx, timeouts and garbage on 30% of calls: transient ones are retried (one layer: Celery), garbage
    is stored as an error verdict, never a guessed score and never an alert."""
    system = make_system(llm_latency_ms=20, RELMON_LLM_TIMEOUT=1)  # the served timeouts (1.5 s) outlast it
    system.llm.set_behavior(latency_ms=20, fault_rate=0.3, seed=8, timeout_seconds=1.5, retry_after_seconds=0.05)
    system.send_answers(40)
    system.wait_until_finished()
    statuses = system.llm.statuses
    assert statuses.get(429) and statuses.get(500), statuses
    retries = sum(count for status, count in statuses.items() if status != 200)
    tallies = system.check_exactly_once(extra_llm_calls=retries + 16)
    assert tallies["errors"] >= 1  # garbage replies became error verdicts
    errors = [j for j in system.judgments() if j.status == JudgmentStatus.ERROR]
    assert all(j.score is None for j in errors)


def test_slack_rate_limits_alert_posts(make_system) -> None:
    """chat.postMessage answers 429 with Retry-After: each alert waits and is posted once."""
    system = make_system(llm_latency_ms=20)
    system.slack.rate_limit("chat.postMessage", times=6, retry_after=1)
    system.send_answers(24)
    system.wait_until_finished()
    tallies = system.check_exactly_once()
    assert tallies["alerts"] == 6
    attempts = system.slack.calls_to("chat.postMessage")
    assert len(attempts) >= tallies["alerts"] + 6  # the refused attempts were made, and retried


def test_slack_drops_the_connection_after_taking_alert_posts(make_system) -> None:
    """Slack carries out chat.postMessage but the connection closes before its answer: the client does not re-send
    it (only a request that never left is retried), and the task's retry finds the marked post in the channel
    instead of posting it again. Each alert is posted once."""
    system = make_system(llm_latency_ms=20)
    system.slack.drop_method("chat.postMessage", times=4)
    system.send_answers(24)
    system.wait_until_finished()
    # The dropped posts are in the channel at once; their tasks record them only when a retry has found them.
    wait_for(
        lambda: all(a.status == alert_store.STATUS_POSTED for a in system.alert_rows()),
        timeout=60,
        what="every alert recorded as posted",
    )
    tallies = system.check_exactly_once()
    assert tallies["alerts"] == 6
    assert len(system.slack.calls_to("chat.postMessage")) == tallies["alerts"]  # the dropped ones were not re-sent
    assert system.slack.calls_to("conversations.history")  # the retries looked for them
