"""How a task the bot handed on retries: its message is all that carries it, noted until it ends (common.task_notes).
Redis or the database down for a while (a restart, a failover): the work waits in its message, retried with backoff
(1 s, doubling to a minute) for about an hour; past that, its note stays and beat's orphan check sends it again.
Each task names what it retries on (`autoretry_for`)."""

from __future__ import annotations

from typing import Any

HANDED_ON_RETRIES: dict[str, Any] = {
    "acks_late": True,  # a worker that dies mid-task leaves the message to the broker's visibility timeout
    "retry_backoff": 1,
    "retry_backoff_max": 60,
    "max_retries": 60,
}
