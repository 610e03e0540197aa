"""The `digests` table: one row per period, claimed before anything is posted.

A claim is an insert on the unique period key. A row left `claimed` by a crashed run is taken over once its
lease has run out; a `failed` row (a run that gave up on an error) at once; a `sent` row never.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from store.db import insert_or_ignore
from store.models import Digest

CLAIMED, SENT, FAILED = "claimed", "sent", "failed"


@dataclass(frozen=True)
class DigestClaim:
    id: int
    period_key: str
    message_ts: str | None  # set once the message is posted: a retry then only finishes the rest
    # Taken over from a run that crashed or gave up (not a fresh insert): that run may have posted unrecorded.
    taken_over: bool = False


def claim_digest(
    session: Session, period_key: str, channel_id: str | None, now: datetime, lease: timedelta
) -> DigestClaim | None:
    """Claim the period for this run, or None when it is sent or another run holds it."""
    row = {"period_key": period_key, "channel_id": channel_id, "status": CLAIMED, "created_at": now}
    inserted = session.execute(insert_or_ignore(session, Digest, ["period_key"], row).returning(Digest.id)).first()
    if inserted is None:
        # Compare-and-set: only one of several runs racing for an abandoned claim gets it.
        taken = session.execute(
            update(Digest)
            .where(
                Digest.period_key == period_key,
                or_(Digest.status == FAILED, (Digest.status == CLAIMED) & (Digest.created_at < now - lease)),
            )
            .values(status=CLAIMED, created_at=now)
            .returning(Digest.id)
        ).first()
        if taken is None:
            return None
    row = session.execute(select(Digest).where(Digest.period_key == period_key)).scalar_one()
    return DigestClaim(id=row.id, period_key=row.period_key, message_ts=row.message_ts, taken_over=inserted is None)


def status_of(session: Session, period_key: str) -> str | None:
    return session.execute(select(Digest.status).where(Digest.period_key == period_key)).scalar_one_or_none()


def mark_digest_posted(session: Session, digest_id: int, message_ts: str) -> None:
    session.execute(update(Digest).where(Digest.id == digest_id).values(message_ts=message_ts))


def mark_sent(session: Session, digest_id: int, now: datetime) -> None:
    session.execute(update(Digest).where(Digest.id == digest_id).values(status=SENT, sent_at=now))


def release(session: Session, digest_id: int) -> None:
    """Give the claim up after an error, so that a retry can take it straight away."""
    session.execute(update(Digest).where(Digest.id == digest_id, Digest.status == CLAIMED).values(status=FAILED))
