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
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import select

from common.messages.alerts import ACTION_RIGHT
from store import alerts as alert_store
from store.db import Database
from store.models import Alert, Judgment, JudgmentStatus, Pair, PairStatus
from tests import slack_requests as sr
from tests.bot_harness import SECRET, BotServer, ServedBot, bot_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import RelmonProcess, relmon_env, wait_for
from tests.services import create_postgres_database, drop_postgres_database, postgres_admin_url

pytestmark = pytest.mark.slow

CHANNEL = "C_SUPPORT"
ALERTS = "C_ALERTS"
THRESHOLD = 2  # relevancy ≤ 2 alerts; the fake LLM scores "offtopic" answers 0 and others 4
VISIBILITY_TIMEOUT = 5  # a killed worker's unacked tasks come back within seconds
# Beat's sweeper re-enqueues a pair that has not moved on for this long: the backstop for a task message lost
# in kombu's window between taking a message off the Redis list and recording it as unacknowledged.
SWEEP_AFTER = 15
SETTLE_TIMEOUT = 90.0  # the longest a test waits for the pipeline to finish (it usually takes seconds)


# The system under test ---------------------------------------------------------------------------------------


@dataclass
class System:
    bot: ServedBot
    slack: FakeSlack
    llm: FakeOpenAI
    database: Database
    worker_env: dict[str, str]
    log_dir: Path
    workers: list[RelmonProcess] = field(default_factory=list)
    beat: RelmonProcess | None = None
    answers: dict[str, bool] = field(default_factory=dict)  # answer ts → offtopic (should alert)
    restarts: int = 0  # workers the supervisor replaced

    def start_workers(self, count: int = 1) -> list[RelmonProcess]:
        """Start `count` workers at once and wait until each is ready (start-up is the slow part)."""
        fresh = [RelmonProcess("worker", env=self.worker_env, log_dir=self.log_dir).start() for _ in range(count)]
        self.workers.extend(fresh)
        for worker in fresh:
            worker.wait_until_ready(timeout=90)
        return fresh

    def send(self, event: dict, *, deadline: float = 60.0) -> None:
        """Deliver one event as Slack does: until the bot answers 2xx, retrying 5xx and dropped connections
        (same event_id, a fresh signature each time)."""
        body = sr.envelope(event)
        stop = time.monotonic() + deadline
        while True:
            try:
                response = sr.post(self.bot.url, body, SECRET, timeout=10)
                if response.status_code < 300:
                    return
                assert response.status_code >= 500, f"{response.status_code} {response.text}"
            except httpx.TransportError:
                pass
            if time.monotonic() > stop:
                raise AssertionError(f"the bot never accepted event {body['event_id']}")
            time.sleep(0.3)

    def send_answers(self, count: int, *, start: int = 0, offtopic_every: int = 4) -> None:
        """`count` questions, each answered in its thread by the monitored bot; every n-th answer is off topic.
        Four conversations at a time, as Slack delivers events concurrently."""
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda i: self._send_answer(i, offtopic_every), range(start, start + count)))

    def _send_answer(self, i: int, offtopic_every: int) -> None:
        question_ts = sr.next_ts()
        self.send(sr.human_message(CHANNEL, question_ts, f"How do I reset the password on device {i}?"))
        offtopic = i % offtopic_every == 0
        text = (
            f"Our offtopic cafeteria menu for day {i} is pasta."
            if offtopic
            else f"Open Settings, then Security, then Reset on device {i}."
        )
        answer_ts = sr.next_ts()
        self.send(sr.bot_message(CHANNEL, answer_ts, text, thread_ts=question_ts))
        self.answers[answer_ts] = offtopic

    # What happened -----------------------------------------------------------------------------------------

    def pairs(self) -> list[Pair]:
        with self.database.session() as session:
            return list(session.execute(select(Pair).order_by(Pair.id)).scalars())

    def judgments(self) -> list[Judgment]:
        with self.database.session() as session:
            return list(session.execute(select(Judgment)).scalars())

    def alert_rows(self) -> list[Alert]:
        with self.database.session() as session:
            return list(session.execute(select(Alert)).scalars())

    def posted_low_alerts(self) -> Counter[int]:
        """Judgment IDs of low-score alerts that Slack accepted (429'd attempts are not posts), with counts."""
        with self.slack._lock:
            messages = list(self.slack.messages.get(ALERTS, {}).values())
        ids: Counter[int] = Counter()
        for message in messages:
            for block in message.get("blocks") or []:
                for element in block.get("elements") or []:
                    if isinstance(element, dict) and element.get("action_id") == ACTION_RIGHT:
                        ids[int(element["value"])] += 1
        return ids

    def revive_dead_workers(self) -> None:
        """What systemd or a container restart policy does: a worker process that exited is replaced.
        (Celery 5.7 / kombu 5.7 workers exit with "Unrecoverable error" when Redis is killed under them.)"""
        for index, worker in enumerate(self.workers):
            if not worker.running():
                worker.stop()
                self.workers[index] = RelmonProcess("worker", env=self.worker_env, log_dir=self.log_dir).start()
                self.restarts += 1

    def finished(self) -> bool:
        self.revive_dead_workers()
        pairs = self.pairs()
        if len(pairs) < len(self.answers) or any(p.status != PairStatus.JUDGED for p in pairs):
            return False
        low = {j.id for j in self.judgments() if j.status == JudgmentStatus.OK and j.score <= THRESHOLD}
        return set(self.posted_low_alerts()) >= low

    def wait_until_finished(self, timeout: float = SETTLE_TIMEOUT) -> None:
        try:
            wait_for(self.finished, timeout=timeout, interval=0.25, what="every pair judged and alerted")
        except AssertionError as error:
            statuses = Counter(p.status for p in self.pairs())
            tails = "\n".join(
                f"--- worker {w.pid} ---\n" + "\n".join(line[:300] for line in w.tail(15).splitlines())
                for w in self.workers
            )
            raise AssertionError(f"{error}\npair statuses: {dict(statuses)}\n{tails}") from None
        time.sleep(1.0)  # a late duplicate (a redelivered task) would land in this second

    def check_exactly_once(self, *, extra_llm_calls: int = 0) -> dict[str, int]:
        """The promises, checked on the database and at both fakes; returns the tallies for the message."""
        pairs = self.pairs()
        assert sorted(p.answer_ts for p in pairs) == sorted(self.answers), "a captured answer is missing or doubled"
        assert all(p.status == PairStatus.JUDGED for p in pairs)

        judgments = self.judgments()
        per_pair_judge = Counter((j.pair_id, j.judge) for j in judgments)
        assert set(per_pair_judge.values()) == {1}
        assert {pair_id for pair_id, _ in per_pair_judge} == {p.id for p in pairs}
        assert all(j.status in (JudgmentStatus.OK, JudgmentStatus.ERROR) for j in judgments)

        offtopic_by_pair = {p.id: self.answers[p.answer_ts] for p in pairs}
        ok = [j for j in judgments if j.status == JudgmentStatus.OK]
        for judgment in ok:  # the score follows the answer, whatever the faults
            assert (judgment.score <= THRESHOLD) == offtopic_by_pair[judgment.pair_id], judgment.id
        low = {j.id for j in ok if j.score <= THRESHOLD}

        posted = self.posted_low_alerts()
        assert set(posted) == low, "an alert is missing, or an error or a good score was alerted"
        assert set(posted.values()) <= {1}, f"duplicate alerts: {[i for i, n in posted.items() if n > 1]}"
        low_rows = Counter(a.judgment_id for a in self.alert_rows() if a.kind == "low_score")
        assert set(low_rows) == low and set(low_rows.values()) <= {1}

        llm_calls = len(self.llm.requests)
        fresh = [j for j in ok if not j.cached]
        assert llm_calls >= len(fresh)
        assert llm_calls <= len(judgments) + extra_llm_calls, f"{llm_calls} LLM calls for {len(judgments)} pairs"
        return {"pairs": len(pairs), "ok": len(ok), "errors": len(judgments) - len(ok), "alerts": len(posted)}

    def start_beat(self) -> None:
        """Exactly one `relmon beat`, as in production: its sweeper is part of what keeps nothing stuck."""
        self.beat = RelmonProcess("beat", env=self.worker_env, log_dir=self.log_dir).start()

    def stop(self) -> None:
        for process in [*self.workers, *([self.beat] if self.beat else [])]:
            process.kill()  # nothing to finish gracefully: the test has checked what it needed
            process.stop()


