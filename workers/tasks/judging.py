"""judge_pair: judge one settled pair with every judge in force, exactly once per judge, and hand the results on.

Safe to run any number of times for the same pair (redelivery after a worker died, a duplicate enqueue, the stale
sweeper): each judgment is inserted with ON CONFLICT DO NOTHING on (pair_id, judge), so only the first stores a row.
The order of checks for each judge: already stored? → sampled out? → durable cache → in-process cache → daily
budget → LLM. (A cache hit calls nothing, so it is looked up before the budget is charged; the budget is charged
once per pair and judge, so a retry of the same judgment is not charged again.)

A task that keeps failing with a bug (not an LLM error) leaves its pair pending; each failure is counted, and the
stale sweeper gives up after MAX_FAILED_RUNS of them: it stores the pair's judgments as errors with the reason.
Failures of the infrastructure (the database, Redis or the network down, after their retries) are not counted: an
outage of any length only delays a pair. The sweeper gives up only once the last failure is a sweep interval old,
so that no run that could still store the real verdict is beaten to it by the error rows.
"""

from __future__ import annotations

import errno
import logging
import random
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from celery.exceptions import Reject
from celery.signals import task_failure
from kombu.exceptions import OperationalError as BrokerError
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from common.celery_app import celery
from common.runtime import Runtime, get_runtime
from common.telemetry import event_fields
from judges import TransientLLMError, get_judge
from store.attempts import Failures, failures_of, record_failure
from store.judgments import (
    find_cached_many,
    insert_judgment,
    pair_for_judging,
    set_pair_status,
    stale_pairs,
    stored_judges,
    touch_pairs,
)
from store.models import JudgmentStatus, PairStatus
from store.settings import RETRY_CAP_SECONDS, RETRY_JITTER, largest_retry_delay
from workers import budget, sampling
from workers.alerts.policy import JudgmentFacts
from workers.tasks.slack import follow_up_needed

log = logging.getLogger("relmon.judging")

# The LLM retries are counted on their own (the `llm_attempts` kwarg) and stop at RELMON_LLM_MAX_RETRIES (≤ 10).
# Celery's `request.retries` counts every retry of the task, the database autoretries too; its bound leaves room
# for all the LLM retries after up to 10 database retries (an LLM retry it would refuse is given up on instead).
MAX_LLM_RETRIES = 10
TASK_MAX_RETRIES = MAX_LLM_RETRIES + 10
HAND_ON_RETRY_SECONDS = 1.0  # first wait before handing stored judgments on again (doubles, at most 30 s)
SWEEP_LIMIT = 500
# Failed judge_pair runs (bugs, not LLM errors) after which the sweeper stops re-enqueuing a pair and stores it
# as an error: the first run and two re-enqueues, ten minutes or more apart.
MAX_FAILED_RUNS = 3
TASK_CONSIDER_ALERT = "workers.tasks.slack.consider_alert"
TASK_DELIVER_VERDICT = "workers.tasks.slack.deliver_verdict"
TASK_SETTLE_PAIR = "workers.tasks.capture.settle_pair"


def sweep_interval(sweep_after_seconds: float) -> float:
    """Seconds between sweeps: half the threshold, at most 5 minutes."""
    return min(5 * 60.0, max(1.0, sweep_after_seconds / 2))


def sweep_schedule(sweep_after_seconds: float) -> dict:
    """Beat entry for the sweeper (merged into workers.schedule.beat_schedule): a sweep every half threshold,
    at most every 5 minutes, so a lost task is found at most 1.5 thresholds after its pair last changed."""
    every = sweep_interval(sweep_after_seconds)
    return {
        "relmon-requeue-stale": {
            "task": "workers.tasks.judging.requeue_stale",
            "schedule": every,
            "options": {"expires": every},  # a sweep that waited past the next one is useless
        }
    }


# Pure rules ------------------------------------------------------------------------------------------------


