"""`relmon rejudge --errors [--since DATE]`: judge error verdicts again. Their pairs go back to pending and join
the answers waiting for the LLM endpoint (workers.judging.outage): the workers judge them oldest first, at
RELMON_LLM_RESUME_PER_MINUTE, and alert on each low score as usual."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from common.runtime import Runtime
from store.rejudging import ErrorVerdict, error_verdicts, reopen
from store.settings import Settings

EXIT_OK, EXIT_USAGE = 0, 2


def parse_since(text: str | None, now: datetime) -> datetime | None:
    """`7d` (days back) or a date `YYYY-MM-DD` (UTC midnight); None (no bound) when not given. Raises ValueError."""
    if text is None:
        return None
    from relmon.backfill.command import parse_since as parse_period

    return parse_period(text, now)


def summary(
    verdicts: list[ErrorVerdict], pairs: int, per_minute: float, since: datetime | None, timezone: str = "UTC"
) -> str:
    """What the command did, for a person (`since` in the team's `timezone`, the zone named)."""
    when = f" since {since.astimezone(ZoneInfo(timezone)):%Y-%m-%d %H:%M} {timezone}" if since is not None else ""
    if not verdicts:
        return f"No error verdicts to judge again{when}."
    count = "1 error verdict" if len(verdicts) == 1 else f"{len(verdicts)} error verdicts"
    answers = "1 answer" if pairs == 1 else f"{pairs} answers"
    return (
        f"{count}{when} ({answers}) will be judged again, oldest first, up to {per_minute:g} a minute. "
        "relmon worker and relmon beat judge them and alert on low scores as usual."
    )


def run_rejudge(args: argparse.Namespace, settings: Settings, *, now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    if not args.errors:
        print("relmon rejudge: say what to judge again: --errors (error verdicts)", file=sys.stderr)
        return EXIT_USAGE
    try:
        since = parse_since(args.since, now)
    except ValueError:
        print(f"relmon rejudge: --since {args.since!r} is not 7d or a date YYYY-MM-DD", file=sys.stderr)
        return EXIT_USAGE
    from workers.judging import outage

    runtime = Runtime(settings)
    try:
        runtime.db.migrate()  # the schema only
        with runtime.db.session() as session:
            verdicts = error_verdicts(session, since)
            pair_ids = reopen(session, verdicts)
        answered = {verdict.pair_id: verdict.answer_ts for verdict in verdicts}
        for pair_id in pair_ids:
            outage.hold(runtime.redis, pair_id, outage.answered_at_score(answered[pair_id], time.time()))
    finally:
        runtime.db.dispose()
    if args.json:
        report = {
            "error_verdicts": len(verdicts),
            "pairs": pair_ids,
            "since": since.isoformat() if since else None,
            "per_minute": settings.llm_resume_per_minute,
        }
        print(json.dumps(report))
    else:
        print(summary(verdicts, len(pair_ids), settings.llm_resume_per_minute, since, settings.timezone))
    return EXIT_OK
