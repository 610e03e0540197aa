"""`capture_event`: one Slack event the bot deduplicated and handed on before it answered Slack (bot.hand_on),
captured here (workers.live_capture). The bot noted it in Redis beside the task (capture.handoffs), so that a
message lost in kombu's window is sent again by the orphan check; the note is dropped once the event is captured,
or given up on with a bug. Retried while Redis or the database is down; running an event twice changes nothing more."""

from __future__ import annotations

from typing import Any

import redis
from sqlalchemy.exc import OperationalError

from capture import handoffs
from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.live_capture import LiveCapture
from workers.pairs.capturing import ConversationBusy


@celery.task(
    name=task_names.CAPTURE_EVENT,
    bind=True,
    acks_late=True,
    autoretry_for=(redis.RedisError, OperationalError, ConversationBusy),
    retry_backoff=1,
    retry_backoff_max=60,
    max_retries=60,
)
def capture_event(self, entry: dict[str, Any], handoff: str | None = None) -> None:
    runtime = get_runtime()
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    try:
        LiveCapture(runtime, redelivered=redelivered).capture_entry(entry)
    except (redis.RedisError, OperationalError, ConversationBusy):
        raise  # tried again: the note stays until the event is captured
    except Exception:
        handoffs.done(runtime.redis, handoff)  # a bug: sending it again would fail the same way (logged by Celery)
        raise
    handoffs.done(runtime.redis, handoff)
