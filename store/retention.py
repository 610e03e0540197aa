"""Retention: delete what is older than RELMON_RETENTION_DAYS, a batch at a time (short transactions)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from store.models import Alert, Pair


def delete_pairs_batch(session: Session, before: datetime, batch_size: int) -> int:
    """Delete up to `batch_size` pairs created before `before`; their judgments, alerts and feedback go
    with them (ON DELETE CASCADE). Returns how many pairs were deleted."""
    return _delete_batch(session, Pair, before, batch_size)


def delete_alerts_batch(session: Session, before: datetime, batch_size: int) -> int:
    """Alerts not tied to a judgment (degradation, summaries) have no cascade: delete old ones directly."""
    return _delete_batch(session, Alert, before, batch_size)


def _delete_batch(session: Session, model: type[Pair] | type[Alert], before: datetime, batch_size: int) -> int:
    """Delete the oldest rows of `model` (at most `batch_size`) created before `before`; returns how many."""
    query = select(model.id).where(model.created_at < before).order_by(model.id).limit(batch_size)
    ids = session.execute(query).scalars().all()
    if ids:
        session.execute(delete(model).where(model.id.in_(ids)))
    return len(ids)
