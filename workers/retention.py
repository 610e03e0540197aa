"""Retention reaches what relmon posted: before the daily purge deletes rows older than RELMON_RETENTION_DAYS, the
messages relmon posted about them (alerts, the hour's summaries, verdicts sent as direct messages) are redrawn
without their words (chat.update) or, with RELMON_RETENTION_SLACK=delete, deleted (chat.delete); and every stored
response_url older than its 30-minute life is blanked. A post Slack no longer has (deleted, its channel gone) counts
as retired; any other failure leaves the post, and the rows that record it, for the next purge."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from slack_sdk.errors import SlackApiError

from common.messages.retired import retired_message
from common.runtime import Runtime
from store import alerts as alert_store
from store import retention
from workers.alerts.delivery import is_permanent, lease, slack_error

log = logging.getLogger("relmon.maintenance")

RESPONSE_URL_LIFE = timedelta(hours=1)  # Slack honours a response_url for 30 minutes: kept no longer than this
GONE = frozenset({"message_not_found", "channel_not_found", "cant_delete_message", "cant_update_message"})


def retire_posts(runtime: Runtime, before: datetime, *, batch_size: int = 200) -> int:
    """Retire every post about what is older than `before`; returns how many. A Slack failure that may pass
    (rate limit, 5xx, timeout) stops here: the rest waits for the next purge, and so do their rows."""
    settings = runtime.settings
    retired = 0
    while True:
        with runtime.db.reading() as session:
            rows = retention.posts_to_retire(session, before, batch_size)
        if not rows:
            return retired
        for row in rows:
            channel = (row.details or {}).get("dm_channel") if row.kind == alert_store.KIND_VERDICT else None
            channel = channel or row.alert_channel_id
            with lease(runtime, row.id, owner=f"retire:{row.id}"):  # not beside a vote's redraw of the same alert
                try:
                    if settings.retention_slack == "delete":
                        runtime.slack.chat_delete(channel=channel, ts=row.message_ts)
                    else:
                        payload = retired_message(row.kind, settings.retention_days)
                        runtime.slack.chat_update(channel=channel, ts=row.message_ts, **payload)
                except SlackApiError as error:
                    if slack_error(error) not in GONE and not is_permanent(error):
                        raise
                    log.info("retired post already gone", extra={"alert_id": row.id, "error": slack_error(error)})
                with runtime.db.session() as session:
                    retention.mark_retired(session, row.id)
            retired += 1


def forget_response_urls(runtime: Runtime, now: datetime) -> int:
    with runtime.db.session() as session:
        return retention.blank_response_urls(session, now - RESPONSE_URL_LIFE)
