"""The real services a process-level bench runs relmon against, started and torn down in one place: its own Redis
(fsync every second, as production runs it), a fresh database (SQLite, or PostgreSQL), the fake LLM in its own
process, the fake Slack, a Celery producer, and the environment `relmon bot` and `relmon worker` start with.
Also the sender processes a burst is sent from. Each bench keeps its own measurement; this module measures nothing.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from sqlalchemy import func, select

from bench.measure import fresh_database
from bench.pipeline import add_pairs, start_fake_openai
from common.celery_app import QUEUE_JUDGE, create_celery
from common.task_names import JUDGE_PAIR
from store.db import Database
from store.models import Judgment
from store.settings import Settings
from tests.fakes.slack_server import FakeSlack
from tests.processes import RelmonProcess, relmon_env, start_bot, start_worker, wait_for
from tests.services import RedisProcess, drop_postgres_database, postgres_admin_url

START_TIMEOUT = 120.0  # seconds for a bot or a worker to be ready: the benches start them on a busy machine


class BenchRedis(RedisProcess):
    """The test Redis, but with `appendfsync everysec` (Redis's default and the usual production setting)
    instead of the tests' fsync on every write."""

    def start(self) -> None:
        super().start()
        redis.Redis.from_url(self.url).config_set("appendfsync", "everysec")


def judged_pairs(database: Database) -> int:
    """Pairs with at least one judgment."""
    with database.session() as session:
        return session.scalar(select(func.count(func.distinct(Judgment.pair_id))))


@dataclass
class Services:
    """What `services()` started; `env` is for `relmon bot` and `relmon worker` (relmon's defaults, worker
    concurrency included, but what the bench asked for)."""

    work: Path  # the bench's folder: the database file, Redis's, the processes' logs
    redis_server: BenchRedis
    broker: redis.Redis
    database: Database
    slack: FakeSlack
    env: dict[str, str]
    openai_url: str | None = None  # None: no fake LLM (nothing is judged)
    producer: Celery | None = None

    def start_bot(self) -> tuple[RelmonProcess, str]:
        """A running `relmon bot` and its base URL; stopped when the caller's `with bot:` ends."""
        return start_bot(self.env, log_dir=self.work, timeout=START_TIMEOUT)

    def start_worker(self, **settings: object) -> RelmonProcess:
        """A running `relmon worker`, with these variables over `env`; stopped when the caller's `with` ends."""
        env = dict(self.env, **{name: str(value) for name, value in settings.items()})
        return start_worker(env, log_dir=self.work, timeout=START_TIMEOUT)

    def judge(self, pair_ids: list[int], *, started: int) -> None:
        """Enqueue judge_pair for each pair, then wait until a running worker has judged `started` of them (so
        that what the bench measures next happens while the worker is busy)."""
        assert self.producer is not None, "services(producer=False)"
        for pair_id in pair_ids:
            self.producer.send_task(JUDGE_PAIR, args=[pair_id], queue=QUEUE_JUDGE)
        wait_for(
            lambda: judged_pairs(self.database) >= started, timeout=START_TIMEOUT, interval=0.2, what="judging to start"
        )

    def judge_backlog(self, count: int, *, started: int = 20) -> list[int]:
        """`count` pending pairs stored and handed to the worker (`judge`); their ids."""
        pair_ids = add_pairs(self.database, count, start=0)
        self.judge(pair_ids, started=started)
        return pair_ids


@contextmanager
def services(
    prefix: str,
    *,
    llm_latency_ms: float | None = 0.0,
    llm_niceness: int = 0,
    producer: bool = True,
    postgresql: bool = False,
    database_url: str | None = None,
    **settings: object,
) -> Iterator[Services]:
    """Start the services in a new folder named `prefix`...; stop them all, whatever happened, when the block ends.

    `llm_latency_ms`: the fake LLM's (None: no fake LLM). `postgresql`: a fresh PostgreSQL database (dropped after),
    else `database_url`, else a fresh SQLite file. `settings`: variables for relmon's processes, over
    `tests.processes.relmon_env`'s, whose worker concurrency is dropped so that the worker runs relmon's default."""
    with ExitStack() as stack:
        work = Path(tempfile.mkdtemp(prefix=prefix))
        redis_server = BenchRedis(work / "redis")
        redis_server.start()
        stack.callback(redis_server.stop)
        broker = redis.Redis.from_url(redis_server.url)
        stack.callback(broker.close)
        admin = postgres_admin_url() if postgresql else None
        url, name = fresh_database(admin, work / "relmon.sqlite3")
        if admin is not None and name is not None:
            stack.callback(drop_postgres_database, admin, name)  # after the engine is disposed of (below)
        elif database_url:
            url = database_url
        database = Database(url)
        stack.callback(database.dispose)
        database.migrate()
        openai_url = None
        if llm_latency_ms is not None:
            fake_openai, openai_url = start_fake_openai(llm_latency_ms, niceness=llm_niceness)
            stack.callback(_stop, fake_openai)
        celery = None
        if producer:
            celery = create_celery(Settings(_env_file=None, redis_url=redis_server.url), redis_server.url)
            stack.callback(celery.close)
        slack = stack.enter_context(FakeSlack())
        env = relmon_env(
            redis_url=redis_server.url,
            database_url=url,
            slack_api_url=slack.api_url,
            openai_base_url=openai_url,
            data_dir=work / "data",
            **settings,
        )
        if "RELMON_WORKER_CONCURRENCY" not in settings:
            env.pop("RELMON_WORKER_CONCURRENCY")  # relmon's default
        yield Services(work, redis_server, broker, database, slack, env, openai_url, celery)


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=10)


def from_processes(
    send_all: Callable[..., None], url: str, bodies: list[bytes], senders: int, *, timeout: float
) -> tuple[list[Any], float]:
    """A burst sent from `senders` processes (forked: nothing to import), the bodies dealt among them, which start
    together once every one has connected. Each runs `send_all(url, its_bodies, ready, go, results)`: connects,
    releases `ready`, waits for `go`, sends, and puts what it measured on `results`. Returns what each put (in the
    order they finished) and the seconds from the go to the last one's result."""
    context = multiprocessing.get_context("fork")
    results, ready, go = context.Queue(), context.Semaphore(0), context.Event()
    processes = [
        context.Process(target=send_all, args=(url, bodies[i::senders], ready, go, results)) for i in range(senders)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        ready.acquire(timeout=60)
    started = time.perf_counter()
    go.set()
    measured = [results.get(timeout=timeout) for _ in processes]
    elapsed = time.perf_counter() - started
    for process in processes:
        process.join()
    return measured, elapsed
