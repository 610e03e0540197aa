"""Alert queries: claim an alert under its unique key before it is posted, count what the hourly cap
counts, track degradation episodes (the scores they weigh: `store.channel_scores`; the hour's summary reads
`store.alert_summaries`).

The claim is the at-most-once guarantee: INSERT ... ON CONFLICT DO NOTHING on `dedupe_key`, so two
workers handling the same judgment meet one row. `lock_channel` serialises the decisions that count
rows first (the hourly cap, degradation episodes) so that a burst handled by many workers at once
cannot all see "under the cap".
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, update
from sqlalchemy.orm import Session

from store.alert_reads import AlertRow
from store.db import insert_or_ignore
from store.models import Alert, Judgment

KIND_LOW = "low_score"
KIND_DEGRADATION = "degradation"
KIND_MISSED = "missed_failure"  # the judge scored an answer well, the conversation says it failed
KIND_SUMMARY = "summary"
KIND_VERDICT = "verdict"  # an on-demand verdict delivered to whoever asked
KIND_CHANGE = "change"  # a group's failure rate rose above its own baseline (workers.alerts.changes)

STATUS_CLAIMED = "claimed"  # to be posted (a worker holds it, or died holding it)
STATUS_POSTED = "posted"
STATUS_HELD = "held"  # over an hourly cap: shown in the hour's summary instead
STATUS_FAILED = "failed"  # Slack refused it for good (e.g. the alert channel is gone)
STATUS_RETIRED = "retired"  # past retention: its message redrawn without words, or deleted (store.retention)

# Low-score rows that use up the hourly cap: everything posted or on its way, not the held ones.
CAP_STATUSES = (STATUS_CLAIMED, STATUS_POSTED, STATUS_FAILED)


def lock_channel(session: Session, channel_id: str, *, namespace: str = "relmon-alerts") -> None:
    """Serialise alert decisions for one source channel until this transaction ends.

    PostgreSQL: a transaction-scoped advisory lock on the channel. SQLite: a no-op write takes the
    database's write lock now (other writers wait on busy_timeout), so the counts that follow are current."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        digest = hashlib.sha256(f"{namespace}:{channel_id}".encode()).digest()
        key = int.from_bytes(digest[:8], "big", signed=True)
        session.execute(select(func.pg_advisory_xact_lock(key)))
    else:
        session.execute(update(Alert).where(Alert.id == -1).values(status=Alert.status))


def lock_alert_channel(session: Session, alert_channel_id: str) -> None:
    """Serialise decisions that count an alert channel's hourly cap. Taken after `lock_channel` of the source,
    never before, and in a namespace of its own (a channel may be both): no two transactions wait on each other
    in a cycle. SQLite: the source channel's lock took the database's one write lock already, nothing to add."""
    if session.get_bind().dialect.name == "postgresql":
        lock_channel(session, alert_channel_id, namespace="relmon-alert-channel")


def claim_alert(
    session: Session, *, dedupe_key: str, kind: str, now: datetime | None = None, **columns: Any
) -> tuple[Alert, bool]:
    """The alert row for this key, inserted if absent with the other Alert `columns` given (status: claimed unless
    given; judgment_id, source_channel_id, alert_channel_id, details). Returns (row, whether this call created it)."""
    values = {"status": STATUS_CLAIMED, **columns, "dedupe_key": dedupe_key, "kind": kind}
    values |= {"details": columns.get("details") or {}, "created_at": now or datetime.now(UTC)}
    # The INSERT returns the row it wrote: nothing is read back.
    inserted = session.scalars(insert_or_ignore(session, Alert, ["dedupe_key"], values).returning(Alert)).first()
    if inserted is not None:
        return inserted, True
    row = by_key(session, dedupe_key)  # a twin (or an earlier attempt) claimed it first: its row is the one
    assert row is not None
    return row, False


def by_key(session: Session, dedupe_key: str) -> Alert | None:
    return session.execute(select(Alert).where(Alert.dedupe_key == dedupe_key)).scalar_one_or_none()


