"""`capture_answer`: the SQL side of capture, done by a worker (the step: workers.pairs.capturing). Here is how it
retries. (A deletion's scrub: workers.tasks.forgetting.)"""

from __future__ import annotations

from typing import Any

import redis
from sqlalchemy.exc import OperationalError

from capture import handoffs
from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.pairs.capturing import ConversationBusy, capture_answer_in

# The database may be down for a while (a restart, a failover): the log keeps the answer, the task waits.
_RETRIED = {
    "acks_late": True,
    "autoretry_for": (redis.RedisError, OperationalError, ConversationBusy),
    "retry_backoff": 1,
    "retry_backoff_max": 60,
    "max_retries": 60,
}


@celery.task(name=task_names.CAPTURE_ANSWER, bind=True, **_RETRIED)
def capture_answer(
    self,
    channel: str,
    ts: str,
    thread_ts: str | None = None,
    team_id: str | None = None,
    channel_type: str | None = None,
    ext_shared: bool | None = None,
    logged: dict[str, Any] | None = None,
    handoff: str | None = None,
) -> str:
    runtime = get_runtime()
    try:
        return capture_answer_in(
            runtime,
            channel,
            ts,
            thread_ts=thread_ts,
            team_id=team_id,
            channel_type=channel_type,
            ext_shared=ext_shared,
            logged=logged,
            redelivered=bool((self.request.delivery_info or {}).get("redelivered")),
            handoff=handoff,
        )
    except _RETRIED["autoretry_for"]:
        raise  # tried again: the bot's note stays until the answer is stored
    except Exception:
        handoffs.done(runtime.redis, handoff)  # a bug: sending it again would fail the same way (logged by Celery)
        raise
