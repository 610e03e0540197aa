"""Fault tests of the services, end to end (as tests/system/test_reliability.py, which breaks the workers, the LLM
and Slack): Redis killed and restarted mid-run (AOF, fsync always), Redis down for 20 s while events arrive, the
countdowns a worker held when Redis restarted, and PostgreSQL restarted under the workers. Each checks the
pipeline's promises: every captured pair judged exactly once per judge, every low score alerted exactly once, no
LLM call beyond the ones the fault cut short. A module of its own so that the two halves run on two test workers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from common import task_names
from store.settings import MIN_LEASE_SECONDS
from tests.broker import wait_until_idle
from tests.processes import json_lines, relmon_env, start_worker, wait_for
from workers.judging.queued import UNACKED_KEY

pytestmark = pytest.mark.slow


def test_redis_restarted_after_a_kill_mid_run_loses_nothing(make_system, redis_server) -> None:
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


def test_countdowns_a_worker_held_through_a_redis_restart_run_once(
    redis_server, redis_url: str, fresh_db_url: str, tmp_path: Path, producer
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
        # Nothing left queued or held: a second copy of a countdown (restored twice, or held and restored) has run.
        wait_until_idle(redis_url, timeout=MIN_LEASE_SECONDS * 4)
        assert sorted(judged()) == missing
        assert worker.running(), worker.tail()
        assert "Unrecoverable error" not in worker.log()
        assert client.hlen(UNACKED_KEY) == 0


OUTAGE_SECONDS = 20  # shortened from bench/faults.py's 10 minutes: the spool's behaviour does not depend on it


def test_events_arriving_while_redis_is_down_20s_are_handed_on_in_order_once(make_system, redis_server) -> None:
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
    time.sleep(max(0.0, down_until - time.monotonic()))  # the outage's full length is the fault under test
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
