"""requeue_orphans and requeue_stale, run by beat: the orphan check every half lease, the stale sweep every few
minutes. Their steps and decisions are in workers.sweeps."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.sweeps import check_orphans, sweep_stale

log = logging.getLogger("relmon.judging")


@celery.task(name=task_names.REQUEUE_ORPHANS)
def requeue_orphans() -> int:
    """Re-enqueue pairs pending or settling for over a lease that have no message queued or held, and send again
    the noted tasks whose message was lost. A pair whose judging failed with a bug is left to requeue_stale."""
    resent, requeued = check_orphans(get_runtime(), datetime.now(UTC))
    if requeued:
        log.warning("re-enqueued pairs whose task message was lost", extra={"count": requeued})
    return resent + requeued


@celery.task(name=task_names.REQUEUE_STALE)
def requeue_stale() -> int:
    """Re-enqueue pairs whose task was lost, and give up on those whose judging kept failing."""
    stale, given_up = sweep_stale(get_runtime(), datetime.now(UTC))
    if stale:
        log.warning("re-enqueued stale pairs", extra={"count": stale - given_up, "given_up": given_up})
    return stale
