"""`relmon topics fixed KEY [--at TIME] [--candidates FILE] [--json]`: mark a topic fixed (workers.fixes.mark) and
print its verdict so far. With --candidates the topic's test-set items are judged on those answers first (`relmon
regress` on the topic's items only), and the run is given with the verdict. The mark's message, whose thread the
verdicts go in, is posted in the alert channel (RELMON_ALERT_CHANNEL) when Slack is configured."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from common.messages.fixes import verdict_line
from common.reports.fixes import FixVerdict
from common.runtime import Runtime
from store.settings import Settings


def _fail(message: str) -> int:
    sys.stderr.write(f"relmon topics fixed: {message}\n")
    return 2


def parse_at(text: str | None, timezone: str, now: datetime) -> datetime:
    """`--at`: a date or a date and time (ISO 8601), in RELMON_TIMEZONE unless it names its offset; never later
    than now. Raises ValueError with what to write."""
    if text is None:
        return now
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--at {text!r}: write a date YYYY-MM-DD or a time YYYY-MM-DDTHH:MM") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo(timezone))
    moment = moment.astimezone(UTC)
    if moment > now:
        raise ValueError(f"--at {text}: that is in the future; give when the fix shipped")
    return moment


def verdict_json(verdict: FixVerdict) -> dict:
    shift = verdict.shift
    difference = shift.difference
    return {
        "verdict": verdict.outcome,
        "before": shift.before.as_json(),
        "after": shift.after.as_json(),
        "difference": None if difference is None else {"low": difference.low, "high": difference.high},
        "answers_needed": verdict.needed,
        "wait_until": verdict.wait_until.isoformat() if verdict.wait_until else None,
        "golden": None
        if verdict.golden is None
        else {"run_id": verdict.golden.run_id, "passed": verdict.golden.passed, "total": verdict.golden.total},
    }


def _regress(args: argparse.Namespace, settings: Settings, runtime: Runtime, key: str) -> tuple[int | None, int]:
    """The topic's test-set items judged on the --candidates answers: (the run's id, its exit status)."""
    from relmon.regress.command import run_regress
    from store import fixes as fix_rows

    with runtime.db.reading() as session:
        items = fix_rows.golden_item_ids(session, key)
    if not items:
        sys.stderr.write("relmon topics fixed: the test set has no item of this topic: nothing re-run\n")
        return None, 0
    regress = argparse.Namespace(
        candidates=args.candidates, baseline=None, min_pass=0.8, json=None, junit=None, batch=False, threads=8,
        fresh=False, include_private=False, allow_missing=True,
    )  # fmt: skip
    started = datetime.now(UTC)
    with contextlib.redirect_stdout(sys.stderr):  # its table for people; this command's stdout is the verdict
        code = run_regress(regress, settings, only_items=items)
    with runtime.db.reading() as session:
        runs = fix_rows.regress_runs_since(session, started)
    return (runs[0].id if runs else None), code


def run_fixed(args: argparse.Namespace, settings: Settings, now: datetime | None = None) -> int:
    from store import fixes as fix_rows
    from workers.fixes import CLI, UnknownTopic, mark

    if args.action != "fixed" or not args.key:
        return _fail("write `relmon topics fixed KEY` (the keys: `relmon topics --json`)")
    if args.since not in (None, "7d") or args.channel or args.refresh:
        return _fail("--since, --channel and --refresh are for listing topics, not for marking one fixed")
    now = now or datetime.now(UTC)
    try:
        at = parse_at(args.at, settings.timezone, now)
    except ValueError as error:
        return _fail(str(error))
    runtime = Runtime(settings)
    try:
        runtime.db.migrate()
        with runtime.db.reading() as session:
            record = fix_rows.topic(session, args.key)
        if record is None:
            return _fail(f"no topic has the key {args.key!r} (the keys: `relmon topics --json`)")
        run_id, code = _regress(args, settings, runtime, record.key) if args.candidates else (None, 0)
        if args.candidates and run_id is None and code:
            return code  # the regress run said why
        try:
            fix, verdict = mark(runtime, record.key, at, CLI, max(now, datetime.now(UTC)), regress_run_id=run_id)
        except UnknownTopic:
            return _fail(f"no topic has the key {args.key!r}")
        if args.json:
            payload = {"fix_id": fix.id, "topic": record.key, "name": record.name, "marked_at": at.isoformat()}
            payload |= verdict_json(verdict) | {"thread": fix.message_ts}
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            sys.stdout.write(f"Marked fixed at {at:%Y-%m-%d %H:%M} UTC (fix {fix.id}).\n")
            sys.stdout.write(verdict_line(record.name, verdict, mrkdwn=False) + "\n")
        return 0
    finally:
        runtime.db.dispose()