def retry_delay(
    retries: int, base: float, *, cap: float = RETRY_CAP_SECONDS, rng: random.Random | None = None
) -> float:
    """Exponential backoff with jitter: base, 2·base, 4·base … (at most `cap`), each stretched by up to 25% at
    random so that tasks which failed together (a 429 burst) do not come back together."""
    delay = min(cap, base * 2**retries)
    return delay * (1.0 + RETRY_JITTER * (rng or random).random())


def retry_countdown(
    retries: int, base: float, max_retries: int, retry_after: float | None = None, *, rng: random.Random | None = None
) -> float:
    """The delay before retry number `retries + 1`: the backoff, but never sooner than the server's Retry-After.
    A Retry-After is honoured up to the longest delay the backoff itself reaches (`largest_retry_delay`), which
    Settings keeps under the visibility timeout: a longer one would have Redis deliver the retry twice."""
    delay = retry_delay(retries, base, rng=rng)
    if retry_after is not None and retry_after > delay:
        delay = max(delay, min(retry_after, largest_retry_delay(base, max_retries)))
    return delay


def may_retry_llm(
    llm_attempts: int, llm_max_retries: int, task_retries: int, task_max_retries: int = TASK_MAX_RETRIES
) -> bool:
    """Whether a transient LLM failure is retried: `llm_attempts` LLM retries done so far (not Celery's
    `request.retries`, which counts the database autoretries too), below RELMON_LLM_MAX_RETRIES, and Celery's own
    bound on the task's retries not reached (else its retry() would fail the task instead of storing the error).
    The failed call was attempt number `llm_attempts + 1`."""
    return llm_attempts < llm_max_retries and task_retries < task_max_retries


def judges_in_force(pair_judges: list[str] | None, rule_judges: list[str], has_reference: bool) -> list[str]:
    """The pair's own list (on-demand requests name their judge) or the channel's; judges that compare with a
    reference answer only when the pair has one. Order kept, duplicates dropped."""
    names = pair_judges if pair_judges else rule_judges
    chosen: list[str] = []
    for name in names:
        if name in chosen:
            continue
        if get_judge(name).needs_reference and not has_reference:
            continue
        chosen.append(name)
    return chosen


def judgment_status(verdict_status: str) -> str:
    """Verdict status → stored status. 'empty' (nothing to judge, no LLM call) cannot be graded: stored as null."""
    if verdict_status == "empty":
        return JudgmentStatus.NULL
    return verdict_status


def verdict_values(verdict, *, pair_id: int, cache_key: str) -> dict[str, Any]:
    return {
        "pair_id": pair_id,
        "judge": verdict.judge,
        "status": judgment_status(verdict.status),
        "score": verdict.score,
        "max_score": verdict.max_score,
        "normalized_score": verdict.normalized_score,
        "reasoning": verdict.reasoning,
        "model": verdict.model,
        "prompt_tokens": verdict.prompt_tokens or 0,
        "completion_tokens": verdict.completion_tokens or 0,
        "latency_ms": verdict.latency_ms or 0.0,
        "raw_output": verdict.raw_output,
        "prompt_version": verdict.prompt_version,
        "error": verdict.error,
        "cache_key": cache_key,
        "cached": bool(verdict.cached),
    }


def gave_up_values(judge, *, pair_id: int, cache_key: str, model: str, attempts: int, error: Exception) -> dict:
    return {
        "pair_id": pair_id,
        "judge": judge.name,
        "status": JudgmentStatus.ERROR,
        "max_score": judge.max_score,
        "model": model,
        "prompt_version": judge.prompt_version,
        "error": f"LLM unavailable after {attempts} attempts: {error}"[:2000],
        "cache_key": cache_key,
    }


def sweep_action(
    status: str,
    failures: int,
    last_failed_at: datetime | None = None,
    *,
    quiet_since: datetime | None = None,
    max_failures: int = MAX_FAILED_RUNS,
) -> str:
    """What the sweeper does with a stale pair: "settle" it again (settling), "judge" it again (pending), or
    "give_up" (pending, its judging task has failed `max_failures` times already: a bug would fail again; and
    the last failure came before `quiet_since`, a sweep interval ago). A failure more recent than that may have a
    twin still running (a redelivery, a duplicate enqueue) whose verdict the error rows would beat to the insert:
    the pair is judged again instead, and given up on at a later sweep if it fails again."""
    if status != PairStatus.PENDING:
        return "settle"
    if failures < max_failures:
        return "judge"
    if last_failed_at is not None and quiet_since is not None and last_failed_at >= quiet_since:
        return "judge"
    return "give_up"


