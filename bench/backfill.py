"""Backfill bench: histories of 5,000 and 10,000 messages (2.5 a pair) read from the fake Slack and judged by the
fake LLM. The fakes run in a process of their own and each size's backfill in a fresh one, so the memory shown is
the backfill's alone. Prints, per size, messages/s, pairs/s, LLM calls (one per pair), Slack calls per minute
against the tier, and peak memory: RSS (the high-water mark, with its growth over the RSS when the part began)
and, with --python-memory, Python's allocations (tracemalloc: the run is some five times slower), of

- reading and judging, in the backfill's process (pages are streamed and judgments bounded in flight);
- the report of the period that ends the run (the digest's figures), run once more on the stored history in a
  fresh process, warmed up by the report of the history's first hour (imports made, SQL compiled): the rows are
  streamed through running tallies a batch at a time, so its growth should not depend on the history's size;
- the backfill's process as a whole (reading, then the report).

It ends with the growth of each from the smallest size to the largest.

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
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path

from common.reports.period import Period
from tests.backfill_helpers import BOT, args, history_messages, load_fake

TIER3_PER_MINUTE = 50
CHANNEL = "C_BENCH"
MESSAGES_PER_PAIR = 2.5
WARM_UP = timedelta(hours=1)  # the report of the history's first hour warms the report's process up


@dataclass(frozen=True)
class Measured:
    code: int
    seconds: float
    rss_at_start_mb: float
    rss_reading_mb: float  # peak while reading, pairing, storing and judging (the streamed part)
    rss_peak_mb: float  # peak of the whole run, the report of the period included
    python_reading_mb: float  # Python's allocations (tracemalloc), peak while reading and judging
    python_report_mb: float  # the same during the report
    period: Period  # the period the report covered


@dataclass(frozen=True)
class ReportMeasured:
    """The report alone, in a fresh process on the stored history."""

    seconds: float
    rss_at_start_mb: float  # once warmed up: imports done, a report of an empty period made
    rss_peak_mb: float
    python_mb: float  # Python's allocations' peak (tracemalloc), 0 when not traced

    @property
    def growth_mb(self) -> float:
        return self.rss_peak_mb - self.rss_at_start_mb


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


def _status_mb(field: str) -> float | None:
    """VmRSS (now) or VmHWM (the peak) of this process, from /proc (Linux)."""
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return None


def _reset_peak() -> bool:
    """Start the RSS high-water mark again from the RSS now (Linux: clear_refs 5), so a part's own peak shows."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def run_one(settings_values: dict, since: str, python_memory: bool) -> Measured:
    """The backfill's process: everything it imports is loaded first, so the growth is the run's own. The peak
    is read once more when the report begins, to tell the streamed part from the report."""
    from relmon.backfill import command
    from relmon.backfill.report import backfill_period
    from store.settings import Settings

    settings = Settings(_env_file=None, **settings_values)
    reading: list = []
    report = command._report

    def measured_report(run, since, bad_days=None):
        reading.extend((_rss_mb(), tracemalloc.get_traced_memory()[1] / 1e6))
        reading.append(backfill_period(since, run.now, run.runtime.settings.timezone, run.source))
        tracemalloc.reset_peak()  # 0, 0 when not tracing
        return report(run, since, bad_days)

    command._report = measured_report
    at_start = _rss_mb()
    started = time.perf_counter()
    if python_memory:
        tracemalloc.start()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = command.run_backfill(args(since=since), settings, now=datetime.now(UTC))
    report_peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    seconds = time.perf_counter() - started
    return Measured(code, seconds, at_start, reading[0], _rss_mb(), reading[1], report_peak, reading[2])


def run_report(settings_values: dict, period: Period, python_memory: bool) -> ReportMeasured:
    """The report's process: the period's report (printed into a buffer) on the stored history, once warmed up."""
    from common.runtime import Runtime
    from relmon.backfill.report import print_backfill_report
    from store.settings import Settings

    runtime = Runtime(Settings(_env_file=None, **settings_values))
    first_hour = replace(period, end=period.start + WARM_UP, previous_start=period.start - WARM_UP)
    with contextlib.redirect_stdout(io.StringIO()):
        print_backfill_report(runtime, first_hour)  # every import made, every query compiled
        if python_memory:
            tracemalloc.start()
        tracked = _reset_peak()
        at_start = _status_mb("VmRSS") if tracked else _rss_mb()
        started = time.perf_counter()
        print_backfill_report(runtime, period)
        seconds = time.perf_counter() - started
    peak = _status_mb("VmHWM") if tracked else _rss_mb()
    python = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    runtime.db.dispose()
    return ReportMeasured(seconds, at_start or 0.0, peak or 0.0, python)


def bench(size: int, calls_per_minute: float, python_memory: bool) -> tuple[Measured, ReportMeasured]:
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
            with ProcessPoolExecutor(1, mp_context=spawn) as fresh:
                alone = fresh.submit(run_report, values, measured.period, python_memory).result()
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
    print(f"                    the period's report alone: {alone.rss_peak_mb:,.1f} MB RSS (+{alone.growth_mb:,.1f} MB "
          f"over its start), {alone.seconds:.2f} s"
          + (f", {alone.python_mb:,.1f} MB of Python allocations" if python_memory else ""))  # fmt: skip
    print(f"                    the backfill, reading then the report: {peak:,.1f} MB RSS (+{peak - start:,.1f} MB)"
          + (f", {measured.python_report_mb:,.1f} MB of Python allocations in the report" if python_memory else "")
          + "; the fakes apart")  # fmt: skip
    return measured, alone


def growth(sizes: list[int], results: list[tuple[Measured, ReportMeasured]], python_memory: bool) -> None:
    """How each part's peak grew from the smallest history to the largest."""
    (first, first_alone), (last, last_alone) = results[0], results[-1]
    print(f"growth from {sizes[0]:,} to {sizes[-1]:,} messages (peak RSS)")
    print(f"  reading and judging   {last.rss_reading_mb - first.rss_reading_mb:+,.1f} MB")
    print(f"  the report alone      {last_alone.growth_mb - first_alone.growth_mb:+,.1f} MB (its rise over its start)"
          + (f", {last_alone.python_mb - first_alone.python_mb:+,.2f} MB of Python allocations"
             if python_memory else ""))  # fmt: skip
    print(f"  the whole backfill    {last.rss_peak_mb - first.rss_peak_mb:+,.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5000,10000", help="history sizes in messages, comma-separated")
    parser.add_argument("--calls-per-minute", type=float, default=100_000)
    parser.add_argument("--python-memory", action="store_true", help="also trace Python's allocations (slow)")
    options = parser.parse_args()
    sizes = [int(s) for s in options.sizes.split(",")]
    results = [bench(size, options.calls_per_minute, options.python_memory) for size in sizes]
    if len(sizes) > 1:
        growth(sizes, results, options.python_memory)


if __name__ == "__main__":
    main()
