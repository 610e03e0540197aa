"""Retention: delete what is older than RELMON_RETENTION_DAYS, a batch at a time (short transactions). relmon's own
posts about it (alerts, summaries, verdicts sent as direct messages) are retired first (`posts_to_retire`, then
`mark_retired` once Slack has them without their words): a pair or alert row is never deleted while a post of it
still shows words in Slack, since its row is the only record of where that post is."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Row, and_, delete, exists, or_, select, update
from sqlalchemy.orm import Session

from store import alerts as alert_store
from store.golden_models import RegressRun
from store.models import Alert, Judgment, Pair

# The posts whose words retention takes out of Slack (a degradation alert shows figures only).
RETIRED_KINDS = (alert_store.KIND_LOW, alert_store.KIND_MISSED, alert_store.KIND_SUMMARY, alert_store.KIND_VERDICT)


def _showing_words():
    """An alert row whose message in Slack may still show words: posted, with its ts, of a retired kind."""
    return and_(Alert.status == alert_store.STATUS_POSTED, Alert.message_ts.is_not(None), Alert.kind.in_(RETIRED_KINDS))


def posts_to_retire(session: Session, before: datetime, limit: int) -> list[Row]:
    """Posted messages about pairs created before `before` (or, not tied to a pair, themselves created before it):
    (id, kind, alert_channel_id, message_ts, details), oldest first."""
    return session.execute(
        select(Alert.id, Alert.kind, Alert.alert_channel_id, Alert.message_ts, Alert.details)
        .outerjoin(Judgment, Judgment.id == Alert.judgment_id)
        .outerjoin(Pair, Pair.id == Judgment.pair_id)
        .where(
            _showing_words(),
            or_(Pair.created_at < before, and_(Alert.judgment_id.is_(None), Alert.created_at < before)),
        )
        .order_by(Alert.id)
        .limit(limit)
    ).all()


def mark_retired(session: Session, alert_id: int) -> None:
    session.execute(update(Alert).where(Alert.id == alert_id).values(status=alert_store.STATUS_RETIRED))


def blank_response_urls(session: Session, before: datetime) -> int:
    """A response_url is a credential to post for 30 minutes: blank it on every pair created before `before`."""
    result = session.execute(
        update(Pair).where(Pair.response_url.is_not(None), Pair.created_at < before).values(response_url=None)
    )
    return result.rowcount or 0


def delete_pairs_batch(session: Session, before: datetime, batch_size: int) -> int:
    """Delete up to `batch_size` pairs created before `before`; their judgments, alerts and feedback go
    with them (ON DELETE CASCADE). A pair with a post not yet retired waits. Returns how many were deleted."""
    unretired = exists(
        select(Alert.id)
        .join(Judgment, Judgment.id == Alert.judgment_id)
        .where(Judgment.pair_id == Pair.id, _showing_words())
    )
    return _delete_batch(session, Pair, before, batch_size, ~unretired)


def delete_alerts_batch(session: Session, before: datetime, batch_size: int) -> int:
    """Alerts not tied to a judgment (degradation, summaries, verdicts) have no cascade: delete old ones directly
    (a post not yet retired waits)."""
    return _delete_batch(session, Alert, before, batch_size, ~_showing_words())


def delete_regress_runs_batch(session: Session, before: datetime, batch_size: int) -> int:
    """`relmon regress` runs started and finished before `before`: their reports and their checks (ON DELETE
    CASCADE) quote the golden questions, expected answers and judges' reasoning, like the pairs they came from."""
    done_before = or_(RegressRun.finished_at.is_(None), RegressRun.finished_at < before)
    return _delete_batch(session, RegressRun, before, batch_size, done_before)


def _delete_batch(
    session: Session, model: type[Pair] | type[Alert] | type[RegressRun], before: datetime, batch_size: int, *where
) -> int:
    """Delete the oldest rows of `model` (at most `batch_size`) created before `before`; returns how many."""
    query = select(model.id).where(model.created_at < before, *where).order_by(model.id).limit(batch_size)
    ids = session.execute(query).scalars().all()
    if ids:
        session.execute(delete(model).where(model.id.in_(ids)))
    return len(ids)
