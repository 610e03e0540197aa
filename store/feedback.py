"""Feedback queries: one vote per person and judgment, changeable (an upsert on the unique key)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, case, func, select
from sqlalchemy.orm import Session

from store.db import dialect_insert
from store.exchanges import in_report_channel
from store.models import ALERTING_SOURCES, Feedback, Judgment, Pair


def record_vote(session: Session, judgment_id: int, user_id: str, vote: str, now: datetime | None = None) -> bool:
    """Store or change this person's vote. Returns False when the judgment does not exist."""
    if session.get(Judgment, judgment_id) is None:
        return False
    moment = now or datetime.now(UTC)
    statement = dialect_insert(session)(Feedback).values(
        judgment_id=judgment_id, user_id=user_id, vote=vote, created_at=moment, updated_at=moment
    )
    statement = statement.on_conflict_do_update(
        index_elements=["judgment_id", "user_id"], set_={"vote": vote, "updated_at": moment}
    )
    session.execute(statement)
    return True


def votes_for(session: Session, judgment_id: int) -> list[tuple[str, str]]:
    """(user_id, vote) for one judgment, oldest change first."""
    rows = session.execute(
        select(Feedback.user_id, Feedback.vote)
        .where(Feedback.judgment_id == judgment_id)
        .order_by(Feedback.updated_at, Feedback.id)
    )
    return [(user_id, vote) for user_id, vote in rows]


def _with_votes(*columns: Any) -> Select:
    """These columns of each judgment people voted on (joined to its pair), then its right and its wrong votes
    (the caller groups by judgment)."""
    return (
        select(
            *columns,
            func.sum(case((Feedback.vote == "right", 1), else_=0)),
            func.sum(case((Feedback.vote == "wrong", 1), else_=0)),
        )
        .join(Feedback, Feedback.judgment_id == Judgment.id)
        .join(Pair, Pair.id == Judgment.pair_id)
    )


def voted_scores(session: Session, channel_id: str, since: datetime) -> list[tuple[str, float, int, int]]:
    """(judge, score, right votes, wrong votes) of the channel's (or bot's) live judgments people voted on since
    `since`."""
    rows = session.execute(
        _with_votes(Judgment.judge, Judgment.score)
        .where(in_report_channel(channel_id), Pair.source.in_(ALERTING_SOURCES), Judgment.created_at >= since)
        .where(Judgment.score.is_not(None))
        .group_by(Judgment.id, Judgment.judge, Judgment.score)
    )
    return [(judge, float(score), int(right or 0), int(wrong or 0)) for judge, score, right, wrong in rows]


@dataclass(frozen=True)
class VotedExample:
    channel_id: str | None
    question: str
    answer: str
    reference: str | None
    score: float
    right: int
    wrong: int


def voted_examples(session: Session, judge: str) -> list[VotedExample]:
    """Every scored judgment of this judge that people voted on, with its texts and its votes, oldest first."""
    rows = session.execute(
        _with_votes(Pair.channel_id, Pair.question_text, Pair.answer_text, Pair.reference_text, Judgment.score)
        .where(Judgment.judge == judge, Judgment.score.is_not(None))
        .group_by(Judgment.id, Pair.id)
        .order_by(Judgment.id)
    )
    return [
        VotedExample(channel, question or "", answer or "", reference or None, float(score), int(r or 0), int(w or 0))
        for channel, question, answer, reference, score, r, w in rows
    ]
