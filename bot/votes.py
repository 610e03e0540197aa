"""The feedback buttons on alerts: a click is this person's vote (changeable); the alert's tally is refreshed by
the workers."""

from __future__ import annotations

import logging

from slack_sdk import WebClient

from bot.replies import tell
from common import task_names
from common.celery_app import celery
from common.feedback import VOTE_RIGHT
from common.messages.verdicts import error_message
from common.replies import Asker
from common.runtime import Runtime
from store.alerts import by_message, low_alert_for_judgment
from store.feedback import record_vote

log = logging.getLogger("relmon.commands")


def record_click(
    runtime: Runtime, client: WebClient, asker: Asker, judgment_id: int, vote: str, *, message_ts: str | None = None
) -> None:
    """Record the vote, then queue the refresh of the alert it was cast on (found by its message, else by
    the judgment's low-score alert)."""
    assert asker.user_id is not None
    try:
        with runtime.db.session() as session:
            recorded = record_vote(session, judgment_id, asker.user_id, vote)
            alert = None
            if asker.channel_id and message_ts:
                alert = by_message(session, asker.channel_id, message_ts)
            if alert is None:
                alert = low_alert_for_judgment(session, judgment_id)
            alert_id = alert.id if alert is not None else None
        if not recorded:  # the judgment was deleted (retention) since the alert was posted
            tell(client, asker, error_message("vote_gone"))
            return
        if alert_id is not None:
            celery.send_task(task_names.REFRESH_ALERT_VOTES, args=[alert_id])
        if vote == VOTE_RIGHT:  # a low score people confirm: its question may join the golden set (the worker checks
            # that this voter may add it: common.golden_access)
            where = {"user": asker.user_id, "channel_id": asker.channel_id}
            celery.send_task(task_names.GOLDEN_FROM_VOTE, args=[judgment_id, vote], kwargs=where)
    except Exception:
        log.exception("feedback not recorded")
        tell(client, asker, error_message("unavailable"))