# Network errors below the libraries (a socket refused, reset, unreachable): an outage, not a bug.
NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.EHOSTDOWN,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.ENETRESET,
    }
)
INFRASTRUCTURE_ERRORS = (
    OperationalError,  # the database: connection lost, server restarting, lock timeouts (after the autoretries)
    InterfaceError,
    DisconnectionError,
    PoolTimeoutError,  # no connection free in the pool
    redis.exceptions.ConnectionError,  # Redis (budget, locks, caches) unreachable or loading
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,  # a replica during failover
    BrokerError,  # kombu could not publish (send_task, a retry) to the broker
    ConnectionError,  # builtin: refused, reset, aborted, broken pipe
    TimeoutError,  # builtin, and socket.timeout
    socket.gaierror,  # DNS
    socket.herror,
)


def is_infrastructure(error: BaseException | None) -> bool:
    """True for a failure of what relmon runs on (database, Redis, broker, network), not of relmon's code: such a
    failure is not counted towards giving up on a pair. Looks through the explicit causes (`raise … from`)."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, INFRASTRUCTURE_ERRORS):
            return True
        if isinstance(error, DBAPIError) and error.connection_invalidated:
            return True
        if isinstance(error, OSError) and error.errno in NETWORK_ERRNOS:
            return True
        reason = getattr(error, "reason", None)  # urllib's URLError wraps the socket error in `reason`
        error = error.__cause__ or (reason if isinstance(reason, BaseException) else None)
        seen += 1
    return False


def failed_values(name: str, *, pair_id: int, model: str, reason: str) -> dict[str, Any]:
    """An error judgment for a judge the pipeline gave up on. The judge's name may be what broke judging (an
    unknown name in the pair's list): then its scale and prompt version are unknown and left empty."""
    try:
        judge = get_judge(name)
        max_score, prompt_version = judge.max_score, judge.prompt_version
    except ValueError:
        max_score, prompt_version = None, None
    return {
        "pair_id": pair_id,
        "judge": name[:32],
        "status": JudgmentStatus.ERROR,
        "max_score": max_score,
        "model": model,
        "prompt_version": prompt_version,
        "error": reason[:2000],
    }


# The task --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairView:
    """What judging needs from a pair, read once (plain data: no session kept across the LLM call)."""

    id: int
    status: str
    source: str
    channel_id: str | None
    answer_ts: str | None
    question: str
    answer: str
    reference: str | None
    judges: list[str] | None

    @classmethod
    def of(cls, fields: dict[str, Any]) -> PairView:
        return cls(
            id=fields["id"],
            status=fields["status"],
            source=fields["source"] or "capture",
            channel_id=fields["channel_id"],
            answer_ts=fields["answer_ts"],
            question=fields["question_text"] or "",
            answer=fields["answer_text"] or "",
            reference=fields["reference_text"] or None,
            judges=list(fields["judges"]) if fields["judges"] else None,
        )

    @property
    def on_demand(self) -> bool:
        return self.source in sampling.ON_DEMAND_SOURCES


