"""Read-only queries behind the digest and App Home: plain rows of pairs with their judgments and votes.

The statistics themselves are pure functions in `common.reports.stats`; these rows are all they see.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from store.judgments import is_current
from store.models import Feedback, Judgment, Pair

# Ids per IN (...) clause: well under SQLite's and PostgreSQL's parameter limits.
_CHUNK = 500


@dataclass(frozen=True)
class JudgmentRow:
    id: int
    judge: str
    status: str  # ok | null | error
    score: float | None = None
    max_score: float | None = None
    normalized_score: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache
    completion_tokens: int = 0
    cached: bool = False
    batch: bool = False  # judged through the Batch API: half price
    votes_right: int = 0  # feedback buttons: "the judge was right"
    votes_wrong: int = 0
    model: str | None = None  # the model that answered
    prompt_version: str | None = None
    confirmation_status: str | None = None  # the second opinion on a low score, if one was asked for
    confirmation_score: float | None = None


@dataclass(frozen=True)
class PairRow:
    id: int
    channel_id: str | None
    created_at: datetime  # aware, UTC
    status: str
    source: str = "capture"
    channel_is_private: bool = False
    answer_ts: str | None = None
    thread_ts: str | None = None
    judgments: tuple[JudgmentRow, ...] = field(default_factory=tuple)


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything stored is UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


def pair_rows(session: Session, start: datetime, end: datetime) -> list[PairRow]:
    """Every pair created in [start, end) with its current judgments (an edited answer's latest of each judge) and
    their feedback counts (no texts)."""
    pairs = session.execute(
        select(
            Pair.id,
            Pair.channel_id,
            Pair.created_at,
            Pair.status,
            Pair.source,
            Pair.channel_is_private,
            Pair.answer_ts,
            Pair.thread_ts,
        )
        .where(Pair.created_at >= start, Pair.created_at < end)
        .order_by(Pair.id)
    ).all()
    ids = [row.id for row in pairs]
    judgments: dict[int, list[JudgmentRow]] = defaultdict(list)
    for chunk in _chunks(ids):
        votes = (
            select(
                Feedback.judgment_id,
                func.sum(case((Feedback.vote == "right", 1), else_=0)).label("right"),
                func.sum(case((Feedback.vote == "wrong", 1), else_=0)).label("wrong"),
            )
            .group_by(Feedback.judgment_id)
            .subquery()
        )
        rows = session.execute(
            select(Judgment, votes.c.right, votes.c.wrong)
            .outerjoin(votes, votes.c.judgment_id == Judgment.id)
            .where(Judgment.pair_id.in_(chunk), is_current())
            .order_by(Judgment.id)
        ).all()
        for judgment, right, wrong in rows:
            judgments[judgment.pair_id].append(
                JudgmentRow(
                    id=judgment.id,
                    judge=judgment.judge,
                    status=judgment.status,
                    score=judgment.score,
                    max_score=judgment.max_score,
                    normalized_score=judgment.normalized_score,
                    prompt_tokens=judgment.prompt_tokens or 0,
                    cached_tokens=judgment.cached_tokens or 0,
                    completion_tokens=judgment.completion_tokens or 0,
                    cached=bool(judgment.cached),
                    batch=bool(judgment.batch),
                    votes_right=int(right or 0),
                    votes_wrong=int(wrong or 0),
                    model=judgment.model,
                    prompt_version=judgment.prompt_version,
                    confirmation_status=judgment.confirmation_status,
                    confirmation_score=judgment.confirmation_score,
                )
            )
    return [
        PairRow(
            id=row.id,
            channel_id=row.channel_id,
            created_at=_aware(row.created_at),
            status=row.status,
            source=row.source,
            channel_is_private=bool(row.channel_is_private),
            answer_ts=row.answer_ts,
            thread_ts=row.thread_ts,
            judgments=tuple(judgments.get(row.id, ())),
        )
        for row in pairs
    ]


def pair_texts(session: Session, pair_ids: Iterable[int]) -> dict[int, tuple[str | None, str | None]]:
    """Question and answer texts of a few pairs (the worst answers a digest may quote)."""
    ids = sorted(set(pair_ids))
    texts: dict[int, tuple[str | None, str | None]] = {}
    for chunk in _chunks(ids):
        for row in session.execute(
            select(Pair.id, Pair.question_text, Pair.answer_text).where(Pair.id.in_(chunk))
        ).all():
            texts[row.id] = (row.question_text, row.answer_text)
    return texts
