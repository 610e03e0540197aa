"""Fixes that worked (#47): a topic marked fixed, followed. The adapter around `common.reports.fixes.verdict`:

- `mark`: store the mark (the CLI, the "Mark fixed" button), and where its verdicts are told: under the button's
  own message (the digest's), or, from App Home and the CLI, under a message relmon posts in the alert channel
  (RELMON_ALERT_CHANNEL; none set: the digest's "Fixes" section only);
- `counts`: the topic's answers and failed ones in the `fix_baseline_days` before the mark and since (its pairs
  are those the topics runs put in it: `pair_topics`; failed as the topics count it, `topics.questions`);
- `follow`: each fix marked in the last `fix_follow_days`, its verdict now; a changed verdict is claimed in SQL and
  posted once in the mark's thread (`common.post_once`); returns the lines of the digest's "Fixes" section.

The test set's items of the topic re-run by `relmon regress` after the mark are given with the verdict."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from common.messages.fixes import FixLine, mark_message, verdict_reply
from common.post_once import PostOnce, Receipts
from common.privacy import Destination
from common.reports.fixes import FixVerdict, GoldenRerun, Side, sides, verdict
from common.reports.topic_runs import place_of
from common.runtime import Runtime
from golden.regress import MISSING, PASS
from store import fixes as fix_rows
from store import topics as topic_rows
from store.fixes import Fix
from topics.audience import shown_name

log = logging.getLogger("relmon.fixes")

METADATA_EVENT = "relmon_fix"
CLI = "cli"


class UnknownTopic(LookupError):
    """No topic has that key (nor a unique prefix of it)."""


def counts(runtime: Runtime, key: str, marked_at: datetime, now: datetime) -> tuple[Side, Side]:
    """((failed, answers) before the mark, (failed, answers) since), over the topic's pairs; under sampling each
    side's weights instead (its judged answers at 1/π, those sampling skipped left out: the failure rate's, as the
    topics count it)."""
    from topics.service import question_of  # numpy: the worker's and the CLI's, not the bot's

    settings = runtime.settings
    start = marked_at - timedelta(days=settings.fix_baseline_days)
    with runtime.db.reading() as session:
        ids = fix_rows.pair_ids(session, key)
    if not ids:
        return (0, 0), (0, 0)
    found = []
    with runtime.db.session() as session:  # a transaction: PostgreSQL streams through a server-side cursor
        for row, text in topic_rows.stream_questions(session, start, now):
            if row.id not in ids:
                continue
            rule = runtime.rules.for_channel(row.channel_id, settings)
            question = question_of(row, text, rule.thresholds) if rule.watch else None
            if question is not None:  # the window is of pairs made
                found.append((row.created_at, question.failed, question.weight))
    return sides(found, marked_at)


def golden_rerun(runtime: Runtime, fix: Fix) -> GoldenRerun | None:
    """The newest `relmon regress` run since the mark (the one given with the mark first) that judged any of the
    topic's test-set items: how many of them passed."""
    with runtime.db.reading() as session:
        items = {str(item) for item in fix_rows.golden_item_ids(session, fix.topic_key)}
        runs = fix_rows.regress_runs_since(session, fix.marked_at) if items else []
    runs.sort(key=lambda run: run.id != fix.regress_run_id)  # stable: the given run first, then newest first
    for run in runs:
        lines = [line for line in (run.report or {}).get("items", []) if str(line.get("id")) in items]
        judged = [line for line in lines if line.get("outcome") != MISSING]
        if judged:
            return GoldenRerun(run.id, sum(1 for line in judged if line.get("outcome") == PASS), len(judged))
    return None


def verdict_of(runtime: Runtime, fix: Fix, now: datetime) -> FixVerdict:
    before, after = counts(runtime, fix.topic_key, fix.marked_at, now)
    return verdict(before, after, marked_at=fix.marked_at, now=now, golden=golden_rerun(runtime, fix))


def topic_name(runtime: Runtime, key: str, channel: Destination | str | None) -> str:
    """The topic's name as `channel`'s people may read it (a private channel's words only where they may)."""
    with runtime.db.reading() as session:
        record = fix_rows.topic(session, key)
    if record is None:
        return f"topic {key[:8]}"
    return shown_name(record.name, record.name_sources, place_of(runtime, channel))


