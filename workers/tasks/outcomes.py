"""The outcome tasks (the steps: workers.outcome_watching): a message or a reaction the bot handed on, and beat's
sweep that closes the windows whose time is up. How they retry is here."""

from __future__ import annotations

from datetime import UTC, datetime

import redis
from sqlalchemy.exc import OperationalError

from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.outcome_watching import MessageNotLogged, close_due_windows_in, observe_message_in, observe_reaction_in

_RETRIED = {
    "autoretry_for": (redis.RedisError, OperationalError),
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "max_retries": 8,
}


@celery.task(
    name=task_names.OBSERVE_MESSAGE,
    acks_late=True,
    **{**_RETRIED, "autoretry_for": (*_RETRIED["autoretry_for"], MessageNotLogged), "retry_backoff": 1},
)
def observe_message(pair_ids: list[int], channel: str, ts: str) -> dict[int, list[str]]:
    """`pair_ids`: every pair the message concerns, in one task."""
    return observe_message_in(get_runtime(), pair_ids, channel, ts)


@celery.task(name=task_names.OBSERVE_REACTION, acks_late=True, **_RETRIED)
def observe_reaction(pair_id: int, user: str, emoji: str, added: bool, at: float) -> list[str]:
    return observe_reaction_in(get_runtime(), pair_id, user, emoji, added, at)


@celery.task(name=task_names.CLOSE_DUE_WINDOWS, acks_late=True, **_RETRIED)
def close_due_windows() -> int:
    return close_due_windows_in(get_runtime(), datetime.now(UTC))