@celery.task(
    name="workers.tasks.judging.judge_pair",
    bind=True,
    max_retries=TASK_MAX_RETRIES,
    # The database went away (restart, failover): Celery retries the task with backoff instead of dropping it.
    autoretry_for=(OperationalError,),
    retry_backoff=1,
    retry_backoff_max=30,
)
def judge_pair(self, pair_id: int, resumed: bool = False, llm_attempts: int = 0) -> str:
    """Judge one pair. `resumed` (set by the stale sweeper) means an earlier run may have stopped half-way;
    `llm_attempts` is how many times this task was retried for a transient LLM error (a small counter, set by
    the task's own retry; the database autoretries keep it as it is)."""
    runtime = get_runtime()
    redelivered = bool((self.request.delivery_info or {}).get("redelivered")) or resumed
    try:
        return _judge(self, runtime, pair_id, redelivered=redelivered, llm_attempts=llm_attempts)
    except HandOnFailed as failure:
        # The judgments are stored (the pair may be judged already, so neither the sweeper nor a plain retry
        # would look at it again), but their follow-up tasks were not queued: retry as a resumed run, which
        # hands every stored judgment on again (the alert task claims each alert in SQL: nothing posts twice).
        log.warning(
            "follow-up tasks not queued; retrying the hand-on",
            extra={**event_fields(pair_id=pair_id), "error": repr(failure.error)[:300]},
        )
        countdown = min(30.0, HAND_ON_RETRY_SECONDS * 2**self.request.retries)
        try:
            raise self.retry(
                kwargs={"resumed": True, "llm_attempts": llm_attempts}, countdown=countdown, exc=failure.error
            ) from failure
        except Reject as dropped:
            # The broker cannot take the retry either (Redis down): requeue this message instead (or, if Redis
            # cannot even hear that, it stays unacknowledged and is restored, marked redelivered, later).
            raise Reject(failure.error, requeue=True) from dropped


def _judge(task, runtime: Runtime, pair_id: int, *, redelivered: bool, llm_attempts: int = 0) -> str:
    """On the hot path: reads (pair, stored judges, cache) and the budget claim each in autocommit, then one
    transaction for the insert together with the status change. No transaction is open during the LLM call."""
    settings = runtime.settings
    engine = runtime.db.engine
    model = settings.judge_model
    with runtime.db.autocommit() as connection:
        fields = pair_for_judging(connection, pair_id)
        if fields is None:
            log.warning("pair not found", extra={"pair_id": pair_id})
            return "missing"
        pair = PairView.of(fields)
        # A judged pair is done, unless this message came back after a worker died between storing and handing on.
        if pair.status != PairStatus.PENDING and not (pair.status == PairStatus.JUDGED and redelivered):
            return pair.status
        stored = stored_judges(connection, pair_id)
        rule = runtime.rules.for_channel(pair.channel_id, settings)
        wanted = judges_in_force(pair.judges, rule.judges, pair.reference is not None)
        todo = [name for name in wanted if name not in stored]
        if (
            todo
            and not stored
            and not sampling.is_sampled_in(pair.channel_id, pair.answer_ts, rule.sample_rate, source=pair.source)
        ):
            set_pair_status(connection, pair_id, PairStatus.SKIPPED_SAMPLING, only_from=[PairStatus.PENDING])
            return PairStatus.SKIPPED_SAMPLING
        keys = {name: get_judge(name).cache_key(model, pair.question, pair.answer, pair.reference) for name in todo}
        cached = find_cached_many(connection, list(keys.values()))

    # Rows an interrupted earlier run stored may never have been handed on: hand them on again (the alert task
    # claims each alert in SQL, so a repeat posts nothing twice).
    handed_on: dict[int, dict[str, Any] | None] = dict.fromkeys(stored.values()) if redelivered else {}
    ready: list[dict[str, Any]] = []  # judgments to store, in judge order
    for name in todo:
        judge, key = get_judge(name), keys[name]
        if key in cached:
            ready.append({**cached[key], "pair_id": pair_id, "judge": name, "cached": True})
            continue
        known = judge.from_cache(runtime.llm, key)  # a twin judged by this process since the SQL lookup
        if known is not None:
            ready.append(verdict_values(known, pair_id=pair_id, cache_key=key))
            continue
        if not budget.charge(runtime.db, pair_id, name, settings.daily_budget):
            return _skip_for_budget(runtime, pair, _store(engine, pair, ready, mark_judged=False))
        try:
            verdict = judge.evaluate(runtime.llm, question=pair.question, answer=pair.answer, reference=pair.reference)
            ready.append(verdict_values(verdict, pair_id=pair_id, cache_key=key))
        except TransientLLMError as error:
            if may_retry_llm(llm_attempts, settings.llm_max_retries, task.request.retries, task.max_retries):
                # What this run has is final: store it and alert on it now; the retry skips those judges.
                _hand_on(runtime, pair, _store(engine, pair, ready, mark_judged=False))
                countdown = retry_countdown(
                    llm_attempts, settings.retry_base_seconds, settings.llm_max_retries, error.retry_after
                )
                log.info(
                    "LLM transient error, retrying",
                    extra=event_fields(
                        channel=pair.channel_id,
                        message_ts=pair.answer_ts,
                        pair_id=pair_id,
                        judge=name,
                        retry=llm_attempts + 1,
                        in_s=round(countdown, 3),
                        retry_after_s=error.retry_after,
                    ),
                )
                kwargs = {**(task.request.kwargs or {}), "llm_attempts": llm_attempts + 1}
                raise task.retry(countdown=countdown, exc=error, kwargs=kwargs) from error
            ready.append(
                gave_up_values(
                    judge,
                    pair_id=pair_id,
                    cache_key=key,
                    model=model,
                    attempts=llm_attempts + 1,
                    error=error,
                )
            )
    # Every judge in force now has a row (this run's, or a twin task's that won the insert): the pair is judged.
    created = _store(engine, pair, ready, mark_judged=True)
    _hand_on(runtime, pair, {**handed_on, **created}, complete=True, recheck=redelivered)
    return PairStatus.JUDGED