def mark(
    runtime: Runtime,
    key: str,
    at: datetime,
    by: str,
    now: datetime,
    *,
    channel_id: str | None = None,
    message_ts: str | None = None,
    regress_run_id: int | None = None,
) -> tuple[Fix, FixVerdict]:
    """Store a mark on the topic `key` (a unique prefix will do) and tell its first verdict: in the thread of the
    button's message, or under a message of its own in the alert channel. Raises UnknownTopic."""
    with runtime.db.reading() as session:
        record = fix_rows.topic(session, key)
    if record is None:
        raise UnknownTopic(key)
    with runtime.db.session() as session:
        fix_id = fix_rows.add(session, record.key, at, by, channel_id=channel_id, message_ts=message_ts,
                              regress_run_id=regress_run_id)  # fmt: skip
    with runtime.db.reading() as session:
        fix = fix_rows.get(session, fix_id)
    found = verdict_of(runtime, fix, max(now, at))
    alert_channel = runtime.settings.alert_channel if runtime.settings.slack_bot_token else None
    if fix.message_ts is None and alert_channel:
        try:
            name = topic_name(runtime, fix.topic_key, alert_channel)
            message = mark_message(name, by, at, found)
            once = PostOnce(runtime.slack, Receipts(runtime.redis, log=log), f"fix-mark:{fix.id}", METADATA_EVENT)
            posted = once.post(alert_channel, text=message["text"], blocks=message["blocks"], unfurl_links=False)
            with runtime.db.session() as session:
                fix_rows.set_anchor(session, fix.id, alert_channel, posted["ts"])
                # The mark's message says this verdict already: no reply repeats it.
                fix_rows.claim_verdict(session, fix.id, found.key, f"fix:{fix.id}:{found.key}:mark")
                fix_rows.record_reply(session, fix.id, f"fix:{fix.id}:{found.key}:mark", posted["ts"])
        except Exception:  # Slack down or the channel gone: the mark stands, the digest still shows it
            log.exception("the mark's message was not posted", extra={"fix_id": fix.id})
    else:
        tell_verdict(runtime, fix, found, now)
    with runtime.db.reading() as session:
        return fix_rows.get(session, fix.id), found


def tell_verdict(runtime: Runtime, fix: Fix, found: FixVerdict, now: datetime) -> bool:
    """Post the verdict in the mark's thread if it changed since last told (once per change); whether it posted."""
    key = f"fix:{fix.id}:{found.key}:{int(now.timestamp())}"
    if fix.verdict != found.key:
        with runtime.db.session() as session:
            if not fix_rows.claim_verdict(session, fix.id, found.key, key):
                return False
    elif fix.reply_ts or not fix.verdict_key:
        return False  # told already
    else:
        key = fix.verdict_key  # claimed by an earlier run that did not record its reply: that post, once
    if not (fix.channel_id and fix.message_ts):
        return False  # no thread to tell it in: the digest shows it
    name = topic_name(runtime, fix.topic_key, fix.channel_id)
    message = verdict_reply(name, fix.marked_at, found)
    once = PostOnce(runtime.slack, Receipts(runtime.redis, log=log), key, METADATA_EVENT)
    # The receipt only: a thread reply is not in the channel's history, so looking there could not find it.
    ts = once.earlier(fix.channel_id, fix.marked_at, look=False)
    if ts is None:
        posted = once.post(fix.channel_id, thread_ts=fix.message_ts, text=message["text"], blocks=message["blocks"],
                           unfurl_links=False)  # fmt: skip
        ts = posted.get("ts") or ""
    with runtime.db.session() as session:
        fix_rows.record_reply(session, fix.id, key, ts)
    return True


def follow(
    runtime: Runtime, now: datetime, *, shown_in: Destination | str | None = None, tell: bool = True
) -> list[FixLine]:
    """Every followed fix's verdict now, each change told in its thread (unless `tell` is off); the lines for
    `shown_in`'s people (the digest's channel: each name as they may read it)."""
    with runtime.db.reading() as session:
        fixes = fix_rows.followed(session, now - timedelta(days=runtime.settings.fix_follow_days))
    lines = []
    for fix in fixes:
        if fix.marked_at > now:
            continue  # marked after the moment asked about (a redrawn digest's)
        found = verdict_of(runtime, fix, now)
        try:
            if tell:
                tell_verdict(runtime, fix, found, now)
        except Exception:  # one thread that cannot be posted in stops neither the others nor the digest
            log.exception("a fix's verdict was not posted", extra={"fix_id": fix.id})
        lines.append(FixLine(topic_name(runtime, fix.topic_key, shown_in), fix.marked_at, found))
    return lines
