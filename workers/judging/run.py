"""Judging one pair, the step `judge_pair` runs (and `capture_answer`, for an answer that settled at once): read the
pair once, then for each judge in force: already stored? → sampled out? → durable cache → in-process cache → daily
budget → LLM; store the rows with the pair's status in one transaction; hand each new judgment on by task name.

Safe to run any number of times for the same pair (redelivery after a worker died, a duplicate enqueue, the stale
sweeper): each judgment is inserted with ON CONFLICT DO NOTHING on (pair_id, judge, pair_version), so only the first
stores a row. An answer edited after it was judged comes back with a higher version and is judged again: the new
rows supersede the older ones, which stay as history. (A cache hit calls nothing, so it is looked up before the
budget is charged; the budget is charged once per pair and judge, so a retry of the same judgment is not charged
again.) The rules themselves are in workers.judging.rules."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from celery.exceptions import Reject

from common import task_names
from common.celery_app import celery
from common.runtime import Runtime
from common.telemetry.logs import event_fields
from judges import TransientLLMError, get_judge
from store.db import autocommit, dialect_name
from store.judgments import (
    find_cached_many,
    insert_judgment,
    insert_judgment_marking_judged,
    pair_for_judging,
    set_pair_status,
    stored_for_version,
)
from store.models import PairStatus
from workers import budget, noted_tasks, sampling
from workers.alerts.planning import follow_up_needed, policy_of
from workers.alerts.policy import ChannelPolicy, JudgmentFacts
from workers.judging.pair_view import PairView
from workers.judging.rules import (
    TASK_MAX_RETRIES,
    gave_up_values,
    judges_in_force,
    may_retry_llm,
    retry_countdown,
    reused_values,
    verdict_values,
)
from workers.trace_sending import queue_trace_sends

log = logging.getLogger("relmon.judging")


@dataclass(frozen=True)
class ToJudge:
    """What one judging run starts from, loaded once: the pair as judging reads it, and whether settling returned
    it this moment in the same task (`just_settled`: its first version then has no judgment yet)."""

    pair: PairView
    just_settled: bool = False


def load_to_judge(runtime: Runtime, pair_id: int) -> ToJudge | None:
    with runtime.db.autocommit() as connection:
        fields = pair_for_judging(connection, pair_id)
    return ToJudge(PairView.of(fields)) if fields is not None else None


def judge_run(task, runtime: Runtime, start: ToJudge, *, redelivered: bool, llm_attempts: int = 0) -> str:
    """On the hot path: reads (stored judges, cache) and the budget claim each in autocommit, then one
    transaction for the insert together with the status change. No transaction is open during the LLM call."""
    settings = runtime.settings
    engine = runtime.db.engine
    model = settings.judge_model
    pair = start.pair
    pair_id = pair.id
    # A judged pair is done, unless this message came back after a worker died between storing and handing on.
    if pair.status != PairStatus.PENDING and not (pair.status == PairStatus.JUDGED and redelivered):
        return pair.status
    with runtime.db.autocommit() as connection:
        if start.just_settled and pair.version == 1:
            stored, supersedes = {}, False  # just settled, for the first time: nothing judged it yet
        else:
            stored, supersedes = stored_for_version(connection, pair_id, pair.version)
        rule = runtime.rules.for_channel(pair.channel_id, settings)
        # The alert policy's view of the same rule, for the hand-on: the channel's rule is resolved once per run.
        policy = policy_of(rule, settings) if pair.channel_id else None
        wanted = judges_in_force(pair.judges, rule.judges, pair.reference is not None)
        todo = [name for name in wanted if name not in stored]
        if (
            todo
            and not stored
            and not sampling.is_sampled_in(pair.channel_id, pair.answer_ts, rule.sample_rate, source=pair.source)
        ):
            set_pair_status(connection, pair_id, PairStatus.SKIPPED_SAMPLING, only_from=[PairStatus.PENDING])
            return PairStatus.SKIPPED_SAMPLING
        given = pair.judge_input
        keys = {name: get_judge(name).cache_key(model, *given.texts) for name in todo}
        cached = find_cached_many(connection, list(keys.values()))

    # Rows an interrupted earlier run stored may never have been handed on: hand them on again (the alert task
    # claims each alert in SQL, so a repeat posts nothing twice).
    handed_on: dict[int, dict[str, Any] | None] = dict.fromkeys(stored.values()) if redelivered else {}
    ready: list[dict[str, Any]] = []  # judgments to store, in judge order
    for name in todo:
        judge, key = get_judge(name), keys[name]
        if key in cached:
            ready.append(reused_values(cached[key], pair_id=pair_id, judge=name))
            continue
        known = judge.from_cache(runtime.llm, key)  # a twin judged by this process since the SQL lookup
        if known is not None:
            ready.append(verdict_values(known, pair_id=pair_id, cache_key=key))
            continue
        # /judge and the shortcut spent their own budget at the bot (bot.on_demand_limits): never the monitoring one.
        paid_at_the_bot = pair.on_demand
        if not paid_at_the_bot and not budget.charge(
            runtime.db, pair_id, pair.budget_unit(name), settings.daily_budget
        ):
            return _skip_for_budget(runtime, pair, store_judgments(engine, pair, ready, mark_judged=False), policy)
        try:
            verdict = judge.evaluate(runtime.llm, *given.texts)
            ready.append(verdict_values(verdict, pair_id=pair_id, cache_key=key))
        except TransientLLMError as error:
            if may_retry_llm(llm_attempts, settings.llm_max_retries, task.request.retries, task.max_retries):
                # What this run has is final: store it and alert on it now; the retry skips those judges.
                created = store_judgments(engine, pair, ready, mark_judged=False)
                hand_on(runtime, pair, created, policy, recheck=supersedes)
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
    created = store_judgments(engine, pair, ready, mark_judged=True)
    # New judgments of an edited answer always go to the alert task: an alert on the older text is updated.
    hand_on(runtime, pair, {**handed_on, **created}, policy, complete=True, recheck=redelivered or supersedes)
    return PairStatus.JUDGED


def judge_settled(runtime: Runtime, settled: Mapping[str, Any]) -> str:
    """Judge a pair the capture task has just settled, in that task: a task (its message, its delivery, its
    acknowledgement and its reads of the pair) fewer per answer. A transient LLM error hands the retry to a
    `judge_pair` task, as its own retry would; anything else hands the whole pair to one (resumed: it hands on
    whatever this run stored). If even that cannot be sent, the capture task is requeued, and its redelivery sends
    it (workers.tasks.answers)."""
    pair_id = settled["id"]
    try:
        return judge_run(
            _InlineRun(pair_id), runtime, ToJudge(PairView.of(dict(settled)), just_settled=True), redelivered=False
        )
    except _HandedOver:
        return "retrying"
    except Exception as error:
        log.warning(
            "inline judging failed; handed to judge_pair",
            extra={**event_fields(pair_id=pair_id), "error": repr(error)[:300]},
        )
        try:
            celery.send_task(task_names.JUDGE_PAIR, args=[pair_id], kwargs={"resumed": True})
        except Exception as unsent:
            raise Reject(unsent, requeue=True) from error
        return "handed on"


class _HandedOver(Exception):
    """The inline run's retry was sent as a `judge_pair` task."""


