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
def collect_vote(judgment_id: int, vote: str, user: str | None = None, channel_id: str | None = None) -> int | None:
    return collect_vote_in(get_runtime(), judgment_id, vote, user, channel_id)


@celery.task(name=task_names.GOLDEN_SAVE, acks_late=True, **_RETRIED)
def save_from_modal(
    judgment_id: int, user: str, note: str | None, remove: bool = False, channel_id: str | None = None
) -> dict:
    """`note`: the key of the typed expected answer's Redis note (common.golden_notes), never the text itself."""
    runtime = get_runtime()
    outcome = save_from_modal_in(runtime, judgment_id, user, note, remove, channel_id)
    acknowledge_save(runtime, channel_id, user, outcome)
    return outcome
