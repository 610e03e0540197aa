"""What one scrape of the bot's GET /metrics costs as the database grows: the state's grouped counts
(`store.metrics_queries.read_state`) and the exposition, on SQLite, for N judged pairs (one judgment each, a
fifth with a second opinion, a tenth with an alert and an outcome signal), with a local redis-server (the
queue depth).

Prints, per size, the median and worst of a few readings of the state (what a scrape cost before the state was
cached, and what the one scrape per 15 s that reads it costs now), the median of scrapes with the state from the cache
(`common.metrics.state_cache`, as the bot serves every other scrape), in milliseconds, and the body's size.

    python -m bench.metrics_scrape                     # 1,000 and 10,000 pairs
    python -m bench.metrics_scrape --sizes 1000 100000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert

from bench.processes import BenchRedis
from common import metrics
from common.runtime import Runtime
from store.db import Database
from store.models import Alert, Judgment, OutcomeSignal, Pair
from store.settings import Settings


def fill(database: Database, count: int) -> None:
    with database.session() as session:
        session.execute(
            insert(Pair),
            [
                {"id": i, "channel_id": f"C{i % 20}", "answer_ts": f"{i}.0", "status": "judged"}
                for i in range(1, count + 1)
            ],
        )
        session.execute(
            insert(Judgment),
            [
                {
                    "id": i,
                    "pair_id": i,
                    "judge": "relevancy",
                    "status": "ok",
                    "score": i % 5,
                    "normalized_score": (i % 5) / 4,
                    "prompt_tokens": 900,
                    "completion_tokens": 60,
                    "latency_ms": 800 + i % 2000,
                    "confirmation_status": "confirmed" if i % 5 == 0 else None,
                }
                for i in range(1, count + 1)
            ],
        )
        tenth = range(10, count + 1, 10)
        session.execute(insert(Alert), [{"dedupe_key": f"a{i}", "kind": "low_score", "judgment_id": i} for i in tenth])
        session.execute(insert(OutcomeSignal), [{"pair_id": i, "name": "reask"} for i in tenth])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--scrapes", type=int, default=5)
    args = parser.parse_args()
    redis_server = BenchRedis(Path(tempfile.mkdtemp(prefix="relmon-bench-redis-")))
    redis_server.start()
    try:
        for size in args.sizes:
            scrape(size, args.scrapes, redis_server.url)
    finally:
        redis_server.stop()


def scrape(size: int, scrapes: int, redis_url: str) -> None:
    directory = Path(tempfile.mkdtemp(prefix="relmon-bench-metrics-"))
    url = f"sqlite:///{directory / 'relmon.sqlite3'}"
    database = Database(url)
    database.migrate()
    fill(database, size)
    runtime = Runtime(Settings(_env_file=None, database_url=url, redis_url=redis_url, data_dir=str(directory)))
    times, body = [], b""
    for _ in range(scrapes):
        started = time.perf_counter()
        body, _ = metrics.exposition(runtime)  # no cache: the state read now
        times.append((time.perf_counter() - started) * 1000)
    assert b"relmon_state_up 1.0" in body, "the state was not read"
    # A scrape once the answer's one-second reuse is over: the process counters now, the state from the cache.
    state = metrics.state_cache(runtime)
    metrics.exposition(runtime, state)  # the one reading
    cached = []
    for _ in range(scrapes * 20):
        started = time.perf_counter()
        metrics.exposition(runtime, state)
        cached.append((time.perf_counter() - started) * 1000)
    print(
        f"{size:>8} pairs: state read median {statistics.median(times):7.1f} ms, worst {max(times):7.1f} ms; "
        f"scrape with the state cached median {statistics.median(cached):5.2f} ms; body {len(body) / 1024:.1f} KiB"
    )


if __name__ == "__main__":
    main()