@contextmanager
def fresh_database(directory: Path) -> Iterator[str]:
    """A fresh, migrated database: PostgreSQL (as in production) when a server answers, else SQLite."""
    admin = postgres_admin_url()
    if admin is None:
        url = f"sqlite:///{directory / 'relmon.sqlite3'}"
        Database(url).migrate()
        yield url
        return
    url, name = create_postgres_database(admin)
    database = Database(url)
    database.migrate()
    database.dispose()
    try:
        yield url
    finally:
        drop_postgres_database(admin, name)


@pytest.fixture
def fault_db_url(tmp_path: Path) -> Iterator[str]:
    with fresh_database(tmp_path) as url:
        yield url


@contextmanager
def running_system(
    *,
    redis_url: str,
    database_url: str,
    directory: Path,
    llm_latency_ms: float = 50,
    workers: int = 2,
    concurrency: int = 8,
    bot_overrides: dict | None = None,
    **worker_settings: object,
) -> Iterator[System]:
    """The in-process bot over HTTP, `workers` real `relmon worker` processes, the fake Slack and LLM."""
    with FakeSlack() as slack, FakeOpenAI(latency_ms=llm_latency_ms) as llm:
        slack.add_user("U_ASKER", "ana", "Ana Diaz")
        slack.add_channel(CHANNEL, "support", members=["U_ASKER", "U_RELMON", "U_SUPPORT"])
        slack.add_channel(ALERTS, "alerts", members=["U_RELMON"])
        timings = {
            "RELMON_SETTLE_SECONDS": 0,
            "RELMON_VISIBILITY_TIMEOUT": VISIBILITY_TIMEOUT,
            "RELMON_SWEEP_AFTER_SECONDS": SWEEP_AFTER,
            "RELMON_RETRY_BASE_SECONDS": 0.05,
            # Long enough that a reply stalled on a loaded machine is not retried (the tests count LLM calls);
            # the fault test that serves timeouts sets 1 s.
            "RELMON_LLM_TIMEOUT": 10,
            "RELMON_ALERT_CAP_PER_HOUR": 10_000,
            # Exactly one alert per low score: a degradation alert depends on the order the scores land in.
            "RELMON_DEGRADATION_WINDOW_MINUTES": 0,
            "RELMON_THRESHOLD": THRESHOLD,
            "RELMON_HISTORY_FALLBACK": "false",
        }
        env = relmon_env(
            redis_url=redis_url,
            database_url=database_url,
            slack_api_url=slack.api_url,
            openai_base_url=llm.base_url,
            data_dir=directory / "data",
            RELMON_WORKER_CONCURRENCY=concurrency,
            **{**timings, **worker_settings},
        )
        settings = bot_settings(
            redis_url=redis_url,
            database_url=database_url,
            slack_api_url=slack.api_url,
            settle_seconds=0,
            history_fallback=False,
            **(bot_overrides or {}),
        )
        with BotServer(settings) as bot:
            system = System(bot, slack, llm, Database(database_url), env, directory / "logs")
            try:
                system.start_workers(workers)
                system.start_beat()
                yield system
            finally:
                system.stop()
                system.database.dispose()


