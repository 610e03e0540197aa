"""`relmon topics [--since 7d] [--channel C] [--json] [--refresh]` and `relmon gaps [--since 7d] [--channel C]
[--format json|markdown]`: what to fix first, in the terminal. The operator's tools: every watched channel, private
ones included (as `relmon export`). They store the topics' names and anchors (the cache) but no run: the digest's
and App Home's runs are the history; `--refresh` makes and stores App Home's daily run now (named for App Home)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING

from common.messages.readable import Readable
from common.runtime import Runtime
from store.settings import Settings

if TYPE_CHECKING:
    from topics.figures import Figures


def _period(args: argparse.Namespace, now: datetime) -> tuple[datetime, datetime]:
    from relmon.backfill.command import parse_since

    start = parse_since(args.since or "7d", now)
    return start, start - (now - start)


def compute(args: argparse.Namespace, settings: Settings, now: datetime | None = None):
    """The topics of the period the arguments name (a `topics.build.TopicsReport`), their stored histories and
    how their channels and times read (`Readable`); or a message to print."""
    from datetime import UTC

    from common.channel_names import readable_for
    from relmon.backfill.command import backfill_llm
    from store import topics as topic_rows
    from topics.service import TopicsDeps, TopicsQuery, compute_topics

    now = now or datetime.now(UTC)
    try:
        start, previous_start = _period(args, now)
    except ValueError:
        return None, f"relmon {args.command}: --since takes a number of days (7d) or a date (YYYY-MM-DD)\n"
    if start >= now:
        return None, f"relmon {args.command}: --since must be in the past\n"
    refresh = getattr(args, "refresh", False)
    if refresh and (args.since not in (None, "7d") or args.channel):
        return (
            None,
            "relmon topics: --refresh groups the last 7 days of every channel; leave out --since and --channel\n",
        )
    runtime = Runtime(settings)
    try:
        runtime.db.migrate()  # the schema only: the topics' names are cached in the database
        if refresh:  # the daily run, as beat makes it: App Home and the digest's dry run show it
            from common.reports.topic_runs import daily_run
            from common.runtime import shared_redis

            report = daily_run(runtime, now, redis_client=shared_redis(settings))  # one maker at a time
        else:
            deps = TopicsDeps(runtime.db, settings, runtime.rules, llm=lambda: backfill_llm(settings))
            query = TopicsQuery(start, now, now, previous_start=previous_start, channel=args.channel)
            report = compute_topics(deps, query)
        with runtime.db.reading() as session:
            report_history = topic_rows.histories(session, [t.key for t in report.topics if t.key])
        channels = [g.question.channel_id for g in report.gaps]
        channels += [q.channel_id for t in report.topics for q in t.questions]
        return (report, report_history, readable_for(runtime, channels)), None
    finally:
        runtime.db.dispose()


def _where(readable: Readable | None, channel_id: str | None, ts: str | None) -> dict:
    """The extra fields of a question's IDs for people: its channel's name (None when unknown), its local time."""
    readable = readable or Readable()
    return {"channel_name": readable.name(channel_id), "time": readable.iso(ts)}


def rates_json(figures: Figures, previous: Figures | None) -> dict:
    """The topic's rates as `{value, n, low, high}` (95% Wilson intervals, docs/statistics.md) and what the change
    rule says of the failure rate against the week before: up, down, none, too_few, or null without a week before."""
    from common.reports.intervals import proportion
    from common.reports.resolution import ResolutionStats
    from common.reports.topics import failure_change, failure_of

    change = failure_change(previous, figures).direction if previous else None
    return {
        "failure_rate": failure_of(figures).as_json(),  # weighted under sampling (common.reports.weighted)
        "resolution": proportion(figures.resolved, figures.decided).as_json(),
        # The tiers (docs/resolution.md): each one's count, share and Wilson interval, of the closed questions.
        "resolution_tiers": ResolutionStats(None, dict(figures.tiers)).as_json() if figures.tiers else None,
        "failure_rate_change": change,
    }


def topic_json(report, history: dict[str, list[dict]] | None = None, readable: Readable | None = None) -> dict:
    return {
        "start": report.start.isoformat(),
        "end": report.end.isoformat(),
        "questions": report.questions,
        "left_out": report.left_out,
        "embedding": report.embedding,
        "notes": list(report.notes),
        "too_few": report.too_few,  # too few questions to group: no topics, the failed ones listed on their own
        "needed": report.needed or None,
        "failed_questions": [
            {"channel": q.channel_id, "ts": q.ts, "failures": list(q.failures), "group": group.keyword}
            for group in report.failed_groups
            for q in group.questions
        ],
        "topics": [
            {
                "rank": rank,
                "key": topic.key,
                "name": topic.name,
                **topic.figures.as_dict(),
                **rates_json(topic.figures, topic.previous),
                "previous": topic.previous.as_dict() if topic.previous is not None else None,
                "history": (history or {}).get(topic.key or "", []),  # its stored runs: digests, daily runs
                "questions_ids": [
                    {"channel": q.channel_id, "ts": q.ts, **_where(readable, q.channel_id, q.ts)}
                    for q in topic.questions
                ],
            }
            for rank, topic in enumerate(report.topics, start=1)
        ],
    }


def run_topics(args: argparse.Namespace, settings: Settings) -> int:
    from common.messages.topics import topics_text
    from common.reports.topics import view_of
    from judges.safe_text import visible
    from topics.audience import Place

    found, problem = compute(args, settings)
    if found is None:
        sys.stderr.write(problem)
        return 2
    report, history, readable = found
    if args.json:
        sys.stdout.write(json.dumps(topic_json(report, history, readable), indent=2) + "\n")
    else:
        view = view_of(
            report, audience_sees=lambda _channel: True, may_quote=lambda _question: True, place=Place.terminal()
        )
        sys.stdout.write(visible(topics_text(view)))  # a question's control characters shown, never sent
    return 0


def run_gaps(args: argparse.Namespace, settings: Settings) -> int:
    """The gaps as JSON or draft entries; a private channel's question and teammate answer only with
    --include-private (relmon.private_items): without it a JSON gap keeps its figures and ids, a draft is left out,
    and both say how many were withheld."""
    from judges.safe_text import visible
    from relmon.private_items import text_shown, withheld_note
    from topics.gaps import drafts

    found, problem = compute(args, settings)
    if found is None:
        sys.stderr.write(problem)
        return 2
    report, _history, readable = found
    include = getattr(args, "include_private", False)
    shows = [text_shown(gap.question.private, include_private=include) for gap in report.gaps]
    withheld = shows.count(False)
    note = withheld_note(withheld)
    if args.format == "json":
        # The IDs and the raw ts stay (scripts read them); the channel's name and the local time are extra fields.
        gaps = [
            gap.as_dict()
            | _where(readable, gap.question.channel_id, gap.question.ts)
            | ({"withheld": False} if show else {"question": None, "answer": None, "topic": None, "withheld": True})
            for gap, show in zip(report.gaps, shows, strict=True)
        ]
        payload = {"gaps": gaps, "private_withheld": withheld, "note": note, "notes": list(report.notes)}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")  # ASCII: every control character escaped
    else:
        sys.stdout.write(drafts([gap for gap, show in zip(report.gaps, shows, strict=True) if show]))
        for line in (*report.notes, *([note] if note else [])):
            sys.stdout.write(f"\n_{visible(line)}_\n")
    return 0
