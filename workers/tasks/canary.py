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
def run_canary(self, run_id: int | None = None, team_runs: list[int] | None = None) -> str:
    """The seed canary's run, then each team judge's with labels (`workers.canary.run_team`); each run's "the judge
    moved" said once. Returns the seed run's outcome."""
    runtime = get_runtime()
    if run_id is None:
        run_id = canary.run(runtime)
        team_runs = canary.run_team(runtime)
    try:
        outcome = canary.announce(runtime, run_id)
        for team_run in team_runs or ():
            canary.announce(runtime, team_run)
        return outcome
    except Exception as error:
        if self.request.retries >= MAX_RETRIES:
            raise
        countdown = backoff_seconds(self.request.retries, base=2.0, cap=60.0)
        log.info("canary alert retrying", extra={"canary_run": run_id, "in_s": countdown, "error": repr(error)[:300]})
        kwargs = {"run_id": run_id, "team_runs": list(team_runs or ())}
        raise self.retry(kwargs=kwargs, countdown=countdown, exc=error) from error
