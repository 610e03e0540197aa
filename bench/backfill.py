"""Backfill bench: 10,000 messages (4,000 pairs) read from the fake Slack and judged by the fake LLM, in this
process. Prints messages/s, pairs/s, LLM calls (one per pair), Slack calls per minute against the tier, and the
peak memory of the run (tracemalloc): pages are streamed, so it stays flat as the history grows.

The tier is raised with RELMON_BACKFILL_CALLS_PER_MINUTE for speed (Slack's Tier 3 is ~50/min); the output says so.

    python -m bench.backfill [--pairs 4000] [--calls-per-minute 100000]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

from relmon.backfill.command import run_backfill
from store.settings import Settings
from tests.backfill_helpers import BOT, args, history_messages, load_fake
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack

TIER3_PER_MINUTE = 50


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--calls-per-minute", type=float, default=100_000)
    options = parser.parse_args()
    with FakeSlack() as slack, FakeOpenAI() as llm, tempfile.TemporaryDirectory() as tmp:
        slack.add_channel("C_BENCH", "bench")
        messages = history_messages("C_BENCH", options.pairs, step=60.0)
        load_fake(slack, "C_BENCH", messages)
        since = datetime.fromtimestamp(float(messages[0]["ts"]) - 1, UTC).date().isoformat()
        settings = Settings(
            _env_file=None, slack_bot_token="xoxb-bench", slack_api_url=slack.api_url, openai_base_url=llm.base_url,
            openai_api_key="sk-bench", monitored_bots=[BOT], watched_channels=["C_BENCH"],
            database_url=f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", data_dir=Path(tmp),
            backfill_calls_per_minute=options.calls_per_minute, backfill_concurrency=16,
        )  # fmt: skip
        tracemalloc.start()
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = run_backfill(args(since=since), settings, now=datetime.now(UTC))
        seconds = time.perf_counter() - started
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        slack_calls = len(slack.calls_to("conversations.history")) + len(slack.calls_to("conversations.replies"))
    print(f"backfill bench (exit {code}): {len(messages):,} messages, {options.pairs:,} pairs, {seconds:.1f} s")
    print(f"  messages/s        {len(messages) / seconds:,.0f}")
    print(f"  pairs/s           {options.pairs / seconds:,.1f}")
    print(f"  LLM calls         {len(llm.requests):,} (pairs: {options.pairs:,})")
    per_minute = slack_calls / seconds * 60
    print(f"  Slack calls       {slack_calls:,} ({per_minute:,.0f}/min; the bench's tier was raised to "
          f"{options.calls_per_minute:,.0f}/min per method, Slack's Tier 3 is ~{TIER3_PER_MINUTE}/min: at that "
          f"rate this history takes {slack_calls / TIER3_PER_MINUTE / 2:,.0f} min)")  # fmt: skip
    print(f"  peak memory       {peak / 1e6:,.1f} MB (tracemalloc, Python allocations)")


if __name__ == "__main__":
    main()