def _store(engine, pair: PairView, ready: list[dict[str, Any]], *, mark_judged: bool) -> dict[int, dict[str, Any]]:
    """Insert the judgments (a row another run stored first wins) and, at the end, mark the pair judged, in one
    transaction. Returns the rows this call created: id → the values stored."""
    if not ready and not mark_judged:
        return {}
    created_rows: dict[int, dict[str, Any]] = {}
    with engine.begin() as connection:
        for values in ready:
            judgment_id, created = insert_judgment(connection, values)
            if created:
                created_rows[judgment_id] = values
        if mark_judged:
            set_pair_status(connection, pair.id, PairStatus.JUDGED, only_from=[PairStatus.PENDING])
    for judgment_id, values in created_rows.items():  # once per stored row: a twin's lost insert logs nothing
        log.info(
            "judged",
            extra=event_fields(
                channel=pair.channel_id,
                message_ts=pair.answer_ts,
                judgment_id=judgment_id,
                pair_id=pair.id,
                judge=values["judge"],
                score=values.get("score"),
                status=values["status"],
            ),
        )
    return created_rows


def _hand_on(
    runtime: Runtime,
    pair: PairView,
    judgments: dict[int, dict[str, Any] | None],
    *,
    complete: bool = False,
    recheck: bool = False,
) -> None:
    """Captured answers: the alert policy looks at each new judgment (a task only when an alert may follow; after
    a redelivery, always, since a claimed alert may wait to be posted). On-demand: the verdict goes to whoever
    asked, once every judge has spoken. Messages carry IDs only."""
    try:
        if pair.on_demand:
            if complete:
                celery.send_task(TASK_DELIVER_VERDICT, args=[pair.id])
            return
        for judgment_id, values in judgments.items():
            if recheck or values is None or follow_up_needed(runtime, _facts(judgment_id, values, pair)):
                celery.send_task(TASK_CONSIDER_ALERT, args=[judgment_id])
    except Exception as error:  # the broker or the database, after the judgments were stored
        raise HandOnFailed(error) from error


class HandOnFailed(Exception):
    """Judgments were stored but their follow-up tasks (alert policy, verdict) could not all be queued."""

    def __init__(self, error: Exception) -> None:
        super().__init__(repr(error)[:300])
        self.error = error


def _facts(judgment_id: int, values: dict[str, Any], pair: PairView) -> JudgmentFacts:
    return JudgmentFacts(
        judgment_id, values["judge"], values["status"], values.get("score"), pair.source, pair.channel_id
    )


