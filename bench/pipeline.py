"""Throughput, latency, overhead and memory of the judging pipeline: one `relmon worker`, default settings.

Starts a real Redis (or uses --redis-url), a SQLite database in a temporary folder (or --database-url), the fake
OpenAI server as a subprocess answering in 500 ms, the fake Slack (alerts land there), and one `relmon worker`
with default settings. Then:

1. burst: inserts --pairs pending pairs and enqueues judge_pair for all of them as fast as it can; prints
   judgments/s from the first enqueue to the last judgment stored.
2. steady: --rate pairs/s for --seconds (open loop: each pair has its slot); prints end-to-end latency (pair
   enqueued → judgment stored) and the pipeline's own overhead (latency minus the LLM call, judgment.latency_ms).

Worker RSS (the process and its children, from /proc) is sampled throughout; the peak is printed.

    python -m bench.pipeline
    python -m bench.pipeline --database-url postgresql://postgres@127.0.0.1:5432/relmon_bench
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import redis
from sqlalchemy import func, insert, select

from bench.measure import cpu_seconds, percentile, process_tree, status_mb
from common.celery_app import QUEUE_JUDGE, QUEUE_SLACK, create_celery
from common.task_names import JUDGE_PAIR
from store.db import Database
from store.models import Judgment, Pair, PairStatus
from store.settings import Settings
from tests.fakes.slack_server import FakeSlack
from tests.processes import relmon_env, start_worker, wait_for
from tests.services import RedisProcess, free_port

TARGET_ONE_WORKER_PER_S = 40.0  # judgments/s of one worker at 500 ms of LLM latency

# Measurements ----------------------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    return status_mb(pid, "VmRSS")


class RssSampler(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak = pid, interval, 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            self._halt.wait(self.interval)

    def stop(self) -> float:
        self._halt.set()
        self.join(timeout=5)
        return self.peak


def as_utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def sustained_rate(stored: list[datetime]) -> float:
    """Judgments/s over the middle 80% of their store times: away from the ramp-up (workers starting, threads
    filling) and the tail (the last LLM calls in flight)."""
    stored = sorted(stored)
    low, high = stored[len(stored) // 10], stored[(len(stored) * 9) // 10]
    return (len(stored) * 0.8) / max(1e-9, (high - low).total_seconds())


# Set-up ------------------------------------------------------------------------------------------------------


def add_pairs(database: Database, count: int, start: int) -> list[int]:
    now = datetime.now(UTC)
    rows = [
        {
            "source": "capture",
            "channel_id": "C_BENCH",
            "answer_ts": f"1700000000.{start + i:06d}",
            "question_text": f"How do I export my invoices for account {start + i}?",
            "answer_text": f"Open Billing, choose Invoices, then Export for account {start + i}.",
            "status": PairStatus.PENDING,
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        for i in range(count)
    ]
    with database.session() as session:
        session.execute(insert(Pair), rows)
        return sorted(
            session.scalars(select(Pair.id).where(Pair.answer_ts.in_([row["answer_ts"] for row in rows]))).all()
        )


def judgments_for(database: Database, pair_ids: list[int]) -> list[tuple[int, datetime, float]]:
    with database.session() as session:
        rows = session.execute(
            select(Judgment.pair_id, Judgment.created_at, Judgment.latency_ms).where(Judgment.pair_id.in_(pair_ids))
        ).all()
    return [(pair_id, as_utc(created), latency) for pair_id, created, latency in rows]


def count_judged(database: Database, first_id: int, last_id: int) -> int:
    with database.session() as session:
        return session.scalar(
            select(func.count(Judgment.id)).where(Judgment.pair_id >= first_id, Judgment.pair_id <= last_id)
        )


def queues_idle(redis_url: str) -> bool:
    client = redis.Redis.from_url(redis_url)
    return client.llen(QUEUE_JUDGE) + client.llen(QUEUE_SLACK) + client.hlen("unacked") == 0


def start_fake_openai(latency_ms: float, niceness: int = 0) -> tuple[subprocess.Popen, str]:
    """The fake LLM in its own process; `niceness` lowers its CPU priority (it stands in for a remote service,
    which takes no CPU from the machine relmon runs on)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", "--port", str(port), "--latency-ms", str(latency_ms)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=(lambda: os.nice(niceness)) if niceness else None,
    )
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: httpx.get(f"{base}/_admin/stats", timeout=1).status_code == 200, timeout=30, what="fake OpenAI")
    return process, f"{base}/v1"


# Phases ------------------------------------------------------------------------------------------------------


def burst(database: Database, producer, pairs: int, timeout: float) -> dict:
    pair_ids = add_pairs(database, pairs, start=0)
    started = datetime.now(UTC)
    for pair_id in pair_ids:
        producer.send_task(JUDGE_PAIR, args=[pair_id], queue=QUEUE_JUDGE)
    enqueued = datetime.now(UTC)
    wait_for(
        lambda: count_judged(database, pair_ids[0], pair_ids[-1]) >= len(pair_ids),
        timeout=timeout,
        interval=0.2,
        what="every burst pair judged",
    )
    stored = sorted(created for _, created, _ in judgments_for(database, pair_ids))
    elapsed = (stored[-1] - started).total_seconds()
    return {
        "pairs": len(pair_ids),
        "enqueue_s": (enqueued - started).total_seconds(),
        "elapsed_s": elapsed,
        "overall_per_s": len(pair_ids) / elapsed,
        "sustained_per_s": sustained_rate(stored),
    }


