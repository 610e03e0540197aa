"""Queries of the fixes (`workers.fixes` is their caller): marks, the topic a key names, the topic's answers and
test-set items, and the verdict told under each mark (claimed once per change, then its reply recorded)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from store.golden_models import GoldenItem, GoldenSource, RegressRun
from store.models import as_utc
from store.topic_models import PairTopic, TopicFix, TopicRecord


@dataclass(frozen=True)
class Fix:
    id: int
    topic_key: str
    marked_at: datetime
    marked_by: str
    channel_id: str | None
    message_ts: str | None
    verdict: str | None
    verdict_key: str | None
    reply_ts: str | None
    regress_run_id: int | None


def _fix(row: TopicFix) -> Fix:
    return Fix(row.id, row.topic_key, as_utc(row.marked_at), row.marked_by, row.channel_id, row.message_ts,
               row.verdict, row.verdict_key, row.reply_ts, row.regress_run_id)  # fmt: skip


def topic(session: Session, key: str) -> TopicRecord | None:
    """The topic `key` names: its whole key, or a prefix of at least 6 characters that only one key starts with."""
    found = session.get(TopicRecord, key)
    if found is None and len(key) >= 6:
        like = key.replace("\\", "").replace("%", "").replace("_", "\\_")
        query = select(TopicRecord).where(TopicRecord.key.like(f"{like}%", escape="\\")).limit(2)
        matches = list(session.scalars(query))
        found = matches[0] if len(matches) == 1 else None
    if found is not None:
        session.expunge(found)
    return found


def add(
    session: Session,
    key: str,
    at: datetime,
    by: str,
    *,
    channel_id: str | None = None,
    message_ts: str | None = None,
    regress_run_id: int | None = None,
) -> int:
    same = session.scalars(
        select(TopicFix.id).where(TopicFix.topic_key == key, TopicFix.marked_by == by, TopicFix.marked_at == at)
    ).first()
    if same is not None:  # the same click handed on again (a redelivered task): one mark
        return same
    row = TopicFix(topic_key=key, marked_at=at, marked_by=by, channel_id=channel_id, message_ts=message_ts,
                   regress_run_id=regress_run_id)  # fmt: skip
    session.add(row)
    session.flush()
    return row.id


def set_anchor(session: Session, fix_id: int, channel_id: str, message_ts: str) -> None:
    """The message the fix's verdicts are posted under, once the mark's own message is posted."""
    session.execute(update(TopicFix).where(TopicFix.id == fix_id).values(channel_id=channel_id, message_ts=message_ts))


def get(session: Session, fix_id: int) -> Fix | None:
    row = session.get(TopicFix, fix_id)
    return _fix(row) if row is not None else None


def followed(session: Session, since: datetime) -> list[Fix]:
    """The fixes followed: the newest mark of each topic, marked at or after `since`."""
    rows = session.scalars(select(TopicFix).where(TopicFix.marked_at >= since).order_by(TopicFix.marked_at.desc()))
    newest: dict[str, Fix] = {}
    for row in rows:
        newest.setdefault(row.topic_key, _fix(row))
    return sorted(newest.values(), key=lambda fix: (fix.marked_at, fix.id))


def claim_verdict(session: Session, fix_id: int, verdict: str, key: str) -> bool:
    """Record a new verdict and the key its reply is posted once under; False when the verdict is the one told
    already (another run claimed it, or nothing changed)."""
    changed = session.execute(
        update(TopicFix)
        .where(TopicFix.id == fix_id, or_(TopicFix.verdict.is_(None), TopicFix.verdict != verdict))
        .values(verdict=verdict, verdict_key=key, reply_ts=None)
    )
    return changed.rowcount == 1


def record_reply(session: Session, fix_id: int, key: str, reply_ts: str) -> None:
    """The reply of the verdict claimed under `key` went out (a later verdict's claim is left alone)."""
    session.execute(
        update(TopicFix).where(TopicFix.id == fix_id, TopicFix.verdict_key == key).values(reply_ts=reply_ts or "-")
    )


def pair_ids(session: Session, key: str) -> set[int]:
    """The pairs whose question fell in the topic at the latest topics run that grouped it."""
    return set(session.scalars(select(PairTopic.pair_id).where(PairTopic.topic_key == key)))


def golden_item_ids(session: Session, key: str) -> set[int]:
    """The test set's items (not removed) asked in the topic: one of their sources' questions fell in it."""
    query = (
        select(GoldenSource.item_id)
        .join(GoldenItem, GoldenItem.id == GoldenSource.item_id)
        .join(PairTopic, PairTopic.pair_id == GoldenSource.pair_id)
        .where(PairTopic.topic_key == key, GoldenItem.removed_at.is_(None))
    )
    return set(session.scalars(query))


def regress_runs_since(session: Session, since: datetime) -> list[RegressRun]:
    """Finished `relmon regress` runs since `since`, newest first."""
    query = (
        select(RegressRun)
        .where(RegressRun.finished_at.is_not(None), RegressRun.finished_at >= since)
        .order_by(RegressRun.finished_at.desc(), RegressRun.id.desc())
    )
    runs = list(session.scalars(query))
    session.expunge_all()
    return runs
