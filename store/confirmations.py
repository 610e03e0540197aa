"""The second opinion on a low score, stored on the judgment it confirms: written once (the first writer wins),
so a retry or a twin task reads the stored one instead of asking the LLM again. The alert path reads it with the
judgment (`stored`), once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update

from store.exchanges import in_report_channel
from store.judgments import Executor
from store.models import ConfirmationStatus, Judgment, Pair


@dataclass(frozen=True)
class SecondOpinion:
    """The second verdict on a low score as the judgment stores it; `status` is a ConfirmationStatus (confirmed,
    disputed, unconfirmed), `error` why a second verdict could not be had."""

    status: str
    score: float | None = None
    reasoning: str | None = None
    model: str | None = None
    error: str | None = None


def stored(judgment: Judgment) -> SecondOpinion | None:
    """The second opinion stored on a judgment, if any."""
    if judgment.confirmation_status is None:
        return None
    return SecondOpinion(
        judgment.confirmation_status,
        judgment.confirmation_score,
        judgment.confirmation_reasoning,
        judgment.confirmation_model,
        judgment.confirmation_error,
    )


def record(executor: Executor, judgment_id: int, opinion: SecondOpinion) -> SecondOpinion:
    """Store the second opinion unless one is stored already; return the one that stands."""
    error = opinion.error[:2000] if opinion.error else None
    written = executor.execute(
        update(Judgment)
        .where(Judgment.id == judgment_id, Judgment.confirmation_status.is_(None))
        .values(
            confirmation_status=opinion.status,
            confirmation_score=opinion.score,
            confirmation_reasoning=opinion.reasoning,
            confirmation_model=opinion.model,
            confirmation_error=error,
        )
        .returning(Judgment.id)
    ).first()
    if written is not None:  # this one stands: nothing to read back
        return SecondOpinion(opinion.status, opinion.score, opinion.reasoning, opinion.model, error)
    # A twin task stored its own first (or the judgment is gone): read the one that stands.
    row = executor.execute(
        select(
            Judgment.confirmation_status,
            Judgment.confirmation_score,
            Judgment.confirmation_reasoning,
            Judgment.confirmation_model,
            Judgment.confirmation_error,
        ).where(Judgment.id == judgment_id)
    ).first()
    return stored(row) if row is not None and row.confirmation_status is not None else opinion


def disputed_counts(executor: Executor, channel_id: str, since: datetime) -> dict[str, int]:
    """Judge → low scores of the channel since `since` that a second opinion disputed."""
    rows = executor.execute(
        select(Judgment.judge, func.count())
        .join(Pair, Pair.id == Judgment.pair_id)
        .where(
            in_report_channel(channel_id),
            Judgment.created_at >= since,
            Judgment.confirmation_status == ConfirmationStatus.DISPUTED,
        )
        .group_by(Judgment.judge)
    )
    return {judge: int(count) for judge, count in rows}
