"""The end of a backfill or an import: what the run did (its own counts and spend, why anything was left), the
digest's figures for the period read (printed, and posted with `--post` through the digest's own delivery), and,
for `--dry-run`, what judging it would cost."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import PurePath
from typing import Any

from common.messages.readable import Readable, short_date
from common.reports.period import Period
from common.runtime import Runtime
from relmon.backfill.progress import Counters
from store.models import PairSource
from workers import sampling
from workers.judging.rules import judges_in_force

OUTPUT_TOKENS_PER_CALL = 120  # a judge's reply: a score and a sentence or two
CHARS_PER_TOKEN = 4


def history_title(since: datetime, now: datetime, timezone: str, origin: str) -> str:
    """`History report: 2026-11-02 – 2026-11-30, imported from export.zip`: what the report is and where its
    history came from (`origin`), with the team's days."""
    return f"History report: {short_date(since, timezone)} – {short_date(now, timezone)}, {origin}"


def origin_of(source: str, args: Any) -> str:
    """Where the run read its history: the export's file name, or Slack."""
    if source == "import" and getattr(args, "export", None):
        return f"imported from {PurePath(args.export).name}"
    return "read from Slack's history"


def backfill_period(since: datetime, now: datetime, timezone: str, source: str, origin: str | None = None) -> Period:
    """The period read, compared with as long a period before it; its own digest key and title."""
    return Period(
        key=f"{source}-{since:%Y%m%d}-{now:%Y%m%d}",
        start=since,
        end=now,
        previous_start=since - (now - since),
        timezone=timezone,
        title=history_title(since, now, timezone, origin or origin_of(source, None)),
    )


def print_backfill_report(runtime: Runtime, period: Period) -> None:
    from common.channel_names import readable_for
    from common.messages.digest import digest_text
    from common.reports.figures import load_report, prices_for
    from workers.digest.delivery import quotes_for

    report = load_report(runtime, period)
    quotes = quotes_for(runtime, report, runtime.settings.digest_channel)
    channels = [s.channel_id for s in report.channels] + [w.channel_id for w in report.overall.worst]
    readable = readable_for(runtime, channels)
    sys.stdout.write(digest_text(report, {}, quotes, prices_for(runtime), readable=readable))


def post_report(runtime: Runtime, period: Period, now: datetime) -> str:
    from workers.digest.delivery import deliver_digest

    if not runtime.settings.digest_channel:
        return "not posted: set RELMON_DIGEST_CHANNEL (or RELMON_ALERT_CHANNEL)"
    outcome = deliver_digest(runtime, now, period=period)
    if outcome.status == "sent":
        readable = _readable(runtime, [runtime.settings.digest_channel])
        where, when = readable.channel(runtime.settings.digest_channel), readable.time(outcome.message_ts)
        return f"report posted to {where} ({when})"
    return f"report not posted again ({outcome.status})"


def _readable(runtime: Runtime, channels: list[str | None], *, keep: bool = True) -> Readable:
    from common.channel_names import readable_for

    return readable_for(runtime, channels, keep=keep)


def estimate(counters: Counters, runtime: Runtime, channel: str, answer_ts: str, question: str, answer: str) -> None:
    """Count what judging this pair would take, as judging would (sampling, the judges in force)."""
    settings = runtime.settings
    rule = runtime.rules.for_channel(channel, settings)
    if not sampling.is_sampled_in(channel, answer_ts, rule.sample_rate, source=PairSource.BACKFILL):
        return
    counters.sampled += 1
    for name in judges_in_force(None, rule.judges, False, runtime.judges):
        messages = runtime.judges.get(name).messages(question, answer, None, settings.max_prompt_chars)
        counters.calls += 1
        counters.input_tokens += sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN
        counters.output_tokens += OUTPUT_TOKENS_PER_CALL
    if len(counters.examples) < 5:
        counters.examples.append((channel, answer_ts, question[:60], answer[:60]))


