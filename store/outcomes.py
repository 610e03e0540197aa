"""Outcome windows and signals. A signal is inserted once per (pair, name); the window's row is locked while a
signal is recorded or the window closed, so no signal lands after the window closed as resolved."""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, Row, and_, bindparam, select, update
from sqlalchemy.orm import Session

from store.db import insert_or_ignore_returning
from store.models import OutcomeSignal, OutcomeWindow, Pair, PairStatus, as_utc, utcnow


def insert_window(
    session: Session | Connection,
    *,
    pair_id: int,
    channel_id: str,
    answer_ts: str,
    thread_key: str,
    asker: str | None,
    closes_at: datetime,
) -> bool:
    """Start watching an answer (a second call for the same pair keeps the first window). True when new."""
    row = {"pair_id": pair_id, "channel_id": channel_id, "answer_ts": answer_ts, "thread_key": thread_key}
    row |= {"asker": asker, "closes_at": closes_at}
    statement = insert_or_ignore_returning(session, OutcomeWindow, ["pair_id"], "pair_id")
    return session.execute(statement, row).scalar_one_or_none() is not None


def is_watched(pair: Row) -> bool:
    """Only a captured answer with its question gets an outcome window (pair: a row with store.pairs.WATCH_COLUMNS)."""
    return pair.source == "capture" and bool(pair.question_ts)


def watched_where(columns) -> ColumnElement[bool]:
    """`is_watched` in SQL, over a row source with those columns (the settle's CTE: store.pairs)."""
    return and_(columns.source == "capture", columns.question_ts.is_not(None), columns.question_ts != "")


def insert_window_of(executor: Session | Connection, pair: Row, closes_at: datetime) -> bool:
    """`insert_window` for a pair's row (store.pairs.WATCH_COLUMNS): its thread, or the answer's own ts at top level."""
    return insert_window(
        executor,
        pair_id=pair.id,
        channel_id=pair.channel_id,
        answer_ts=pair.answer_ts,
        thread_key=pair.thread_ts or pair.answer_ts,
        asker=pair.question_user,
        closes_at=closes_at,
    )


def get_window(session: Session, pair_id: int) -> OutcomeWindow | None:
    return session.execute(select(OutcomeWindow).where(OutcomeWindow.pair_id == pair_id)).scalar()


@functools.cache
def _open_windows_statement():
    """Built once: a message's observation reads its pairs' windows on the hot path."""
    windows, pairs = OutcomeWindow.__table__.c, Pair.__table__.c
    return (
        select(windows.pair_id, windows.answer_ts, windows.thread_key, windows.asker, windows.closes_at)
        .add_columns(pairs.question_text, pairs.answer_text)  # what the answer is about: a re-ask or a new question
        .join_from(OutcomeWindow.__table__, Pair.__table__, pairs.id == windows.pair_id)
        .where(windows.pair_id.in_(bindparam("pair_ids", expanding=True)), windows.closed_at.is_(None))
        .order_by(windows.pair_id)
    )


def open_windows(executor: Session | Connection, pair_ids: Collection[int]) -> list[Row]:
    """The windows of these pairs that are still open (pair_id, answer_ts, thread_key, asker, closes_at, and the
    pair's question_text and answer_text), in pair ID order (one query for a message's pairs)."""
    if not pair_ids:
        return []
    return list(executor.execute(_open_windows_statement(), {"pair_ids": list(pair_ids)}))


def signal_names(session: Session | Connection, pair_id: int) -> set[str]:
    return set(session.execute(select(OutcomeSignal.name).where(OutcomeSignal.pair_id == pair_id)).scalars())


def signals_with_times(session: Session, pair_id: int) -> list[tuple[str, float | None]]:
    rows = session.execute(
        select(OutcomeSignal.name, OutcomeSignal.after_seconds)
        .where(OutcomeSignal.pair_id == pair_id)
        .order_by(OutcomeSignal.id)
    )
    return [(name, after) for name, after in rows]


@functools.cache
def _signals_of_statement():
    signals = OutcomeSignal.__table__.c
    return (
        select(signals.pair_id, signals.name)
        .where(signals.pair_id.in_(bindparam("pair_ids", expanding=True)))
        .order_by(signals.id)
    )


