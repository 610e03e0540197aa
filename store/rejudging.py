"""Error verdicts judged again (`relmon rejudge --errors`): which ones, and reopening their pairs. A pair reopened
is pending again without its error rows, so the judging pipeline judges it as it judges any pending pair."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from store.models import JudgingFailure, Judgment, JudgmentStatus, Pair, PairStatus


class ErrorVerdict(NamedTuple):
    judgment_id: int
    pair_id: int
    judge: str
    answer_ts: str | None
    error: str | None


def error_verdicts(session: Session, since: datetime | None) -> list[ErrorVerdict]:
    """The error verdicts on the current version of judged answers (since `since`, when given), oldest answer
    first."""
    query = (
        select(Judgment.id, Judgment.pair_id, Judgment.judge, Pair.answer_ts, Judgment.error)
        .join(Pair, Pair.id == Judgment.pair_id)
        .where(
            Judgment.status == JudgmentStatus.ERROR,
            Judgment.pair_version == Pair.version,
            Pair.status == PairStatus.JUDGED,
        )
        .order_by(Pair.created_at, Judgment.pair_id, Judgment.id)
    )
    if since is not None:
        query = query.where(Judgment.created_at >= since)
    return [ErrorVerdict(*row) for row in session.execute(query)]


def reopen(session: Session, verdicts: list[ErrorVerdict]) -> list[int]:
    """Delete the error rows and put their pairs back to pending (with no counted failures: a bug fixed since
    gets a fresh start). Returns the pairs reopened, in the verdicts' order."""
    pair_ids = list(dict.fromkeys(verdict.pair_id for verdict in verdicts))
    if not pair_ids:
        return []
    session.execute(
        delete(Judgment)
        .where(Judgment.id.in_([verdict.judgment_id for verdict in verdicts]))
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(Pair)
        .where(Pair.id.in_(pair_ids), Pair.status == PairStatus.JUDGED)
        .values(status=PairStatus.PENDING)
        .execution_options(synchronize_session=False)
    )
    session.execute(delete(JudgingFailure).where(JudgingFailure.pair_id.in_(pair_ids)))
    return pair_ids