def estimate_text(counters: Counters, runtime: Runtime, *, batch: bool, readable: Readable | None = None) -> str:
    """What `--dry-run` prints: the pairs it would judge, the calls, tokens and cost; its examples by channel name
    and local time."""
    settings = runtime.settings
    readable = readable or Readable(settings.timezone)
    cost = counters.input_tokens / 1e6 * settings.input_price + counters.output_tokens / 1e6 * settings.output_price
    lines = [
        f"would judge {counters.sampled} pair(s): {counters.calls} LLM call(s), about {counters.input_tokens:,} "
        f"input and {counters.output_tokens:,} output tokens, about ${cost:.4f} online, ${cost / 2:.4f} with --batch"
        + (" (asked)" if batch else ""),
        *(
            f"  {readable.channel(channel)} {readable.time(ts)}: {question!r} → {answer!r}"
            for channel, ts, question, answer in counters.examples
        ),
    ]
    if counters.calls > settings.daily_budget:
        lines.append(
            f"the daily budget ({settings.daily_budget:,} judgments) covers part of it: "
            "the rest stays pending for the next days' runs"
        )
    lines.append("(dry run: nothing was judged, stored or posted)")
    return "\n".join(lines) + "\n"


SKIPPED_INPUT = 3  # the run finished, but some of its input (a day file of the export) could not be read


def run_lines(counters: Counters, *, dry_run: bool) -> list[str]:
    """What the run did, for people: its own counts and spend, and why anything was left."""
    from relmon.backfill.judging import BUDGET_SPENT, GONE, LEFT, SAMPLED_OUT

    why = counters.outcomes
    lines = [
        f"{counters.messages} messages read, {counters.pairs} pairs found, {counters.judged} judged, "
        f"{counters.skipped} skipped, {counters.left} left pending, ${counters.spend_usd:.4f} spent by this run"
    ]
    if dry_run:
        return lines
    if why.get(SAMPLED_OUT):
        lines.append(f"{why[SAMPLED_OUT]} skipped by sampling (the channel's sample rate)")
    if why.get(GONE):
        lines.append(f"{why[GONE]} skipped: judged already (by an earlier run or the live pipeline)")
    if why.get(LEFT):
        lines.append(f"the LLM endpoint did not answer: {why[LEFT]} left pending; run again or leave it to the worker")
    if why.get(BUDGET_SPENT):
        lines.append(
            f"the daily budget (RELMON_DAILY_BUDGET) is spent: {why[BUDGET_SPENT]} left pending; "
            "run again tomorrow or leave it to the worker"
        )
    if counters.pairs:
        lines.append(
            f"conversations after the answers: {counters.with_signals} with outcome signals, {counters.unresolved} "
            f"not resolved, {counters.references} answered by a teammate, {counters.golden_items} question(s) added to "
            "the golden set"
        )
    return lines


def end_of_run(
    runtime: Runtime,
    counters: Counters,
    args: Any,
    since: datetime,
    now: datetime,
    source: str,
    bad_days: dict[str, str] | None = None,
    channel_names: Mapping[str, str] | None = None,
    skipped_unit: str = "file(s) of the export",
) -> int:
    """What the run did and why anything was left (stderr), then the period's report, or the estimate of a dry
    run; returns the exit code. `channel_names`: the export's (a dry run stores none); `bad_days`: the input skipped
    (an export's files, a JSONL file's lines: `skipped_unit`)."""
    for line in run_lines(counters, dry_run=args.dry_run):
        print(line, file=sys.stderr)
    for day, why in sorted((bad_days or {}).items()):
        print(f"skipped {day}: {why}", file=sys.stderr)
    code = SKIPPED_INPUT if bad_days else 0
    if bad_days:
        print(
            f"{len(bad_days)} {skipped_unit} skipped, the rest imported (exit code {SKIPPED_INPUT})",
            file=sys.stderr,
        )
    if args.dry_run:
        readable = _readable(runtime, [channel for channel, *_ in counters.examples], keep=False)  # stores nothing
        readable = replace(readable, names={**readable.names, **(channel_names or {})})
        sys.stdout.write(estimate_text(counters, runtime, batch=args.batch, readable=readable))
        return code
    period = backfill_period(since, now, runtime.settings.timezone, source, origin_of(source, args))
    print_backfill_report(runtime, period)
    if counters.pairs:
        day = f"{since:%Y-%m-%d}"
        print(
            f"what this history holds: relmon topics --since {day}; relmon gaps --since {day}; relmon golden export",
            file=sys.stderr,
        )
    if getattr(args, "post", False):
        print(post_report(runtime, period, now), file=sys.stderr)
    return code
