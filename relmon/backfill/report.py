"""The end of a backfill: the digest's figures for the period read (printed, and posted with `--post` through the
digest's own delivery), and, for `--dry-run`, what judging it would cost."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime

from common.reports.period import Period
from common.runtime import Runtime
from judges import get_judge
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


def print_report(runtime: Runtime, period: Period) -> None:
    from common.messages.digest import digest_text
    from common.reports.figures import load_report, prices_for
    from workers.tasks.digest import quotes_for

    report = load_report(runtime, period)
    quotes = quotes_for(runtime, report, runtime.settings.digest_channel)
    sys.stdout.write(digest_text(report, {}, quotes, prices_for(runtime)))


def post_report(runtime: Runtime, period: Period, now: datetime) -> str:
    from workers.tasks.digest import deliver_digest

    if not runtime.settings.digest_channel:
        return "not posted: set RELMON_DIGEST_CHANNEL (or RELMON_ALERT_CHANNEL)"
    outcome = deliver_digest(runtime, now, period=period)
    if outcome.status == "sent":
        return f"report posted to {runtime.settings.digest_channel} (ts {outcome.message_ts})"
    return f"report not posted again ({outcome.status})"


@dataclass
class Estimate:
    """What `--dry-run` would judge: pairs, LLM calls and tokens (from the prompts' lengths)."""

    pairs: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, runtime: Runtime, channel: str, answer_ts: str, question: str, answer: str) -> None:
        settings = runtime.settings
        rule = runtime.rules.for_channel(channel, settings)
        if not sampling.is_sampled_in(channel, answer_ts, rule.sample_rate, source="backfill"):
            return
        self.pairs += 1
        for name in judges_in_force(None, rule.judges, False):
            messages = get_judge(name).messages(question, answer, None, settings.max_prompt_chars)
            self.calls += 1
            self.input_tokens += sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN
            self.output_tokens += OUTPUT_TOKENS_PER_CALL
        if len(self.examples) < 5:
            self.examples.append(f"  {channel} {answer_ts}: {question[:60]!r} → {answer[:60]!r}")

    def text(self, runtime: Runtime, *, batch: bool) -> str:
        settings = runtime.settings
        cost = (
            self.input_tokens / 1e6 * settings.cost_per_million_input_tokens
            + self.output_tokens / 1e6 * settings.cost_per_million_output_tokens
        )
        lines = [
            f"would judge {self.pairs} pair(s): {self.calls} LLM call(s), about {self.input_tokens:,} input and "
            f"{self.output_tokens:,} output tokens, about ${cost:.4f} online, ${cost / 2:.4f} with --batch"
            + (" (asked)" if batch else ""),
            *self.examples,
        ]
        if self.calls > settings.daily_budget:
            lines.append(
                f"the daily budget ({settings.daily_budget:,} judgments) covers part of it: "
                "the rest stays pending for the next days' runs"
            )
        lines.append("(dry run: nothing was judged, stored or posted)")
        return "\n".join(lines) + "\n"
