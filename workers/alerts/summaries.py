"""The hour's summary: one message per alert channel and hour for the alerts its caps held back, from every
source channel, posted once and then updated in place as more gather. Four steps: claim the summary's row,
gather what it shows, render it, post or update it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from slack_sdk.errors import SlackApiError

from common.messages.summaries import DegradationAlert, SummaryItem, summary_message
from common.runtime import Runtime
from store import alert_summaries
from store import alerts as alert_store
from store.models import Alert
from workers.alerts import views
from workers.alerts.delivery import alert_post_once, earlier_post, lease, refused_for_good, slack_error
from workers.alerts.policy import hour_start, summary_key, to_utc

log = logging.getLogger("relmon.alerts")

SUMMARY_LOOKBACK = timedelta(hours=2)  # a flush also finishes the previous hour's summary


def flush_summaries(runtime: Runtime, now: datetime | None = None) -> int:
    """Post or update the summary message of every alert channel-hour with held alerts."""
    now = now or datetime.now(UTC)
    with runtime.db.session() as session:
        held = alert_summaries.held_channel_hours(session, now - SUMMARY_LOOKBACK)
    buckets = sorted({(alert_channel, hour_start(created)) for alert_channel, created in held})
    first_error: Exception | None = None
    for alert_channel, hour in buckets:
        try:
            flush_summary(runtime, alert_channel, hour)
        except Exception as error:  # one alert channel's trouble must not hold back the others' summaries
            log.warning(
                "alert summary not flushed",
                extra={"alert_channel": alert_channel, "error": repr(error)[:300], "slack_error": slack_error(error)},
            )
            first_error = first_error or error
    if first_error is not None:
        raise first_error  # the task's retry flushes again (what was done is not done twice)
    return len(buckets)


@dataclass(frozen=True)
class Gathered:
    """What the summary row says and what it is to show."""

    status: str
    message_ts: str | None
    shown: int  # how many items the message in Slack shows
    claimed_at: datetime
    items: list[SummaryItem]
    degradations: list[DegradationAlert]

    @property
    def total(self) -> int:
        return len(self.items) + len(self.degradations)

    @property
    def unchanged(self) -> bool:
        posted_as_is = self.status == alert_store.STATUS_POSTED and self.shown == self.total
        return not self.total or self.status == alert_store.STATUS_FAILED or posted_as_is


def claim_summary(runtime: Runtime, alert_channel: str, hour: datetime) -> int:
    """The summary's row for this alert channel and hour (claimed by the first flush, found by the others)."""
    with runtime.db.session() as session:
        row, _ = alert_store.claim_alert(
            session,
            dedupe_key=summary_key(alert_channel, hour),
            kind=alert_store.KIND_SUMMARY,
            source_channel_id=None,
            alert_channel_id=alert_channel,
            details={"hour": hour.isoformat(), "count": 0},
        )
        return row.id


def gather(runtime: Runtime, summary_id: int, alert_channel: str, hour: datetime) -> Gathered:
    until = hour + timedelta(hours=1)
    with runtime.db.session() as session:
        row = session.get(Alert, summary_id)
        items = [
            views.summary_item(runtime, alert, judgment, private, sent)
            for alert, judgment, private, sent in alert_summaries.held_in_hour(session, alert_channel, hour, until)
        ]
        degradations = [
            views.degradation_of(held)
            for held in alert_summaries.held_degradations(session, alert_channel, hour, until)
        ]
        shown = int((row.details or {}).get("count", 0))
        return Gathered(row.status, row.message_ts, shown, to_utc(row.created_at), items, degradations)


def render_summary(runtime: Runtime, hour: datetime, gathered: Gathered) -> dict:
    sources = {item.channel_id for item in gathered.items}
    caps = {source: runtime.rules.for_channel(source, runtime.settings).alert_cap_per_hour for source in sources}
    return summary_message(
        hour,
        gathered.items,
        caps=caps,
        alert_channel_cap=runtime.settings.alert_channel_cap_per_hour,
        degradations=gathered.degradations,
    )


def flush_summary(runtime: Runtime, alert_channel: str, hour: datetime) -> str:
    """Post or update the hour's summary in `alert_channel`: one message for the alerts held there from every
    source channel (a burst across many channels must not become one summary per channel)."""
    summary_id = claim_summary(runtime, alert_channel, hour)
    once = alert_post_once(runtime, summary_key(alert_channel, hour))
    with lease(runtime, summary_id):
        gathered = gather(runtime, summary_id, alert_channel, hour)
        message_ts = gathered.message_ts
        if not message_ts:  # posted already, but the database missed it (down, or the post's answer never came)?
            message_ts = earlier_post(runtime, once, alert_channel, gathered.claimed_at) or None
            if message_ts:
                with runtime.db.session() as session:
                    alert_store.mark_alert_posted(session, summary_id, message_ts)
        if gathered.unchanged:
            return "unchanged"
        payload = render_summary(runtime, hour, gathered)
        try:
            if message_ts:
                runtime.slack.chat_update(channel=alert_channel, ts=message_ts, **payload)
            else:
                message_ts = once.post(alert_channel, unfurl_links=False, unfurl_media=False, **payload).get("ts")
                with runtime.db.session() as session:
                    alert_store.mark_alert_posted(session, summary_id, message_ts)
        except SlackApiError as error:
            return refused_for_good(runtime, summary_id, error, "alert summary not posted", alert_channel=alert_channel)
        with runtime.db.session() as session:
            alert_store.merge_details(session, summary_id, count=gathered.total)
    log.info(
        "alert summary sent",
        extra={
            "alert_channel": alert_channel,
            "sources": len({item.channel_id for item in gathered.items}),
            "count": len(gathered.items),
            "degraded": len(gathered.degradations),
        },
    )
    return "updated" if gathered.message_ts else "posted"
