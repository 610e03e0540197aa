"""The LLM outage's tasks: beat's tick (probe a down endpoint, release the waiting answers once it is back) and
the notices in the alert channels. Thin: the state and rules are in workers.judging.outage, the tick's step in
workers.judging.outage_tick, the notices in workers.outage_notices."""

from __future__ import annotations

import time
from functools import partial

from common.celery_app import celery
from common.runtime import get_runtime
from common.task_names import LLM_OUTAGE_TICK, POST_OUTAGE_NOTICE
from workers.judging.outage_tick import tick
from workers.outage_notices import post_notice
from workers.tasks.slack import MAX_RETRIES, _run


@celery.task(name=LLM_OUTAGE_TICK)
def outage_tick() -> str:
    return tick(get_runtime(), time.time())


@celery.task(name=POST_OUTAGE_NOTICE, bind=True, max_retries=MAX_RETRIES)
def post_outage_notice(self, kind: str, since: float, failure: str, waited: int = 0, at: float = 0.0) -> int:
    """Post 'judging paused' or 'judging resumed' in every alert channel, once each; retried like every post."""
    return _run(self, partial(post_notice, waited=waited, at=at), kind, since, failure)
