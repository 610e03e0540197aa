"""Canary runs: each re-judging of the labelled set, stored with the model that answered and its agreement."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.models import CanaryRun


def record_run(session: Session, **values: object) -> CanaryRun:
    run = CanaryRun(**values)
    session.add(run)
    session.flush()
    return run


def recent_runs(
    session: Session, *, before: datetime | None = None, limit: int = 2, judges: Collection[str] | None = None
) -> list[CanaryRun]:
    """The newest runs (created before `before`; of these `judges` only, when given), newest first, detached from
    the session."""
    statement = select(CanaryRun).order_by(CanaryRun.created_at.desc(), CanaryRun.id.desc()).limit(limit)
    if before is not None:
        statement = statement.where(CanaryRun.created_at < before)
    if judges is not None:
        statement = statement.where(CanaryRun.judge.in_(sorted(judges)))
    runs = list(session.execute(statement).scalars())
    for run in runs:
        session.expunge(run)
    return runs
