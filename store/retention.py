"""Retention: delete what is older than RELMON_RETENTION_DAYS, a batch at a time (short transactions)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from store.models import Alert, Pair


def delete_pairs_batch(session: Session, before: datetime, batch_size: int) -> int:
    """Delete up to `batch_size` pairs created before `before`; their judgments, alerts and feedback go
    with them (ON DELETE CASCADE). Returns how many pairs were deleted."""
    ids = (
        session.execute(select(Pair.id).where(Pair.created_at < before).order_by(Pair.id).limit(batch_size))
        .scalars()
        .all()
    )
    if not ids:
        return 0
    session.execute(delete(Pair).where(Pair.id.in_(ids)))
    return len(ids)


def delete_alerts_batch(session: Session, before: datetime, batch_size: int) -> int:
    """Alerts not tied to a judgment (degradation, summaries) have no cascade: delete old ones directly."""
    ids = (
        session.execute(select(Alert.id).where(Alert.created_at < before).order_by(Alert.id).limit(batch_size))
        .scalars()
        .all()
    )
    if not ids:
        return 0
    session.execute(delete(Alert).where(Alert.id.in_(ids)))
    return len(ids)
