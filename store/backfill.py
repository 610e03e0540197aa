"""Queries of `relmon backfill` and `relmon import`: pairs found in history (unique on channel and answer, like
captured ones, so a pair captured live or found by an earlier run is never added twice) and the per-channel
checkpoints of the history read so far."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.db import insert_or_ignore
from store.models import HISTORY_SOURCES, BackfillCheckpoint, Pair, PairStatus, utcnow


@dataclass(frozen=True)
class Stored:
    pair_id: int
    source: str
    status: str

    @property
    def to_judge(self) -> bool:
        """Found in history and not judged yet (a pair captured live is judged by the pipeline)."""
        return self.source in HISTORY_SOURCES and self.status == PairStatus.PENDING


def add_found(session: Session, *, created_at: datetime, **values: Any) -> Stored:
    """Store a pair found in history as pending (created at the answer's time, so it counts in that week),
    unless a pair for that answer exists already. Returns the stored pair, new or not."""
    row = {**values, "status": PairStatus.PENDING, "version": 1, "created_at": created_at, "updated_at": utcnow()}
    session.execute(insert_or_ignore(session, Pair, ["channel_id", "answer_ts"], row))
    found = session.execute(
        select(Pair.id, Pair.source, Pair.status).where(
            Pair.channel_id == values["channel_id"], Pair.answer_ts == values["answer_ts"]
        )
    ).one()
    return Stored(found.id, found.source, found.status)


def pending_history_pairs(session: Session, channels: Iterable[str], source: str) -> list[int]:
    """Pairs an earlier run found but did not judge (interrupted, or the day's budget was spent)."""
    return list(
        session.scalars(
            select(Pair.id)
            .where(Pair.source == source, Pair.status == PairStatus.PENDING, Pair.channel_id.in_(list(channels)))
            .order_by(Pair.id)
        )
    )


def get_checkpoint(session: Session, channel_id: str) -> BackfillCheckpoint | None:
    return session.get(BackfillCheckpoint, channel_id)


def start_checkpoint(session: Session, channel_id: str, oldest_ts: str, latest_ts: str) -> None:
    """A new pass over [oldest_ts, latest_ts] (replaces a finished one)."""
    row = session.get(BackfillCheckpoint, channel_id)
    if row is None:
        row = BackfillCheckpoint(channel_id=channel_id)
        session.add(row)
    row.oldest_ts, row.latest_ts, row.resume_ts, row.done, row.messages_read = oldest_ts, latest_ts, None, False, 0


def advance_checkpoint(session: Session, channel_id: str, resume_ts: str | None, read: int, *, done: bool) -> None:
    row = session.get(BackfillCheckpoint, channel_id)
    if row is None:
        return
    row.resume_ts = resume_ts
    row.messages_read = (row.messages_read or 0) + read
    row.done = done
