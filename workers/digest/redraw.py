"""A posted digest redrawn after a message it may quote was forgotten (deleted in Slack, or edited to take words
out): the worst answers' quotes, the topics' examples and names are read again from the scrubbed rows and the
posted message is replaced in place (chat.update), for the same channel and under the same quoting rule as when it
was posted. The topics come from the run stored with the digest (no LLM call); the gap drafts are not stored with
it, so a redrawn digest leaves them out and says it was redrawn. The chart in its thread carries no message text
(`workers.digest.chart`: figures, days, the judge's name) but the topics' names, which are made from questions: when
the forgetting took words out of a name shown, the chart is drawn again and replaces the one in the thread (a file
cannot be edited: the old one is deleted)."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import redis

from capture.forgetting import DELETED_MARK, REMOVED_MARK
from common.messages.digest import digest_message
from common.reports.figures import load_report, prices_for
from common.reports.period import WINDOW, Period
from common.reports.topic_runs import quoting_in
from common.reports.topics import TopicsView, chart_bars, spend_summary, stored_view
from common.runtime import Runtime
from store import digests as digest_rows
from store import topics as topic_rows
from workers.digest.delivery import (
    channel_audience,
    chart_in_thread,
    chart_title,
    followed_fixes,
    links_for,
    quotes_for,
)

log = logging.getLogger("relmon.digest")
REDRAWN_NOTE = "Redrawn: a message it drew on was deleted or edited in Slack (its knowledge gaps are left out)."


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _stored(runtime: Runtime, digest: digest_rows.PostedDigest):
    """The digest's period (its stored run's, else the seven days before it was made) and what its topics view is
    drawn from: the run, its topics, their examples' texts as they are now, and the topics' spend; or None."""
    with runtime.db.reading() as session:
        found = digest_rows.topics_run(session, digest.period_key)
        if found is None:
            start, end = digest.made_at - WINDOW, digest.made_at
        else:
            start, end = _aware(found[0].start), _aware(found[0].end)
        period = Period(digest.period_key, start, end, start - (end - start), runtime.settings.timezone)
        if found is None:
            return period, None
        run, periods = found
        texts = topic_rows.example_texts(session, [pair_id for row in periods for pair_id in row.examples])
        spend = topic_rows.spend_between(session, start, end + timedelta(minutes=1))
    return period, (run, periods, texts, spend)


def _topics_view(runtime: Runtime, channel: str, stored, audience_sees) -> TopicsView:
    run, periods, texts, spend = stored
    settings = runtime.settings
    view = stored_view(run, periods, texts, audience_sees=audience_sees, may_quote=quoting_in(runtime, channel))
    cost = spend_summary(
        spend,
        embedding_price=settings.embedding_price,
        input_price=settings.input_price,
        output_price=settings.output_price,
    )
    return replace(view, notes=(*view.notes, REDRAWN_NOTE), cost=cost)


def redraw_digest(runtime: Runtime, digest_id: int) -> str:
    """Replace the posted digest with one drawn from the rows as they are now: redrawn, or gone (nothing posted,
    or the digest no longer stored). Slack's errors are the caller's (the task retries)."""
    with runtime.db.reading() as session:
        digest = digest_rows.posted(session, digest_id)
    if digest is None:
        return "gone"
    period, stored = _stored(runtime, digest)
    # A private channel's figures, lines and topics only where the digest channel's audience may see them.
    audience = channel_audience(runtime, digest.channel_id, period)
    report = load_report(runtime, period, may_see=audience.may_see)
    topics = None
    if stored is not None and not report.empty:
        topics = _topics_view(runtime, digest.channel_id, stored, audience.may_see)
    message = digest_message(
        report,
        links_for(runtime, report),
        quotes_for(runtime, report, digest.channel_id),
        prices_for(runtime),
        chart_in_thread=not report.empty,
        topics=topics,
        # The fixes as of when the digest was made (told then already): a redraw keeps its "Fixes" section.
        fixes=followed_fixes(runtime, digest.made_at, digest.channel_id, tell=False),
    )
    runtime.slack.chat_update(
        channel=digest.channel_id, ts=digest.message_ts, text=message["text"], blocks=message["blocks"]
    )
    if topics is not None and names_scrubbed(topics) and not chart_drawn_with(runtime, digest, topics):
        replace_chart(runtime, digest, period, report, topics)
    log.info("digest redrawn", extra={"period_key": digest.period_key, "message_ts": digest.message_ts})
    return "redrawn"


def names_scrubbed(topics: TopicsView) -> bool:
    """Whether a topic name the chart shows had words taken out by a forgetting (capture.forgetting's marks)."""
    return any(mark in bar.name for bar in chart_bars(topics) for mark in (DELETED_MARK, REMOVED_MARK))


def _chart_key(digest: digest_rows.PostedDigest) -> str:
    return f"relmon:digest-chart:{digest.id}"


def _names_hash(topics: TopicsView) -> str:
    return hashlib.sha256(json.dumps([bar.name for bar in chart_bars(topics)]).encode()).hexdigest()


def chart_drawn_with(runtime: Runtime, digest: digest_rows.PostedDigest, topics: TopicsView) -> bool:
    """Whether the chart in the thread was drawn again with these names already (a hash of them, kept when it was):
    a later forgetting in the same topic then redraws the message, not the chart."""
    try:
        kept = runtime.redis.get(_chart_key(digest))
    except redis.RedisError:
        return False  # drawn again: the safe side
    return (kept.decode() if isinstance(kept, bytes) else kept) == _names_hash(topics)


def replace_chart(
    runtime: Runtime, digest: digest_rows.PostedDigest, period: Period, report, topics: TopicsView
) -> None:
    """Delete the digest's chart from its thread and upload it drawn again (with the names as they are now)."""
    title = chart_title(period, report)
    replies = runtime.slack.conversations_replies(channel=digest.channel_id, ts=digest.message_ts, limit=200)
    for reply in replies.get("messages") or []:
        for shared in reply.get("files") or []:
            if shared.get("title") == title:
                runtime.slack.files_delete(file=shared["id"])
    chart_in_thread(runtime, digest.channel_id, digest.message_ts, period, report, chart_bars(topics))
    ttl = runtime.settings.retention_days * 86_400  # the digest's rows go with retention; the hash with them
    try:
        runtime.redis.set(_chart_key(digest), _names_hash(topics), ex=ttl)
    except redis.RedisError as error:  # the next redraw draws the chart again, no more
        log.warning("digest chart not noted", extra={"digest_id": digest.id, "error": type(error).__name__})
