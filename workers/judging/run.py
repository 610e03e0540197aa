"""Judging one pair, the step `judge_pair` runs: read the pair once, then for each judge in force: already stored? →
sampled out? → durable cache → in-process cache → daily budget → LLM; store the rows with the pair's status in one
transaction; send each new judgment's follow-up by task name.

Safe to run any number of times for the same pair (redelivery after a worker died, a duplicate enqueue, the stale
sweeper): each judgment is inserted with ON CONFLICT DO NOTHING on (pair_id, judge, pair_version), so only the first
stores a row. An answer edited after it was judged comes back with a higher version and is judged again: the new
rows supersede the older ones, which stay as history. (A cache hit calls nothing, so it is looked up before the
budget is charged; the budget is charged once per pair and judge, so a retry of the same judgment is not charged
again.) The rules themselves are in workers.judging.rules."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from common import task_names, task_notes
from common.runtime import Runtime
from judges import TransientLLMError
from store import exchanges
from store.db import autocommit, dialect_name
from store.judgments import (
    find_cached_many,
    insert_judgment,
    insert_judgment_marking_judged,
    pair_for_judging,
    set_pair_status,
    stored_judges,
)
from store.models import PairStatus
from workers import budget
from workers.judging import outage, sampling_step
from workers.judging.rules import (
    TASK_MAX_RETRIES,
    gave_up_values,
    judges_in_force,
    may_retry_llm,
    retry_countdown,
    reused_values,
    verdict_values,
)
from workers.pair_view import PairView
from workers.trace_sending import queue_trace_sends

log = logging.getLogger("relmon.judging")

WAITING = "waiting"  # the run's outcome when the pair waits for the LLM endpoint (workers.judging.outage)


def read_pair_view(runtime: Runtime, pair_id: int) -> PairView | None:
    """The pair as judging reads it, in one read."""
    with runtime.db.autocommit() as connection:
        fields = pair_for_judging(connection, pair_id)
    return PairView.of(fields) if fields is not None else None


@dataclass(frozen=True)
class RetryLater:
    """What a judging run returns when a transient LLM error is to be tried again: the task retries in `countdown`
    seconds (what the run had is stored and followed up already)."""

    countdown: float
    error: TransientLLMError


def judge_run(
    runtime: Runtime,
    pair: PairView,
    *,
    redelivered: bool,
    llm_attempts: int = 0,
    task_retries: int = 0,
    task_max_retries: int = TASK_MAX_RETRIES,
    probe: bool = False,
    failing_since: float | None = None,
) -> str | RetryLater:
    """Judge the pair; returns its status, WAITING, or `RetryLater` for the task to act on. `task_retries` and
    `task_max_retries`: the task's own count and bound (a retry past the bound would fail the task instead of
    storing the error). `probe`: this run is the outage tick's probe of a down endpoint; `failing_since`: when
    this task's first LLM call failed (an outage it declares started then). A captured answer whose LLM call keeps
    failing past its retries, or meets an endpoint known to be down, waits (workers.judging.outage): never an
    error verdict for an endpoint that did not answer. On the hot path: reads (stored judges, cache) and the
    budget claim each in autocommit, then one transaction for the insert together with the status change. No
    transaction is open during the LLM call."""
    settings = runtime.settings
    engine = runtime.db.engine
    model = settings.judge_model
    pair_id = pair.id
    # A judged pair is done, unless this message came back after a worker died between storing and handing on.
    if pair.status != PairStatus.PENDING and not (pair.status == PairStatus.JUDGED and redelivered):
        return pair.status
    with runtime.db.autocommit() as connection:
        stored = stored_judges(connection, pair_id, pair.version)
        # An ingested exchange in no Slack channel is judged under its bot's rule (`bots:`, `/judge config bot:NAME`).
        key = exchanges.rule_key(connection, pair_id, pair.channel_id, pair.source)
        rule = runtime.rules.for_channel(key, settings)
        wanted = judges_in_force(pair.judges, rule.judges, pair.reference is not None, runtime.judges)
        todo = [name for name in wanted if name not in stored]
        # A failure the conversation signalled is judged for certain, the rest sampled (workers.sampling).
        if todo and not stored and not sampling_step.judged(runtime, connection, pair, rule, datetime.now(UTC)):
            return PairStatus.SKIPPED_SAMPLING
        given = pair.judge_input
        catalog = runtime.judges
        keys = {name: catalog.get(name).cache_key(model, *given.texts) for name in todo}
        cached = find_cached_many(connection, list(keys.values()))

    # Rows an interrupted earlier run stored may never have been followed up: send them again (the alert task
    # claims each alert in SQL, so a repeat posts nothing twice).
    resent: dict[int, dict[str, Any] | None] = dict.fromkeys(stored.values()) if redelivered else {}
    ready: list[dict[str, Any]] = []  # judgments to store, in judge order
    # Whether the endpoint is known to be down: read once, before the first call (on demand, whoever asked is
    # answered now, so those pairs never wait).
    down: bool | None = None if not (pair.on_demand or probe) else False
    for name in todo:
        judge, key = catalog.get(name), keys[name]
        if key in cached:
            ready.append(reused_values(cached[key], pair_id=pair_id, judge=name))
            continue
        known = judge.from_cache(runtime.llm, key)  # a twin judged by this process since the SQL lookup
        if known is not None:
            ready.append(verdict_values(known, pair_id=pair_id, cache_key=key))
            continue
        # /judge and the shortcut spent their own budget at the bot (bot.on_demand_limits): never the monitoring one.
        paid_at_the_bot = pair.on_demand
        if down is None:
            down = outage.current(runtime.redis) is not None
        if down:
            return wait_for_endpoint(runtime, pair, ready)
        if not paid_at_the_bot and not budget.charge(
            runtime.db, pair_id, pair.budget_unit(name), settings.daily_budget
        ):
            return _skip_for_budget(runtime, pair, store_judgments(engine, pair, ready, mark_judged=False))
        try:
            verdict = judge.evaluate(runtime.llm, *given.texts)
            ready.append(verdict_values(verdict, pair_id=pair_id, cache_key=key))
            if probe:  # the endpoint answered: the outage is over
                probe = False
                end_outage(runtime, pair)
        except TransientLLMError as error:
            if probe:
                return failed_probe(runtime, pair, ready, error)
            if not pair.on_demand and not may_retry_llm(
                llm_attempts, settings.llm_max_retries, task_retries, task_max_retries
            ):
                return declare_outage(runtime, pair, ready, error, failing_since)
            if may_retry_llm(llm_attempts, settings.llm_max_retries, task_retries, task_max_retries):
                # What this run has is final: store it and alert on it now; the retry skips those judges.
                created = store_judgments(engine, pair, ready, mark_judged=False)
                send_follow_ups(runtime, pair, created)
                countdown = retry_countdown(
                    llm_attempts, settings.retry_base_seconds, settings.llm_max_retries, error.retry_after
                )
                log.info(
                    "LLM transient error, retrying",
                    extra=pair.log_fields(
                        judge=name,
                        retry=llm_attempts + 1,
                        in_s=round(countdown, 3),
                        retry_after_s=error.retry_after,
                    ),
                )
                return RetryLater(countdown, error)
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
    created = store_judgments(engine, pair, ready, mark_judged=True)
    # New judgments of an edited answer always go to the alert task: an alert on the older text is updated.
    send_follow_ups(runtime, pair, {**resent, **created}, complete=True)
    return PairStatus.JUDGED


def store_judgments(
    engine, pair: PairView, ready: list[dict[str, Any]], *, mark_judged: bool
) -> dict[int, dict[str, Any]]:
    """Insert the judgments (a row another run stored first wins) and, at the end, mark the pair judged, in one
    transaction. Returns the rows this call created: id → the values stored."""
    if not ready and not mark_judged:
        return {}
    created_rows: dict[int, dict[str, Any]] = {}
    if mark_judged and len(ready) == 1 and dialect_name(engine) == "postgresql":  # one judge: one statement
        values = {**ready[0], "pair_version": pair.version}
        with autocommit(engine) as connection:
            judgment_id = insert_judgment_marking_judged(connection, values)
        if judgment_id is not None:
            created_rows[judgment_id] = values
    else:
        with engine.begin() as connection:
            for values in ready:
                values = {**values, "pair_version": pair.version}
                judgment_id, created = insert_judgment(connection, values)
                if created:
                    created_rows[judgment_id] = values
            if mark_judged:
                set_pair_status(connection, pair.id, PairStatus.JUDGED, only_from=[PairStatus.PENDING])
    for judgment_id, values in created_rows.items():  # once per stored row: a twin's lost insert logs nothing
        log.info(
            "judged",
            extra=pair.log_fields(
                judgment_id=judgment_id,
                judge=values["judge"],
                score=values.get("score"),
                status=values["status"],
            ),
        )
    return created_rows


def send_follow_ups(
    runtime: Runtime, pair: PairView, judgments: dict[int, dict[str, Any] | None], *, complete: bool = False
) -> None:
    """What follows new judgments, by task name: for a captured answer, each judgment goes to the alert task, which
    makes every alert decision (workers.alerts); on demand, the verdict goes to whoever asked, once every judge has
    spoken. Messages carry IDs only."""
    try:
        if pair.on_demand:
            if complete:
                task_notes.send(runtime.redis, task_notes.Call(task_names.DELIVER_VERDICT, (pair.id,)), time.time())
            return
        for judgment_id in judgments:
            task_notes.send(runtime.redis, task_notes.Call(task_names.CONSIDER_ALERT, (judgment_id,)), time.time())
    except Exception as error:  # the broker or the database, after the judgments were stored
        raise FollowUpsUnsent(error) from error
    queue_trace_sends(runtime, list(judgments))  # never raises: the bot's traces wait on nothing here


class FollowUpsUnsent(Exception):
    """Judgments were stored but their follow-up tasks (alert policy, verdict) could not all be queued."""

    def __init__(self, error: Exception) -> None:
        super().__init__(repr(error)[:300])
        self.error = error


def _skip_for_budget(runtime: Runtime, pair: PairView, created: dict[int, dict[str, Any]]) -> str:
    settings = runtime.settings
    with runtime.db.session() as session:
        set_pair_status(session, pair.id, PairStatus.SKIPPED_BUDGET, only_from=[PairStatus.PENDING])
    # Whoever asked on demand hears that nothing more will come today (the pair's status says why).
    send_follow_ups(runtime, pair, created, complete=True)
    budget.announce_exhausted(runtime.db, runtime.slack, settings.alert_channel, settings.daily_budget)
    log.info("daily budget spent: pair skipped", extra=pair.log_fields())
    return PairStatus.SKIPPED_BUDGET


# The LLM endpoint down (workers.judging.outage) ------------------------------------------------------------


def wait_for_endpoint(runtime: Runtime, pair: PairView, ready: list[dict[str, Any]]) -> str:
    """The pair waits for the endpoint: what this run has (cache hits) is stored and followed up; the pair stays
    pending, in the waiting set, which the sweeps leave to the outage tick."""
    created = store_judgments(runtime.db.engine, pair, ready, mark_judged=False)
    send_follow_ups(runtime, pair, created)
    outage.hold(runtime.redis, pair.id, outage.answered_at_score(pair.answer_ts, time.time()))
    log.info("LLM endpoint down: the answer waits", extra=pair.log_fields())
    return WAITING


def declare_outage(
    runtime: Runtime, pair: PairView, ready: list[dict[str, Any]], error: TransientLLMError, failing_since: float | None
) -> str:
    """This task's retries ran out on a transient failure: the endpoint is down. The first task to say so posts
    the notice (once); the pair waits."""
    down = outage.declared(failing_since, error, time.time(), runtime.settings.llm_probe_seconds)
    if outage.declare(runtime.redis, down):
        log.error(
            "LLM endpoint down: judging paused; answers wait",
            extra=pair.log_fields(failure=down.failure, error=str(error)[:300]),
        )
        send_outage_notice(runtime, "paused", down)
    return wait_for_endpoint(runtime, pair, ready)


def failed_probe(runtime: Runtime, pair: PairView, ready: list[dict[str, Any]], error: TransientLLMError) -> str:
    """The probe got no answer either: the next one waits longer."""
    now = time.time()
    known = outage.current(runtime.redis)
    if known is not None:
        after = outage.after_failed_probe(known, error, now, runtime.settings.llm_probe_seconds)
        outage.update(runtime.redis, after)
        log.warning(
            "LLM endpoint still down",
            extra=pair.log_fields(failure=after.failure, next_probe_in_s=round(after.next_probe_at - now, 1)),
        )
    else:  # resumed meanwhile by another probe: this answer waits for the release like the others
        log.info("LLM probe failed after the endpoint came back", extra=pair.log_fields(error=str(error)[:300]))
    return wait_for_endpoint(runtime, pair, ready)


def end_outage(runtime: Runtime, pair: PairView) -> None:
    """The probe got an answer: the endpoint is up. The one run that ends the outage says so (once); the waiting
    answers are released by the outage tick, oldest first, at a bounded rate."""
    outage.drop_waiting(runtime.redis, pair.id)
    ended = outage.resume(runtime.redis)
    if ended is None:
        return
    was, waited = ended
    log.warning("LLM endpoint back: judging resumed", extra=pair.log_fields(failure=was.failure, waited=waited))
    send_outage_notice(runtime, "resumed", was, waited=waited, at=time.time())


def send_outage_notice(
    runtime: Runtime, kind: str, down: outage.Outage, *, waited: int = 0, at: float | None = None
) -> None:
    """The notice goes to the Slack queue (workers.outage_notices), noted so that a lost message is sent again."""
    call = task_notes.Call(
        task_names.POST_OUTAGE_NOTICE,
        (kind, down.since, down.failure),
        {"waited": waited, "at": at or down.since},
    )
    task_notes.send(runtime.redis, call, time.time())
