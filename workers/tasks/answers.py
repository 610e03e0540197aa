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
def capture_answer(self, channel: str, ts: str, **described: Any) -> str:
    """`described`: what the bot sent with the answer (thread_ts, team_id, channel_type, ext_shared, logged,
    handoff), as `capture_answer_in` takes it."""
    runtime = get_runtime()
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    try:
        return capture_answer_in(runtime, channel, ts, redelivered=redelivered, **described)
    except _RETRIED["autoretry_for"]:
        raise  # tried again: the bot's note stays until the answer is stored
    except Exception:
        # A bug: sending it again would fail the same way (logged by Celery).
        handoffs.done(runtime.redis, described.get("handoff"))
        raise
