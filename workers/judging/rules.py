"""The pure rules of judging a pair: which judges are in force, the rows stored for a verdict or a failure, when
a transient LLM failure is retried and after how long, which failures are outages, and what the stale sweeper
does with a stale pair."""

from __future__ import annotations

import errno
import random
import socket
from datetime import datetime
from typing import Any

import redis
from kombu.exceptions import OperationalError as BrokerError
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from common.backoff import backoff_seconds
from judges.judge_files import JudgeCatalog
from store.models import JudgmentStatus, PairStatus
from store.settings import RETRY_CAP_SECONDS, RETRY_JITTER, largest_retry_delay

# The LLM retries are counted on their own (the `llm_attempts` kwarg) and stop at RELMON_LLM_MAX_RETRIES (≤ 10).
# Celery's `request.retries` counts every retry of the task, the database autoretries too; its bound leaves room
# for all the LLM retries after up to 10 database retries (an LLM retry it would refuse is given up on instead).
MAX_LLM_RETRIES = 10
TASK_MAX_RETRIES = MAX_LLM_RETRIES + 10
# Failed judge_pair runs (bugs, not LLM errors) after which the sweeper stops re-enqueuing a pair and stores it
# as an error: the first run and two re-enqueues, ten minutes or more apart.
MAX_FAILED_RUNS = 3


def sweep_interval(sweep_after_seconds: float) -> float:
    """Seconds between sweeps: half the threshold, at most 5 minutes."""
    return min(5 * 60.0, max(1.0, sweep_after_seconds / 2))


# Pure rules ------------------------------------------------------------------------------------------------


def retry_countdown(
    retries: int, base: float, max_retries: int, retry_after: float | None = None, *, rng: random.Random | None = None
) -> float:
    """The delay before LLM retry number `retries + 1`: base, 2·base, 4·base … (at most RETRY_CAP_SECONDS), with
    jitter, but never sooner than the server's Retry-After. A Retry-After is honoured up to the longest delay the
    backoff itself reaches (`largest_retry_delay`)."""
    return backoff_seconds(
        retries,
        base=base,
        cap=RETRY_CAP_SECONDS,
        jitter=RETRY_JITTER,
        retry_after=retry_after,
        retry_after_cap=largest_retry_delay(base, max_retries),
        rng=rng,
    )


def may_retry_llm(
    llm_attempts: int, llm_max_retries: int, task_retries: int, task_max_retries: int = TASK_MAX_RETRIES
) -> bool:
    """Whether a transient LLM failure is retried: `llm_attempts` LLM retries done so far (not Celery's
    `request.retries`, which counts the database autoretries too), below RELMON_LLM_MAX_RETRIES, and Celery's own
    bound on the task's retries not reached (else its retry() would fail the task instead of storing the error).
    The failed call was attempt number `llm_attempts + 1`."""
    return llm_attempts < llm_max_retries and task_retries < task_max_retries


def judges_in_force(
    pair_judges: list[str] | None, rule_judges: list[str], has_reference: bool, catalog: JudgeCatalog | None = None
) -> list[str]:
    """The pair's own list (on-demand requests name their judge) or the channel's; judges that compare with a
    reference answer only when the pair has one. Order kept, duplicates dropped. `catalog`: the team's judges too
    (store.judge_catalog); a name in the channel's list that is no judge (a broken judge file, left out and
    reported at start-up) is left out, while one the pair itself names fails as before."""
    catalog = catalog if catalog is not None else JudgeCatalog()
    names = pair_judges if pair_judges else [name for name in rule_judges if name in catalog.names]
    chosen: list[str] = []
    for name in names:
        if name in chosen:
            continue
        if catalog.get(name).needs_reference and not has_reference:
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
        # As the provider reported them (None: it did not say); a reused verdict made no call: 0.
        "prompt_tokens": 0 if verdict.cached else verdict.prompt_tokens,
        "cached_tokens": 0 if verdict.cached else verdict.cached_tokens,
        "completion_tokens": 0 if verdict.cached else verdict.completion_tokens,
        "latency_ms": verdict.latency_ms or 0.0,
        "raw_output": verdict.raw_output,
        "prompt_version": verdict.prompt_version,
        "error": verdict.error,
        "cache_key": cache_key,
        "cached": bool(verdict.cached),
    }


def reused_values(stored: dict[str, Any], *, pair_id: int, judge: str) -> dict[str, Any]:
    """A judgment copied from the durable cache (an earlier identical one, `store.judgments.find_cached_many`): it
    made no call, so it used no tokens."""
    return {
        **stored,
        "pair_id": pair_id,
        "judge": judge,
        "cached": True,
        "prompt_tokens": 0,
        "cached_tokens": 0,
        "completion_tokens": 0,
    }


def gave_up_values(judge, *, pair_id: int, cache_key: str, model: str, attempts: int, error: Exception) -> dict:
    """The error verdict of an on-demand request whose LLM calls kept failing: whoever asked hears it now. A
    captured answer never gets one: it waits for the endpoint instead (workers.judging.outage)."""
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


def failed_values(
    name: str, *, pair_id: int, model: str, reason: str, catalog: JudgeCatalog | None = None
) -> dict[str, Any]:
    """An error judgment for a judge the pipeline gave up on. The judge's name may be what broke judging (an
    unknown name in the pair's list): then its scale and prompt version are unknown and left empty."""
    try:
        judge = (catalog or JudgeCatalog()).get(name)
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
