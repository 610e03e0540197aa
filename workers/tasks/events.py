"""`capture_event`: one Slack event the bot deduplicated and published before it answered Slack (bot.publishing),
captured here (workers.live_capture). Noted until it ends (common.task_notes), so that a message lost in kombu's
window is sent again by the orphan check. Running an event twice changes nothing more."""

from __future__ import annotations

from typing import Any

import redis
from sqlalchemy.exc import OperationalError

from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.handed_on import HANDED_ON_RETRIES
from workers.live_capture import LiveCapture
from workers.pairs.capturing import ConversationBusy


# Retried as every task the bot hands on is (workers.handed_on); ConversationBusy too.
@celery.task(
    name=task_names.CAPTURE_EVENT,
    bind=True,
    autoretry_for=(redis.RedisError, OperationalError, ConversationBusy),
    **HANDED_ON_RETRIES,
)
def capture_event(self, entry: dict[str, Any]) -> None:
    LiveCapture(get_runtime()).capture_entry(entry)
