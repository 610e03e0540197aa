"""Backfill bench: histories of 5,000 and 10,000 messages (2.5 a pair) read from the fake Slack and judged by the
fake LLM. The fakes run in a process of their own and each size's backfill in a fresh one, so the memory shown is
the backfill's alone. Prints, per size, messages/s, pairs/s, LLM calls (one per pair), Slack calls per minute
against the tier, and the backfill process's peak RSS (getrusage) with its growth over the RSS it had when the
run began: pages are streamed and judgments bounded in flight, so the peak stays flat as the history grows.

The tier is raised with RELMON_BACKFILL_CALLS_PER_MINUTE for speed (Slack's Tier 3 is ~50/min); the output says so.

    python -m bench.backfill [--sizes 5000,10000] [--calls-per-minute 100000]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import resource
import tempfile
import time
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
    rss_peak_mb: float


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


def run_one(settings_values: dict, since: str) -> Measured:
    """The backfill's process: everything it imports is loaded first, so the growth is the run's own."""
    from relmon.backfill.command import run_backfill
    from store.settings import Settings

    settings = Settings(_env_file=None, **settings_values)
    at_start = _rss_mb()
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = run_backfill(args(since=since), settings, now=datetime.now(UTC))
    return Measured(code, time.perf_counter() - started, at_start, _rss_mb())


def bench(size: int, calls_per_minute: float) -> None:
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
            measured = pool.submit(run_one, values, since).result()
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
    print(f"  peak memory       {measured.rss_peak_mb:,.1f} MB RSS of the backfill process "
          f"(+{measured.rss_peak_mb - measured.rss_at_start_mb:,.1f} MB over its start; the fakes apart)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5000,10000", help="history sizes in messages, comma-separated")
    parser.add_argument("--calls-per-minute", type=float, default=100_000)
    options = parser.parse_args()
    for size in (int(s) for s in options.sizes.split(",")):
        bench(size, options.calls_per_minute)


if __name__ == "__main__":
    main()
