"""`relmon digest [--dry-run] [--force]`: send this week's digest now, or print it here."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from common.reports.period import period_for
from common.runtime import Runtime, set_runtime
from store.settings import Settings


def run_digest(args: argparse.Namespace, settings: Settings, *, now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    runtime = Runtime(settings)
    set_runtime(runtime)
    try:
        if args.dry_run:
            # A dry run touches no Slack and does not migrate: it refuses an old schema. It writes only the
            # topics, when none are stored (made as the daily run makes them).
            if not schema_at_head(runtime):
                sys.stderr.write(
                    "relmon digest --dry-run: the database schema is not up to date; run relmon migrate first\n"
                )
                return 1
            return _dry_run(runtime, now)
        runtime.db.migrate()  # the schema only
        return _send(runtime, now, force=args.force)
    finally:
        runtime.db.dispose()
        set_runtime(None)


def schema_at_head(runtime: Runtime) -> bool:
    """Whether every migration is applied, found without writing: a SQLite file that does not exist yet is not
    opened (that would create it)."""
    from store.db import pending_migrations, sqlite_file

    path = sqlite_file(runtime.db.engine)
    if path is not None and not path.exists():
        return False
    return not pending_migrations(runtime.db.engine)


def _dry_run(runtime: Runtime, now: datetime) -> int:
    from common.channel_names import readable_for
    from common.messages.digest import digest_text
    from common.reports.figures import load_report, prices_for
    from common.reports.topic_runs import place_of, quoting_in, stored_or_made_view, too_few_view
    from common.runtime import shared_redis
    from judges.safe_text import visible
    from relmon.backfill.command import backfill_llm
    from workers.digest.delivery import followed_fixes, quotes_for

    settings = runtime.settings
    period = period_for(now, settings.timezone)
    report = load_report(runtime, period)
    # No Slack here: answers are located by channel and ts instead of permalinks.
    quotes = quotes_for(runtime, report, settings.digest_channel)
    # The newest stored topics, made now when none are (the first digest after an import): then they are stored
    # as the daily run's, paid from the daily budget and named by the judge model with the SDK's retries. Without
    # Slack to ask who reads the digest channel, a private channel's topics are left out.
    quoting = quoting_in(runtime, settings.digest_channel)
    place = place_of(runtime, settings.digest_channel)  # names as the digest channel may read them
    topics, made = stored_or_made_view(
        runtime,
        now,
        audience_sees=lambda _channel: False,
        may_quote_text=quoting,
        place=place,
        llm=lambda: backfill_llm(settings),
        redis_client=shared_redis(settings),  # one maker at a time with the workers, when Redis is there
    )
    grouped = bool(topics.topics)
    if not grouped:  # too few to group (after a small import, say): the failed ones, read here
        topics = too_few_view(runtime, period, now, settings.digest_channel, lambda _channel: False) or topics
    # What the digest channel would be shown, its quotes' control characters shown instead of sent to the terminal.
    # Channels by the names stored (an import's, earlier look-ups'), answers by the team's local time.
    channels = [s.channel_id for s in report.channels] + [w.channel_id for w in report.overall.worst]
    readable = readable_for(runtime, channels, ask_slack=False)
    # The followed fixes' verdicts, told nowhere (a dry run posts nothing).
    fixes = followed_fixes(runtime, now, settings.digest_channel, tell=False)
    text = digest_text(report, {}, quotes, prices_for(runtime), topics=topics, readable=readable, fixes=fixes)
    sys.stdout.write(visible(text))
    if made and grouped:
        sys.stdout.write("\n(dry run: nothing was posted; the topics were grouped now and stored as today's run)\n")
    elif made:
        sys.stdout.write("\n(dry run: nothing was posted; today's topics run was stored: too few questions to group)\n")
    else:
        sys.stdout.write("\n(dry run: nothing was posted or recorded)\n")
    return 0


def _send(runtime: Runtime, now: datetime, *, force: bool) -> int:
    from workers.digest.delivery import deliver_digest

    missing = [name for name in ("SLACK_BOT_TOKEN",) if not runtime.settings.slack_bot_token]
    if missing or not runtime.settings.digest_channel:
        sys.stderr.write("relmon digest needs SLACK_BOT_TOKEN and RELMON_DIGEST_CHANNEL (or RELMON_ALERT_CHANNEL)\n")
        return 2
    outcome = deliver_digest(runtime, now, force=force)
    if outcome.status == "sent":
        from common.channel_names import readable_for

        channel = runtime.settings.digest_channel
        readable = readable_for(runtime, [channel])
        print(f"digest {outcome.period_key} sent to {readable.channel(channel)} ({readable.time(outcome.message_ts)})")
        return 0
    if outcome.status == "already_sent":
        print(f"digest {outcome.period_key} was already sent; use --force to send another")
        return 0
    print(f"digest {outcome.period_key} is being sent by another run right now")
    return 1
