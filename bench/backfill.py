"""Backfill bench: histories of 5,000 and 10,000 messages (2.5 a pair) read from the fake Slack and judged by the
fake LLM. The fakes run in a process of their own and each size's backfill in a fresh one, so the memory shown is
the backfill's alone. Prints, per size, messages/s, pairs/s, LLM calls (one per pair), Slack calls per minute
against the tier, and the backfill process's peak memory: RSS (getrusage, with its growth over the RSS when the
run began) and, with --python-memory, Python's allocations (tracemalloc: the run is some five times slower), while
reading and judging (pages are streamed and judgments bounded in flight: flat as the history grows) and with the
report of the period that ends the run (the digest's figures, read from a row per pair).

The tier is raised with RELMON_BACKFILL_CALLS_PER_MINUTE for speed (Slack's Tier 3 is ~50/min); the output says so.

    python -m bench.backfill [--sizes 5000,10000] [--calls-per-minute 100000] [--python-memory]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import resource
import tempfile
import time
import tracemalloc
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path

from tests.backfill_helpers import BOT, args, history_messages, load_fake

TIER3_PER_MINUTE = 50
CHANNEL = "C_BENCH"
MESSAGES_PER_PAIR = 2.5


@dataclass(frozen=True)
class Measured:
    code: int
    seconds: float
    rss_at_start_mb: float
    rss_reading_mb: float  # peak while reading, pairing, storing and judging (the streamed part)
    rss_peak_mb: float  # peak with the report of the period (the digest's figures: a row per pair read)
    python_reading_mb: float  # Python's allocations (tracemalloc), peak while reading and judging
    python_report_mb: float  # the same during the report


def serve_fakes(pairs: int, conn: Connection) -> None:
    """The fakes' process: a history of `pairs` pairs in the fake Slack, the fake LLM; counts when told to stop."""
    from tests.fakes.openai_server import FakeOpenAI
    from tests.fakes.slack_server import FakeSlack

    with FakeSlack() as slack, FakeOpenAI() as llm:
        slack.add_channel(CHANNEL, "bench")
        messages = history_messages(CHANNEL, pairs, step=60.0)
        load_fake(slack, CHANNEL, messages)
        conn.send((slack.api_url, llm.base_url, len(messages), float(messages[0]["ts"])))
        conn.recv()
        history = len(slack.calls_to("conversations.history")) + len(slack.calls_to("conversations.replies"))
        conn.send((history, len(llm.requests)))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_one(settings_values: dict, since: str, python_memory: bool) -> Measured:
    """The backfill's process: everything it imports is loaded first, so the growth is the run's own. The peak
    is read once more when the report begins, to tell the streamed part from the report."""
    from relmon.backfill import command
    from store.settings import Settings

    settings = Settings(_env_file=None, **settings_values)
    reading: list[float] = []
    report = command._report

    def measured_report(*report_args):
        reading.extend((_rss_mb(), tracemalloc.get_traced_memory()[1] / 1e6))
        tracemalloc.reset_peak()  # 0, 0 when not tracing
        return report(*report_args)

    command._report = measured_report
    at_start = _rss_mb()
    started = time.perf_counter()
    if python_memory:
        tracemalloc.start()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = command.run_backfill(args(since=since), settings, now=datetime.now(UTC))
    report_peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return Measured(code, time.perf_counter() - started, at_start, reading[0], _rss_mb(), reading[1], report_peak)


def bench(size: int, calls_per_minute: float, python_memory: bool) -> None:
    pairs = int(size / MESSAGES_PER_PAIR)
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    fakes = spawn.Process(target=serve_fakes, args=(pairs, theirs), daemon=True)
    fakes.start()
    try:
        slack_url, llm_url, messages, first_ts = ours.recv()
        with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(1, mp_context=spawn) as pool:
            values = dict(
                slack_bot_token="xoxb-bench", slack_api_url=slack_url, openai_base_url=llm_url,
                openai_api_key="sk-bench", monitored_bots=[BOT], watched_channels=[CHANNEL],
                database_url=f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", data_dir=Path(tmp),
                backfill_calls_per_minute=calls_per_minute, backfill_concurrency=16,
            )  # fmt: skip
            since = datetime.fromtimestamp(first_ts - 1, UTC).date().isoformat()
            measured = pool.submit(run_one, values, since, python_memory).result()
        ours.send("stop")
        slack_calls, llm_calls = ours.recv()
    finally:
        fakes.join(timeout=10)
        if fakes.is_alive():
            fakes.terminate()
    seconds = measured.seconds
    print(f"backfill bench (exit {measured.code}): {messages:,} messages, {pairs:,} pairs, {seconds:.1f} s")
    print(f"  messages/s        {messages / seconds:,.0f}")
    print(f"  pairs/s           {pairs / seconds:,.1f}")
    print(f"  LLM calls         {llm_calls:,} (pairs: {pairs:,})")
    per_minute = slack_calls / seconds * 60
    print(f"  Slack calls       {slack_calls:,} ({per_minute:,.0f}/min; the bench's tier was raised to "
          f"{calls_per_minute:,.0f}/min per method, Slack's Tier 3 is ~{TIER3_PER_MINUTE}/min: at that "
          f"rate this history takes {slack_calls / TIER3_PER_MINUTE / 2:,.0f} min)")  # fmt: skip
    start, reading, peak = measured.rss_at_start_mb, measured.rss_reading_mb, measured.rss_peak_mb
    print(f"  peak memory       reading and judging: {reading:,.1f} MB RSS (+{reading - start:,.1f} MB over the start)"
          + (f", {measured.python_reading_mb:,.1f} MB of Python allocations" if python_memory else ""))  # fmt: skip
    print(f"                    with the period's report: {peak:,.1f} MB RSS (+{peak - start:,.1f} MB)"
          + (f", {measured.python_report_mb:,.1f} MB of Python allocations" if python_memory else "")
          + "; the fakes apart")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5000,10000", help="history sizes in messages, comma-separated")
    parser.add_argument("--calls-per-minute", type=float, default=100_000)
    parser.add_argument("--python-memory", action="store_true", help="also trace Python's allocations (slow)")
    options = parser.parse_args()
    for size in (int(s) for s in options.sizes.split(",")):
        bench(size, options.calls_per_minute, options.python_memory)


if __name__ == "__main__":
    main()
