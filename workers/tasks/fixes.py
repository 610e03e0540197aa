"""The "Mark fixed" button's task (bot/listeners/fixes.py hands it on): the mark stored and its first verdict told
in the thread of the button's message, or under a message in the alert channel from App Home (workers.fixes)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from sqlalchemy.exc import OperationalError

from common import task_names
from common.celery_app import celery
from common.messages.fixes import unknown_topic_text
from common.runtime import get_runtime
from workers.fixes import UnknownTopic, mark

log = logging.getLogger("relmon.fixes")

_RETRIED = {"autoretry_for": (OperationalError,), "retry_backoff": 2, "retry_backoff_max": 60, "max_retries": 8}


@celery.task(name=task_names.MARK_FIXED, acks_late=True, **_RETRIED)
def mark_fixed(
    key: str, user: str, clicked_at: float, channel_id: str | None = None, message_ts: str | None = None
) -> int | None:
    """`clicked_at`: the click's action_ts, the mark's time (a redelivered task finds the same mark)."""
    runtime = get_runtime()
    at = datetime.fromtimestamp(clicked_at, UTC)
    try:
        fix, found = mark(runtime, key, at, user, datetime.now(UTC), channel_id=channel_id, message_ts=message_ts)
    except UnknownTopic:
        log.info("mark on an unknown topic", extra={"topic_key": key})
        runtime.slack.chat_postMessage(channel=user, text=unknown_topic_text())  # a direct message: only to them
        return None
    log.info("topic marked fixed", extra={"fix_id": fix.id, "verdict": found.outcome})
    return fix.id