class _InlineRun:
    """What `_judge` asks of its task, for a run inside the capture task: no retries of its own yet; a retry is a
    `judge_pair` task with the same countdown and arguments."""

    max_retries = TASK_MAX_RETRIES

    def __init__(self, pair_id: int) -> None:
        self.pair_id = pair_id
        self.request = SimpleNamespace(retries=0, kwargs={}, delivery_info={})  # the shape of Celery's Task.request

    def retry(self, *, countdown: float, exc: Exception, kwargs: dict[str, Any]) -> Exception:
        celery.send_task(task_names.JUDGE_PAIR, args=[self.pair_id], kwargs=kwargs, countdown=countdown)
        return _HandedOver(repr(exc)[:300])


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


def hand_on(
    runtime: Runtime,
    pair: PairView,
    judgments: dict[int, dict[str, Any] | None],
    policy: ChannelPolicy | None,
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
                noted_tasks.send(runtime.redis, task_names.DELIVER_VERDICT, [pair.id], time.time())
            return
        for judgment_id, values in judgments.items():  # `policy`: the pair's channel's, resolved by the caller
            if (
                recheck
                or values is None
                or (policy is not None and follow_up_needed(runtime, _facts(judgment_id, values, pair), policy))
            ):
                noted_tasks.send(runtime.redis, task_names.CONSIDER_ALERT, [judgment_id], time.time())
    except Exception as error:  # the broker or the database, after the judgments were stored
        raise HandOnFailed(error) from error
    queue_trace_sends(runtime, list(judgments))  # never raises: the bot's traces wait on nothing here


class HandOnFailed(Exception):
    """Judgments were stored but their follow-up tasks (alert policy, verdict) could not all be queued."""

    def __init__(self, error: Exception) -> None:
        super().__init__(repr(error)[:300])
        self.error = error


def _facts(judgment_id: int, values: dict[str, Any], pair: PairView) -> JudgmentFacts:
    return JudgmentFacts(
        judgment_id, values["judge"], values["status"], values.get("score"), pair.source, pair.channel_id
    )


def _skip_for_budget(
    runtime: Runtime, pair: PairView, created: dict[int, dict[str, Any]], policy: ChannelPolicy | None
) -> str:
    settings = runtime.settings
    with runtime.db.session() as session:
        set_pair_status(session, pair.id, PairStatus.SKIPPED_BUDGET, only_from=[PairStatus.PENDING])
    # Whoever asked on demand hears that nothing more will come today (the pair's status says why).
    hand_on(runtime, pair, created, policy, complete=True)
    budget.announce_exhausted(runtime.db, runtime.slack, settings.alert_channel, settings.daily_budget)
    log.info("daily budget spent: pair skipped", extra=pair.log_fields())
    return PairStatus.SKIPPED_BUDGET
