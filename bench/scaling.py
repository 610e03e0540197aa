"""Judgments/s as worker processes are added while the LLM is the bound: for each count in --workers, that many
`relmon worker` processes (relmon's default concurrency each) judge a burst of pairs against the fake LLM answering
in 500 ms.

One Redis, one database for every count (a fresh PostgreSQL database when a server answers, else SQLite, where
workers wait for each other to write), the fake OpenAI server and the fake Slack, as bench.pipeline. For each count:
--pairs pairs per worker process are enqueued first (judge_pair), then the workers start: the rate is the middle
80% of the judgments' store times (bench.pipeline.sustained_rate), so neither the enqueueing nor the workers'
start-up counts. Every pair must be judged exactly once (judgments counted per pair). The machine's busy share over
that same window says whether the LLM was the bound: with the cores busy, more processes cannot add judgments.

Prints judgments/s per count, the growth from the previous count, the machine's busy share, lost and duplicated,
and a verdict: one worker >= 40/s, each step >= 1.3x the previous while the LLM is the bound, 0 lost, 0 duplicated.

    python -m bench.scaling                          # 1, 2 and 4 workers, 1200 pairs per worker process
    python -m bench.scaling --workers 1,2 --pairs 200
    python -m bench.scaling --concurrency 16       # fewer judgments in flight: the LLM the bound on a small machine
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from sqlalchemy import func, select

from bench.measure import fresh_database, machine_busy_seconds
from bench.pipeline import (
    TARGET_ONE_WORKER_PER_S,
    add_pairs,
    judgments_for,
    queues_idle,
    start_fake_openai,
    sustained_rate,
)
from common.celery_app import QUEUE_JUDGE, create_celery
from common.task_names import JUDGE_PAIR
from store.db import Database
from store.models import Judgment
from store.settings import Settings
from tests.fakes.slack_server import FakeSlack
from tests.processes import RelmonProcess, relmon_env, wait_for
from tests.services import RedisProcess, drop_postgres_database, postgres_admin_url

TARGET_STEP = 1.3  # each count's judgments/s over the previous count's, while the LLM is the bound
CORES_BOUND = 0.9  # the machine this busy (all cores): the cores are the bound, not the LLM


class BusySampler(threading.Thread):
    """The machine's busy CPU seconds (all cores, /proc/stat), sampled with the wall time, to read the busy share
    over any window afterwards."""

    def __init__(self, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.interval, self.samples = interval, [(time.time(), machine_busy_seconds())]
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            self.samples.append((time.time(), machine_busy_seconds()))

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def share(self, start: float, end: float) -> float:
        """The machine's busy share between the samples nearest `start` and `end` (0 to 1)."""
        first = min(self.samples, key=lambda sample: abs(sample[0] - start))
        last = min(self.samples, key=lambda sample: abs(sample[0] - end))
        wall = max(1e-9, last[0] - first[0])
        return (last[1] - first[1]) / wall / (os.cpu_count() or 1)


def judged_per_pair(database: Database, pair_ids: list[int]) -> Counter[int]:
    with database.session() as session:
        rows = session.execute(
            select(Judgment.pair_id, func.count()).where(Judgment.pair_id.in_(pair_ids)).group_by(Judgment.pair_id)
        ).all()
    return Counter(dict(rows))