def steady(database: Database, producer, rate: float, seconds: float, timeout: float) -> dict:
    total = int(rate * seconds)
    pair_ids = add_pairs(database, total, start=100_000)
    enqueued_at: dict[int, datetime] = {}
    late = 0
    origin = time.monotonic()
    for index, pair_id in enumerate(pair_ids):
        slot = origin + index / rate
        pause = slot - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        elif pause < -0.05:
            late += 1
        enqueued_at[pair_id] = datetime.now(UTC)
        producer.send_task(JUDGE_PAIR, args=[pair_id], queue=QUEUE_JUDGE)
    wait_for(
        lambda: count_judged(database, pair_ids[0], pair_ids[-1]) >= len(pair_ids),
        timeout=timeout,
        interval=0.2,
        what="every steady pair judged",
    )
    latencies, overheads, llm = [], [], []
    for pair_id, created, latency_ms in judgments_for(database, pair_ids):
        end_to_end = (created - enqueued_at[pair_id]).total_seconds() * 1000
        latencies.append(end_to_end)
        overheads.append(end_to_end - latency_ms)
        llm.append(latency_ms)
    return {
        "pairs": len(pair_ids),
        "late_sends": late,
        "latency_p50_ms": percentile(latencies, 0.50),
        "latency_p99_ms": percentile(latencies, 0.99),
        "llm_p50_ms": statistics.median(llm),
        "overhead_p50_ms": percentile(overheads, 0.50),
        "overhead_p99_ms": percentile(overheads, 0.99),
        "overhead_max_ms": max(overheads),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="default: SQLite in a temporary folder")
    parser.add_argument("--redis-url", help="default: a redis-server started for the bench")
    parser.add_argument("--pairs", type=int, default=1200, help="burst size (default 1200)")
    parser.add_argument("--rate", type=float, default=20.0, help="steady pairs/s (default 20)")
    parser.add_argument("--seconds", type=float, default=30.0, help="steady duration (default 30)")
    parser.add_argument("--latency-ms", type=float, default=500.0, help="fake LLM latency (default 500)")
    parser.add_argument("--concurrency", type=int, help="RELMON_WORKER_CONCURRENCY (default: relmon's default)")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="relmon-bench-pipeline-"))
    redis_server = None
    if args.redis_url:
        redis_url = args.redis_url
    else:
        redis_server = RedisProcess(workdir / "redis")
        redis_server.start()
        redis_url = redis_server.url
    database_url = args.database_url or f"sqlite:///{workdir / 'relmon.sqlite3'}"
    database = Database(database_url)
    database.migrate()
    fake_openai, openai_url = start_fake_openai(args.latency_ms)
    slack = FakeSlack().start()
    producer = create_celery(Settings(redis_url=redis_url), redis_url)
    env = relmon_env(
        redis_url=redis_url,
        database_url=database_url,
        slack_api_url=slack.api_url,
        openai_base_url=openai_url,
        data_dir=workdir / "data",
    )
    env.pop("RELMON_WORKER_CONCURRENCY")  # relmon's defaults, unless asked
    if args.concurrency:
        env["RELMON_WORKER_CONCURRENCY"] = str(args.concurrency)
    worker = start_worker(env, log_dir=workdir, timeout=120)
    print(f"worker pid {worker.pid}", flush=True)
    sampler = RssSampler(worker.pid)
    sampler.start()
    try:
        dialect = database.engine.dialect.name
        print(f"relmon pipeline bench: 1 worker, {dialect}, LLM {args.latency_ms:.0f} ms")
        cpu_before = cpu_seconds(process_tree(worker.pid))
        result = burst(database, producer, args.pairs, timeout=args.pairs / 5 + 60)
        cpu_ms = (cpu_seconds(process_tree(worker.pid)) - cpu_before) * 1000 / result["pairs"]
        print(
            f"burst:  {result['pairs']} pairs enqueued in {result['enqueue_s']:.2f} s, all judged in "
            f"{result['elapsed_s']:.1f} s: {result['overall_per_s']:.1f} judgments/s overall, "
            f"{result['sustained_per_s']:.1f}/s sustained (middle 80%); worker CPU {cpu_ms:.1f} ms per judgment "
            f"(alert follow-up included): one free core would allow ~{1000 / cpu_ms:.0f}/s"
        )
        met = result["sustained_per_s"] >= TARGET_ONE_WORKER_PER_S
        print(
            f"target (one worker >= {TARGET_ONE_WORKER_PER_S:.0f} judgments/s at {args.latency_ms:.0f} ms of LLM "
            f"latency, sustained): {'met' if met else 'NOT met'}"
        )
        # The alert follow-ups of the burst (relmon.slack) must drain too, or they would compete with the steady run.
        wait_for(lambda: queues_idle(redis_url), timeout=300, interval=0.5, what="the queues to drain")
        result = steady(database, producer, args.rate, args.seconds, timeout=120)
        print(
            f"steady: {result['pairs']} pairs at {args.rate:g}/s ({result['late_sends']} sent late): "
            f"latency p50 {result['latency_p50_ms']:.0f} ms, p99 {result['latency_p99_ms']:.0f} ms "
            f"(LLM p50 {result['llm_p50_ms']:.0f} ms); overhead p50 {result['overhead_p50_ms']:.1f} ms, "
            f"p99 {result['overhead_p99_ms']:.1f} ms, max {result['overhead_max_ms']:.1f} ms"
        )
    finally:
        peak = sampler.stop()
        print(f"worker RSS: peak {peak:.0f} MB, now {rss_mb(worker.pid):.0f} MB (process and children)")
        worker.stop()
        slack.stop()
        fake_openai.terminate()
        fake_openai.wait(timeout=10)
        producer.close()
        database.dispose()
        if redis_server is not None:
            redis_server.stop()
    print(f"load average during the run: {os.getloadavg()[0]:.1f} (this machine has {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
