"""The golden set's tasks: a "judge was right" vote and the alert's "Add to test set" modal (the steps:
workers.golden_items)."""

from __future__ import annotations

from sqlalchemy.exc import OperationalError

from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.golden_items import acknowledge_save, collect_vote_in, save_from_modal_in

_RETRIED = {"autoretry_for": (OperationalError,), "retry_backoff": 2, "retry_backoff_max": 60, "max_retries": 8}


@celery.task(name=task_names.GOLDEN_FROM_VOTE, acks_late=True, **_RETRIED)
def collect_vote(judgment_id: int, vote: str) -> int | None:
    return collect_vote_in(get_runtime(), judgment_id, vote)


@celery.task(name=task_names.GOLDEN_SAVE, acks_late=True, **_RETRIED)
def save_from_modal(
    judgment_id: int, user: str, expected: str | None, remove: bool = False, channel_id: str | None = None
) -> dict:
    runtime = get_runtime()
    outcome = save_from_modal_in(runtime, judgment_id, user, expected, remove)
    acknowledge_save(runtime, channel_id, user, outcome)
    return outcome
