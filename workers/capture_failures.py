"""How the capture task (workers.tasks.events) retries and fails."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

import redis
from celery.exceptions import Reject
from sqlalchemy.exc import OperationalError

from capture import handoffs
from workers.pairs.capturing import ConversationBusy

# The database may be down for a while (a restart, a failover): the log keeps the answer, the task waits.
CAPTURE_RETRIES = {
    "acks_late": True,
    "autoretry_for": (redis.RedisError, OperationalError, ConversationBusy),
    "retry_backoff": 1,
    "retry_backoff_max": 60,
    "max_retries": 60,
}


def replayed(task) -> bool:
    """The task's message came again (its worker died, or it was requeued) or this is its retry: an earlier run
    may have stored the answer and stopped anywhere after, so a replay finishes what it left."""
    return bool((task.request.delivery_info or {}).get("redelivered")) or bool(task.request.retries)


@contextmanager
def capture_failures(runtime, handoff: str | None) -> Iterator[None]:
    """How a capture task fails. Transient errors (Redis, the database, a busy conversation) are retried (Celery's
    autoretry) and a Reject (a requeue) goes through: the bot's note stays until the answer is stored. Anything
    else is a bug: sending it again would fail the same way (logged by Celery), so the note is dropped."""
    try:
        yield
    except (*CAPTURE_RETRIES["autoretry_for"], Reject):
        raise
    except Exception:
        with suppress(redis.RedisError):  # Redis down too: the note stays, and its resend fails the same way
            handoffs.done(runtime.redis, handoff)
        raise