@pytest.fixture
def make_system(redis_url: str, fault_db_url: str, tmp_path: Path) -> Iterator:
    with ExitStack() as stack:
        yield lambda **options: stack.enter_context(
            running_system(redis_url=redis_url, database_url=fault_db_url, directory=tmp_path, **options)
        )


# The faults --------------------------------------------------------------------------------------------------


def test_worker_killed_mid_batch_end_to_end_with_alerts(make_system) -> None:
    """SIGKILL one of two workers while it holds LLM calls in flight; a replacement joins. The killed worker's
    unacked tasks come back after the visibility timeout and are finished elsewhere, once."""
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


def test_redis_killed_and_restarted_mid_run(make_system, redis_server) -> None:
    """Redis dies (SIGKILL) half-way through and comes back from its append-only file: events sent meanwhile
    are refused with 5xx and redelivered; tasks the workers held are restored; nothing is judged twice."""
    system = make_system(llm_latency_ms=200)
    system.send_answers(20)
    redis_server.restart(kill=True, down_seconds=1.0)
    system.send_answers(20, start=20)
    system.wait_until_finished()
    tallies = system.check_exactly_once(extra_llm_calls=16)
    assert tallies["pairs"] == 40 and tallies["alerts"] == 10


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


def test_postgres_restarted_mid_run(make_system, fault_db_url: str) -> None:
    """The database goes away under the bot and the workers: the bot answers 5xx (Slack retries), tasks that hit
    OperationalError are retried by Celery, the first failure on a dead connection makes SQLAlchemy drop the pool."""
    if not fault_db_url.startswith("postgresql"):
        pytest.skip("needs PostgreSQL")
    command = _restart_postgres_command(fault_db_url)
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
