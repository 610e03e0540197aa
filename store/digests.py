"""The `digests` table: one row per period, claimed before anything is posted.

A claim is an insert on the unique period key. A row left `claimed` by a crashed run is taken over once its
lease has run out; a `failed` row (a run that gave up on an error) at once; a `sent` row never.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from store.db import insert_or_ignore
from store.models import Digest, Pair
from store.topic_models import PairTopic, TopicPeriod, TopicRun

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


# A digest made at a moment covers the pairs created in the seven days before it (common.reports.period); a little
# more, so that a digest whose claim was taken over (its moment moved on) is still found.
COVERS = timedelta(days=7, hours=1)
DIGEST_RUN = "digest:"  # the topics run stored with a digest: `digest:{period key}` (workers.digest.delivery)


@dataclass(frozen=True)
class PostedDigest:
    id: int
    period_key: str
    channel_id: str
    message_ts: str
    made_at: datetime  # the claim's moment: the end of the period it covers (common.reports.period)


def posted_covering(
    session: Session, pair_ids: Collection[int], topic_pairs: Collection[int] = (), marks: Collection[str] = ()
) -> list[int]:
    """The posted digests that may show what a forgetting changed: those whose period may hold one of `pair_ids`
    (created in the days before the digest was made: worst answers, topic examples, gap drafts), and those whose
    topics include a topic of `topic_pairs` whose name now carries one of `marks` (a name scrubbed)."""
    conditions = []
    if pair_ids:
        first, last = session.execute(
            select(func.min(Pair.created_at), func.max(Pair.created_at)).where(Pair.id.in_(list(pair_ids)))
        ).one()
        if first is not None:
            conditions.append((Digest.created_at > first) & (Digest.created_at <= last + COVERS))
    if topic_pairs and marks:
        keys = select(PairTopic.topic_key).where(PairTopic.pair_id.in_(list(topic_pairs)))
        runs = session.scalars(
            select(TopicRun.run_key)
            .join(TopicPeriod, TopicPeriod.run_id == TopicRun.id)
            .where(
                TopicPeriod.topic_key.in_(keys),
                TopicRun.run_key.like(f"{DIGEST_RUN}%"),
                or_(*(TopicPeriod.name.contains(mark, autoescape=True) for mark in marks)),
            )
        )
        named = {run_key.removeprefix(DIGEST_RUN) for run_key in runs}
        if named:
            conditions.append(Digest.period_key.in_(named))
    if not conditions:
        return []
    return list(
        session.scalars(
            select(Digest.id)
            .where(Digest.message_ts.is_not(None), Digest.channel_id.is_not(None), or_(*conditions))
            .order_by(Digest.id)
        )
    )


def posted(session: Session, digest_id: int) -> PostedDigest | None:
    row = session.get(Digest, digest_id)
    if row is None or not row.message_ts or not row.channel_id:
        return None
    made_at = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)  # SQLite: naive
    return PostedDigest(row.id, row.period_key, row.channel_id, row.message_ts, made_at)


def topics_run(session: Session, period_key: str) -> tuple[TopicRun, list[TopicPeriod]] | None:
    """The topics run stored with the digest of `period_key`, with its topics in rank order."""
    run = session.scalars(select(TopicRun).where(TopicRun.run_key == f"{DIGEST_RUN}{period_key}")).first()
    if run is None:
        return None
    periods = list(session.scalars(select(TopicPeriod).where(TopicPeriod.run_id == run.id).order_by(TopicPeriod.rank)))
    session.expunge_all()
    return run, periods
