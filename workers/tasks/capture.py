"""`settle_pair(pair_id, version)`: settle one pair once its answer has been quiet for RELMON_SETTLE_SECONDS (the
step: workers.pairs.settling.settle), then hand it to `judge_pair`."""

from __future__ import annotations

import redis
from sqlalchemy.exc import OperationalError

from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.pairs.settling import settle


@celery.task(
    name=task_names.SETTLE_PAIR,
    bind=True,
    acks_late=True,
    autoretry_for=(redis.RedisError, OperationalError),
    retry_backoff=2,
    retry_backoff_max=120,
    max_retries=8,
)
def settle_pair(self, pair_id: int, version: int) -> str:
    return settle(get_runtime(), pair_id, version)
