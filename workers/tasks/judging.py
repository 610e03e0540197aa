"""judge_pair: judge one settled pair with every judge in force, exactly once per judge, and send each judgment's
follow-up (the step: workers.judging.run). Here is how the task retries.

A task that keeps failing with a bug (not an LLM error) leaves its pair pending; each failure is counted, and the
stale sweeper (workers.sweeps) gives up after MAX_FAILED_RUNS of them. Failures of the infrastructure (the
database, Redis or the network down, after their retries) are not counted: an outage of any length only delays a
pair.
"""

from __future__ import annotations

import logging
import time

from celery.signals import task_failure
from sqlalchemy.exc import OperationalError

from common import task_names
from common.backoff import backoff_seconds
from common.celery_app import celery
from common.runtime import get_runtime
from common.telemetry.logs import event_fields
from store.attempts import record_failure
from workers.judging import outage
from workers.judging.rules import TASK_MAX_RETRIES, is_infrastructure
from workers.judging.run import WAITING, FollowUpsUnsent, RetryLater, judge_run, read_pair_view

log = logging.getLogger("relmon.judging")

FOLLOW_UPS_RETRY_SECONDS = 1.0  # first wait before sending stored judgments' follow-ups again (doubles, at most 30 s)
FOLLOW_UPS_RETRY_CAP_SECONDS = 30.0


@celery.task(
    name=task_names.JUDGE_PAIR,
    bind=True,
    max_retries=TASK_MAX_RETRIES,
    # The database went away (restart, failover): Celery retries the task with backoff instead of dropping it.
    autoretry_for=(OperationalError,),
    retry_backoff=1,
    retry_backoff_max=30,
)
def judge_pair(
    self,
    pair_id: int,
    resumed: bool = False,
    llm_attempts: int = 0,
    probe: bool = False,
    failing_since: float | None = None,
) -> str:
    """Judge one pair. `resumed` (set by the stale sweeper) means an earlier run may have stopped half-way;
    `llm_attempts` is how many times this task was retried for a transient LLM error (a small counter, set by
    the task's own retry; the database autoretries keep it as it is); `failing_since`, when its first LLM call
    failed. `probe` (set by the outage tick): this run probes an LLM endpoint known to be down
    (workers.judging.outage)."""
    runtime = get_runtime()
    redelivered = bool((self.request.delivery_info or {}).get("redelivered")) or resumed
    try:
        pair = read_pair_view(runtime, pair_id)
        if pair is None:
            log.warning("pair not found", extra={"pair_id": pair_id})
            outcome = "missing"
        else:
            outcome = judge_run(
                runtime,
                pair,
                redelivered=redelivered,
                llm_attempts=llm_attempts,
                task_retries=self.request.retries,
                task_max_retries=self.max_retries,
                probe=probe,
                failing_since=failing_since,
            )
        if probe and outcome != WAITING:
            # The probe's pair waits no more. One that called nothing (the pair gone, judged meanwhile, all cached)
            # must not stay the oldest waiting answer, or every later probe would call nothing too.
            outage.probe_made_no_call(runtime.redis, pair_id, time.time())
    except FollowUpsUnsent as failure:
        # The judgments are stored (the pair may be judged already, so neither the sweeper nor a plain retry
        # would look at it again), but their follow-up tasks were not queued: retry as a resumed run, which
        # sends every stored judgment's follow-up again (the alert task claims each alert in SQL: nothing posts twice).
        log.warning(
            "follow-up tasks not queued; retrying their send",
            extra={**event_fields(pair_id=pair_id), "error": repr(failure.error)[:300]},
        )
        countdown = backoff_seconds(
            self.request.retries, base=FOLLOW_UPS_RETRY_SECONDS, cap=FOLLOW_UPS_RETRY_CAP_SECONDS, jitter=0.0
        )
        # If the broker cannot take the retry either (Redis down), the message is requeued instead, or restored
        # marked redelivered once its lease lapses (common.celery_task).
        raise self.retry(
            kwargs={"resumed": True, "llm_attempts": llm_attempts, "failing_since": failing_since},
            countdown=countdown,
            exc=failure.error,
        ) from failure
    if isinstance(outcome, RetryLater):  # a transient LLM error: this task tries that judge again later
        kwargs = {
            **(self.request.kwargs or {}),
            "llm_attempts": llm_attempts + 1,
            "failing_since": failing_since if failing_since is not None else time.time(),
        }
        raise self.retry(countdown=outcome.countdown, exc=outcome.error, kwargs=kwargs)
    return outcome


@task_failure.connect(sender=judge_pair)
def _log_failure(sender=None, task_id=None, exception=None, args=None, **_ignored) -> None:
    """Not an LLM failure (those are retried, then stored): the pair stays pending (never dropped) and the sweeper
    re-enqueues it later. A bug is counted in SQL, so the sweeper gives up after MAX_FAILED_RUNS; an outage of the
    database, Redis or the network (still failing after its retries) is not: it would give up on healthy pairs."""
    pair_id = (args or [None])[0]
    error = repr(exception)[:500]
    if is_infrastructure(exception):
        log.warning(
            "judge_pair failed on the infrastructure (not counted); the pair stays pending until the stale "
            "sweeper re-enqueues it",
            extra={"task_id": task_id, "pair_id": pair_id, "error": error},
        )
        return
    log.error(
        "judge_pair failed; the pair stays pending until the stale sweeper re-enqueues it or gives up",
        extra={"task_id": task_id, "pair_id": pair_id, "error": error},
    )
    if not isinstance(pair_id, int):
        return
    try:
        with get_runtime().db.autocommit() as connection:
            record_failure(connection, pair_id, error)
    except Exception:  # the database may be what failed: the sweeper still re-enqueues the pair
        log.exception("could not count the failed judging run", extra={"pair_id": pair_id})