def by_message(session: Session, channel_id: str, message_ts: str) -> Alert | None:
    return session.execute(
        select(Alert).where(Alert.alert_channel_id == channel_id, Alert.message_ts == message_ts).limit(1)
    ).scalar_one_or_none()


def low_alert_for_judgment(session: Session, judgment_id: int) -> Alert | None:
    return session.execute(
        select(Alert).where(Alert.judgment_id == judgment_id, Alert.kind == KIND_LOW).limit(1)
    ).scalar_one_or_none()


def hour_counts(
    session: Session, channel_id: str, alert_channel_id: str | None, since: datetime, until: datetime
) -> tuple[int, int]:
    """What counts against the hourly caps, in one round trip: the source channel's low-score (and missed-failure)
    alerts, and every alert to the alert channel from any source channel (0 without one). Each count is a
    subquery of its own, so each uses its channel's index."""
    row = session.execute(_counts_statement(), _counts_parameters(channel_id, alert_channel_id, since, until)).one()
    return row.source_channel, row.alert_channel


@dataclass(frozen=True)
class ClaimCheck:
    """What a claim reads under its channel locks: the hour's counts, and the row its key already has (id,
    status), if any."""

    source_channel: int
    alert_channel: int
    found: tuple[int, str] | None


def claim_check(
    session: Session, dedupe_key: str, channel_id: str, alert_channel_id: str | None, since: datetime, until: datetime
) -> ClaimCheck:
    """`hour_counts`, and whether `dedupe_key` is claimed already, in the same round trip."""
    parameters = {**_counts_parameters(channel_id, alert_channel_id, since, until), "key": dedupe_key}
    row = session.execute(_claim_check_statement(), parameters).one()
    found = (row.found_id, row.found_status) if row.found_id is not None else None
    return ClaimCheck(row.source_channel, row.alert_channel, found)


def _counts_parameters(channel_id: str, alert_channel_id: str | None, since: datetime, until: datetime) -> dict:
    # No alert channel: its count is of alert_channel_id = NULL, which matches nothing (0).
    return {"channel": channel_id, "alert_channel": alert_channel_id, "since": since, "until": until}


@functools.cache
def _count_columns() -> tuple[Any, Any]:
    """The two counts as scalar subqueries: each uses its channel's index."""
    counted = (
        Alert.status.in_(CAP_STATUSES),
        Alert.created_at >= bindparam("since"),
        Alert.created_at < bindparam("until"),
    )
    low = select(func.count(Alert.id)).where(
        Alert.kind.in_((KIND_LOW, KIND_MISSED)), Alert.source_channel_id == bindparam("channel"), *counted
    )
    to_alert_channel = select(func.count(Alert.id)).where(
        Alert.kind.in_((KIND_LOW, KIND_MISSED, KIND_DEGRADATION)),
        Alert.alert_channel_id == bindparam("alert_channel"),
        *counted,
    )
    return low.scalar_subquery().label("source_channel"), to_alert_channel.scalar_subquery().label("alert_channel")


@functools.cache
def _counts_statement():
    return select(*_count_columns())


@functools.cache
def _claim_check_statement():
    def found(column):  # a look-up on the unique dedupe_key
        return select(column).where(Alert.dedupe_key == bindparam("key")).scalar_subquery()

    return select(*_count_columns(), found(Alert.id).label("found_id"), found(Alert.status).label("found_status"))


def mark_alert_posted(
    executor: Session | Connection, alert_id: int, message_ts: str | None, now: datetime | None = None
) -> None:
    executor.execute(
        update(Alert)
        .where(Alert.id == alert_id)
        .values(status=STATUS_POSTED, message_ts=message_ts, posted_at=now or datetime.now(UTC))
    )


def mark_failed(session: Session, alert_id: int, error: str) -> None:
    row = session.get(Alert, alert_id)
    if row is not None:
        row.status = STATUS_FAILED
        row.details = {**(row.details or {}), "error": error[:500]}