def one_count(
    args: argparse.Namespace, env: dict[str, str], database: Database, producer, workers: int, start: int
) -> dict:
    """`workers` fresh worker processes judge --pairs pairs each (new pairs, numbered from `start`); their rate,
    the machine's busy share meanwhile, lost and duplicated."""
    pair_ids = add_pairs(database, args.pairs * workers, start=start)
    for pair_id in pair_ids:  # all queued before any worker starts: enqueueing is not what is measured
        producer.send_task(JUDGE_PAIR, args=[pair_id], queue=QUEUE_JUDGE)
    sampler = BusySampler()
    sampler.start()
    processes = [RelmonProcess("worker", env=env, log_dir=args.workdir).start() for _ in range(workers)]
    try:
        wait_for(
            lambda: sum(judged_per_pair(database, pair_ids).values()) >= len(pair_ids),
            timeout=len(pair_ids) / 10 + 120,
            interval=0.5,
            what=f"every pair judged by {workers} workers",
        )
        # Every message acknowledged: a duplicate would have run by now.
        wait_for(lambda: queues_idle(args.redis_url), timeout=120, interval=0.5, what="the queues to drain")
    finally:
        sampler.stop()
        for process in processes:
            process.stop()
    stored = sorted(created for _, created, _ in judgments_for(database, pair_ids))
    low, high = stored[len(stored) // 10], stored[(len(stored) * 9) // 10]
    counts = judged_per_pair(database, pair_ids)
    return {
        "workers": workers,
        "pairs": len(pair_ids),
        "per_s": sustained_rate(stored),
        "busy": sampler.share(low.timestamp(), high.timestamp()),
        "lost": sum(1 for pair_id in pair_ids if not counts[pair_id]),
        "duplicated": sum(n - 1 for n in counts.values() if n > 1),
    }


def report(results: list[dict], ceiling_per_worker: float) -> bool:
    """Prints one line per count and the verdict; True when the targets are met. A step whose larger count kept the
    machine CORES_BOUND busy is not held to TARGET_STEP: the cores were its bound, not the LLM."""
    grew, llm_bound, previous = 0, 0, None
    for result in results:
        growth = ""
        if previous is not None:
            step = result["per_s"] / previous["per_s"]
            if result["busy"] < CORES_BOUND:
                llm_bound += 1
                grew += step >= TARGET_STEP
            growth = f" ({step:.2f}x the previous{'' if result['busy'] < CORES_BOUND else ': the cores the bound'})"
        workers = result["workers"]
        print(
            f"{workers} worker{'s' if workers > 1 else ''}: {result['pairs']} pairs, {result['per_s']:.1f} "
            f"judgments/s{growth}; LLM ceiling {ceiling_per_worker * workers:.0f}/s; machine "
            f"{100 * result['busy']:.0f}% busy; lost {result['lost']}, duplicated {result['duplicated']}",
            flush=True,
        )
        previous = result
    one = next((r["per_s"] for r in results if r["workers"] == 1), None)
    lost, duplicated = sum(r["lost"] for r in results), sum(r["duplicated"] for r in results)
    met = (one is None or one >= TARGET_ONE_WORKER_PER_S) and grew == llm_bound and lost == duplicated == 0
    print(
        f"target (one worker >= {TARGET_ONE_WORKER_PER_S:.0f}/s: {'-' if one is None else f'{one:.0f}'}; each step "
        f">= {TARGET_STEP}x while the LLM is the bound: {grew} of {llm_bound} such steps, "
        f"{len(results) - 1 - llm_bound} bound by the cores (machine >= {100 * CORES_BOUND:.0f}% busy); "
        f"0 lost: {lost}; 0 duplicated: {duplicated}): {'met' if met else 'NOT met'}"
    )
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4", help="worker process counts (default 1,2,4)")
    parser.add_argument("--pairs", type=int, default=1200, help="pairs per worker process (default 1200)")
    parser.add_argument("--latency-ms", type=float, default=500.0, help="fake LLM latency (default 500)")
    parser.add_argument("--concurrency", type=int, help="RELMON_WORKER_CONCURRENCY (default: relmon's default)")
    parser.add_argument("--database-url", help="default: a fresh PostgreSQL database, or SQLite")
    args = parser.parse_args(argv)
    counts = [int(count) for count in args.workers.split(",")]

    args.workdir = Path(tempfile.mkdtemp(prefix="relmon-bench-scaling-"))
    redis_server = RedisProcess(args.workdir / "redis")
    redis_server.start()
    args.redis_url = redis_server.url
    admin = None if args.database_url else postgres_admin_url()
    database_url, database_name = args.database_url, None
    if not database_url:
        database_url, database_name = fresh_database(admin, args.workdir / "relmon.sqlite3")
    database = Database(database_url)
    database.migrate()
    fake_openai, openai_url = start_fake_openai(args.latency_ms)
    slack = FakeSlack().start()
    producer = create_celery(Settings(_env_file=None, redis_url=redis_server.url), redis_server.url)
    env = relmon_env(
        redis_url=redis_server.url,
        database_url=database_url,
        slack_api_url=slack.api_url,
        openai_base_url=openai_url,
        data_dir=args.workdir / "data",
    )
    concurrency = args.concurrency or Settings.model_fields["worker_concurrency"].default
    env["RELMON_WORKER_CONCURRENCY"] = str(concurrency)
    try:
        print(
            f"relmon scaling bench: worker processes {counts}, {concurrency} threads each, LLM "
            f"{args.latency_ms:.0f} ms, {database.engine.dialect.name}, {os.cpu_count()} cores",
            flush=True,
        )
        starts = [args.pairs * sum(counts[:index]) for index in range(len(counts))]
        results = [one_count(args, env, database, producer, n, start) for n, start in zip(counts, starts, strict=True)]
        met = report(results, concurrency / (args.latency_ms / 1000))
        llm_calls = httpx.get(f"{openai_url.removesuffix('/v1')}/_admin/stats", timeout=5).json()["requests"]
        judgments = sum(r["pairs"] + r["duplicated"] - r["lost"] for r in results)
        print(f"LLM calls: {llm_calls} for {judgments} judgments ({llm_calls - judgments} beyond one each)")
    finally:
        slack.stop()
        fake_openai.terminate()
        fake_openai.wait(timeout=10)
        producer.close()
        database.dispose()
        redis_server.stop()
        if database_name is not None and admin is not None:
            drop_postgres_database(admin, database_name)
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
