"""run_canary: re-judge the labelled canary set (`workers.canary`), store the run, and say once if the judge
moved. The run is stored before anything is posted: a retry of the post (kwargs `run_id`) measures nothing again."""

from __future__ import annotations

import logging

from common import task_names
from common.backoff import backoff_seconds
from common.celery_app import celery
from common.runtime import get_runtime
from workers import canary

log = logging.getLogger("relmon.canary")

MAX_RETRIES = 8


@celery.task(name=task_names.RUN_CANARY, bind=True, max_retries=MAX_RETRIES)
def run_canary(self, run_id: int | None = None) -> str:
    runtime = get_runtime()
    if run_id is None:
        run_id = canary.run(runtime)
    try:
        return canary.announce(runtime, run_id)
    except Exception as error:
        if self.request.retries >= MAX_RETRIES:
            raise
        countdown = backoff_seconds(self.request.retries, base=2.0, cap=60.0)
        log.info("canary alert retrying", extra={"canary_run": run_id, "in_s": countdown, "error": repr(error)[:300]})
        raise self.retry(kwargs={"run_id": run_id}, countdown=countdown, exc=error) from error
