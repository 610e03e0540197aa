"""The second opinion on a low score, stored on the judgment it confirms: written once (the first writer wins),
so a retry or a twin task reads the stored one instead of asking the LLM again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update

from store.judgments import PAIR_FIELDS, Executor
from store.models import ConfirmationStatus, Judgment, Pair


@dataclass(frozen=True)
class ToConfirm:
    """What a second opinion needs: the judgment, its pair's fields as judging reads them (`PAIR_FIELDS`: the
    worker builds the same judge input from them as the first verdict's), and any second opinion already stored."""

    judgment_id: int
    judge: str
    pair_version: int
    pair: dict[str, Any]
    stored: SecondOpinion | None


@dataclass(frozen=True)
class SecondOpinion:
    """The second verdict on a low score as the judgment stores it; `status` is a ConfirmationStatus (confirmed,
    disputed, unconfirmed), `error` why a second verdict could not be had."""

    status: str
    score: float | None = None
    reasoning: str | None = None
    model: str | None = None
    error: str | None = None


def to_confirm(executor: Executor, judgment_id: int) -> ToConfirm | None:
    row = executor.execute(
        select(
            Judgment.judge,
            Judgment.pair_version,
            Judgment.confirmation_status,
            Judgment.confirmation_score,
            Judgment.confirmation_reasoning,
            Judgment.confirmation_model,
            Judgment.confirmation_error,
            *[getattr(Pair, name) for name in PAIR_FIELDS],
        )
        .join(Pair, Pair.id == Judgment.pair_id)
        .where(Judgment.id == judgment_id)
    ).first()
    if row is None:
        return None
    stored = None
    if row.confirmation_status is not None:
        stored = SecondOpinion(
            row.confirmation_status,
            row.confirmation_score,
            row.confirmation_reasoning,
            row.confirmation_model,
            row.confirmation_error,
        )
    pair = {name: row._mapping[name] for name in PAIR_FIELDS}
    return ToConfirm(judgment_id, row.judge, row.pair_version, pair, stored)


def record(executor: Executor, judgment_id: int, opinion: SecondOpinion) -> SecondOpinion:
    """Store the second opinion unless one is stored already; return the one that stands."""
    executor.execute(
        update(Judgment)
        .where(Judgment.id == judgment_id, Judgment.confirmation_status.is_(None))
        .values(
            confirmation_status=opinion.status,
            confirmation_score=opinion.score,
            confirmation_reasoning=opinion.reasoning,
            confirmation_model=opinion.model,
            confirmation_error=opinion.error[:2000] if opinion.error else None,
        )
    )
    found = to_confirm(executor, judgment_id)
    return found.stored if found is not None and found.stored is not None else opinion


def disputed_counts(executor: Executor, channel_id: str, since: datetime) -> dict[str, int]:
    """Judge → low scores of the channel since `since` that a second opinion disputed."""
    rows = executor.execute(
        select(Judgment.judge, func.count())
        .join(Pair, Pair.id == Judgment.pair_id)
        .where(
            Pair.channel_id == channel_id,
            Judgment.created_at >= since,
            Judgment.confirmation_status == ConfirmationStatus.DISPUTED,
        )
        .group_by(Judgment.judge)
    )
    return {judge: int(count) for judge, count in rows}
