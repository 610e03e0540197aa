"""Judgment queries: idempotent insert (one row per pair, judge and answer version), which judgment is current, the
durable cache, pair status changes made
by the judging pipeline, stale-pair lookup for the sweeper, and the export query."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, bindparam, case, exists, func, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session, aliased

from judges.names import CORRECTNESS
from store.db import insert_or_ignore_returning
from store.exchange_models import Exchange
from store.models import Judgment, JudgmentStatus, Pair, PairStatus, utcnow

CACHEABLE_STATUSES = (JudgmentStatus.OK, JudgmentStatus.NULL)

# Columns a cached judgment copies from the original (tokens, latency and cost stay with the original call).
CACHED_FIELDS = (
    "status",
    "score",
    "max_score",
    "normalized_score",
    "reasoning",
    "model",
    "raw_output",
    "prompt_version",
    "error",
    "cache_key",
)


# The hot path (judge_pair) runs these on a Core connection, which skips the ORM's per-statement work; the
# functions accept either a Connection or a Session.
Executor = Connection | Session

PAIR_FIELDS = (
    "id",
    "status",
    "source",
    "channel_id",
    "answer_ts",
    "question_text",
    "answer_text",
    "reference_text",
    "context_text",
    "judges",
    "version",
    "rejudges",
    # what an alert about the pair shows besides its texts (workers.alerts.views)
    "channel_is_private",
    "stream_errored",
    "created_at",
    "updated_at",  # the change stamp an alert about to be posted compares (workers.alerts.planning.current)
)


@functools.lru_cache(maxsize=8)  # built once per entity: building the aliased subquery cost more than running it
def pair_of_judgment(session: Session, judgment_id: int) -> Pair | None:
    """The pair a judgment (an alert's button) is of; None when either is gone (retention, a deletion)."""
    judgment = session.get(Judgment, judgment_id)
    return session.get(Pair, judgment.pair_id) if judgment is not None else None


def is_current(judgment=Judgment) -> ColumnElement[bool]:
    """True for the judgment no later version of its answer superseded: the one of the highest pair version for
    its pair and judge. What stats, the digest, App Home and alerts read; the older ones stay as history."""
    newer = aliased(Judgment)
    return ~exists().where(
        newer.pair_id == judgment.pair_id,
        newer.judge == judgment.judge,
        newer.pair_version > judgment.pair_version,
    )


@functools.cache
def _pair_for_judging_statement():  # built once: every judgment reads it
    return select(*[getattr(Pair, name) for name in PAIR_FIELDS]).where(Pair.id == bindparam("pair_id"))


def pair_for_judging(executor: Executor, pair_id: int) -> dict[str, Any] | None:
    """The pair's fields judging needs, as plain data (no ORM object kept across the LLM call)."""
    row = executor.execute(_pair_for_judging_statement(), {"pair_id": pair_id}).first()
    return dict(row._mapping) if row is not None else None


def _judged(session: Executor, pair_id: int) -> list[Row]:
    return session.execute(
        select(Judgment.judge, Judgment.id, Judgment.pair_version)
        .where(Judgment.pair_id == pair_id)
        .order_by(Judgment.pair_version)
    ).all()


def stored_judges(session: Executor, pair_id: int, pair_version: int | None = None) -> dict[str, int]:
    """Judge name -> judgment id, for the judgments stored for this version of a pair's answer (None: for its
    latest judged version of each judge)."""
    rows = _judged(session, pair_id)
    return {row.judge: row.id for row in rows if pair_version is None or row.pair_version == pair_version}


def current_judgment(session: Session, judgment: Judgment) -> Judgment:
    """The judgment that supersedes `judgment` (the latest version's of the same pair and judge), or itself."""
    latest = session.scalars(
        select(Judgment)
        .where(Judgment.pair_id == judgment.pair_id, Judgment.judge == judgment.judge)
        .order_by(Judgment.pair_version.desc())
        .limit(1)
    ).first()
    return latest or judgment


@functools.cache
def _cached_statement():  # built once: every judgment reads it
    return (
        select(*[getattr(Judgment, name) for name in CACHED_FIELDS])
        .where(
            Judgment.cache_key.in_(bindparam("keys", expanding=True)),
            Judgment.status.in_(CACHEABLE_STATUSES),
        )
        .order_by(Judgment.id.desc())
    )


def find_cached_many(session: Executor, cache_keys: list[str]) -> dict[str, dict[str, Any]]:
    """Cache key -> fields of the earliest usable (ok or null) judgment with that key, for the keys found."""
    if not cache_keys:
        return {}
    rows = session.execute(_cached_statement(), {"keys": cache_keys})
    # Newest first, so the earliest judgment with a key is written last and is the one returned.
    return {row.cache_key: dict(row._mapping) for row in rows}


def insert_judgment(session: Executor, values: dict[str, Any]) -> tuple[int, bool]:
    """Store a judgment unless this version of the pair already has one from this judge. Returns (id, whether it
    is new).

    INSERT ... ON CONFLICT DO NOTHING on the (pair_id, judge, pair_version) key: a redelivered or duplicated task
    meets the row its twin stored and adds nothing (no exception, no second row, on SQLite and PostgreSQL alike)."""
    statement = insert_or_ignore_returning(session, Judgment, ["pair_id", "judge", "pair_version"], "id")
    new_id = session.execute(statement, values).scalar()
    if new_id is not None:
        return new_id, True
    existing = session.scalar(
        select(Judgment.id).where(
            Judgment.pair_id == values["pair_id"],
            Judgment.judge == values["judge"],
            Judgment.pair_version == values.get("pair_version", 1),
        )
    )
    assert existing is not None, "conflict on (pair_id, judge, pair_version) without a row"
    return existing, False


def insert_judgment_marking_judged(connection: Connection, values: dict[str, Any]) -> int | None:
    """PostgreSQL: store one judgment and move its pending pair to judged in a single statement (its two
    data-modifying CTEs commit together), so an autocommit connection needs no BEGIN and COMMIT round trips.
    Returns the new judgment's id, or None when a twin stored this version's judgment first."""
    columns = tuple(sorted(name for name in values if name in Judgment.__table__.c))
    parameters = {**values, "w_pair_id": values["pair_id"], "p_status": PairStatus.JUDGED, "p_updated_at": utcnow()}
    return connection.execute(_judged_statement(columns), parameters).scalar()


@functools.cache
def _judged_statement(columns: tuple[str, ...]):  # built once per set of columns: every judgment runs it
    table = Judgment.__table__
    inserted = (
        postgresql.insert(table)
        .values({name: bindparam(name) for name in columns})
        .on_conflict_do_nothing(index_elements=["pair_id", "judge", "pair_version"])
        .returning(table.c.id)
        .cte("inserted")
    )
    # Run after the insert the SELECT reads (PostgreSQL finishes unread CTEs last), as in the two-statement form.
    judged = (
        update(Pair)
        .where(Pair.id == bindparam("w_pair_id"), Pair.status == PairStatus.PENDING)
        .values(status=bindparam("p_status"), updated_at=bindparam("p_updated_at"))  # no onupdate inside a CTE
        .returning(Pair.id)
        .cte("judged")
    )
    return select(inserted.c.id).add_cte(judged)


def set_pair_status(session: Executor, pair_id: int, status: str, *, only_from: Iterable[str]) -> bool:
    """Move a pair to `status` if it is still in one of `only_from` (a settle or an edit may have moved it)."""
    parameters = {"w_pair_id": pair_id, "p_status": status, "only_from": list(only_from)}
    return session.execute(_status_statement(), parameters).rowcount == 1


@functools.cache
def _status_statement():  # built once: every judgment runs it
    return (
        update(Pair)
        .where(Pair.id == bindparam("w_pair_id"), Pair.status.in_(bindparam("only_from", expanding=True)))
        .values(status=bindparam("p_status"))
        .execution_options(synchronize_session=False)
    )


def stale_pairs(session: Session, *, pending_before: datetime, settling_before: datetime, limit: int) -> list[Pair]:
    """Pairs that should have moved on by now: pending (a judge task was lost) or settling (a settle task was)."""
    pending = (Pair.status == PairStatus.PENDING) & (Pair.updated_at < pending_before)
    settling = (Pair.status == PairStatus.SETTLING) & (Pair.updated_at < settling_before)
    return list(session.scalars(select(Pair).where(pending | settling).order_by(Pair.id).limit(limit)))


def touch_pairs(session: Session, pair_ids: list[int], now: datetime) -> None:
    """Mark pairs as just re-enqueued, so the next sweep leaves them alone for another period."""
    if pair_ids:
        session.execute(
            update(Pair)
            .where(Pair.id.in_(pair_ids))
            .values(updated_at=now)
            .execution_options(synchronize_session=False)
        )


EXPORT_COLUMNS = (
    "judgment_id",
    "pair_id",
    "source",
    "channel_id",
    "message_ts",
    "thread_ts",
    "question",
    "context",
    "answer",
    "judge",
    "status",
    "score",
    "max_score",
    "normalized_score",
    "reasoning",
    "confirmation_score",
    "confirmation_reasoning",
    "error",
    "model",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "latency_ms",
    "cached",
    "pair_version",
    "current",
    "created_at",
    "signals",  # outcome signals of the pair (store.outcomes); joined by ";" in CSV
    "reference",  # the reference answer the correctness judgment used (a teammate's reply), if any
    "bot",  # an ingested exchange's bot (POST /v1/exchanges), else empty
    "visibility",  # an ingested exchange's visibility: public | private | dm
)


def export_rows(session: Session, *, since: datetime | None = None, batch: int = 500) -> Iterator[dict[str, Any]]:
    """Every stored judgment with its pair (`current`: not superseded by a judgment of a later version of the
    answer), oldest first, streamed in batches (server-side cursor on PostgreSQL). An ingested pair's row names its
    exchange's bot and visibility (the first exchange, should two name one Slack message)."""
    first_ids = select(func.min(Exchange.id).label("id")).group_by(Exchange.pair_id).subquery()
    first_exchange = (
        select(Exchange.pair_id, Exchange.bot, Exchange.visibility)
        .where(Exchange.id.in_(select(first_ids.c.id)))
        .subquery()
    )
    statement = (
        select(
            Judgment.id.label("judgment_id"),
            Pair.id.label("pair_id"),
            Pair.source,
            Pair.channel_id,
            Pair.answer_ts.label("message_ts"),
            Pair.thread_ts,
            Pair.question_text.label("question"),
            Pair.context_text.label("context"),
            Pair.answer_text.label("answer"),
            Judgment.judge,
            Judgment.status,
            Judgment.score,
            Judgment.max_score,
            Judgment.normalized_score,
            Judgment.reasoning,
            Judgment.confirmation_score,
            Judgment.confirmation_reasoning,
            Judgment.error,
            Judgment.model,
            Judgment.prompt_tokens,
            Judgment.cached_tokens,
            Judgment.completion_tokens,
            Judgment.latency_ms,
            Judgment.cached,
            Judgment.pair_version,
            is_current().label("current"),
            Judgment.created_at,
            case((Judgment.judge == CORRECTNESS, Pair.reference_text)).label("reference"),
            first_exchange.c.bot,
            first_exchange.c.visibility,
        )
        .join(Pair, Pair.id == Judgment.pair_id)
        .outerjoin(first_exchange, first_exchange.c.pair_id == Pair.id)
        .order_by(Judgment.id)
        .execution_options(yield_per=batch)
    )
    if since is not None:
        statement = statement.where(Judgment.created_at >= since)
    for row in session.execute(statement):
        yield dict(row._mapping)