def _skip_for_budget(runtime: Runtime, pair: PairView, created: dict[int, dict[str, Any]]) -> str:
    settings = runtime.settings
    with runtime.db.session() as session:
        set_pair_status(session, pair.id, PairStatus.SKIPPED_BUDGET, only_from=[PairStatus.PENDING])
    # Whoever asked on demand hears that nothing more will come today (the pair's status says why).
    _hand_on(runtime, pair, created, complete=True)
    budget.announce_exhausted(runtime.db, runtime.slack, settings.alert_channel, settings.daily_budget)
    log.info(
        "daily budget spent: pair skipped",
        extra=event_fields(channel=pair.channel_id, message_ts=pair.answer_ts, pair_id=pair.id),
    )
    return PairStatus.SKIPPED_BUDGET


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


@celery.task(name="workers.tasks.judging.requeue_stale")
def requeue_stale() -> int:
    """Beat, every few minutes: re-enqueue pairs whose task was lost (broker data lost, a bug raised before the
    pair moved on). Duplicates are harmless: judging is idempotent and settle acts only on the latest version."""
    runtime = get_runtime()
    now = datetime.now(UTC)
    stale_after = timedelta(seconds=runtime.settings.sweep_after_seconds)
    # A failure within the last sweep interval may have a twin run still going: not given up on yet.
    quiet_since = now - timedelta(seconds=sweep_interval(runtime.settings.sweep_after_seconds))
    settle_grace = timedelta(seconds=runtime.settings.settle_seconds) + stale_after
    with runtime.db.session() as session:
        stale = [
            (pair.id, pair.status, pair.version)
            for pair in stale_pairs(
                session, pending_before=now - stale_after, settling_before=now - settle_grace, limit=SWEEP_LIMIT
            )
        ]
        touch_pairs(session, [pair_id for pair_id, _, _ in stale], now)
        failures = failures_of(session, [pair_id for pair_id, status, _ in stale if status == PairStatus.PENDING])
    given_up = 0
    for pair_id, status, version in stale:
        failed = failures.get(pair_id, Failures(0, None, None))
        action = sweep_action(status, failed.count, failed.last_failed_at, quiet_since=quiet_since)
        if action == "judge":
            judge_pair.apply_async(args=[pair_id], kwargs={"resumed": True})
        elif action == "settle":
            celery.send_task(TASK_SETTLE_PAIR, args=[pair_id, version])
        else:
            try:
                _give_up(runtime, pair_id, failed.count, failed.last_error)
                given_up += 1
            except Exception:  # one broken pair must not stop the sweep; it is tried again next time
                log.exception("could not give up on a failing pair", extra={"pair_id": pair_id})
    if stale:
        log.warning("re-enqueued stale pairs", extra={"count": len(stale) - given_up, "given_up": given_up})
    return len(stale)


def _give_up(runtime: Runtime, pair_id: int, failures: int, last_error: str | None) -> None:
    """The end state of a pair whose judging task kept failing: an error judgment, with the reason, for every
    judge in force that has none, and the pair judged (so it is counted, alerted on and never swept again)."""
    settings = runtime.settings
    with runtime.db.autocommit() as connection:
        fields = pair_for_judging(connection, pair_id)
        if fields is None:
            return
        pair = PairView.of(fields)
        if pair.status != PairStatus.PENDING:
            return
        stored = stored_judges(connection, pair_id)
    try:
        rule = runtime.rules.for_channel(pair.channel_id, settings)
        names = judges_in_force(pair.judges, rule.judges, pair.reference is not None)
    except Exception:  # the bug may be right here (an unknown judge's name): name the judges that were asked for
        names = list(pair.judges or settings.default_judges)
    reason = f"gave up after {failures} failed attempts (an error in relmon, not the LLM): {last_error or 'unknown'}"
    ready = [
        failed_values(name, pair_id=pair_id, model=settings.judge_model, reason=reason)
        for name in (names or ["relevancy"])
        if name not in stored
    ]
    created = _store(runtime.db.engine, pair, ready, mark_judged=True)
    log.error(
        "gave up judging a pair",
        extra=event_fields(channel=pair.channel_id, message_ts=pair.answer_ts, pair_id=pair_id, failures=failures),
    )
    _hand_on(runtime, pair, created, complete=True)
