"""Report bench: the period's report (what ends `relmon backfill`: the digest's figures) over stored histories of
32,000 and 128,000 pairs, written straight to the store (no Slack reading: a history this long takes the backfill
bench an hour). Each report runs in a fresh process, warmed up by the report of the history's first hour
(`bench.backfill.run_report`). Prints, per size, the report's peak RSS over its start, its time and, with
--python-memory, Python's allocations (tracemalloc), then the growth from the smallest history to the largest:
the pairs stream through running tallies a batch at a time, so it should not grow.

    python -m bench.report [--pairs 32000,128000] [--postgresql] [--python-memory]
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert, select

from bench.backfill import ReportMeasured, run_report
from bench.measure import fresh_database
from relmon.backfill.report import backfill_period
from store.db import Database
from store.models import Judgment, Pair
from tests.services import drop_postgres_database, postgres_admin_url

CHANNELS = ("C_BENCH", "C_OTHER")
START = datetime(2026, 5, 1, tzinfo=UTC)
STEP = timedelta(seconds=60)  # an answer a minute: 128,000 pairs are three months
FILL_BATCH = 10_000


def fill(database: Database, pairs: int) -> None:
    """`pairs` judged backfill answers in two channels: a relevancy verdict each, a correctness one every tenth."""
    for first in range(0, pairs, FILL_BATCH):
        numbers = range(first, min(pairs, first + FILL_BATCH))
        with database.engine.begin() as connection:
            connection.execute(insert(Pair), [
                dict(channel_id=CHANNELS[n % 2], answer_ts=f"{1_780_000_000 + n}.000100", status="judged",
                     source="backfill", question_text=f"how do I reset item {n}?",
                     answer_text=f"Open settings and reset item {n}.", created_at=START + n * STEP)
                for n in numbers
            ])  # fmt: skip
            ids = connection.scalars(select(Pair.id).where(Pair.created_at >= START + first * STEP)).all()
            verdicts = [
                dict(pair_id=pair_id, judge=judge, status="ok", score=float(pair_id % (top + 1)), max_score=top,
                     normalized_score=pair_id % (top + 1) / top, model="bench-model", prompt_version="p1",
                     prompt_tokens=1_200, cached_tokens=1_024, completion_tokens=60, reasoning="a sentence or two")
                for pair_id in ids
                for judge, top in (("relevancy", 4), ("correctness", 2))
                if judge == "relevancy" or pair_id % 10 == 0
            ]  # fmt: skip
            connection.execute(insert(Judgment), verdicts)


def measure(pairs: int, admin: str | None, python_memory: bool) -> ReportMeasured:
    with tempfile.TemporaryDirectory() as tmp:
        url, name = fresh_database(admin, Path(tmp) / "report.sqlite3")
        try:
            database = Database(url)
            database.migrate()
            fill(database, pairs)
            database.dispose()
            period = backfill_period(START, START + pairs * STEP, "UTC", "backfill")
            values = dict(database_url=url, data_dir=Path(tmp), watched_channels=list(CHANNELS))
            spawn = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(1, mp_context=spawn) as fresh:
                return fresh.submit(run_report, values, period, python_memory).result()
        finally:
            if name is not None:
                drop_postgres_database(admin, name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", default="32000,128000", help="history sizes in pairs, comma-separated")
    parser.add_argument("--postgresql", action="store_true", help="a fresh PostgreSQL database (127.0.0.1:5432)")
    parser.add_argument("--python-memory", action="store_true", help="also trace Python's allocations")
    options = parser.parse_args()
    admin = postgres_admin_url() if options.postgresql else None
    if options.postgresql and admin is None:
        parser.error("no PostgreSQL server answers (set RELMON_TEST_POSTGRES_URL)")
    sizes = [int(s) for s in options.pairs.split(",")]
    where = "PostgreSQL" if admin else "SQLite"
    results = []
    for pairs in sizes:
        alone = measure(pairs, admin, options.python_memory)
        results.append(alone)
        python = f", {alone.python_mb:,.2f} MB of Python allocations" if options.python_memory else ""
        print(f"report bench ({where}): {pairs:,} stored pairs, the report {alone.seconds:.2f} s, peak "
              f"{alone.rss_peak_mb:,.1f} MB RSS (+{alone.growth_mb:,.2f} MB over its start){python}")  # fmt: skip
    if len(sizes) > 1:
        first, last = results[0], results[-1]
        python = f", {last.python_mb - first.python_mb:+,.2f} MB of Python allocations" if options.python_memory else ""
        print(f"growth from {sizes[0]:,} to {sizes[-1]:,} pairs: {last.growth_mb - first.growth_mb:+,.2f} MB{python}")


if __name__ == "__main__":
    main()
