"""SQL of sampling (workers.sampling): each judged answer's inclusion probability, the answers a failure signal makes
certain to be judged, and the daily volume a cap is shared over."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection, Float, case, exists, false, func, literal, select, update
from sqlalchemy.orm import Session

from store.models import ANSWER_SOURCES, OutcomeSignal, Pair, PairStatus
from store.signals import ALWAYS_JUDGED

Executor = Session | Connection


def _signalled(pair_id_column):
    return exists().where(OutcomeSignal.pair_id == pair_id_column, OutcomeSignal.name.in_(sorted(ALWAYS_JUDGED)))


def probability_of(signals: Collection[str], stored: float | None) -> float | None:
    """An answer's inclusion probability as the reports read it: None (certain) once its conversation signalled a
    failure, whatever was stored when it was sampled (`answer_weight`, in Python)."""
    return None if ALWAYS_JUDGED & set(signals) else stored


def answer_weight():
    """An answer's weight in the reports, in SQL: 1/π, and 1 for one judged for certain (no probability stored, or
    a failure signalled since)."""
    return case(
        (_signalled(Pair.id), literal(1.0, Float)),
        (Pair.inclusion_probability.is_(None), literal(1.0, Float)),
        else_=literal(1.0, Float) / Pair.inclusion_probability,
    )


def in_uniform_sample():
    """The answers of the uniform subsample, in SQL: those whose hashed point fell below the day's probability,
    signalled or not, and every answer sampling did not decide on (NULL: no sampling). The hash knows nothing of the
    conversation, so they are an unbiased sample of all the traffic: what a detector reads without weights."""
    return Pair.uniform_sample.is_not(false())


def mark_uniform(executor: Executor, pair_id: int, uniform: bool) -> None:
    """Record whether the pair's point is below the day's probability (`in_uniform_sample`), once: a pair decided
    again (a failure signal sending a skipped one back to judging) keeps its first day's answer."""
    statement = update(Pair).where(Pair.id == pair_id, Pair.uniform_sample.is_(None)).values(uniform_sample=uniform)
    executor.execute(statement.execution_options(synchronize_session=False))


def sampling_counts(executor: Executor, in_scope, since: datetime) -> tuple[int, int, bool]:
    """Of the unsignalled answers of a scope (a channel's, `in_scope`) since `since`: how many were judged, how many
    sampling decided on (judged or skipped), and whether any was judged with a probability below 1."""
    quiet = ~_signalled(Pair.id)
    decided = Pair.status.in_([PairStatus.JUDGED, PairStatus.SKIPPED_SAMPLING])
    judged, total, below = executor.execute(
        select(
            func.count().filter(Pair.status == PairStatus.JUDGED),
            func.count(),
            func.count(Pair.inclusion_probability),
        ).where(in_scope, Pair.created_at >= since, Pair.source.in_(sorted(ANSWER_SOURCES)), decided, quiet)
    ).one()
    return int(judged or 0), int(total or 0), bool(below)


def is_signalled(executor: Executor, pair_id: int) -> bool:
    """Whether the pair's conversation already signalled a failure (any of ALWAYS_JUDGED)."""
    return bool(executor.execute(select(_signalled(Pair.id)).where(Pair.id == pair_id)).scalar())


def sampled_in(executor: Executor, pair_id: int, probability: float) -> bool:
    """Record that the pair was sampled in with `probability` (NULL when certain), unless a failure signal committed
    meanwhile (the pair is then certain to be judged: its probability stays NULL). True when recorded."""
    stored = None if probability >= 1.0 else probability
    statement = update(Pair).where(Pair.id == pair_id, ~_signalled(Pair.id)).values(inclusion_probability=stored)
    return executor.execute(statement.execution_options(synchronize_session=False)).rowcount == 1


def sampled_out(executor: Executor, pair_id: int) -> bool:
    """Mark a pending pair skipped by sampling, unless a failure signal committed meanwhile: False then (judge it)."""
    statement = (
        update(Pair)
        .where(Pair.id == pair_id, Pair.status == PairStatus.PENDING, ~_signalled(Pair.id))
        .values(status=PairStatus.SKIPPED_SAMPLING)
        .execution_options(synchronize_session=False)
    )
    return executor.execute(statement).rowcount == 1


def now_certain(executor: Executor, pair_ids: Collection[int]) -> list[int]:
    """A failure signal came for these pairs: each is judged for certain. A judged one's probability becomes 1
    (NULL); one sampling skipped goes back to pending. Returns those to judge now."""
    if not pair_ids:
        return []
    ids = sorted(pair_ids)
    signalled = _signalled(Pair.id)
    executor.execute(
        update(Pair)
        .where(Pair.id.in_(ids), Pair.inclusion_probability.is_not(None), signalled)
        .values(inclusion_probability=None)
        .execution_options(synchronize_session=False)
    )
    rows = executor.execute(
        update(Pair)
        .where(Pair.id.in_(ids), Pair.status == PairStatus.SKIPPED_SAMPLING, signalled)
        .values(status=PairStatus.PENDING, inclusion_probability=None)
        .returning(Pair.id)
        .execution_options(synchronize_session=False)
    )
    return sorted(row[0] for row in rows)


def unsignalled_answers(executor: Executor, start: datetime, end: datetime) -> int:
    """The answers captured in [start, end) that sampling decides on: the bot's answers (no /judge request), not
    merged into another, without a failure signal."""
    statement = select(func.count()).where(
        Pair.created_at >= start,
        Pair.created_at < end,
        Pair.source.in_(sorted(ANSWER_SOURCES)),
        Pair.status != PairStatus.MERGED,
        ~_signalled(Pair.id),
    )
    return int(executor.execute(statement).scalar() or 0)
