"""The end of a backfill: the digest's figures for the period read (printed, and posted with `--post` through the
digest's own delivery), and, for `--dry-run`, what judging it would cost."""

from __future__ import annotations

import sys
from datetime import datetime

from common.reports.period import Period
from common.runtime import Runtime
from judges import get_judge
from relmon.backfill.progress import Counters
from store.models import PairSource
from workers import sampling
from workers.judging.rules import judges_in_force

OUTPUT_TOKENS_PER_CALL = 120  # a judge's reply: a score and a sentence or two
CHARS_PER_TOKEN = 4


def backfill_period(since: datetime, now: datetime, timezone: str, source: str) -> Period:
    """The period read, compared with as long a period before it; its own digest key."""
    return Period(
        key=f"{source}-{since:%Y%m%d}-{now:%Y%m%d}",
        start=since,
        end=now,
        previous_start=since - (now - since),
        timezone=timezone,
    )


def print_backfill_report(runtime: Runtime, period: Period) -> None:
    from common.messages.digest import digest_text
    from common.reports.figures import load_report, prices_for
    from workers.digest.delivery import quotes_for

    report = load_report(runtime, period)
    quotes = quotes_for(runtime, report, runtime.settings.digest_channel)
    sys.stdout.write(digest_text(report, {}, quotes, prices_for(runtime)))


def post_report(runtime: Runtime, period: Period, now: datetime) -> str:
    from workers.digest.delivery import deliver_digest

    if not runtime.settings.digest_channel:
        return "not posted: set RELMON_DIGEST_CHANNEL (or RELMON_ALERT_CHANNEL)"
    outcome = deliver_digest(runtime, now, period=period)
    if outcome.status == "sent":
        return f"report posted to {runtime.settings.digest_channel} (ts {outcome.message_ts})"
    return f"report not posted again ({outcome.status})"


def estimate(counters: Counters, runtime: Runtime, channel: str, answer_ts: str, question: str, answer: str) -> None:
    """Count what judging this pair would take, as judging would (sampling, the judges in force)."""
    settings = runtime.settings
    rule = runtime.rules.for_channel(channel, settings)
    if not sampling.is_sampled_in(channel, answer_ts, rule.sample_rate, source=PairSource.BACKFILL):
        return
    counters.sampled += 1
    for name in judges_in_force(None, rule.judges, False):
        messages = get_judge(name).messages(question, answer, None, settings.max_prompt_chars)
        counters.calls += 1
        counters.input_tokens += sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN
        counters.output_tokens += OUTPUT_TOKENS_PER_CALL
    if len(counters.examples) < 5:
        counters.examples.append(f"  {channel} {answer_ts}: {question[:60]!r} → {answer[:60]!r}")


def estimate_text(counters: Counters, runtime: Runtime, *, batch: bool) -> str:
    """What `--dry-run` prints: the pairs it would judge, the calls, tokens and cost."""
    settings = runtime.settings
    cost = counters.input_tokens / 1e6 * settings.input_price + counters.output_tokens / 1e6 * settings.output_price
    lines = [
        f"would judge {counters.sampled} pair(s): {counters.calls} LLM call(s), about {counters.input_tokens:,} "
        f"input and {counters.output_tokens:,} output tokens, about ${cost:.4f} online, ${cost / 2:.4f} with --batch"
        + (" (asked)" if batch else ""),
        *counters.examples,
    ]
    if counters.calls > settings.daily_budget:
        lines.append(
            f"the daily budget ({settings.daily_budget:,} judgments) covers part of it: "
            "the rest stays pending for the next days' runs"
        )
    lines.append("(dry run: nothing was judged, stored or posted)")
    return "\n".join(lines) + "\n"
