"""After a deletion was scrubbed from the store (workers.tasks.forgetting): what relmon posted about it is redrawn
from the scrubbed rows. Posted alerts through the vote tally's redraw task (`refresh_alert_votes`, retried on its
own), the hour's summaries that list a held one (at once, whatever their hour: the periodic flush looks two hours
back), and verdicts sent as direct messages."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError

from common import task_names
from common.celery_app import celery
from common.messages.forgotten import forgotten_note
from common.runtime import Runtime
from store.forgetting import AlertsToRedraw
from workers.alerts import verdicts
from workers.alerts.delivery import schedule_summary_flush, slack_error
from workers.alerts.policy import hour_start
from workers.alerts.summaries import flush_summary

log = logging.getLogger("relmon.forget")


def redraw_forgotten(runtime: Runtime, redraw: AlertsToRedraw, about: dict[int, str]) -> None:
    for alert_id in redraw.posted:
        celery.send_task(task_names.REFRESH_ALERT_VOTES, args=[alert_id])
    for alert_channel, hour in sorted({(channel, hour_start(at)) for channel, at in redraw.held}):
        try:
            flush_summary(runtime, alert_channel, hour)
        except Exception as error:  # the periodic flush tries the recent ones again
            log.warning("summary not redrawn", extra={"alert_channel": alert_channel, "error": repr(error)[:200]})
            schedule_summary_flush(runtime)
    for pair_id in redraw.verdicts:
        try:
            verdicts.redraw(runtime, pair_id, forgotten_note(about.get(pair_id, "message")))
        except (SlackApiError, OSError) as error:  # retention retires it in the end (workers.retention)
            log.warning("verdict not redrawn", extra={"pair_id": pair_id, "error": slack_error(error) or repr(error)})