def signals_of(executor: Session | Connection, pair_ids: Collection[int]) -> dict[int, list[str]]:
    """The signal names of each pair, in the order they came."""
    found: dict[int, list[str]] = {}
    if not pair_ids:
        return found
    for pair_id, name in executor.execute(_signals_of_statement(), {"pair_ids": list(pair_ids)}):
        found.setdefault(pair_id, []).append(name)
    return found


def _insert_signal(executor: Session | Connection, pair_id: int, name: str, after_seconds: float | None) -> bool:
    statement = insert_or_ignore_returning(executor, OutcomeSignal, ["pair_id", "name"], "id")
    row = {"pair_id": pair_id, "name": name, "after_seconds": after_seconds, "created_at": utcnow()}
    return executor.execute(statement, row).scalar_one_or_none() is not None


@functools.cache
def _locked_window_statement():
    windows = OutcomeWindow.__table__.c
    return (
        select(windows.answer_ts, windows.closes_at, windows.closed_at)
        .where(windows.pair_id == bindparam("pair_id"))
        .with_for_update()
    )


def _open_window_locked(executor: Session | Connection, pair_id: int) -> Row | None:
    """The pair's window (answer_ts, closes_at) if it is still open, its row locked till the caller's transaction
    ends: a signal recorded, withdrawn or the window closed meanwhile waits."""
    window = executor.execute(_locked_window_statement(), {"pair_id": pair_id}).first()
    return window if window is not None and window.closed_at is None else None


def record_signals(executor: Session | Connection, pair_id: int, names: Iterable[str], *, at: datetime) -> list[str]:
    """Record signals that came at `at`, if the pair's window is open and `at` within it. Returns the new ones."""
    window = _open_window_locked(executor, pair_id)
    if window is None or at > as_utc(window.closes_at):
        return []
    after = at.timestamp() - float(window.answer_ts)
    return [name for name in sorted(set(names)) if _insert_signal(executor, pair_id, name, after)]


def close_window(session: Session | Connection, pair_id: int, *, now: datetime, closing: Iterable[str]) -> bool:
    """Close the window (once) and record what its end adds. False when it was closed already."""
    if _open_window_locked(session, pair_id) is None:
        return False
    session.execute(update(OutcomeWindow).where(OutcomeWindow.pair_id == pair_id).values(closed_at=now))
    for name in closing:
        _insert_signal(session, pair_id, name, None)
    return True


def set_teammate_reference(session: Session, pair_id: int, text: str, judges: list[str]) -> bool:
    """A teammate's reply becomes the pair's reference (the first one only) and `judges` its judges in force;
    a judged pair goes back to pending for the judges it now lacks. True when the pair needs judging."""
    pair = session.get(Pair, pair_id, with_for_update=True)
    if pair is None or pair.reference_text:
        return False
    pair.reference_text = text
    pair.judges = judges
    if pair.status == PairStatus.JUDGED:
        pair.status = PairStatus.PENDING
    return pair.status == PairStatus.PENDING


def open_windows_due(session: Session, now: datetime, limit: int = 500) -> list[int]:
    """Windows past their end and not closed yet (a lost closing task)."""
    return list(
        session.execute(
            select(OutcomeWindow.pair_id)
            .where(OutcomeWindow.closed_at.is_(None), OutcomeWindow.closes_at <= now)
            .limit(limit)
        ).scalars()
    )


def closed_examples(session: Session) -> list[tuple[str, str, str | None, list[str]]]:
    """(question, answer, reference, signal names) of every pair whose window closed, oldest first: the
    outcome labels of `relmon eval --labels-from outcomes`."""
    rows = session.execute(
        select(Pair.id, Pair.question_text, Pair.answer_text, Pair.reference_text)
        .join(OutcomeWindow, OutcomeWindow.pair_id == Pair.id)
        .where(OutcomeWindow.closed_at.is_not(None), Pair.question_text.is_not(None), Pair.answer_text.is_not(None))
        .order_by(Pair.id)
    ).all()
    signals = signals_of(session, [row.id for row in rows])
    return [(q, a, reference or None, signals.get(pair_id, [])) for pair_id, q, a, reference in rows]
