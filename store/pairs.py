"""Pair queries for capture and settling. Every write is one statement with its condition inside it, so a
Slack retry, a late edit or two settle tasks racing cannot both win."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Row, bindparam, case, func, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from store.db import dialect_name, insert_for
from store.judgments import PAIR_FIELDS
from store.models import OutcomeWindow, Pair, PairSource, PairStatus, utcnow
from store.outcomes import insert_window_of, is_watched, watched_where

# An edit re-opens an answer while it has not been judged (nor deleted or merged away); a judged one, to be judged
# again on its final text, while it has been re-judged fewer than RELMON_MAX_REJUDGE times.
EDITABLE = (PairStatus.SETTLING, PairStatus.PENDING, PairStatus.NO_QUESTION, PairStatus.EMPTY)


@dataclass(frozen=True)
class Captured:
    pair_id: int
    version: int
    accepted: bool  # False: the pair exists but is past editing (deleted, merged, re-judged enough); nothing to settle
    rejudges: int = 0  # times an edit re-opened it after it was judged, this one included


_UPSERT_FIELDS = (
    "team_id", "channel_id", "channel_is_private", "channel_is_ext_shared", "answer_ts", "thread_ts",
    "answer_bot_id", "answer_text", "stream_errored",
)  # fmt: skip


@cache
def _upsert_statement(dialect: str):
    """Built once per dialect with bound parameters: building ON CONFLICT clauses per event cost more CPU than
    running them (this is on the path of every Slack event's acknowledgement)."""
    table = Pair.__table__
    statement = insert_for(dialect)(table).values(
        {name: bindparam(f"p_{name}") for name in _UPSERT_FIELDS}
        | {
            "source": PairSource.CAPTURE,
            "version": 1,
            "status": PairStatus.SETTLING,
            "created_at": bindparam("p_now"),
            "updated_at": bindparam("p_now"),
        }
    )
    return statement.on_conflict_do_update(
        index_elements=[table.c.channel_id, table.c.answer_ts],
        set_={
            "answer_text": statement.excluded.answer_text,
            "stream_errored": statement.excluded.stream_errored,
            "version": table.c.version + 1,
            "status": PairStatus.SETTLING,
            "rejudges": table.c.rejudges + case((table.c.status == PairStatus.JUDGED, 1), else_=0),
            "updated_at": bindparam("p_now"),
        },
        where=table.c.status.in_(EDITABLE)
        | ((table.c.status == PairStatus.JUDGED) & (table.c.rejudges < bindparam("p_max_rejudge"))),
    ).returning(table.c.id, table.c.version, table.c.rejudges)


def upsert_captured(
    session: Session | Connection,
    *,
    channel_id: str,
    answer_ts: str,
    answer_text: str,
    team_id: str | None = None,
    thread_ts: str | None = None,
    answer_bot_id: str | None = None,
    channel_is_private: bool = False,
    channel_is_ext_shared: bool = False,
    stream_errored: bool = False,
    max_rejudge: int = 0,
) -> Captured:
    """Create the pair for an answer (status settling, version 1) or, on an edit, replace its text,
    bump its version and put it back to settling — unless it is past editing (not in EDITABLE): a judged
    answer is re-opened at most `max_rejudge` times."""
    values = {
        "team_id": team_id,
        "channel_id": channel_id,
        "channel_is_private": channel_is_private,
        "answer_ts": answer_ts,
        "thread_ts": thread_ts,
        "answer_bot_id": answer_bot_id,
        "answer_text": answer_text,
        "channel_is_ext_shared": channel_is_ext_shared,
        "stream_errored": stream_errored,
    }
    parameters = {f"p_{name}": value for name, value in values.items()} | {
        "p_now": utcnow(),
        "p_max_rejudge": max_rejudge,
    }
    statement = _upsert_statement(dialect_name(session))
    row = session.execute(statement, parameters).first()
    if row is not None:
        return Captured(row.id, row.version, True, row.rejudges or 0)
    existing = session.execute(
        select(Pair.id, Pair.version, Pair.rejudges).where(Pair.channel_id == channel_id, Pair.answer_ts == answer_ts)
    ).one()
    return Captured(existing.id, existing.version, False, existing.rejudges or 0)


SNAPSHOT_COLUMNS = (
    Pair.id,
    Pair.channel_id,
    Pair.answer_ts,
    Pair.thread_ts,
    Pair.answer_text,
    Pair.version,
    Pair.status,
)
_SNAPSHOT = select(*SNAPSHOT_COLUMNS).where(Pair.id == bindparam("pair_id"))  # built once: a hot path


def snapshot_row(executor: Session | Connection, pair_id: int) -> Row | None:
    """What settling reads of a pair first: (id, channel_id, answer_ts, thread_ts, answer_text, version, status)."""
    return executor.execute(_SNAPSHOT, {"pair_id": pair_id}).first()


WATCH_COLUMNS = (
    Pair.id,
    Pair.source,
    Pair.question_ts,
    Pair.answer_ts,
    Pair.thread_ts,
    Pair.question_user,
    Pair.channel_id,
)
_WATCH = select(*WATCH_COLUMNS).where(Pair.id == bindparam("pair_id"))


def watch_row(executor: Session | Connection, pair_id: int) -> Row | None:
    """What opening an outcome window reads of a pair."""
    return executor.execute(_WATCH, {"pair_id": pair_id}).first()


def get_pair(session: Session, pair_id: int) -> Pair | None:
    return session.get(Pair, pair_id)


def captured_texts(session: Session, channel_id: str, answer_ts: str) -> Row | None:
    """What capture stored of one answer (its texts, their thread and the channel's privacy), or None."""
    return session.execute(
        select(Pair.question_text, Pair.answer_text, Pair.question_ts, Pair.thread_ts, Pair.channel_is_private)
        .where(Pair.channel_id == channel_id, Pair.answer_ts == answer_ts)
        .limit(1)
    ).first()


def thread_texts(
    executor: Session | Connection, channel_id: str, thread_ts: str, before_ts: str, limit: int
) -> list[tuple[str | None, str | None]]:
    """(question_text, answer_text) of the last `limit` answers captured in a thread before `before_ts`, oldest first:
    the earlier turns of a thread that resumes after the conversation log forgot it. Read along the (channel,
    answer_ts) key, from the thread's root on."""
    rows = executor.execute(
        select(Pair.question_text, Pair.answer_text)
        .where(
            Pair.channel_id == channel_id,
            Pair.answer_ts >= thread_ts,
            Pair.answer_ts < before_ts,
            Pair.thread_ts == thread_ts,
            Pair.source == "capture",
            Pair.question_text.is_not(None),  # answered a question (a deleted or merged answer did not)
            Pair.status.not_in((PairStatus.DELETED, PairStatus.MERGED)),
        )
        .order_by(Pair.answer_ts.desc())
        .limit(limit)
    ).all()
    return [(question, answer) for question, answer in reversed(rows)]


def add_on_demand(session: Session, **values: Any) -> int:
    """Store an on-demand pair (`/judge`, the shortcut, the modal) as pending: it needs no settling. Its
    `answer_ts` stays empty: the (channel, answer_ts) key belongs to the captured pair, and one answer may be
    judged on demand any number of times (the judgment cache spares the repeat LLM calls)."""
    pair = Pair(status=PairStatus.PENDING, **values)
    session.add(pair)
    session.flush()
    return pair.id


def mark_merged(session: Session | Connection, channel_id: str, answer_ts_list: list[str]) -> int:
    """Later parts of a multi-message answer whose own pair was created first (events out of order)."""
    if not answer_ts_list:
        return 0
    result = session.execute(
        update(Pair)
        .where(Pair.channel_id == channel_id, Pair.answer_ts.in_(answer_ts_list), Pair.status.in_(EDITABLE))
        .values(status=PairStatus.MERGED, version=Pair.version + 1, updated_at=utcnow())
    )
    return result.rowcount


def mark_deleted(session: Session, channel_id: str, answer_ts: str) -> bool:
    """A deleted answer is never judged: only a pair not yet judged becomes deleted."""
    result = session.execute(
        update(Pair)
        .where(Pair.channel_id == channel_id, Pair.answer_ts == answer_ts, Pair.status.in_(EDITABLE))
        .values(status=PairStatus.DELETED, version=Pair.version + 1, updated_at=utcnow())
    )
    return result.rowcount > 0


def settle(
    session: Session | Connection,
    pair_id: int,
    version: int,
    *,
    status: str,
    answer_text: str | None,
    question_ts: str | None = None,
    question_user: str | None = None,
    question_text: str | None = None,
    context_text: str | None = None,
    window_closes_at: datetime | None = None,
) -> Row | None:
    """Move a settling pair to its settled status, only if nothing changed it since `version`. Returns the settled
    pair's SETTLED_COLUMNS (what judging and the outcome window read next), or None if it changed meanwhile.

    With `window_closes_at`, a captured answer settled `pending` with its question also gets its outcome window
    (kept if it has one): on PostgreSQL in the same statement, a round trip fewer for every answer; elsewhere in
    a second one on the same connection."""
    parameters = {
        "w_pair_id": pair_id,
        "w_version": version,
        "p_status": status,
        "p_question_ts": question_ts,
        "p_question_user": question_user,
        "p_question_text": question_text,
        "p_context_text": context_text,
        "p_updated_at": utcnow(),
    }
    if answer_text is not None:
        parameters["p_answer_text"] = answer_text
    opens = window_closes_at is not None and status == PairStatus.PENDING
    if opens and dialect_name(session) == "postgresql":
        parameters["p_closes_at"] = window_closes_at
        return session.execute(_settle_opening_window_statement(answer_text is not None), parameters).first()
    settled = session.execute(_settle_statement(answer_text is not None), parameters).first()
    if opens and settled is not None and is_watched(settled):
        insert_window_of(session, settled, window_closes_at)
    return settled


# What judging reads of a pair, and what opening its outcome window reads: the settle UPDATE returns both.
SETTLED_COLUMNS = (*PAIR_FIELDS, *(column.key for column in WATCH_COLUMNS if column.key not in PAIR_FIELDS))
_SETTLED_VALUES = ("status", "question_ts", "question_user", "question_text", "context_text", "updated_at")


@cache
def _settle_statement(with_answer_text: bool):
    """Built once (with and without a new answer text): every answer is settled."""
    names = _SETTLED_VALUES + (("answer_text",) if with_answer_text else ())
    return (
        update(Pair)
        .where(
            Pair.id == bindparam("w_pair_id"),
            Pair.version == bindparam("w_version"),
            Pair.status == PairStatus.SETTLING,
        )
        .values({name: bindparam(f"p_{name}") for name in names})
        .returning(*[getattr(Pair, name) for name in SETTLED_COLUMNS])
    )


@cache
def _settle_opening_window_statement(with_answer_text: bool):
    """PostgreSQL: the settle UPDATE, and from the row it returns the outcome window's INSERT (a data-modifying
    CTE: both or neither); what it returns is the settle's."""
    settled = _settle_statement(with_answer_text).cte("settled")
    window = OutcomeWindow.__table__
    opened = (
        postgresql.insert(window)
        .from_select(
            ["pair_id", "channel_id", "answer_ts", "thread_key", "asker", "closes_at"],
            select(
                settled.c.id,
                settled.c.channel_id,
                settled.c.answer_ts,
                func.coalesce(settled.c.thread_ts, settled.c.answer_ts),
                settled.c.question_user,
                bindparam("p_closes_at", type_=window.c.closes_at.type),
            ).where(watched_where(settled.c)),
        )
        .on_conflict_do_nothing(index_elements=["pair_id"])
        .returning(window.c.pair_id)
        .cte("opened")
    )
    return select(*[settled.c[name] for name in SETTLED_COLUMNS]).add_cte(opened)