def merge_details(session: Session, alert_id: int, **values: Any) -> None:
    row = session.get(Alert, alert_id)
    if row is not None:
        row.details = {**(row.details or {}), **values}  # a new dict: JSON columns track assignment only


@dataclass(frozen=True)
class DegradationHistory:
    open_alert_id: int | None  # the latest episode, not yet recovered
    open_unposted: bool  # that episode's alert was claimed but never posted (its worker died)
    last_alert_at: datetime | None
    episodes: int
    open_row: AlertRow | None = None  # the open episode's row, as read: posted from it when unposted


def degradation_history(session: Session | Connection, channel_id: str) -> DegradationHistory:
    """The channel's degradation episodes: the latest (one indexed row) and how many there were."""
    latest_statement, count_statement = _history_statements()
    latest = session.execute(latest_statement, {"channel": channel_id}).first()
    if latest is None:
        return DegradationHistory(None, False, None, 0)
    episodes = session.execute(count_statement, {"channel": channel_id}).scalar_one()
    is_open = not (latest.details or {}).get("recovered_at")
    return DegradationHistory(
        latest.id if is_open else None,
        is_open and latest.status == STATUS_CLAIMED,
        latest.created_at,
        episodes,
        AlertRow.of(latest) if is_open else None,
    )


@functools.cache
def _history_statements():
    """degradation_history's two reads, built once: the first runs after every judgment."""
    scope = (Alert.kind == KIND_DEGRADATION, Alert.source_channel_id == bindparam("channel"))
    latest = select(*Alert.__table__.c).where(*scope).order_by(Alert.id.desc())
    return latest.limit(1), select(func.count(Alert.id)).where(*scope)


def mark_recovered(session: Session, alert_id: int, at: datetime) -> None:
    merge_details(session, alert_id, recovered_at=at.isoformat())


def posted_about_pair(
    session: Session, pair_id: int, *conditions: Any, kinds: tuple[str, ...] = (KIND_LOW,)
) -> list[int]:
    """The posted alerts of these kinds about the pair's judgments (and `conditions` on them), oldest first."""
    return list(
        session.scalars(
            select(Alert.id)
            .join(Judgment, Judgment.id == Alert.judgment_id)
            .where(
                Judgment.pair_id == pair_id,
                *conditions,
                Alert.kind.in_(kinds),
                Alert.status == STATUS_POSTED,
                Alert.message_ts.is_not(None),
            )
            .order_by(Alert.id)
        )
    )


@functools.cache
def _pairs_with_alerts_statement():
    """Each of the pairs' judgments with one of its alerts, if any: a correlated look-up on `ix_alerts_judgment_id`
    per judgment (a join or EXISTS was planned as a scan of every alert on a young database, without statistics)."""
    about = (
        select(Alert.id)
        .where(Alert.judgment_id == Judgment.id, Alert.kind.in_((KIND_LOW, KIND_MISSED)))
        .limit(1)
        .scalar_subquery()
    )
    return select(Judgment.pair_id, about).where(Judgment.pair_id.in_(bindparam("pair_ids", expanding=True)))


def pairs_with_alerts(executor: Connection | Session, pair_ids: Collection[int]) -> set[int]:
    """Those of the pairs that a low-score or missed-failure alert row (claimed, held, posted or failed) is about:
    only theirs can outcome signals change what an alert shows."""
    if not pair_ids:
        return set()
    rows = executor.execute(_pairs_with_alerts_statement(), {"pair_ids": list(pair_ids)})
    return {pair_id for pair_id, alert_id in rows if alert_id is not None}


def posted_about_earlier(session: Session, pair_id: int, judge: str, pair_version: int) -> list[int]:
    """The posted low-score alerts about judgments of earlier versions of this answer (by this judge): the ones to
    update in place now that a newer judgment supersedes them."""
    return posted_about_pair(session, pair_id, Judgment.judge == judge, Judgment.pair_version < pair_version)
