"""Beat's LLM outage tick: probe a down endpoint, release the waiting answers once it is back. Thin: the state
and rules are in workers.judging.outage, the tick's step in workers.judging.outage_tick (the notices are posted
by workers.tasks.slack.post_outage_notice)."""

from __future__ import annotations

import time

from common.celery_app import celery
from common.runtime import get_runtime
from common.task_names import LLM_OUTAGE_TICK
from workers.judging.outage_tick import tick


@celery.task(name=LLM_OUTAGE_TICK)
def outage_tick() -> str:
    return tick(get_runtime(), time.time())
