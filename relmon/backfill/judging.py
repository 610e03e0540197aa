"""Judging backfilled pairs in this process, with the pipeline's rules: the judges in force, sampling, the durable
cache, the daily budget, one row per (pair, judge). Nothing is handed on: pairs read from history never alert.

`plan` does every check before the LLM call; the online path (`judge_online`) and the Batch API
(`relmon.backfill.batch`) then each make the calls their own way and store the rows the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common.runtime import Runtime
from judges import TransientLLMError
from store import sampling as sampling_store
from store.judgments import find_cached_many, pair_for_judging, set_pair_status, stored_judges
from store.models import PairStatus
from workers import budget, sampling
from workers.judging.rules import judges_in_force, reused_values, verdict_values
from workers.judging.run import store_judgments
from workers.pair_view import PairView

JUDGED, SAMPLED_OUT, BUDGET_SPENT, LEFT, GONE = "judged", "sampled_out", "budget_spent", "left_pending", "gone"


@dataclass
class Plan:
    """What one pair still needs: the judges to call (name → cache key) and the rows ready without a call."""

    pair: PairView | None
    outcome: str | None = None  # set when nothing is left to call
    calls: dict[str, str] = field(default_factory=dict)
    ready: list[dict[str, Any]] = field(default_factory=list)


def plan(runtime: Runtime, pair_id: int) -> Plan:
    """The checks before any LLM call, budget charged for each call to make (once per pair and judge)."""
    settings = runtime.settings
    with runtime.db.autocommit() as connection:
        fields = pair_for_judging(connection, pair_id)
        if fields is None or fields["status"] != PairStatus.PENDING:
            return Plan(None, GONE)
        pair = PairView.of(fields)
        stored = stored_judges(connection, pair_id)
        rule = runtime.rules.for_channel(pair.channel_id, settings)
        todo = [
            n
            for n in judges_in_force(pair.judges, rule.judges, pair.reference is not None, runtime.judges)
            if n not in stored
        ]
        if todo and not stored and rule.sample_rate < 1:
            # As the live path: a history answer whose thread signalled a failure (recorded before its judging) is
            # judged for certain, the rest at the rate, each one's chance stored for the reports' weights.
            point = sampling.sample_point(pair.channel_id, pair.answer_ts)
            sampling_store.mark_uniform(connection, pair_id, sampling.chosen(point, rule.sample_rate))
            signalled = sampling_store.is_signalled(connection, pair_id)
            probability = sampling.inclusion_probability(rule.sample_rate, source=pair.source, signalled=signalled)
            if not sampling.chosen(point, probability):
                set_pair_status(connection, pair_id, PairStatus.SKIPPED_SAMPLING, only_from=[PairStatus.PENDING])
                return Plan(pair, SAMPLED_OUT)
            if not pair.on_demand:
                sampling_store.sampled_in(connection, pair_id, probability)
        given = pair.judge_input
        keys = {n: runtime.judges.get(n).cache_key(settings.judge_model, *given.texts) for n in todo}
        cached = find_cached_many(connection, list(keys.values()))
    result = Plan(pair)
    for name, key in keys.items():
        if key in cached:
            result.ready.append(reused_values(cached[key], pair_id=pair_id, judge=name))
        elif budget.charge(runtime.db, pair_id, name, settings.daily_budget):
            result.calls[name] = key
        else:
            store_judgments(runtime.db.engine, pair, result.ready, mark_judged=False)
            return Plan(pair, BUDGET_SPENT)  # left pending: a run tomorrow judges it
    return result


def finish_plan(runtime: Runtime, plan_: Plan, rows: list[dict[str, Any]]) -> str:
    """Store the rows; the pair is judged once every judge in force has one."""
    store_judgments(runtime.db.engine, plan_.pair, [*plan_.ready, *rows], mark_judged=True)
    return JUDGED


def judge_online(runtime: Runtime, pair_id: int, llm) -> str:
    """Judge one pair now. A transient LLM failure (after the client's retries) leaves it pending for the next run."""
    planned = plan(runtime, pair_id)
    if planned.outcome:
        return planned.outcome
    pair, rows = planned.pair, []
    given = pair.judge_input
    for name, key in planned.calls.items():
        try:
            verdict = runtime.judges.get(name).evaluate(llm, *given.texts)
        except TransientLLMError:
            store_judgments(runtime.db.engine, pair, [*planned.ready, *rows], mark_judged=False)
            return LEFT
        rows.append(verdict_values(verdict, pair_id=pair_id, cache_key=key))
    return finish_plan(runtime, planned, rows)
