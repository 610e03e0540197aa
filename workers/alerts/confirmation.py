"""The second opinion on a low score: before a low score alerts, relmon judges the answer again (another seed,
temperature 0.7, or RELMON_CONFIRM_MODEL) and the policy alerts only when that verdict is low too.

A step of the alert path (`delivery.consider` calls `confirm` before it claims anything), so only low scores
cost a second call. Idempotent: the second opinion is stored on the judgment once and a retry or a twin reads it
back. Charged to the daily budget once per judgment (its own budget row, `<judge>:second@<pair version>`, so a
re-judged edit's second opinion is a unit of its own). A transient LLM
failure is raised for the alert task's retry (with the one backoff); on its last attempt, or when the budget is
spent, the second opinion is stored as unconfirmed: the first verdict stays as it was stored and nobody is
alerted."""

from __future__ import annotations

import logging

from common.runtime import Runtime
from judges import Sampling, TransientLLMError
from store import confirmations
from store.confirmations import SecondOpinion
from store.models import ConfirmationStatus
from workers import budget
from workers.alerts.planning import Judged
from workers.alerts.policy import confirmation_outcome
from workers.trace_sending import judgment_sends, note_sends, queue_trace_sends

log = logging.getLogger("relmon.alerts")

MODE_OFF = "off"
SECOND_OPINION_TEMPERATURE = 0.7
SECOND_OPINION_SEED = 7  # first verdicts are asked with no seed at temperature 0


def sampling(confirm_model: str | None) -> Sampling:
    return Sampling(temperature=SECOND_OPINION_TEMPERATURE, seed=SECOND_OPINION_SEED, model=confirm_model)


def budget_key(judge: str, pair_version: int) -> str:
    """The budget row of a second opinion, one per judgment (a judgment is unique on pair, judge and pair
    version): apart from the first verdict's row."""
    return f"{judge}:second@{pair_version}"


def confirm(runtime: Runtime, judged: Judged, threshold: float | None, *, last_attempt: bool = False) -> str | None:
    """The judgment's confirmation status, asking for a second opinion if none is stored; None when
    confirmation is off. Raises TransientLLMError for a retry unless `last_attempt`."""
    if runtime.settings.confirm == MODE_OFF:
        return None
    if judged.second_opinion is not None:
        return judged.second_opinion.status
    judgment_id = judged.facts.judgment_id
    opinion = _ask(runtime, judged, threshold, last_attempt=last_attempt)
    # Noted before it is stored: a replay reads the stored opinion and queues nothing, so a run that dies between
    # the two leaves its sends to the orphan check (common.task_notes).
    note_sends(runtime, judgment_sends(runtime, [judgment_id]))
    with runtime.db.autocommit() as connection:  # an atomic conditional UPDATE, then a read of what stands
        stood = confirmations.record(connection, judgment_id, opinion)
    log.info(
        "second opinion",
        extra={"judgment_id": judgment_id, "confirmation": stood.status, "second_score": stood.score},
    )
    queue_trace_sends(runtime, [judgment_id])  # the second opinion's outcome joins the verdict's score
    return stood.status


def _ask(runtime: Runtime, judged: Judged, threshold: float | None, *, last_attempt: bool) -> SecondOpinion:
    settings, pair = runtime.settings, judged.pair
    unit = budget_key(judged.facts.judge, judged.pair_version)
    if not budget.charge(runtime.db, pair.id, unit, settings.daily_budget):
        return SecondOpinion(ConfirmationStatus.UNCONFIRMED, error="daily budget spent")
    judge = runtime.judges.get(judged.facts.judge)
    try:
        # The input the first verdict read (the earlier turns too): the second opinion judges the same texts.
        verdict = judge.evaluate(runtime.llm, *pair.judge_input.texts, sampling=sampling(settings.confirm_model))
    except TransientLLMError as error:
        if not last_attempt:
            raise
        return SecondOpinion(ConfirmationStatus.UNCONFIRMED, error=f"LLM unavailable for the second opinion: {error}")
    return SecondOpinion(
        confirmation_outcome(verdict.status, verdict.score, threshold),
        verdict.score,
        verdict.reasoning,
        verdict.model,
        verdict.error,
    )
